package redlock

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
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
func (l *Locker) Acquire(ctx context.Context, resource string) (*Lease, error) {
	if err := checkResource(resource); err != nil {
		return nil, err
	}
	if !l.enter() {
		return nil, ErrClosed
	}
	// Close waits for the call, and wakes it (Locker.closing): it leaves
	// the nodes' queues before Close returns.
	defer l.bg.Done()
	key := l.Key(resource)
	p := l.newPlace()
	if p == nil {
		// Without the nodes' queue, a caller that just released the lock
		// lets the waiter it woke take it first.
		if err := l.standBack(ctx, key); err != nil {
			return nil, fmt.Errorf("redlock: acquire %q: %w", resource, err)
		}
	}
	b := l.cfg.NewBackOff()
	b.Reset()
	var w *waiter
	queued := false // whether p may stand in a node's queue
	defer func() {
		if w != nil {
			l.hub.leave(key, w)
		}
		if queued {
			l.leaveQueue(key, p, l.allIdxs(), true)
		}
	}()
	var last error // the last attempt's *AcquireError
	began := time.Now()
	if p == nil && l.hub.queued(key) {
		// Others of this Locker already wait for key: queue behind them
		// rather than spend an attempt that cannot win.
		if w = l.hub.join(key, ""); w != nil {
			if err := l.await(ctx, w, b.NextBackOff()); err != nil {
				return nil, fmt.Errorf("redlock: acquire %q: %w", resource, err)
			}
		}
	}
	acquired := func(lease *Lease, attempts int) {
		l.emit(Event{Kind: EventAcquired, Resource: resource, Granted: len(lease.granted), Total: len(l.nodes), Attempts: attempts, Latency: time.Since(began)})
	}
	syncs := 0  // attempts in a row made at once to agree on a ticket
	splits := 0 // attempts in a row that some nodes granted
	for attempts := 1; ; attempts++ {
		start := time.Now()
		lease, err := l.attempt(ctx, resource, p)
		if err == nil {
			queued = false // the attempt leaves the other nodes' queues
			acquired(lease, attempts)
			return lease, nil
		}
		queued = p != nil
		var ae *AcquireError
		if !errors.As(err, &ae) {
			if ctx.Err() != nil && last != nil {
				return nil, ctxEnded(ctx, resource, last)
			}
			return nil, err // closed, cancelled, or a bug in a Node
		}
		last = err
		if ae.permanent {
			return nil, err // waiting will not fix these nodes (finish)
		}
		if p != nil && len(ae.Refused) > ae.handed {
			if h, _ := l.handed(p, w); len(h) > 0 && len(h)+ae.Granted+ae.silent < l.quorum {
				// The nodes handed the lock over to this place, but not a
				// majority of them, and even with the nodes that did not
				// answer they cannot be one: the others refused (they hold
				// the lock for another, or keep it for another head) or
				// failed. No majority may come to this place until the
				// others give up. Give its locks back and keep the turn
				// with a new place; try again at a random point soon, as
				// after a split vote.
				l.givePlaceBack(key, p, w)
				splits++
				if l.await(ctx, nil, time.Duration(mrand.Int64N(int64(2*time.Since(start))<<min(splits, 16)+1))) != nil {
					return nil, ctxEnded(ctx, resource, last)
				}
				continue
			}
		}
		if p != nil && ae.handed > 0 {
			// The attempt found locks handed over to this place that no
			// announcement had told of yet.
			if lease, _ := l.handedOver(ctx, resource, p, w); lease != nil {
				queued = false
				acquired(lease, attempts)
				return lease, nil
			}
		}
		if p != nil {
			// Bring the highest ticket to every node: they then order this
			// waiter alike. Nodes that gave different tickets are told at
			// once (twice at most in a row; a node that keeps disagreeing
			// is told on the next attempt).
			p.ticket = max(p.ticket, ae.queue.hi)
			if ae.queue.lo != ae.queue.hi && syncs < 2 {
				syncs++
				continue
			}
			syncs = 0
		}

		if w == nil {
			id := ""
			if p != nil {
				id = p.id
			}
			w = l.hub.join(key, id)
		}
		wait := b.NextBackOff()
		if wait == backoff.Stop {
			return nil, err
		}
		if ae.HolderTTL > 0 && ae.HolderTTL < wait {
			wait = ae.HolderTTL
		}
		if p != nil {
			// Renew the place in time, and try again when the head's place
			// runs out (a waiter that died holds the lock up no longer).
			wait = min(wait, p.ttl/3)
			if ae.queue.headLeft > 0 {
				wait = min(wait, ae.queue.headLeft+time.Millisecond)
			}
		}
		if ae.Granted > 0 {
			// Some nodes were free: other acquirers split the votes, or a
			// holder's grant has not reached them. Try again soon, at a
			// random point so as not to split them again, and later each
			// time it happens again (a minority that stays free must not
			// keep a waiter spinning until the holder releases).
			wait = min(wait, time.Duration(mrand.Int64N(int64(2*time.Since(start))<<min(splits, 16)+1)))
			splits++
		} else {
			splits = 0
		}
		for {
			slept := time.Now()
			if l.await(ctx, w, wait) != nil {
				return nil, ctxEnded(ctx, resource, last)
			}
			if p == nil || w == nil || l.isClosed() {
				break // the next attempt reports a closed Locker
			}
			// The nodes may have handed the lock over to us: then no
			// attempt is needed. While some have and the others have not
			// yet, their announcements are on their way: wait for them
			// (no longer than this wait was to last; the next attempt
			// finds the lock wherever it went). A majority that cannot
			// make a lease (too little validity left) is taken over by
			// an attempt at once.
			lease, next := l.handedOver(ctx, resource, p, w)
			if lease != nil {
				queued = false
				acquired(lease, attempts)
				return lease, nil
			}
			if wait -= time.Since(slept); next != waitMore || wait <= 0 {
				break
			}
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
	case <-l.closing:
	}
	return nil
}

// await sleeps until w is woken (w may be nil), wait has passed, or ctx
// ends (its error).
func await(ctx context.Context, w *waiter, wait time.Duration) error {
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

// standBack delays an Acquire of key that follows this Locker's own release
// of key while others were waiting, long enough for the woken waiter to
// take the lock: without it the releasing caller, already next to the
// nodes, would win nearly every time.
func (l *Locker) standBack(ctx context.Context, key string) error {
	l.mu.Lock()
	until, ok := l.yields[key]
	if ok {
		delete(l.yields, key)
	}
	l.mu.Unlock()
	d := time.Until(until)
	if !ok || d <= 0 {
		return nil
	}
	return await(ctx, nil, d)
}

// noteRelease records that key was released while others were listening
// and that the release took that long: this Locker's next Acquire of key stands
// back for a few such round trips.
func (l *Locker) noteRelease(key string, took time.Duration) {
	until := time.Now().Add(min(max(3*took, 500*time.Microsecond), 20*time.Millisecond))
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.yields) >= 1024 { // forget stale entries; keep the map small
		now := time.Now()
		for k, t := range l.yields {
			if t.Before(now) {
				delete(l.yields, k)
			}
		}
	}
	l.yields[key] = until
}

// TryAcquire makes exactly one attempt to acquire resource. When the lock is
// busy the error wraps ErrNotAcquired and is an *AcquireError.
func (l *Locker) TryAcquire(ctx context.Context, resource string) (*Lease, error) {
	if err := checkResource(resource); err != nil {
		return nil, err
	}
	start := time.Now()
	lease, err := l.attempt(ctx, resource, nil)
	if err == nil {
		l.emit(Event{Kind: EventAcquired, Resource: resource, Granted: len(lease.granted), Total: len(l.nodes), Attempts: 1, Latency: time.Since(start)})
	}
	return lease, err
}
