package redlock

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/e6344662/go-redlock/fencing"
)

// The plain Redlock path: one attempt fans the acquire out to every node,
// tallies the answers until a majority decides, confirms the fencing token
// and makes the lease (docs/design.md §5, §6, §7). How an Acquire waits
// between attempts, and what its wait queue adds to an attempt, is its
// waiting's business (wait.go): the attempt only calls its hooks.

// outcome is what one attempt heard from the nodes: who granted (with
// their fence counters), who refused and why, who failed or stayed silent,
// and what the refusals said of the wait queue. err is the attempt's
// report, the error Acquire returns when it gives up.
type outcome struct {
	start                     time.Time
	granted, answered, unsure []int
	// handed lists the nodes whose lock is held by the caller's place (a
	// hand-over the caller had not heard of); counters holds the fence
	// counters of the granted and handed nodes, by node index.
	handed   []int
	counters []fencing.Token
	// left is the least time left of a lock the attempt's token already
	// held (a client-side retry of a call that was applied); 0 for none.
	left time.Duration
	// silent counts the nodes that had not answered when the attempt was
	// decided; rejoining the refusals of nodes within their rejoin delay.
	silent, rejoining int
	// others counts the refusals that were not hand-overs to the caller.
	others int
	queue  queueView
	err    AcquireError
}

// newOutcome returns an empty outcome for n nodes, its index slices
// sharing one backing array.
func newOutcome(resource string, needed, n int) *outcome {
	idx := make([]int, 3*n)
	o := &outcome{start: time.Now(), counters: make([]fencing.Token, n)}
	o.granted, o.answered, o.unsure = idx[0:0:n], idx[n:n:2*n], idx[2*n:2*n]
	o.err = AcquireError{Resource: resource, Needed: needed, Total: n}
	return o
}

// note records one node's answer, without reporting it: for answers that
// arrive after the verdict.
func (o *outcome) note(r reply[grant]) {
	o.answered = append(o.answered, r.idx)
	switch {
	case r.err != nil:
		o.unsure = append(o.unsure, r.idx)
	case r.val.OK:
		o.granted = append(o.granted, r.idx)
		o.counters[r.idx] = r.val.Counter
		if r.val.left > 0 && (o.left == 0 || r.val.left < o.left) {
			o.left = r.val.left
		}
	case r.val.handed:
		o.handed = append(o.handed, r.idx)
		o.counters[r.idx] = r.val.Counter
	}
}

// add records one node's answer in the outcome and its report, and tells
// whether the attempt is decided: a majority granted, or so many did not
// that no majority can.
func (o *outcome) add(l *Locker, r reply[grant]) bool {
	o.note(r)
	switch {
	case r.err != nil:
		o.err.NodeErrors = append(o.err.NodeErrors, r.err)
	case !r.val.OK:
		reason := r.val.Reason
		if r.val.handed {
			reason = handedReason
		}
		refusal := l.nodes[r.idx].Addr()
		if reason != "" {
			refusal += " (" + reason + ")"
		}
		o.err.Refused = append(o.err.Refused, refusal)
		if !r.val.handed {
			o.others++
		}
		o.queue.add(r.val)
		if rejoiningRefusal(reason) {
			o.rejoining++
		}
		if r.val.HolderTTL < 0 || (o.err.HolderTTL >= 0 && r.val.HolderTTL > o.err.HolderTTL) {
			o.err.HolderTTL = r.val.HolderTTL
		}
	}
	n := len(l.nodes)
	return len(o.granted) >= l.quorum || n-(len(o.answered)-len(o.granted)) < l.quorum
}

// attempt makes one acquisition attempt under w's hooks (TryAcquire:
// noWait). It returns the lease, or the outcome and the error to report:
// the outcome's *AcquireError, or nil outcome for a Locker that is closed
// or a context that ended.
func (l *Locker) attempt(ctx context.Context, resource string, w attemptHooks) (*Lease, *outcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("redlock: acquire %q: %w", resource, err)
	}
	if !l.enter() {
		return nil, nil, ErrClosed
	}
	defer l.bg.Done()
	ctx = l.begin(ctx, Event{Kind: EventAttemptStart, Resource: resource, Total: len(l.nodes)})
	ls := newLease(l, resource, newToken())
	o := newOutcome(resource, l.quorum, len(l.nodes))
	ls.validUntil = o.start.Add(l.cfg.validity())
	r := l.ask(ctx, ls, o, w)
	token, failure := l.decide(ctx, ls, o, r)
	l.emitCtx(ctx, Event{Kind: EventAttempt, Resource: resource, Granted: len(o.granted), Total: len(l.nodes), Latency: time.Since(o.start), Err: failure})
	if failure != nil {
		l.fail(ctx, ls, o, r, w)
		if !isReport(failure) {
			return nil, nil, failure // ctx ended
		}
		return nil, o, failure
	}
	w.granted(ls)
	if !l.establish(ls, o.granted, token) {
		<-l.cleanup(ls, r.replies, append(o.granted, o.unsure...), o.answered)
		return nil, nil, ErrClosed
	}
	return ls, nil, nil
}

// round is an attempt's fan-out: the answers still to read, the deadline
// (NodeCallTimeout), how many were read and whether time ran out.
type round struct {
	replies  <-chan reply[grant]
	deadline <-chan struct{}
	received int
	timedOut bool
}

// ask fans the acquire out to every node and reads the answers into o
// until the attempt is decided (and as long as w wants to listen after).
// Node calls run on their own context so that the caller's cancellation
// after success does not cut short calls still pending; the fan-out bounds
// them by NodeCallTimeout, which is below the validity, and a client that
// ignores context deadlines does not hold the attempt up past it: the
// unanswered nodes count as failed.
func (l *Locker) ask(ctx context.Context, ls *Lease, o *outcome, w attemptHooks) round {
	n := len(l.nodes)
	a := acquireArgs{keys: ls.keys, token: ls.token, owner: l.cfg.Owner, ttl: l.cfg.LeaseDuration, step: l.seedStep, queue: w.queue()}
	a.prepare()
	var r round
	r.replies, r.deadline = fanout(l, context.WithoutCancel(ctx), "acquire", l.allIdxs(), &ls.acquiring, func(ctx context.Context, i int) (grant, error) {
		return l.acquireOn(ctx, i, a)
	})
	w.started(startedCalls{at: o.start, wg: &ls.acquiring, over: r.deadline})
	r.received, r.timedOut = gather(ctx, r.replies, r.deadline, n, func(rp reply[grant]) bool { return o.add(l, rp) })
	if d := w.listen(o); d > 0 && r.received < n && !r.timedOut && ctx.Err() == nil {
		brief, cancel := context.WithTimeout(context.Background(), d)
		more, _ := gather(ctx, r.replies, brief.Done(), n-r.received, func(rp reply[grant]) bool {
			o.add(l, rp)
			return false
		})
		cancel()
		r.received += more
	}
	o.silent = n - r.received
	if o.left > 0 {
		// Where our token already held the lock, it keeps it only for
		// what it had left.
		if t := o.start.Add(o.left - l.cfg.drift()); t.Before(ls.validUntil) {
			ls.validUntil = t
		}
	}
	return r
}

// decide gives the attempt's verdict: the lease's fencing token, or why
// it failed (the outcome's report, or ctx's error).
func (l *Locker) decide(ctx context.Context, ls *Lease, o *outcome, r round) (fencing.Token, error) {
	ae := &o.err
	ae.Granted = len(o.granted)
	switch {
	case ctx.Err() != nil:
		return 0, fmt.Errorf("redlock: acquire %q: %w", ls.resource, ctx.Err())
	case r.timedOut:
		ae.NodeErrors = append(ae.NodeErrors, fmt.Errorf("%d nodes did not answer within %s", len(l.nodes)-r.received, l.cfg.NodeCallTimeout))
	}
	if len(o.granted) < l.quorum {
		return 0, ae.finish(o.rejoining)
	}
	token, err := ls.confirmFence(ctx, o.granted, o.counters, ls.validUntil, ae)
	if err == nil && !time.Now().Before(ls.validUntil) {
		ae.Reason = "validity elapsed during the attempt"
		err = ae.finish(o.rejoining)
	}
	return token, err
}

// fail cleans a failed attempt up: it lets the calls still running that
// may hold our lock answer (within the attempt's NodeCallTimeout), so that
// the clean-up covers them and a retry does not find our leftovers (a busy
// lock, nothing granted, answers at once); w may take grants over; the
// caller then waits for the nodes that answered and may hold the lock, not
// for the others (a paused node never holds it up).
func (l *Locker) fail(ctx context.Context, ls *Lease, o *outcome, r round, w attemptHooks) {
	if len(o.granted)+len(o.unsure) > 0 && !r.timedOut && ctx.Err() == nil {
		gather(ctx, r.replies, r.deadline, len(l.nodes)-r.received, func(rp reply[grant]) bool {
			o.note(rp)
			return false
		})
	}
	kept := w.failed(ctx, o, ls.token)
	mayHold := slices.DeleteFunc(append(slices.Clone(o.granted), o.unsure...), func(i int) bool { return slices.Contains(kept, i) })
	select {
	case <-l.cleanup(ls, r.replies, mayHold, o.answered):
	case <-ctx.Done():
	}
}

// isReport reports whether err is an attempt's *AcquireError.
func isReport(err error) bool {
	_, ok := err.(*AcquireError)
	return ok
}

// establish makes ls, granted by the nodes with the given indexes with
// fencing token fence, a held lease and starts its renewal. It reports
// false, having done nothing, when the Locker is closed. It must be called
// while the caller holds its count in l.bg (enter).
func (l *Locker) establish(ls *Lease, granted []int, fence fencing.Token) bool {
	ls.fence = fence
	ls.granted = make([]string, len(granted))
	for k, i := range granted {
		ls.granted[k] = l.nodes[i].Addr()
	}
	if !l.track(ls) {
		return false
	}
	// Calls still pending keep running (bounded by NodeCallTimeout); the
	// lease waits for them when it ends.
	l.bg.Add(1) // until the lease ends
	ls.start()
	return true
}

// finish picks the sentinel for a failed attempt: ErrNotAcquired when the
// refusals alone rule out a majority (the lock is busy) or time ran out,
// else ErrNoQuorum (node failures stood in the way), or the sentinel of
// failures that waiting will not change (lasting). rejoining counts the
// refusals of nodes within their rejoin delay.
func (e *AcquireError) finish(rejoining int) error {
	e.kind, e.rejoining = ErrNotAcquired, rejoining
	if len(e.Refused) <= e.Total-e.Needed && e.Reason == "" && len(e.NodeErrors) > 0 {
		e.kind = ErrNoQuorum
		e.lasting()
	}
	if e.Reason == "" && rejoining > 0 {
		e.Reason = fmt.Sprintf("%d of the nodes that refused are rejoining after a restart or a loss of data (Config.RejoinDelay)", rejoining)
	}
	return e
}

// confirmFence computes the lease's fencing token from the granting nodes'
// counters (docs/design.md §6): the maximum F is usable at once when a
// majority returned exactly F, and otherwise only after a majority of nodes
// where the lock stands acknowledged raising their counter to F.
func (ls *Lease) confirmFence(ctx context.Context, granted []int, counters []fencing.Token, validUntil time.Time, ae *AcquireError) (fencing.Token, error) {
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
	replies, deadline := fanout(l, context.WithoutCancel(ctx), "fence", granted, &ls.acquiring, func(ctx context.Context, i int) (bool, error) {
		return fence(ctx, l.nodes[i], ls.keys, ls.token, f, l.seedStep)
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
	return 0, ae.finish(0)
}

// cleanup removes a failed attempt's partial grants, in the background:
// at once on the nodes in now (those that granted, or failed with an
// unknown outcome), and on each node that had not answered once its call
// has ended, so that no late grant outlives the attempt. Nodes that
// answered with a refusal hold nothing of ours, in time or late: the late
// answers still in replies spare those nodes a call. The clean-up hands no
// lock over, it only names the head of each node's queue: a split vote frees
// the lock on several nodes at once, usually while the waiters it queued
// do not yet agree on their tickets, and handing each node's lock to its
// own head would leave each with a minority. The channel it returns is
// closed when the nodes in now are clean. It must be called while the
// attempt holds its count in l.bg (enter).
func (l *Locker) cleanup(ls *Lease, replies <-chan reply[grant], now, answered []int) <-chan struct{} {
	ls.cancel(ErrLeaseReleased)
	quick := make(chan struct{})
	a := releaseArgs{keys: ls.keys, token: ls.token}
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		ctx := context.Background() // each call is bounded by NodeCallTimeout
		if len(now) > 0 {
			l.releaseOn(ctx, now, a, allAnswers, namingHeads)
		}
		close(quick)
		if len(answered) == len(l.nodes) {
			return
		}
		ls.acquiring.Wait()
		// Every call has ended, so every answer not yet read is in
		// replies.
		refused := make([]bool, len(l.nodes))
		for len(replies) > 0 {
			if r := <-replies; r.err == nil && !r.val.OK {
				refused[r.idx] = true
			}
		}
		rest := make([]int, 0, len(l.nodes)-len(answered))
		for i := range l.nodes {
			if !slices.Contains(answered, i) && !refused[i] {
				rest = append(rest, i)
			}
		}
		if len(rest) > 0 {
			l.releaseOn(ctx, rest, a, allAnswers, namingHeads)
		}
	}()
	return quick
}
