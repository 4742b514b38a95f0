package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/e6344662/go-redlock/fencing"
)

// Acquire waits until it holds a lease on resource or ctx ends. It is fair
// (Config.QueueTTL): while the lock is busy, the caller holds a place in
// the lock's wait queue on the nodes, in arrival order across every
// process, and a release wakes only the head of the queue, which the nodes
// keep the free lock for. It retries with Config.NewBackOff when no wake-up
// comes, never sleeping past the holder's remaining TTL or the time the
// head's place has left. When ctx ends first, the error wraps ctx.Err()
// and describes the last attempt; it is never reported as ErrNotAcquired.
// The caller's place is given up when Acquire returns without a lease.
func (l *Locker) Acquire(ctx context.Context, resource string) (lease *Lease, err error) {
	if err := checkResource(resource); err != nil {
		return nil, err
	}
	if !l.enter() {
		return nil, ErrClosed
	}
	ctx, op := l.beginAcquire(ctx, "acquire", LockMutex, resource)
	defer l.endAcquire(ctx, &op, &lease, nil, &err)
	// Close waits for the call, and wakes it (Locker.closing): it leaves
	// the nodes' queues before Close returns.
	defer l.bg.Done()
	w, err := l.newWaiting(ctx, resource)
	if err != nil {
		return nil, fmt.Errorf("redlock: acquire %q: %w", resource, err)
	}
	leases, err := l.acquire(ctx, &op, w, func(w attemptHooks) ([]*Lease, *outcome, error) {
		return l.attempt(ctx, l.mutexRequest(resource, w), w)
	})
	if err != nil {
		return nil, err
	}
	return leases[0], nil
}

// newWaiting returns the waiting of one Acquire of resource: fair when the
// Locker queues (Config.QueueTTL), plain otherwise.
func (l *Locker) newWaiting(ctx context.Context, resource string) (waiting, error) {
	base := l.newWaitBase(resource, []string{l.Key(resource)}, 0)
	if l.fair {
		return newFairWait(base), nil
	}
	return newPlainWait(ctx, base)
}

// newWaitBase returns the start of a waiting for resource whose lock keys
// are keys (woken by a release of any), never pausing longer than limit
// when positive.
func (l *Locker) newWaitBase(resource string, keys []string, limit time.Duration) waitBase {
	return waitBase{l: l, resource: resource, key: keys[0], keys: keys, limit: limit}
}

// acquire runs attempts (try) until one wins, waiting between them as w
// says, for every lock kind: the uncontended call is its first attempt.
// op is the acquisition's record for its events; its resource names the
// request in the error when ctx ends.
func (l *Locker) acquire(ctx context.Context, op *acquireOp, w waiting, try func(attemptHooks) ([]*Lease, *outcome, error)) ([]*Lease, error) {
	won := false
	defer func() { w.done(won) }()
	began := time.Now()
	resource := op.resource
	var last error // the last attempt's *AcquireError
	told := false  // the rejoin wait was reported (rejoinWait)
	for attempts := 1; ; attempts++ {
		op.try()
		leases, o, err := try(w)
		var lease *Lease
		if o != nil && !o.err.permanent {
			l.rejoinWait(ctx, o, &told)
			last = err
			var wait time.Duration
			if lease, wait, err = w.next(ctx, o); lease == nil && err == nil && wait > 0 {
				lease, err = w.sleep(ctx, wait)
			}
			if op.handOver = lease != nil; op.handOver {
				leases = []*Lease{lease}
			}
		}
		switch {
		case leases != nil:
			won = true
			l.emitCtx(ctx, Event{Kind: EventAcquired, Resource: resource, Granted: len(leases[0].granted), Total: len(l.nodes), Attempts: attempts, Latency: time.Since(began)})
			return leases, nil
		case err == nil:
		case ctx.Err() != nil && last != nil:
			return nil, ctxEnded(ctx, resource, last)
		default:
			return nil, err // closed, cancelled, lasting failures, or the backoff stopped
		}
	}
}

// await is the package's await that also returns, with nil, when the
// Locker is being closed: the next attempt then reports ErrClosed.
func (l *Locker) await(ctx context.Context, w *waiter, wait time.Duration) error {
	select {
	case <-l.closing:
		return nil
	default:
	}
	return awaitOr(ctx, w, l.closing, wait)
}

// await sleeps until w is woken (w may be nil), wait has passed, or ctx
// ends (its error).
func await(ctx context.Context, w *waiter, wait time.Duration) error {
	return awaitOr(ctx, w, nil, wait)
}

// awaitOr is await that also returns, with nil, when stop closes.
func awaitOr(ctx context.Context, w *waiter, stop <-chan struct{}, wait time.Duration) error {
	var wake <-chan struct{}
	if w != nil {
		wake = w.wake
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	case <-wake:
	case <-stop:
	}
	return nil
}

// ctxEnded is Acquire's error when ctx ends while it waits. It wraps
// ctx.Err(), and ErrNoQuorum when the last attempt could not reach a
// majority, but never ErrNotAcquired: running out of time is not "busy".
func ctxEnded(ctx context.Context, resource string, last error) error {
	if errors.Is(last, ErrNoQuorum) {
		return fmt.Errorf("redlock: acquire %q: %w (last attempt: %w)", resource, ctx.Err(), last)
	}
	return fmt.Errorf("redlock: acquire %q: %w (last attempt: %v)", resource, ctx.Err(), last)
}

// TryAcquire makes exactly one attempt to acquire resource. When the lock is
// busy the error wraps ErrNotAcquired and is an *AcquireError.
func (l *Locker) TryAcquire(ctx context.Context, resource string) (lease *Lease, err error) {
	if err := checkResource(resource); err != nil {
		return nil, err
	}
	ctx, op := l.beginAcquire(ctx, "try_acquire", LockMutex, resource)
	defer l.endAcquire(ctx, &op, &lease, nil, &err)
	op.try()
	leases, _, err := l.tryOnce(ctx, resource, l.mutexRequest(resource, noWait{}))
	if err != nil {
		return nil, err
	}
	return leases[0], nil
}

// tryOnce makes one attempt of rq that nobody waits behind, and reports
// its success as an acquisition (resource names it).
func (l *Locker) tryOnce(ctx context.Context, resource string, rq request) ([]*Lease, *outcome, error) {
	start := time.Now()
	leases, o, err := l.attempt(ctx, rq, noWait{})
	if err == nil {
		l.emitCtx(ctx, Event{Kind: EventAcquired, Resource: resource, Granted: len(leases[0].granted), Total: len(l.nodes), Attempts: 1, Latency: time.Since(start)})
	}
	return leases, o, err
}

// mutexRequest is an attempt at resource's mutex: a fresh lease, and the
// acquire call on each node under the rejoin rule, carrying what w adds
// (a fair waiting's place) and read by w first.
func (l *Locker) mutexRequest(resource string, w attemptHooks) request {
	ls := newLease(l, resource, newToken())
	q, read := w.queue()
	a := acquireArgs{keys: ls.keys, token: ls.token, owner: l.cfg.Owner, ttl: l.cfg.LeaseDuration, queue: q, delay: l.delayArg}
	a.prepare()
	counters := make([]fencing.Token, len(l.nodes))
	return request{resource: resource, quoted: true, leases: []*Lease{ls}, call: func(ctx context.Context, i int) (vote, error) {
		g, err := l.acquireOn(ctx, i, a)
		if err != nil {
			return vote{}, err
		}
		v := vote{ok: g.OK, left: g.left, holderTTL: g.HolderTTL, reason: g.Reason}
		if g.OK {
			counters[i] = g.Counter
			v.counters = counters[i : i+1 : i+1]
		}
		if read != nil {
			v = read(i, g, v)
		}
		return v, nil
	}}
}
