package redlock

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/e6344662/go-redlock/fencing"
)

// Lease is a held lock on one resource. It is renewed automatically in the
// background until Release, until its Locker is closed, or until renewal
// fails to keep a majority of nodes within the lease's validity; then the
// lease is lost and its Context ends with cause ErrLeaseLost, before
// ValidUntil. A Lease is safe for concurrent use.
//
// Work guarded by the lease should use Context, and every write to the
// protected resource should carry Fence, which the resource checks (package
// fencing): a process that was paused past its lease cannot know it, but the
// resource can.
type Lease struct {
	locker   *Locker
	resource string
	key      string
	keys     []string // lockKeys(key)
	// notify is the lock key on whose release channel the lease's release
	// is announced, when not key: a reader's, the read-write lock's (so
	// that a waiting writer hears it).
	notify  string
	token   string
	fence   fencing.Token
	granted []string
	// hooks are what the waiting that took the lease adds to its release
	// and its end (wait.go): the Locker's own unless an Acquire's waiting
	// gave its own.
	hooks leaseHooks

	// ctx is the lease's own cancel context; Context returns it wrapped in
	// a leaseCtx, which also ends it when ValidUntil has passed.
	ctx    context.Context
	cancel context.CancelCauseFunc
	lost   atomic.Bool // the loss was declared (and reported) once
	// done is closed when the lease has ended (end): renewal stopped, its
	// node calls and the acquisition's finished, and the lock released on
	// the nodes unless the lease was orphaned. releaseErr is that release's
	// outcome.
	done       chan struct{}
	releaseErr error
	// timer runs the next renewal (tick); calls counts renewal calls still
	// running, waited for only when the lease ends.
	timer *time.Timer
	calls sync.WaitGroup

	// acquiring counts the acquisition's node calls still running; the lock
	// is released on a node only after they finish, so no late grant can
	// outlive it.
	acquiring sync.WaitGroup
	// busy counts, by node index, the lease's calls (acquisition, fence,
	// renewal) not finished yet: its release goes at once to the nodes
	// without one, and to the others once every call has ended. It is
	// backed by inline for up to len(inline) nodes.
	busy   []atomic.Int32
	inline [5]atomic.Int32

	mu            sync.Mutex
	validUntil    time.Time
	releaseCalled bool
	orphaned      bool
	ending        bool // Release, Orphan or a loss decided that the lease ends

	// obs serves its events, when observed (observe.go); under mu.
	obs leaseObs
}

func newLease(l *Locker, resource, token string) *Lease {
	ctx, cancel := context.WithCancelCause(context.Background())
	key := l.Key(resource)
	ls := &Lease{
		locker:   l,
		resource: resource,
		key:      key,
		keys:     lockKeys(key),
		token:    token,
		hooks:    l.hooks,
		ctx:      ctx,
		cancel:   cancel,
		done:     make(chan struct{}),
	}
	if n := len(l.nodes); n <= len(ls.inline) {
		ls.busy = ls.inline[:n]
	} else {
		ls.busy = make([]atomic.Int32, n)
	}
	return ls
}

// String describes the lease for logs with only a prefix of its token.
func (ls *Lease) String() string {
	return fmt.Sprintf("redlock.Lease{resource=%q fence=%d token=%s…}", ls.resource, ls.fence, ls.token[:8])
}

// LogValue makes slog show the lease as String does, never the whole token.
func (ls *Lease) LogValue() slog.Value {
	return slog.GroupValue(slog.String("resource", ls.resource), slog.Uint64("fence", uint64(ls.fence)), slog.String("token", ls.token[:8]+"…"))
}

// Format makes every fmt verb print String, so that %v and %+v of a lease
// never print its token.
func (ls *Lease) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(ls.String())) }

// Resource returns the name of the locked resource.
func (ls *Lease) Resource() string { return ls.resource }

// Token returns the lease's random 128-bit token, hex encoded. The token is
// a secret in the sense that whoever has it can renew and release the lock.
func (ls *Lease) Token() string { return ls.token }

// Fence returns the lease's fencing token. It is greater than the fencing
// token of every lease on the same resource whose acquisition completed
// before this one began (docs/design.md §6), provided the nodes keep their
// data across restarts.
func (ls *Lease) Fence() fencing.Token { return ls.fence }

// Granted returns the addresses of the nodes counted toward the quorum when
// the lease was acquired (a majority; nodes that answered later may hold it
// too).
func (ls *Lease) Granted() []string { return append([]string(nil), ls.granted...) }

// ValidUntil returns the instant, on this process's monotonic clock, until
// which the lease is guaranteed to be held: the start of the latest
// successful acquisition or renewal plus LeaseDuration minus the drift
// allowance. Context ends before this instant if renewal fails, and is
// never seen alive at or after it (see Context).
func (ls *Lease) ValidUntil() time.Time {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.validUntil
}

// Context returns a context that ends when the lease is lost (cause
// ErrLeaseLost) or released (cause ErrLeaseReleased); see context.Cause.
//
// It never reports the lease as held at or after ValidUntil: every call of
// its Err, Done and Value methods first compares the monotonic clock with
// ValidUntil and ends the context if the lease has run out, so the answer
// is right even when this process was starved of CPU and its renewal has
// not run yet. A goroutine already blocked on Done is woken by the renewal,
// which declares the loss a tenth of the validity before ValidUntil.
func (ls *Lease) Context() context.Context { return leaseCtx{ls.ctx, ls} }

// leaseCtx is the context a Lease hands out: its cancel context, checked
// against the lease's validity on every access.
type leaseCtx struct {
	context.Context
	ls *Lease
}

func (c leaseCtx) Done() <-chan struct{} { c.ls.checkValidity(); return c.Context.Done() }
func (c leaseCtx) Err() error            { c.ls.checkValidity(); return c.Context.Err() }
func (c leaseCtx) Value(key any) any     { c.ls.checkValidity(); return c.Context.Value(key) }

// checkValidity ends the lease as lost if ValidUntil has passed and it has
// not ended yet.
func (ls *Lease) checkValidity() {
	if ls.ctx.Err() == nil && !time.Now().Before(ls.ValidUntil()) {
		ls.lose(0)
	}
}

// lose ends the lease with cause ErrLeaseLost and reports it once; it does
// nothing to a lease that was released first.
func (ls *Lease) lose(latency time.Duration) {
	ls.cancel(ErrLeaseLost)
	if context.Cause(ls.ctx) == ErrLeaseLost && ls.lost.CompareAndSwap(false, true) {
		ctx, at := ls.obsCtx()
		ls.locker.emitCtx(ctx, ls.leaseEvent(Event{Kind: EventLost, Latency: latency, Held: held(at), Err: ErrLeaseLost}))
	}
}

// Release stops renewal and deletes the lock on every node. It returns nil
// when a majority deleted it; an error wrapping ErrLeaseLost when the lease
// had already been lost or had expired; an error wrapping ErrNoQuorum when
// no majority could be reached (the lock then expires by its TTL); and an
// error wrapping ErrLeaseReleased when called again. It waits for the
// nodes at most NodeCallTimeout; when fewer than a majority answered, it
// calls the silent nodes again, at most twice, after the Locker's backoff,
// while the lease is still valid and ctx allows (ctx never cancels a call
// already made), so a release that reaches no majority takes at most three
// NodeCallTimeouts and two backoff pauses. If a renewal is running and ctx
// ends first, Release returns ctx's error and the release completes in the
// background.
func (ls *Lease) Release(ctx context.Context) (err error) {
	ctx, began := ls.beginRelease(ctx)
	defer ls.endRelease(ctx, began, &err)
	ls.mu.Lock()
	again, orphaned := ls.releaseCalled, ls.orphaned
	ls.releaseCalled = true
	expired := !time.Now().Before(ls.validUntil)
	owner := false
	if !again {
		ls.ending = true
		owner = ls.timer.Stop() // no renewal running: this goroutine ends the lease
	}
	ls.mu.Unlock()
	if orphaned {
		return fmt.Errorf("%w: %q was handed over to its TTL; release it by token", ErrLeaseOrphaned, ls.resource)
	}
	if again {
		return fmt.Errorf("%w: %q was already released", ErrLeaseReleased, ls.resource)
	}
	if expired {
		ls.lose(0)
	}
	ls.cancel(ErrLeaseReleased) // no effect if the lease was lost first
	if owner {
		ls.end(ctx) // in the caller's goroutine: no hand-over on the hot path
	} else {
		// A renewal is running; it sees the lease ending and ends it.
		select {
		case <-ls.done:
		case <-ctx.Done():
			return fmt.Errorf("redlock: release %q: %w (it completes in the background)", ls.resource, ctx.Err())
		}
	}
	if context.Cause(ls.ctx) == ErrLeaseLost {
		return fmt.Errorf("%w: %q was lost before Release", ErrLeaseLost, ls.resource)
	}
	return ls.releaseErr
}

// Orphan stops renewing the lease without releasing it: the lock stays on
// the nodes until its TTL runs out, or until a release by token
// (Locker.Release, redlock-cli release) deletes it. This process gives up
// the lease: its Context ends at once with cause ErrLeaseOrphaned, the
// Locker forgets it (Close does not release it), and Release fails. Orphan
// returns once no renewal is running; it does nothing to a lease that has
// already ended.
func (ls *Lease) Orphan() {
	ls.mu.Lock()
	owner := false
	if !ls.releaseCalled {
		if ls.ctx.Err() == nil {
			ls.orphaned, ls.releaseCalled = true, true
			ls.cancel(ErrLeaseOrphaned)
		}
		// A lease already lost ends here too, rather than at its next
		// renewal time.
		ls.ending = true
		owner = ls.timer.Stop()
	}
	ls.mu.Unlock()
	if owner {
		ls.end(context.Background())
	}
	<-ls.done
}

func (ls *Lease) setValidUntil(t time.Time) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.validUntil = t
}

// releaseNodes deletes the lock on every node, announcing it to waiters,
// and says how it went: nil when a majority released it. ctx bounds only
// the retries of releaseAgain; it cancels no call. The lease's hooks make
// each node's call and hear its answer, and follow a release that a
// majority confirmed (waking waiters, standing back).
func (ls *Lease) releaseNodes(ctx context.Context) error {
	l := ls.locker
	start := time.Now()
	r := ls.hooks.release(releaseArgs{keys: ls.keys, token: ls.token, notify: ls.notify})
	now, later := ls.idleNodes()
	rctx := context.WithoutCancel(ctx)
	first := l.startRelease(rctx, now, r)
	ls.waitCalls() // while the first nodes release
	var second *yesNoCalls
	if len(later) > 0 {
		second = l.startRelease(rctx, later, r)
	}
	// A Release returns once the nodes it waited for answered too (or
	// NodeCallTimeout passed), so that a lock its late calls left there is
	// gone when it returns.
	t := first.count(rctx, majorityYes, second)
	t = ls.releaseAgain(ctx, t, r)
	if t.yes >= l.quorum {
		r.done(time.Since(start))
	}
	var err error
	switch {
	case t.yes >= l.quorum:
	case t.yes+t.no >= l.quorum:
		err = fmt.Errorf("%w: %q had expired on %d of %d nodes before release", ErrLeaseLost, ls.resource, t.no, len(l.nodes))
	default:
		err = fmt.Errorf("%w; the lock expires by its TTL", l.verdict("release", ls.resource, t))
	}
	if context.Cause(ls.ctx) == ErrLeaseReleased {
		_, at := ls.obsCtx()
		l.emitCtx(ctx, ls.leaseEvent(Event{Kind: EventReleased, Granted: t.yes, Latency: time.Since(start), Held: held(at), Err: err}))
	}
	return err
}

// idleNodes splits the nodes into those the lease has no call running on
// (its release goes there at once) and the others, whose acquisition,
// fence or renewal call may still land: their release waits for it (a
// paused node does not hold up the release, nor the hand-over, on the
// rest). When the lease ends, no new call of it starts.
func (ls *Lease) idleNodes() (now, later []int) {
	n := len(ls.busy)
	for i := range ls.busy {
		if ls.busy[i].Load() > 0 {
			later = append(later, i)
		}
	}
	if len(later) == 0 {
		return ls.locker.allIdxs(), nil
	}
	now = make([]int, 0, n-len(later))
	for i := range ls.busy {
		if !slices.Contains(later, i) {
			now = append(now, i)
		}
	}
	return now, later
}

// waitCalls waits for the lease's renewal and acquisition calls still
// running.
func (ls *Lease) waitCalls() {
	ls.calls.Wait()
	ls.acquiring.Wait()
}

// releaseRetries is how many more times a lease's release calls the nodes
// that gave no answer, when fewer than a majority answered.
const releaseRetries = 2

// releaseAgain calls the nodes that gave no answer to a lease's release
// (t.silent) again, at most releaseRetries times after the Locker's
// backoff, while fewer than a majority have answered, the lease was
// released rather than lost, its validity has not run out, and ctx allows:
// a short stall of the network, of the nodes or of this process then does
// not leave the lock to its TTL. A release by token is idempotent. A node
// that answers a later call that the token does not hold the lock there
// counts as released: the lock is not the lease's there any more, whether
// the first call ran without its answer arriving, handed the lock on, or
// the node never held it. So nil means that a majority no longer hold the
// lock under the lease's token; a lease that had been lost or had expired
// is reported as such before any retry. It returns the merged tally; r
// hears every round.
func (ls *Lease) releaseAgain(ctx context.Context, t tally, r releasing) tally {
	l := ls.locker
	if context.Cause(ls.ctx) != ErrLeaseReleased {
		return t
	}
	var b backoff.BackOff // made on the first retry: most releases need none
	for range releaseRetries {
		if t.yes+t.no >= l.quorum || len(t.silent) == 0 {
			break
		}
		if b == nil {
			b = l.cfg.NewBackOff()
			b.Reset()
		}
		wait := b.NextBackOff()
		if wait < 0 || !time.Now().Add(wait).Before(ls.ValidUntil()) {
			break
		}
		if await(ctx, nil, wait) != nil {
			return t
		}
		again := l.releaseOn(context.WithoutCancel(ctx), t.silent, r, majorityYes)
		t = tally{yes: t.yes + again.yes + again.no, no: t.no, errs: again.errs, silent: again.silent}
	}
	return t
}

// A lease's lifecycle has one owner at a time and no goroutine of its own:
// a timer runs each renewal (tick) with a third of the validity left, and
// whoever decides that the lease ends — Release, Orphan, or a renewal that
// failed — ends it (end) in its own goroutine. Release and Orphan own the
// end when they stop the timer before it fires; otherwise the renewal
// running at that moment sees the lease ending and ends it itself. A lease
// holds one count in its Locker's bg from its grant until end, so Close
// waits for every lease to end.

// start schedules the first renewal of a lease just granted.
func (ls *Lease) start() {
	ls.mu.Lock() // tick reads timer under mu: it may fire before the assignment
	defer ls.mu.Unlock()
	ls.timer = time.AfterFunc(time.Until(ls.validUntil.Add(-ls.locker.validity/3)), ls.tick)
}

// lossGuard is how long before ValidUntil a lease whose renewal is failing
// is declared lost, so that Context ends strictly before the lock can
// expire on the nodes despite timer and scheduling delays.
func lossGuard(validity time.Duration) time.Duration {
	return max(time.Millisecond, validity/10)
}

// tick renews the lease, on the timer's goroutine, and schedules the next
// renewal; when the lease is ending (released, orphaned, lost) it ends it.
func (ls *Lease) tick() {
	l := ls.locker
	if !ls.ended() {
		start := time.Now()
		validUntil := ls.ValidUntil()
		octx := ls.beginRenew()
		next, ok := ls.renewCycle(octx, validUntil.Add(-lossGuard(l.validity)))
		if ok {
			ls.setValidUntil(next)
			l.emitCtx(octx, ls.leaseEvent(Event{Kind: EventRenewed, Latency: time.Since(start), Left: time.Until(validUntil)}))
		} else {
			ls.lose(time.Since(start))
		}
		ls.endRenew(octx, start, validUntil, ok)
		ls.mu.Lock()
		if !ls.ending && ls.ctx.Err() == nil {
			ls.timer.Reset(time.Until(ls.validUntil.Add(-l.validity / 3)))
			ls.mu.Unlock()
			return
		}
		ls.ending = true
		ls.mu.Unlock()
	}
	ls.end(context.Background())
}

// ended marks the lease as ending if its Context has ended, and reports
// whether it is ending.
func (ls *Lease) ended() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.ctx.Err() != nil {
		ls.ending = true
	}
	return ls.ending
}

// end finishes the lease, once, in its owner's goroutine: it releases the
// lock on the nodes unless the lease was orphaned (recording the outcome
// in releaseErr), on each node only once the lease's calls to it have
// ended (so that none lands after), tells its hooks that it ended, and
// lets the Locker forget it. ctx is Release's, bounding its retries
// (releaseNodes).
func (ls *Lease) end(ctx context.Context) {
	l := ls.locker
	orphaned := context.Cause(ls.ctx) == ErrLeaseOrphaned
	if orphaned {
		ls.waitCalls()
	} else {
		ls.releaseErr = ls.releaseNodes(ctx)
	}
	ls.hooks.ended(orphaned)
	l.forget(ls)
	ls.endLease()
	close(ls.done)
	l.bg.Done()
}

// renewCycle tries to renew the lease on a majority before lossAt, retrying
// with backoff. It reports the new validity and whether it succeeded; calls
// it leaves running are counted in ls.calls.
func (ls *Lease) renewCycle(octx context.Context, lossAt time.Time) (time.Time, bool) {
	l := ls.locker
	ctx, cancel := context.WithDeadline(renewContext(ls.ctx, octx), lossAt)
	defer cancel()
	b := l.cfg.NewBackOff()
	b.Reset()
	n := len(l.nodes)
	for {
		start := time.Now()
		replies, deadline := fanout(l, ctx, "renew", l.allIdxs(), &ls.calls, ls.busy, func(ctx context.Context, i int) (bool, error) {
			return renewAt(ctx, l.nodes[i], ls.keys, ls.token, l.cfg.LeaseDuration, l.seedStep, l.gateFor(ctx, i).marker(ls.keys[0]))
		})
		var votes tally
		gather(ctx, replies, deadline, n, func(r reply[bool]) bool {
			votes.add(r)
			return votes.decided(l.quorum, n)
		})
		switch {
		case ctx.Err() != nil:
			return time.Time{}, false
		case votes.yes >= l.quorum && time.Now().Before(lossAt):
			return start.Add(l.validity), true
		case votes.no > n-l.quorum:
			return time.Time{}, false // a majority says it is not ours
		}
		ls.renewFailing(octx, votes)
		wait := b.NextBackOff()
		if wait < 0 || await(ctx, nil, wait) != nil {
			return time.Time{}, false
		}
	}
}
