package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/redlock"
)

// watcher is the Observer of the Locker of acquire and run. It passes every
// event on (to the metrics, with --metrics-addr), keeps the last failed
// attempt (the library's error after a --wait that ran out only quotes it),
// and makes what the library does quietly visible, once per invocation and
// on stderr:
//
//   - nodes that sit out after a restart (the rejoin delay), as soon as an
//     attempt meets them, since a waiting acquire may then wait that long;
//   - a node that fails for a reason that will not pass by itself (wrong
//     password or user, an ACL, a read-only replica, out of memory, a
//     foreign key): the lock rests on the other nodes, with one fewer
//     failure to spare. These are printed by flush, once the lock is
//     taken; a failed command's error names the nodes itself.
//
// Observe is called from the Locker's goroutines, concurrently.
type watcher struct {
	next redlock.Observer
	warn func(format string, args ...any)
	// waits: the command waits (--wait), so the rejoining nodes are
	// reported as soon as met; without a wait the error says it.
	waits bool

	mu   sync.Mutex
	last *redlock.AcquireError
	// lastStart is when the last failed attempt (last) started; failed
	// holds each node's last failed acquire call, when it failed and how:
	// those after lastStart that last does not name failed after the
	// attempt had ended (lateFailures).
	lastStart    time.Time
	failed       map[string]failedCall
	warnedRejoin bool
	warnedNodes  map[string]bool
	nodeWarnings []string // printed by flush, once the lock is taken
	// abort ends a waiting Acquire once an attempt shows that waiting
	// cannot help (nodes without scripts); nil when nothing waits.
	abort context.CancelCauseFunc
}

// errGiveUp is the cause with which the watcher ends a waiting Acquire.
var errGiveUp = errors.New("waiting cannot help")

// waitWith returns ctx made cancelable by the watcher, for one waiting
// Acquire, and the function that undoes it.
func (w *watcher) waitWith(ctx context.Context) (context.Context, func()) {
	if w == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	w.mu.Lock()
	w.abort = cancel
	w.mu.Unlock()
	return ctx, func() {
		w.mu.Lock()
		w.abort = nil
		w.mu.Unlock()
		cancel(nil)
	}
}

// newWatcher returns a watcher passing events on to next (may be nil) and
// printing its warnings with warn; waits tells whether the command waits.
func newWatcher(next redlock.Observer, warn func(format string, args ...any), waits bool) *watcher {
	return &watcher{next: next, warn: warn, waits: waits, warnedNodes: map[string]bool{}, failed: map[string]failedCall{}}
}

// Observe records and reports e.
func (w *watcher) Observe(e redlock.Event) {
	if w.next != nil {
		w.next.Observe(e)
	}
	switch e.Kind {
	case redlock.EventAttempt:
		var ae *redlock.AcquireError
		if e.Err == nil || !errors.As(e.Err, &ae) {
			return
		}
		w.mu.Lock()
		w.last, w.lastStart = ae, time.Now().Add(-e.Latency)
		if w.abort != nil && scriptsDisabledError(ae, nodeErrors(ae), ae.Total) != nil {
			w.abort(errGiveUp)
		}
		first := w.waits && !w.warnedRejoin
		nodes := rejoiningNodes(ae)
		if len(nodes) > 0 {
			w.warnedRejoin = true
		}
		w.mu.Unlock()
		if first && len(nodes) > 0 {
			w.warn("warning: %s", rejoiningText(ae, nodes))
		}
	case redlock.EventNodeError:
		if ne, ok := e.Err.(*redlock.NodeError); ok && e.Op == "acquire" {
			w.mu.Lock()
			w.failed[e.Node] = failedCall{at: time.Now(), err: ne}
			w.mu.Unlock()
		}
		why := lastingReason(e.Err)
		if why == "" {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.warnedNodes[e.Node] {
			w.warnedNodes[e.Node] = true
			msg := fmt.Sprintf("warning: node %s cannot take part in the quorum: %s; the lock rests on the other nodes, with one failure fewer to spare", e.Node, why)
			if said := serverSaid(e.Err); said != why {
				msg += " (" + said + ")"
			}
			w.nodeWarnings = append(w.nodeWarnings, msg)
		}
	}
}

// flush prints the warnings about nodes that could not take part, once
// the lock is taken (when the command fails, its error names them).
func (w *watcher) flush() {
	if w == nil {
		return
	}
	w.mu.Lock()
	msgs := w.nodeWarnings
	w.nodeWarnings = nil
	w.mu.Unlock()
	for _, m := range msgs {
		w.warn("%s", m)
	}
}

// lastAttempt returns the last failed attempt seen, or nil.
func (w *watcher) lastAttempt() *redlock.AcquireError {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// failedCall is a node call that failed: when the watcher heard of it,
// and its error.
type failedCall struct {
	at  time.Time
	err *redlock.NodeError
}

// lateFailures returns the failures of ae's calls that came after the
// attempt had ended: the acquire calls that failed since it started, on
// nodes that ae names neither as refusing nor as failed. ok is false when
// ae is not the last failed attempt the watcher saw (it cannot tell). All
// of them are known once the attempt's calls have ended (the session
// closed).
func (w *watcher) lateFailures(ae *redlock.AcquireError) (late []*redlock.NodeError, ok bool) {
	if w == nil {
		return nil, false
	}
	named := map[string]bool{}
	for _, r := range ae.Refused {
		addr, _, _ := strings.Cut(r, " (")
		named[addr] = true
	}
	for _, ne := range nodeErrors(ae) {
		named[ne.Addr] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last != ae {
		return nil, false
	}
	for node, f := range w.failed {
		if !named[node] && !f.at.Before(w.lastStart) {
			late = append(late, f.err)
		}
	}
	return late, true
}

// serverSaid is what the server answered in err, one node's failure,
// without the library's prefixes (the node's address, the sentinel's words
// that lastingReason already says), or the failure's short reason.
func serverSaid(err error) string {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return reason(unwrapNode(err))
	}
	msg := rerr.Error()
	for _, k := range []error{redlock.ErrReadOnly, redlock.ErrNodeFull, redlock.ErrFenceExhausted, redlock.ErrWrongType} {
		msg = strings.TrimPrefix(msg, k.Error()+": ")
	}
	msg, _, _ = strings.Cut(msg, ". script:")
	// An unknown command quotes its arguments: for EVAL, the script's
	// source.
	msg, _, _ = strings.Cut(msg, ", with args beginning with:")
	return clip(strings.Join(strings.Fields(msg), " "))
}

// lastingReason says why err, one node's failure, will not pass by itself,
// or "" when it may (a node down, a timeout).
func lastingReason(err error) string {
	switch {
	case isAccessDenied(err):
		return "access denied (check the user and password in its URL, and its ACL)"
	case errors.Is(err, redlock.ErrReadOnly):
		return "it is a read-only replica (every node must be a primary)"
	case errors.Is(err, redlock.ErrNodeFull):
		return "it is out of memory (free memory or raise maxmemory)"
	case errors.Is(err, redlock.ErrFenceExhausted):
		return "its fence counter for the resource is at its maximum"
	case errors.Is(err, redlock.ErrWrongType):
		return "a lock key holds someone else's data"
	case isUnknownMaster(err):
		return unknownMasterReason
	case isScriptsDisabled(err):
		return "EVALSHA or EVAL is renamed or disabled there (rename-command), and every lock operation is a Lua script"
	}
	return ""
}

// rejoiningPrefix starts the reason a node gives for refusing while it
// sits out its rejoin delay, in AcquireError.Refused ("addr (rejoining:
// up 2s of the 10s rejoin delay, without appendfsync always)").
const rejoiningPrefix = " (rejoining"

// rejoiningNodes returns the entries of ae.Refused of nodes that refused
// because they are rejoining, as "addr (reason)".
func rejoiningNodes(ae *redlock.AcquireError) []string {
	var out []string
	for _, r := range ae.Refused {
		if strings.Contains(r, rejoiningPrefix) {
			out = append(out, r)
		}
	}
	return out
}

// rejoiningText describes the rejoining nodes of an attempt, each as
// "addr (up 2s of the 10s rejoin delay, without appendfsync always)" or
// "addr (its server evicted keys; it grants again in 1.2s)".
func rejoiningText(ae *redlock.AcquireError, nodes []string) string {
	shown := make([]string, len(nodes))
	for i, n := range nodes {
		shown[i] = strings.Replace(n, rejoiningPrefix+": ", " (", 1)
	}
	return fmt.Sprintf("%d of %d nodes are rejoining after a restart or a loss of data: each refuses every lock until its rejoin delay (--rejoin-delay, default the --ttl) has passed since then: %s",
		len(nodes), ae.Total, strings.Join(shown, ", "))
}

// rejoiningBlocks reports whether the rejoining nodes of ae are what stands
// between the attempt and a majority: without their refusals, the other
// refusals (a holder) would not rule one out. A nil ae does not.
func rejoiningBlocks(ae *redlock.AcquireError) bool {
	if ae == nil {
		return false
	}
	n := len(rejoiningNodes(ae))
	return n > 0 && len(ae.Refused)-n <= ae.Total-ae.Needed
}
