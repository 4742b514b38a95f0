package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"time"

	"github.com/spf13/cobra"

	"github.com/e6344662/go-redlock/redlock"
)

// Environment variables run gives COMMAND.
const (
	envResource = "REDLOCK_RESOURCE"
	envToken    = "REDLOCK_TOKEN"
	envFence    = "REDLOCK_FENCE"
)

// defaultKillAfter is how long run waits after SIGTERM before SIGKILL.
const defaultKillAfter = 10 * time.Second

// runResult is the --json output of run, printed after COMMAND exits.
type runResult struct {
	Resource string `json:"resource"`
	// Slot is the semaphore slot held (-n K above 1), RESOURCE#i: the
	// resource the fence belongs to, as in REDLOCK_RESOURCE.
	Slot          string `json:"slot,omitempty"`
	Fence         uint64 `json:"fence"`
	ExitCode      int    `json:"exit_code"`
	ChildExitCode int    `json:"child_exit_code"`
	ChildSignal   string `json:"child_signal,omitempty"`
	LeaseLost     bool   `json:"lease_lost"`
	Released      bool   `json:"released"`
	DurationMS    int64  `json:"duration_ms"`
}

// runLong is the help text of run.
const runLong = `Acquire the lock on RESOURCE (one attempt, or wait up to --wait), then run
COMMAND with REDLOCK_RESOURCE, REDLOCK_TOKEN and REDLOCK_FENCE in its
environment, renewing the lock while it runs. SIGINT, SIGTERM and SIGHUP are
forwarded to COMMAND; a second one (a second Ctrl-C) while COMMAND still
runs sends it SIGKILL. When COMMAND exits, the lock is released and
redlock-cli exits with COMMAND's exit code (128+N if killed by signal N).

If the lease is lost while COMMAND runs (no majority renewed it in time),
COMMAND gets SIGTERM, then SIGKILL after --kill-after, and redlock-cli exits
with 6. Between the loss and COMMAND's end another holder may already run:
protect the resource itself with the fencing token REDLOCK_FENCE.

COMMAND runs in its own process group, and every signal goes to the whole
group, so helpers it starts are stopped too; processes of the group still
running when COMMAND exits get SIGTERM (and SIGKILL after --kill-after)
before the lock is released. COMMAND cannot read from the terminal. On
Linux, COMMAND is killed if redlock-cli itself dies.

With --metrics-addr, Prometheus metrics of the lock (acquisition, renewals,
node errors) are served at http://HOST:PORT/metrics until redlock-cli exits;
the address is printed on stderr.

Use -- before COMMAND so that COMMAND's own flags are not taken for
redlock-cli's.

` + exitCodeHelp

// runCmd builds run.
func (a *App) runCmd() *cobra.Command {
	var wait time.Duration
	var metricsAddr string
	slots := 1
	killAfter := defaultKillAfter
	cmd := &cobra.Command{
		Use:   "run RESOURCE [-n K] [--wait DURATION] [--kill-after DURATION] [--metrics-addr HOST:PORT] -- COMMAND [ARGS...]",
		Short: "Run a command while holding a lock (flock(1) across machines)",
		Long:  runLong,
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			switch {
			case dash == 0 || len(args) == 0:
				return usageErrorf("run takes RESOURCE -- COMMAND [ARGS...]: no RESOURCE")
			case dash > 1:
				return usageErrorf("run takes one RESOURCE before --, got %d arguments", dash)
			case len(args) < 2:
				return usageErrorf("run takes RESOURCE -- COMMAND [ARGS...]: no COMMAND")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.prepare(cmd, checkWait(cmd, wait), positive("kill-after", killAfter), checkSlots(slots), checkResource(args[0])); err != nil {
				return err
			}
			if cmd.Flags().Changed("metrics-addr") {
				if err := checkMetricsAddr(metricsAddr); err != nil {
					return err
				}
				urls, err := a.g.nodeURLs(a.Getenv)
				if err != nil {
					return err
				}
				stop, err := a.startMetrics(metricsAddr, len(urls))
				if err != nil {
					return err
				}
				defer stop()
			}
			r := &runner{app: a, resource: args[0], argv: args[1:], wait: wait, killAfter: killAfter, slots: slots}
			return r.run(cmd.Context())
		},
	}
	addWaitFlag(cmd.Flags(), &wait)
	addSlotsFlag(cmd.Flags(), &slots)
	cmd.Flags().DurationVar(&killAfter, "kill-after", defaultKillAfter, "SIGKILL this long after SIGTERM, when the lease is lost or COMMAND left processes behind")
	addMetricsFlag(cmd.Flags(), &metricsAddr)
	return cmd
}

// runner is one execution of run.
type runner struct {
	app       *App
	resource  string
	argv      []string
	wait      time.Duration
	killAfter time.Duration
	slots     int // -n: above 1, a semaphore of that many slots
}

// run acquires the lock, supervises COMMAND and releases the lock.
func (r *runner) run(ctx context.Context) error {
	a := r.app
	// Signals that arrive while COMMAND runs are forwarded. The channel is
	// registered before the acquisition's own handler is removed, so that
	// no signal is missed in between.
	sigs := make(chan os.Signal, 8)
	defer signal.Stop(sigs)

	actx, stopInterrupt := interruptible(ctx)
	s, lease, err := r.acquire(actx)
	if err != nil {
		stopInterrupt()
		return err
	}
	// Last, after the close has waited for late calls: nodes that failed
	// after the acquisition's flush.
	defer r.app.watch.flush()
	defer s.close()
	signal.Notify(sigs, stopSignals...)
	stopInterrupt()
	if ie := interrupted(actx); ie != nil {
		r.release(s, lease)
		return ie
	}

	start := time.Now()
	child, err := startChild(r.argv, a, r.childEnv(lease))
	if err != nil {
		r.release(s, lease)
		return err
	}
	out := r.supervise(child, lease, sigs)
	released := r.release(s, lease)

	slot := ""
	if r.slots > 1 {
		slot = lease.Resource()
	}
	res := runResult{
		Resource:      r.resource,
		Slot:          slot,
		Fence:         uint64(lease.Fence()),
		ExitCode:      out.code,
		ChildExitCode: out.childCode,
		ChildSignal:   out.childSignal,
		LeaseLost:     out.lost,
		Released:      released,
		DurationMS:    time.Since(start).Milliseconds(),
	}
	if out.lost {
		res.ExitCode = exitLeaseLost
	}
	if a.g.json {
		a.emit(res)
	}
	if out.lost {
		return &cliError{code: exitLeaseLost, kind: kindLeaseLost, reported: true,
			msg: fmt.Sprintf("lease on %q was lost while COMMAND ran; COMMAND was stopped (%s)", r.resource, out.stoppedWith)}
	}
	if out.code != 0 {
		return &cliError{code: out.code, reported: true}
	}
	return nil
}

// acquire connects and takes the lock.
func (r *runner) acquire(ctx context.Context) (*session, *redlock.Lease, error) {
	w := startWait(r.wait)
	r.app.watch = newWatcher(r.app.observer, r.app.warnf, w.total > 0)
	s, err := r.app.connectWaiting(ctx, w)
	if err != nil {
		return nil, nil, err
	}
	lease, err := r.app.lockSlot(ctx, s, r.resource, r.slots, w)
	if err != nil {
		s.close()
		return nil, nil, err
	}
	r.app.watch.flush()
	return s, lease, nil
}

// childEnv is COMMAND's environment: ours plus the lease's variables.
func (r *runner) childEnv(lease *redlock.Lease) []string {
	return append(os.Environ(),
		envResource+"="+lease.Resource(),
		envToken+"="+lease.Token(),
		envFence+"="+lease.Fence().String(),
	)
}

// release releases the lease, warning on stderr when it fails; it reports
// whether a majority deleted the lock.
func (r *runner) release(s *session, lease *redlock.Lease) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*r.app.g.callTimeout()+time.Second)
	defer cancel()
	err := lease.Release(ctx)
	switch {
	case err == nil:
		return true
	case !errors.Is(err, redlock.ErrLeaseLost):
		r.app.warnf("release %q: %s; the lock expires by its TTL (%s)", r.resource, opError(ctx, err, len(s.nodes)).msg, r.app.g.ttl)
	}
	return false
}

// execError maps a failure to start COMMAND to its exit code.
func execError(name string, err error) *cliError {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist):
		return &cliError{code: exitNotFound, kind: kindExec, msg: fmt.Sprintf("COMMAND %q not found", name), err: err}
	case errors.Is(err, os.ErrPermission):
		return &cliError{code: exitCannotExec, kind: kindExec, msg: fmt.Sprintf("COMMAND %q cannot be executed: permission denied", name), err: err}
	}
	return &cliError{code: exitCannotExec, kind: kindExec, msg: fmt.Sprintf("cannot start COMMAND %q: %s", name, oneLine(err)), err: err}
}
