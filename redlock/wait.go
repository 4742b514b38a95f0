package redlock

import (
	"context"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// How an acquisition waits between attempts, behind one small interface,
// for every lock kind. The attempt (attempt.go) knows nothing of places,
// tickets or hand-overs: it calls its hooks, and a lease calls the hooks
// the waiting gave it (leaseHooks). plainWait (wait_plain.go) sleeps on
// the backoff and is woken by announced releases; fairWait (wait_fair.go,
// the default for Acquire) holds a place in the lock's wait queue on the
// nodes, which hand the lock over to it (docs/design.md §11).

// attemptHooks is what one attempt asks of the waiting behind it.
type attemptHooks interface {
	// queue returns what a mutex attempt's acquire calls carry of the
	// caller's place in the wait queue, and a function that reads each
	// node's answer first, on the call's goroutine, and returns its vote,
	// changed or not; nil, nil when it does not queue.
	queue() (*queueArgs, func(i int, g grant, v vote) vote)
	// started records the attempt's node calls, which may outlive it.
	started(c startedCalls)
	// listen returns how much longer to hear the nodes still answering
	// once the attempt is decided (0: not at all).
	listen(o *outcome) time.Duration
	// failed reads a failed attempt's answers and returns the nodes whose
	// grants it took over for the caller (the clean-up spares them).
	failed(ctx context.Context, o *outcome, token string) (kept []int)
	// granted prepares a lease about to be made for the caller: it may
	// give the lease its own hooks.
	granted(ls *Lease)
}

// startedCalls is one attempt's node calls and its start.
type startedCalls struct {
	at time.Time
	wg *sync.WaitGroup
	// over is closed once every call has ended or their NodeCallTimeout
	// has passed (fanout's deadline).
	over <-chan struct{}
}

// waiting is how one acquisition waits for its lease.
type waiting interface {
	attemptHooks
	// next reads a failed attempt's outcome: a lease handed over to the
	// caller, or how long to wait before the next attempt (0: at once).
	// An error ends the acquisition: its context ended, or the backoff
	// stopped (the attempt's report).
	next(ctx context.Context, o *outcome) (*Lease, time.Duration, error)
	// sleep waits up to d, less when woken, and returns a lease handed over
	// to the caller meanwhile, if any, or ctx's error.
	sleep(ctx context.Context, d time.Duration) (*Lease, error)
	// done ends the waiting when the acquisition returns, with its lease
	// (won) or without.
	done(won bool)
}

// noWait is the hooks of an attempt that nobody waits behind (TryAcquire).
type noWait struct{}

func (noWait) queue() (*queueArgs, func(int, grant, vote) vote) { return nil, nil }
func (noWait) started(startedCalls)                             {}
func (noWait) listen(*outcome) time.Duration                    { return 0 }
func (noWait) failed(context.Context, *outcome, string) []int   { return nil }
func (noWait) granted(*Lease)                                   {}

// leaseHooks is what the waiting adds to a lease's release and end: the
// Locker's own (newLeaseHooks) for every lease, or those a fair Acquire
// gives the lease it took (its place). lease.go, renew.go and quorum.go
// call them and know nothing of places, tickets or hand-overs.
type leaseHooks interface {
	// release begins one release of a's lock (a lease's, with its retries,
	// or a release by token): it makes each node's call and hears its
	// answer.
	release(a releaseArgs) releasing
	// ended follows the lease's end: after its release, or without one
	// when the lease was orphaned (its lock left to its TTL).
	ended(orphaned bool)
}

// releasing is one release's calls on the nodes (Locker.releaseOn).
type releasing interface {
	// args returns node i's release call.
	args(ctx context.Context, i int) releaseArgs
	// heard reads node i's answer; it runs on the node call's goroutine.
	heard(i int, r released)
	// done follows a release that a majority confirmed; took is how
	// long it took.
	done(took time.Duration)
}

// newLeaseHooks returns a Locker's lease hooks: a release hands the lock
// over to the head of the nodes' queue when the Locker queues (fair), and
// wakes this Locker's next waiter otherwise.
func newLeaseHooks(l *Locker) leaseHooks {
	if l.fair {
		return newFairLeases(l)
	}
	return plainLeases{l}
}

// bareRelease releases a lock and nothing more: no hand-over, nothing
// heard, nothing after (an attempt's clean-up, whose nodes name the head
// of their queue but hand nothing over).
type bareRelease struct{ a releaseArgs }

func newBareRelease(a releaseArgs) bareRelease {
	a.prepare()
	return bareRelease{a}
}

func (r bareRelease) args(context.Context, int) releaseArgs { return r.a }
func (bareRelease) heard(int, released)                     {}
func (bareRelease) done(time.Duration)                      {}

// waitBase is what both ways of waiting share: the backoff (made at the
// first pause: an uncontended acquisition needs none), the waiter in the
// Locker's hub (nil until the first wait, or when no node announces
// releases), and the count of split votes in a row.
type waitBase struct {
	l        *Locker
	resource string
	key      string   // keys[0]
	keys     []string // the lock keys whose releases wake the waiter
	limit    time.Duration
	b        backoff.BackOff
	w        *waiter
	splits   int
}

// pause returns how long to wait after the failed attempt o: the
// backoff's next pause, no longer than limit or wb.limit (when positive)
// or the holder's TTL; and when some nodes granted (other acquirers split
// the votes, or a holder's grant has not reached them), a random point
// soon, later each time it happens again in a row, so as not to split them
// again nor spin while a minority stays free. It returns the attempt's
// report when the backoff stops.
func (wb *waitBase) pause(o *outcome, limit time.Duration) (time.Duration, error) {
	wait := wb.backoff().NextBackOff()
	if wait == backoff.Stop {
		return 0, &o.err
	}
	if o.err.HolderTTL > 0 {
		wait = min(wait, o.err.HolderTTL)
	}
	for _, lim := range []time.Duration{limit, wb.limit} {
		if lim > 0 {
			wait = min(wait, lim)
		}
	}
	if o.err.Granted > 0 {
		wait = min(wait, wb.splitDelay(o.start))
		wb.noteSplit(o)
	} else {
		wb.splits = 0
	}
	return wait, nil
}

// backoff returns the waiting's backoff, made on first use.
func (wb *waitBase) backoff() backoff.BackOff {
	if wb.b == nil {
		wb.b = wb.l.cfg.NewBackOff()
		wb.b.Reset()
	}
	return wb.b
}

// noteSplit counts a failed attempt that some nodes granted as a split
// vote, which makes the next split delay longer, unless nodes refused it
// because they sit out after a loss of data: that is no contention, and
// their time left bounds the wait instead.
func (wb *waitBase) noteSplit(o *outcome) {
	if o.rejoining == 0 {
		wb.splits++
	}
}

// splitDelay is a random wait after a split vote in an attempt that began
// at start: up to twice the attempt's duration, doubled for each split in
// a row before it.
func (wb *waitBase) splitDelay(start time.Time) time.Duration {
	return time.Duration(mrand.Int64N(int64(2*time.Since(start))<<min(wb.splits, 16) + 1))
}

// joinHub puts the waiter in the hub, once, with its id in the nodes'
// queue ("" for none).
func (wb *waitBase) joinHub(id string) {
	switch {
	case wb.w != nil:
	case len(wb.keys) == 1:
		wb.w = wb.l.hub.join(wb.key, id)
	default:
		wb.w = wb.l.hub.joinAll(wb.keys)
	}
}

// leaveHub takes the waiter out of the hub.
func (wb *waitBase) leaveHub() {
	switch {
	case wb.w == nil:
	case len(wb.keys) == 1:
		wb.l.hub.leave(wb.key, wb.w)
	default:
		wb.l.hub.leaveAll(wb.keys, wb.w)
	}
}
