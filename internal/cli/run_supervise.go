package cli

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/e6344662/go-redlock/redlock"
)

// outcome is how COMMAND ended.
type outcome struct {
	code        int    // redlock-cli's exit code from COMMAND's status
	childCode   int    // COMMAND's exit status, -1 if killed by a signal
	childSignal string // the signal that killed COMMAND, if any
	lost        bool   // the lease was lost while COMMAND ran
	stoppedWith string // what was sent to COMMAND after the loss
}

// supervise waits for COMMAND to exit, forwarding signals to its process
// group and stopping it if the lease is lost; then it stops what is left of
// the group.
func (r *runner) supervise(c *child, lease heldSet, sigs <-chan os.Signal) outcome {
	var out outcome
	leaseDone := lease.Context().Done()
	var killC <-chan time.Time
	var killTimer *time.Timer
	defer func() {
		if killTimer != nil {
			killTimer.Stop()
		}
	}()
	forwarded := 0 // stop signals passed on to COMMAND
	for done := false; !done; {
		select {
		case sig := <-sigs:
			forwarded++
			if forwarded == 1 {
				c.signal(sig)
				continue
			}
			// A second stop signal while COMMAND still runs (it ignores
			// or outlasts the first): escalate, as the first one's
			// sender clearly wants it gone.
			if out.stoppedWith == "" {
				out.stoppedWith = signalName(sig) + " twice, then SIGKILL"
			}
			r.app.warnf("%s again while COMMAND still runs; sending SIGKILL", signalName(sig))
			c.kill()
		case <-leaseDone:
			leaseDone = nil
			if !errors.Is(context.Cause(lease.Context()), redlock.ErrLeaseLost) {
				continue
			}
			out.lost = true
			out.stoppedWith = "SIGTERM"
			r.app.warnf("lease on %q lost; sending SIGTERM to COMMAND, SIGKILL in %s", r.resource, r.killAfter)
			c.terminate()
			killTimer = time.NewTimer(r.killAfter)
			killC = killTimer.C
		case <-killC:
			killC = nil
			out.stoppedWith = "SIGTERM, then SIGKILL"
			r.app.warnf("COMMAND still running %s after SIGTERM; sending SIGKILL", r.killAfter)
			c.kill()
		case <-c.exited:
			done = true
		}
	}
	if !out.lost && errors.Is(context.Cause(lease.Context()), redlock.ErrLeaseLost) {
		// Lost at about the time COMMAND exited: it may have run unguarded.
		out.lost, out.stoppedWith = true, "it had already exited"
	}
	out.code, out.childCode, out.childSignal = c.status()
	if r.reapGroup(c, lease, out.lost, sigs) && !out.lost {
		out.lost, out.stoppedWith = true, "SIGKILL to the processes it left behind"
	}
	return out
}

// reapGroup stops the processes COMMAND left in its group, so that none
// runs on after the lock is released: SIGTERM, then SIGKILL after
// --kill-after (at once if the lease is or gets lost). It reports whether
// the lease was lost while they ran.
func (r *runner) reapGroup(c *child, lease heldSet, lost bool, sigs <-chan os.Signal) (lostNow bool) {
	if !c.groupAlive() {
		return false
	}
	if lost {
		c.kill()
	} else {
		r.app.warnf("COMMAND exited but left processes in its group; sending them SIGTERM")
		c.terminate()
	}
	deadline := time.NewTimer(r.killAfter)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	killed := lost
	leaseDone := lease.Context().Done()
	for c.groupAlive() {
		select {
		case sig := <-sigs:
			c.signal(sig)
		case <-leaseDone:
			leaseDone = nil
			if errors.Is(context.Cause(lease.Context()), redlock.ErrLeaseLost) {
				lostNow = true
				if !killed {
					killed = true
					c.kill()
				}
			}
		case <-tick.C:
		case <-deadline.C:
			if killed {
				return lostNow // unkillable (stopped, or a zombie no one reaps): give up
			}
			killed = true
			c.kill()
			deadline.Reset(time.Second)
		}
	}
	return lostNow
}
