package redlock

import (
	"context"
	"sync/atomic"
	"time"
)

// plainWait is a waiting without the nodes' wait queue: Acquire's when
// Config.QueueTTL is negative, and always AcquireAll's, the read-write
// lock's and the semaphore's. It sleeps on the backoff, woken by a release
// of one of its keys that a majority of nodes announced. Waiters of one
// Locker take turns in arrival order (the hub wakes one per release), and
// a Locker that just released a lock others wait for stands back a moment
// before its own next Acquire of it.
type plainWait struct {
	waitBase
	noWait
}

// newPlainWait is an Acquire's plain waiting: it stands back if this
// Locker just released the lock while others were waiting, and queues
// behind this Locker's waiters of the lock rather than spend an attempt
// that cannot win.
func newPlainWait(ctx context.Context, base waitBase) (*plainWait, error) {
	pw := &plainWait{waitBase: base}
	l := base.l
	if err := l.standBack(ctx, pw.key); err != nil {
		return nil, err
	}
	if l.hub.queued(pw.key) {
		if pw.joinHub(""); pw.w != nil {
			if err := l.await(ctx, pw.w, pw.backoff().NextBackOff()); err != nil {
				pw.leaveHub()
				return nil, err
			}
		}
	}
	return pw, nil
}

// waitOn returns the plain waiting of an acquisition of resource whose
// lock keys are keys (AcquireAll, the read-write lock, the semaphore): it
// never pauses longer than limit, when positive.
func (l *Locker) waitOn(resource string, keys []string, limit time.Duration) *plainWait {
	return &plainWait{waitBase: l.newWaitBase(resource, keys, limit)}
}

func (pw *plainWait) next(_ context.Context, o *outcome) (*Lease, time.Duration, error) {
	pw.joinHub("")
	wait, err := pw.pause(o, 0)
	return nil, wait, err
}

func (pw *plainWait) sleep(ctx context.Context, d time.Duration) (*Lease, error) {
	return nil, pw.l.await(ctx, pw.w, d)
}

func (pw *plainWait) done(bool) { pw.leaveHub() }

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

// plainLeases are the lease hooks of a Locker without the nodes' queue: a
// release that a majority confirmed wakes this Locker's own next waiter
// (its own announcements then wake no one else), and the Locker stands
// back when others listened.
type plainLeases struct{ l *Locker }

func (p plainLeases) release(a releaseArgs) releasing {
	a.prepare()
	return &announcing{l: p.l, a: a}
}

func (plainLeases) ended(bool) {}

// announcing is a plain release: it counts the most waiters a node
// announced it to.
type announcing struct {
	l         *Locker
	a         releaseArgs
	listeners atomic.Int64
}

func (r *announcing) args(context.Context, int) releaseArgs { return r.a }

func (r *announcing) heard(_ int, rp released) {
	for n := int64(rp.listeners); ; {
		old := r.listeners.Load()
		if n <= old || r.listeners.CompareAndSwap(old, n) {
			return
		}
	}
}

func (r *announcing) done(took time.Duration) {
	key := r.a.keys[0]
	r.l.hub.released(key, releaseID(r.a.token))
	if r.listeners.Load() > 0 {
		r.l.noteRelease(key, took)
	}
}
