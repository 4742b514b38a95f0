package redlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/e6344662/go-redlock/fencing"
)

// Locker grants leases on named resources over a fixed set of independent
// nodes. A lease is granted when a majority (N/2+1) of the nodes grant it
// within its validity. A Locker is safe for concurrent use.
//
// The node set must be the same in every process that locks the same
// resources: changing it while locks are held breaks mutual exclusion.
type Locker struct {
	cfg    Config
	nodes  []Node
	all    []int // 0..len(nodes)-1
	quorum int

	mu     sync.Mutex
	closed bool
	leases map[*Lease]struct{}
	// yields holds, per lock key this Locker released while others were
	// waiting, until when its own next Acquire of that key stands back.
	yields map[string]time.Time
	// bg counts what Close waits for: attempts in flight, their clean-ups,
	// and leases until they end.
	bg      sync.WaitGroup
	hub     waitHub
	workers *workers
}

// New returns a Locker over nodes. It rejects an empty node list, nil or
// duplicate nodes (one server must not count twice toward the quorum), and
// invalid Config values, with errors wrapping ErrInvalidConfig.
func New(nodes []Node, cfg Config) (*Locker, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: no nodes", ErrInvalidConfig)
	}
	seen := make(map[string]bool, len(nodes))
	for i, n := range nodes {
		if n == nil {
			return nil, fmt.Errorf("%w: node %d is nil", ErrInvalidConfig, i)
		}
		if seen[n.Addr()] {
			return nil, fmt.Errorf("%w: node %s given twice (one server must not count twice toward a quorum)", ErrInvalidConfig, n.Addr())
		}
		seen[n.Addr()] = true
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Locker{
		cfg:     cfg,
		nodes:   append([]Node(nil), nodes...),
		quorum:  len(nodes)/2 + 1,
		leases:  make(map[*Lease]struct{}),
		yields:  make(map[string]time.Time),
		workers: newWorkers(),
	}
	l.hub = waitHub{l: l, keys: make(map[string]*keyWait)}
	l.all = make([]int, len(nodes))
	for i := range l.all {
		l.all[i] = i
	}
	return l, nil
}

// Config returns the Locker's configuration with defaults filled in.
func (l *Locker) Config() Config { return l.cfg }

// Quorum returns how many nodes must agree: N/2+1.
func (l *Locker) Quorum() int { return l.quorum }

// Key returns the lock key of resource on every node: KeyPrefix + "{" +
// resource + "}". The fence counter is Key + ":fence" and the release
// channel Key + ":released".
func (l *Locker) Key(resource string) string { return l.cfg.KeyPrefix + "{" + resource + "}" }

// checkResource rejects names the Locker will not lock.
func checkResource(resource string) error {
	if resource == "" {
		return fmt.Errorf("%w: empty resource name", ErrInvalidResource)
	}
	if len(resource) > MaxResourceLen {
		return fmt.Errorf("%w: resource name is %d bytes, over the limit of %d", ErrInvalidResource, len(resource), MaxResourceLen)
	}
	if resource[0] == '}' {
		// P{}...} has an empty hash tag: the lock and fence keys would fall
		// in different Redis Cluster slots.
		return fmt.Errorf("%w: resource name must not start with '}'", ErrInvalidResource)
	}
	return nil
}

// newToken draws a fresh 128-bit token from crypto/rand, hex encoded.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// checkToken rejects strings that are not a token drawn by newToken.
func checkToken(token string) error {
	if len(token) != 32 {
		return fmt.Errorf("%w: token must be 32 hex digits, got %d characters", ErrInvalidResource, len(token))
	}
	if _, err := hex.DecodeString(token); err != nil {
		return fmt.Errorf("%w: token must be 32 hex digits", ErrInvalidResource)
	}
	return nil
}

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
			if err := l.await(ctx, w, b.NextBackOff()); err != nil {
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
		if ae.denied {
			return nil, err // retrying will not change the credentials
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
		if l.await(ctx, w, wait) != nil {
			return nil, ctxEnded(ctx, resource, last)
		}
	}
}

// await sleeps until w is woken (w may be nil), wait has passed, or ctx
// ends (its error).
func (l *Locker) await(ctx context.Context, w *waiter, wait time.Duration) error {
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
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
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

// attempt makes one acquisition attempt (docs/design.md §5, §6, §7).
func (l *Locker) attempt(ctx context.Context, resource string) (*Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redlock: acquire %q: %w", resource, err)
	}
	if !l.enter() {
		return nil, ErrClosed
	}
	defer l.bg.Done()
	ls := newLease(l, resource, newToken())
	start := time.Now()
	validUntil := start.Add(l.cfg.validity())
	ls.validUntil = validUntil

	// Node calls run on their own context so that the caller's cancellation
	// after success does not cut short calls still pending; each fan-out
	// bounds them by NodeCallTimeout, which is below the validity.
	opCtx := context.WithoutCancel(ctx)

	n := len(l.nodes)
	replies, deadline := fanout(l, opCtx, "acquire", l.allIdxs(), &ls.acquiring, func(ctx context.Context, node Node) (Grant, error) {
		return node.Acquire(ctx, ls.key, ls.token, l.cfg.Owner, l.cfg.LeaseDuration)
	})
	ae := &AcquireError{Resource: resource, Needed: l.quorum, Total: n}
	var granted, answered, unsure []int // unsure: errors, the outcome is unknown
	counters := make(map[int]fencing.Token, n)
	var failure error
	// A client that ignores context deadlines does not hold the attempt up
	// past NodeCallTimeout (which is below the validity): gather stops, and
	// the unanswered nodes count as failed.
	received, timedOut := gather(ctx, replies, deadline, n, func(r reply[Grant]) bool {
		answered = append(answered, r.idx)
		switch {
		case r.err != nil:
			ae.NodeErrors = append(ae.NodeErrors, r.err)
			unsure = append(unsure, r.idx)
		case r.val.OK:
			granted = append(granted, r.idx)
			counters[r.idx] = r.val.Counter
		default:
			refusal := l.nodes[r.idx].Addr()
			if r.val.Reason != "" {
				refusal += " (" + r.val.Reason + ")"
			}
			ae.Refused = append(ae.Refused, refusal)
			if r.val.HolderTTL < 0 || (ae.HolderTTL >= 0 && r.val.HolderTTL > ae.HolderTTL) {
				ae.HolderTTL = r.val.HolderTTL
			}
		}
		return len(granted) >= l.quorum || n-(len(answered)-len(granted)) < l.quorum
	})
	switch {
	case ctx.Err() != nil:
		failure = fmt.Errorf("redlock: acquire %q: %w", resource, ctx.Err())
	case timedOut:
		ae.NodeErrors = append(ae.NodeErrors, fmt.Errorf("%d nodes did not answer within %s", n-received, l.cfg.NodeCallTimeout))
	}
	ae.Granted = len(granted)

	var fence fencing.Token
	if failure == nil && ae.Reason == "" && len(granted) >= l.quorum {
		fence, failure = ls.confirmFence(ctx, opCtx, granted, counters, validUntil, ae)
	} else if failure == nil {
		failure = ae.finish()
	}
	if failure == nil && !time.Now().Before(validUntil) {
		ae.Reason = "validity elapsed during the attempt"
		failure = ae.finish()
	}
	l.emit(Event{Kind: EventAttempt, Resource: resource, Granted: len(granted), Total: n, Latency: time.Since(start), Err: failure})
	if failure != nil {
		if len(granted)+len(unsure) > 0 && !timedOut && ctx.Err() == nil {
			// Some nodes may hold our lock: let the calls still running
			// answer (within the attempt's NodeCallTimeout), so that the
			// clean-up below covers them and a retry does not find our
			// leftovers. A busy lock (nothing granted) answers at once.
			gather(ctx, replies, deadline, n-received, func(r reply[Grant]) bool {
				answered = append(answered, r.idx)
				if r.err != nil {
					unsure = append(unsure, r.idx)
				} else if r.val.OK {
					granted = append(granted, r.idx)
				}
				return false
			})
		}
		// The caller waits for the nodes that answered and may hold the
		// lock, not for the others (a paused node never holds it up).
		select {
		case <-l.cleanup(ls, append(granted, unsure...), answered):
		case <-ctx.Done():
		}
		return nil, failure
	}

	ls.fence = fence
	for _, i := range granted {
		ls.granted = append(ls.granted, l.nodes[i].Addr())
	}
	if !l.track(ls) {
		<-l.cleanup(ls, append(granted, unsure...), answered)
		return nil, ErrClosed
	}
	// Calls still pending keep running (bounded by NodeCallTimeout); the
	// lease waits for them when it ends.
	l.bg.Add(1) // until the lease ends
	ls.start()
	return ls, nil
}

// finish picks the sentinel for a failed attempt: ErrNotAcquired when the
// refusals alone rule out a majority (the lock is busy) or time ran out,
// else ErrNoQuorum (node failures stood in the way).
func (e *AcquireError) finish() error {
	e.kind = ErrNotAcquired
	if len(e.Refused) <= e.Total-e.Needed && e.Reason == "" && len(e.NodeErrors) > 0 {
		e.kind = ErrNoQuorum
		denied := 0
		for _, err := range e.NodeErrors {
			if isAuthError(err) {
				denied++
			}
		}
		if denied > e.Total-e.Needed {
			e.denied = true
			e.Reason = "access denied by a majority of nodes: check the user, password and ACL"
		}
	}
	return e
}

// confirmFence computes the lease's fencing token from the granting nodes'
// counters (docs/design.md §6): the maximum F is usable at once when a
// majority returned exactly F, and otherwise only after a majority of nodes
// where the lock stands acknowledged raising their counter to F.
func (ls *Lease) confirmFence(ctx, opCtx context.Context, granted []int, counters map[int]fencing.Token, validUntil time.Time, ae *AcquireError) (fencing.Token, error) {
	l := ls.locker
	var f fencing.Token
	for _, i := range granted {
		f = max(f, counters[i])
	}
	agree := 0
	for _, i := range granted {
		if counters[i] == f {
			agree++
		}
	}
	if agree >= l.quorum {
		return f, nil
	}

	// The fence step must end within the validity.
	fctx, cancel := context.WithDeadline(ctx, validUntil)
	defer cancel()
	replies, deadline := fanout(l, opCtx, "fence", granted, &ls.acquiring, func(ctx context.Context, node Node) (bool, error) {
		return node.Fence(ctx, ls.key, ls.token, f)
	})
	var t tally
	gather(fctx, replies, deadline, len(granted), func(r reply[bool]) bool {
		t.add(r)
		return t.yes >= l.quorum || len(granted)-t.no-len(t.errs) < l.quorum
	})
	if t.yes >= l.quorum && fctx.Err() == nil {
		return f, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("redlock: acquire %q: %w", ls.resource, err)
	}
	ae.NodeErrors = append(ae.NodeErrors, t.errs...)
	ae.Reason = fmt.Sprintf("fencing token %d confirmed on %d nodes only", f, t.yes)
	return 0, ae.finish()
}

// cleanup removes a failed attempt's partial grants, in the background:
// at once on the nodes in now (those that granted, or failed with an
// unknown outcome), and on each node that had not answered once its call
// has ended, so that no late grant outlives the attempt. Nodes that
// answered with a refusal hold nothing of ours. The channel it returns is
// closed when the nodes in now are clean. It must be called while the
// attempt holds its count in l.bg (enter).
func (l *Locker) cleanup(ls *Lease, now, answered []int) <-chan struct{} {
	ls.cancel(ErrLeaseReleased)
	quick := make(chan struct{})
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		ctx := context.Background() // each call is bounded by NodeCallTimeout
		if len(now) > 0 {
			l.releaseOn(ctx, now, ls.key, ls.token, false, false)
		}
		close(quick)
		if len(answered) == len(l.nodes) {
			return
		}
		ls.acquiring.Wait()
		rest := make([]int, 0, len(l.nodes)-len(answered))
		for i := range l.nodes {
			if !slices.Contains(answered, i) {
				rest = append(rest, i)
			}
		}
		l.releaseOn(ctx, rest, ls.key, ls.token, false, false)
	}()
	return quick
}

// enter registers an operation that may start background work with Close,
// which waits for it; it reports false once the Locker is closed. The
// caller calls l.bg.Done when the operation ends, and may start background
// goroutines (l.bg.Add) until then.
func (l *Locker) enter() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.bg.Add(1)
	return true
}

// track records a live lease so that Close can release it; it reports false
// when the Locker is closed.
func (l *Locker) track(ls *Lease) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.leases[ls] = struct{}{}
	return true
}

func (l *Locker) forget(ls *Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.leases, ls)
}

// Close releases every lease the Locker still holds, waits for its
// background work to stop, and makes later acquisitions fail with ErrClosed.
// It does not close the nodes. Errors from releases are joined.
func (l *Locker) Close() error {
	l.mu.Lock()
	l.closed = true
	leases := make([]*Lease, 0, len(l.leases))
	for ls := range l.leases {
		leases = append(leases, ls)
	}
	l.mu.Unlock()

	var errs []error
	for _, ls := range leases {
		if err := ls.Release(context.Background()); err != nil &&
			!errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrLeaseReleased) {
			errs = append(errs, err)
		}
	}
	l.bg.Wait()
	if err := l.hub.close(); err != nil {
		errs = append(errs, err)
	}
	l.workers.stop()
	return errors.Join(errs...)
}

// Renew extends the lock on resource held by token (from another process,
// such as a lease printed by redlock-cli acquire) on every node. It succeeds
// when a majority extended it, and returns the new validity. It fails with
// ErrNotHeld when the token holds the lock on fewer than a majority, and with
// ErrNoQuorum when no majority answered. It never re-creates an expired lock.
func (l *Locker) Renew(ctx context.Context, resource, token string) (time.Time, error) {
	if err := checkResource(resource); err != nil {
		return time.Time{}, err
	}
	if err := checkToken(token); err != nil {
		return time.Time{}, err
	}
	start := time.Now()
	t := l.yesNo(ctx, "renew", l.allIdxs(), false, func(ctx context.Context, n Node) (bool, error) {
		return n.Renew(ctx, l.Key(resource), token, l.cfg.LeaseDuration)
	})
	validUntil := start.Add(l.cfg.validity())
	if err := l.verdict("renew", resource, t); err != nil {
		return time.Time{}, err
	}
	if !time.Now().Before(validUntil) {
		return time.Time{}, fmt.Errorf("%w: renewal of %q took longer than the lease validity", ErrNotHeld, resource)
	}
	return validUntil, nil
}

// Release deletes the lock on resource held by token on every node. It
// succeeds when a majority deleted it, fails with ErrNotHeld when the token
// held it on fewer than a majority, and with ErrNoQuorum when no majority
// answered. It never deletes a lock held by another token.
func (l *Locker) Release(ctx context.Context, resource, token string) error {
	if err := checkResource(resource); err != nil {
		return err
	}
	if err := checkToken(token); err != nil {
		return err
	}
	t, _ := l.releaseAll(ctx, l.Key(resource), token, true, false)
	return l.verdict("release", resource, t)
}
