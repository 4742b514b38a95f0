package redlock

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/e6344662/go-redlock/fencing"
)

// attempt makes one acquisition attempt (docs/design.md §5, §6, §7); with
// a place, the caller queues on the nodes where it is not granted (§11.1).
func (l *Locker) attempt(ctx context.Context, resource string, p *place) (*Lease, error) {
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
	orig := p
	a := acquireArgs{keys: ls.keys, token: ls.token, owner: l.cfg.Owner, ttl: l.cfg.LeaseDuration, step: l.seedStep}
	if p != nil {
		// Calls may outlive the attempt, and the caller updates its place
		// for the next one: they read a snapshot. The caller's final leave
		// waits for them (addCalls below).
		a.queue = &queueArgs{member: p.member, ticket: p.ticketArg(), ttl: p.ttl}
	}

	n := len(l.nodes)
	replies, deadline := fanout(l, opCtx, "acquire", l.allIdxs(), &ls.acquiring, func(ctx context.Context, i int) (grant, error) {
		return l.acquireOn(ctx, i, a)
	})
	if orig != nil {
		orig.addCalls(startedCalls{at: start, wg: &ls.acquiring, over: deadline}, l.cfg.NodeCallTimeout)
	}
	// One allocation for the attempt's bookkeeping: the closure below
	// captures only v.
	v := &tallyAcquire{ae: AcquireError{Resource: resource, Needed: l.quorum, Total: n}}
	v.init(n)
	ae := &v.ae
	var failure error
	// A client that ignores context deadlines does not hold the attempt up
	// past NodeCallTimeout (which is below the validity): gather stops, and
	// the unanswered nodes count as failed.
	received, timedOut := gather(ctx, replies, deadline, n, func(r reply[grant]) bool {
		return v.add(l, r)
	})
	if orig != nil && len(v.handed) > 0 && len(v.granted) < l.quorum && received < n && !timedOut && ctx.Err() == nil {
		// Some nodes hold the lock for the caller's place: whether the
		// others refuse decides whether the place gives them back
		// (Acquire). Hear them too, briefly, so that a paused node does not
		// hold the attempt up.
		elapsed := time.Since(start)
		if left := l.cfg.NodeCallTimeout - elapsed; left > 0 {
			brief, cancel := context.WithTimeout(context.Background(), min(max(2*elapsed, time.Millisecond), left))
			more, _ := gather(ctx, replies, brief.Done(), n-received, func(r reply[grant]) bool {
				v.add(l, r)
				return false
			})
			cancel()
			received += more
		}
	}
	ae.silent = n - received
	granted, counters := v.granted, v.counters
	if v.left > 0 {
		// A node where our token already held the lock (a client-side
		// retry of a call that was applied) keeps it only for what it had
		// left.
		if t := start.Add(v.left - l.cfg.drift()); t.Before(validUntil) {
			validUntil = t
			ls.validUntil = t
		}
	}
	if orig != nil {
		if orig.first.IsZero() {
			orig.first = start
		}
		for _, i := range v.answered {
			switch {
			case slices.Contains(v.handed, i):
				orig.found[i] = max(orig.found[i], v.counters[i])
			case !slices.Contains(v.unsure, i):
				// The node's lock is not the place's (any more: a
				// hand-over that lapsed, or went to a new holder).
				delete(orig.found, i)
			}
		}
		ae.handed = len(v.handed)
	}
	switch {
	case ctx.Err() != nil:
		failure = fmt.Errorf("redlock: acquire %q: %w", resource, ctx.Err())
	case timedOut:
		ae.NodeErrors = append(ae.NodeErrors, fmt.Errorf("%d nodes did not answer within %s", n-received, l.cfg.NodeCallTimeout))
	}
	ae.Granted = len(granted)

	var token fencing.Token
	if failure == nil && ae.Reason == "" && len(granted) >= l.quorum {
		token, failure = ls.confirmFence(ctx, opCtx, granted, counters, validUntil, ae)
	} else if failure == nil {
		failure = ae.finish()
	}
	if failure == nil && !time.Now().Before(validUntil) {
		ae.Reason = "validity elapsed during the attempt"
		failure = ae.finish()
	}
	l.emit(Event{Kind: EventAttempt, Resource: resource, Granted: len(granted), Total: n, Latency: time.Since(start), Err: failure})
	if failure != nil {
		if len(v.granted)+len(v.unsure) > 0 && !timedOut && ctx.Err() == nil {
			// Some nodes may hold our lock: let the calls still running
			// answer (within the attempt's NodeCallTimeout), so that the
			// clean-up below covers them and a retry does not find our
			// leftovers. A busy lock (nothing granted) answers at once.
			gather(ctx, replies, deadline, n-received, func(r reply[grant]) bool {
				v.answered = append(v.answered, r.idx)
				if r.err != nil {
					v.unsure = append(v.unsure, r.idx)
				} else if r.val.OK {
					v.granted = append(v.granted, r.idx)
				}
				return false
			})
		}
		if orig != nil && len(v.granted) > 0 && len(v.handed) > 0 && len(v.granted)+len(v.handed) >= l.quorum && ctx.Err() == nil {
			// This attempt's grants and the locks handed over to the place
			// make a majority together: the grants move under the place's
			// token (for the full TTL) and count as handed over.
			held := l.rehold(ctx, ls.key, v.granted, ls.token, orig)
			for i, c := range held {
				orig.found[i] = max(orig.found[i], c)
				ae.handed++
			}
			v.granted = slices.DeleteFunc(v.granted, func(i int) bool { _, ok := held[i]; return ok })
		}
		// The caller waits for the nodes that answered and may hold the
		// lock, not for the others (a paused node never holds it up).
		select {
		case <-l.cleanup(ls, replies, append(v.granted, v.unsure...), v.answered):
		case <-ctx.Done():
		}
		return nil, failure
	}
	if !l.establish(ls, granted, token, orig) {
		<-l.cleanup(ls, replies, append(v.granted, v.unsure...), v.answered)
		return nil, ErrClosed
	}
	return ls, nil
}

// establish makes ls, granted by the nodes with the given indexes with
// fencing token fence, a held lease and starts its renewal. With p, the
// lease's release also removes p's place where it may still stand (nodes
// that did not grant; a lock handed over there meanwhile is the lease's,
// renewed and released with the others). It reports false, having done
// nothing, when the Locker is closed. It must be called while the caller
// holds its count in l.bg (enter).
func (l *Locker) establish(ls *Lease, granted []int, fence fencing.Token, p *place) bool {
	ls.fence = fence
	ls.granted = make([]string, len(granted))
	for k, i := range granted {
		ls.granted[k] = l.nodes[i].Addr()
	}
	if p != nil {
		// Its place may stand again where a late call queued it: the
		// release removes it, and leaves again after the calls still
		// running then.
		ls.place, ls.queuing = p.member, running(p.calls, &ls.acquiring)
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

// tallyAcquire is the bookkeeping of one attempt's acquire round: which
// nodes answered, granted (with their fence counters) or failed (unsure:
// the outcome there is unknown), and the AcquireError being built.
type tallyAcquire struct {
	granted, answered, unsure []int
	handed                    []int           // held by the caller's place
	counters                  []fencing.Token // by node index
	left                      time.Duration   // least Grant.left of the grants, 0 for none
	ae                        AcquireError
}

// init sizes the slices for n nodes, sharing one backing array.
func (v *tallyAcquire) init(n int) {
	idx := make([]int, 3*n)
	v.granted, v.answered, v.unsure = idx[0:0:n], idx[n:n:2*n], idx[2*n:2*n]
	v.counters = make([]fencing.Token, n)
}

// add counts one node's answer and reports whether the round is decided: a
// majority granted, or so many did not that no majority can.
func (v *tallyAcquire) add(l *Locker, r reply[grant]) bool {
	v.answered = append(v.answered, r.idx)
	switch {
	case r.err != nil:
		v.ae.NodeErrors = append(v.ae.NodeErrors, r.err)
		v.unsure = append(v.unsure, r.idx)
	case r.val.OK:
		v.granted = append(v.granted, r.idx)
		v.counters[r.idx] = r.val.Counter
		if r.val.left > 0 && (v.left == 0 || r.val.left < v.left) {
			v.left = r.val.left
		}
	default:
		if r.val.handed {
			v.handed = append(v.handed, r.idx)
			v.counters[r.idx] = r.val.Counter
			r.val.Reason = handedReason
		}
		refusal := l.nodes[r.idx].Addr()
		if r.val.Reason != "" {
			refusal += " (" + r.val.Reason + ")"
		}
		v.ae.Refused = append(v.ae.Refused, refusal)
		v.ae.queue.add(r.val)
		if strings.HasPrefix(r.val.Reason, rejoiningReason) {
			v.ae.rejoining++
		}
		if r.val.HolderTTL < 0 || (v.ae.HolderTTL >= 0 && r.val.HolderTTL > v.ae.HolderTTL) {
			v.ae.HolderTTL = r.val.HolderTTL
		}
	}
	n := len(l.nodes)
	return len(v.granted) >= l.quorum || n-(len(v.answered)-len(v.granted)) < l.quorum
}

// finish picks the sentinel for a failed attempt: ErrNotAcquired when the
// refusals alone rule out a majority (the lock is busy) or time ran out,
// else ErrNoQuorum (node failures stood in the way), or the sentinel of
// failures that waiting will not change (lasting).
func (e *AcquireError) finish() error {
	e.kind = ErrNotAcquired
	if len(e.Refused) <= e.Total-e.Needed && e.Reason == "" && len(e.NodeErrors) > 0 {
		e.kind = ErrNoQuorum
		e.lasting()
	}
	if e.Reason == "" && e.rejoining > 0 {
		e.Reason = fmt.Sprintf("%d of the nodes that refused are rejoining after a restart (Config.RejoinDelay)", e.rejoining)
	}
	return e
}

// confirmFence computes the lease's fencing token from the granting nodes'
// counters (docs/design.md §6): the maximum F is usable at once when a
// majority returned exactly F, and otherwise only after a majority of nodes
// where the lock stands acknowledged raising their counter to F.
func (ls *Lease) confirmFence(ctx, opCtx context.Context, granted []int, counters []fencing.Token, validUntil time.Time, ae *AcquireError) (fencing.Token, error) {
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
	replies, deadline := fanout(l, opCtx, "fence", granted, &ls.acquiring, func(ctx context.Context, i int) (bool, error) {
		return fence(ctx, l.nodes[i], ls.keys, ls.token, f)
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
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		ctx := context.Background() // each call is bounded by NodeCallTimeout
		if len(now) > 0 {
			l.releaseOn(ctx, now, releaseArgs{keys: ls.keys, token: ls.token}, false, false)
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
			l.releaseOn(ctx, rest, releaseArgs{keys: ls.keys, token: ls.token}, false, false)
		}
	}()
	return quick
}
