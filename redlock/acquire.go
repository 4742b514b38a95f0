package redlock

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Acquire waits until it holds a lease on resource or ctx ends. While the
// lock is busy it waits for the holder's release to be announced by the
// nodes (Notifier), queued in arrival order behind this Locker's other
// waiters of the resource, and otherwise retries with Config.NewBackOff,
// never sleeping past the holder's remaining TTL. When ctx ends first, the
// error wraps ctx.Err() and describes the last attempt; it is never
// reported as ErrNotAcquired.
func (l *Locker) Acquire(ctx context.Context, resource string) (*Lease, error) {
	if err := checkResource(resource); err != nil {
		return nil, err
	}
	key := l.Key(resource)
	if err := l.standBack(ctx, key); err != nil {
		return nil, fmt.Errorf("redlock: acquire %q: %w", resource, err)
	}
	b := l.cfg.NewBackOff()
	b.Reset()
	var w *waiter
	defer func() {
		if w != nil {
			l.hub.leave(key, w)
		}
	}()
	var last error // the last attempt's *AcquireError
	began := time.Now()
	if l.hub.queued(key) {
		// Others of this Locker already wait for key: queue behind them
		// rather than spend an attempt that cannot win.
		if w = l.hub.join(key); w != nil {
			if err := await(ctx, w, b.NextBackOff()); err != nil {
				return nil, fmt.Errorf("redlock: acquire %q: %w", resource, err)
			}
		}
	}
	for attempts := 1; ; attempts++ {
		start := time.Now()
		lease, err := l.attempt(ctx, resource)
		if err == nil {
			l.emit(Event{Kind: EventAcquired, Resource: resource, Granted: len(lease.granted), Total: len(l.nodes), Attempts: attempts, Latency: time.Since(began)})
			return lease, nil
		}
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

		if w == nil {
			w = l.hub.join(key)
		}
		wait := b.NextBackOff()
		if wait == backoff.Stop {
			return nil, err
		}
		if ae.HolderTTL > 0 && ae.HolderTTL < wait {
			wait = ae.HolderTTL
		}
		if ae.Granted > 0 {
			// Some nodes were free: other acquirers split the votes. Try
			// again soon, at a random point so as not to split them again.
			wait = min(wait, time.Duration(mrand.Int64N(int64(2*time.Since(start))+1)))
		}
		if await(ctx, w, wait) != nil {
			return nil, ctxEnded(ctx, resource, last)
		}
	}
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
	lease, err := l.attempt(ctx, resource)
	if err == nil {
		l.emit(Event{Kind: EventAcquired, Resource: resource, Granted: len(lease.granted), Total: len(l.nodes), Attempts: 1, Latency: time.Since(start)})
	}
	return lease, err
}
