package redlock

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/e6344662/go-redlock/fencing"
)

// A combined attempt makes several leases (AcquireAll), or one lease with
// a script of its own (the read-write lock), in one round trip per node:
// each node either grants all of them or none, in one script call (or one
// per Redis Cluster slot group, all given back at the first refusal). The
// majority, the fence step, the validity and the clean-up of a failed
// attempt are the plain attempt's (attempt.go, docs/design.md §5-§7),
// applied to each lease.

// multiGrant is one node's answer to a combined acquire.
type multiGrant struct {
	ok bool
	// counters holds each lease's fence counter, by position, when ok.
	counters []fencing.Token
	// left is the least time a lock had left where the lease's token
	// already held it (a client-side retry); 0 when every grant is new.
	left time.Duration
	// holderTTL is the refusing holder's remaining time (negative: no
	// expiry); reason says why the node refused when it was not a holder.
	holderTTL time.Duration
	reason    string
}

// combined is one combined attempt: a name for its reports, the leases
// it makes (fresh, with their keys and tokens) and the node call. strict
// makes a failed attempt hear every node (within NodeCallTimeout) before
// its clean-up, so that it returns with nothing held on the nodes that
// answered by then (TryAcquireAll).
type combined struct {
	what   string
	leases []*Lease
	call   func(ctx context.Context, i int) (multiGrant, error)
	strict bool
}

// attemptCombined makes one combined attempt. It returns the leases, or
// the attempt's report and the error to return (the report itself, or,
// with a nil report, the Locker closing or ctx ending).
func (l *Locker) attemptCombined(ctx context.Context, c combined) ([]*Lease, *AcquireError, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("redlock: acquire %s: %w", c.what, err)
	}
	if !l.enter() {
		return nil, nil, ErrClosed
	}
	defer l.bg.Done()
	n := len(l.nodes)
	ctx = l.begin(ctx, Event{Kind: EventAttemptStart, Resource: c.what, Total: n})
	start := time.Now()
	validUntil := start.Add(l.cfg.validity())
	first := c.leases[0]
	for _, ls := range c.leases[1:] {
		ls.acquiring.Add(n) // every lease waits for every call before it releases
	}
	replies, deadline := fanout(l, context.WithoutCancel(ctx), "acquire", l.allIdxs(), &first.acquiring, func(cctx context.Context, i int) (multiGrant, error) {
		defer func() {
			for _, ls := range c.leases[1:] {
				ls.acquiring.Done()
			}
		}()
		return c.call(cctx, i)
	})
	t := newCombinedTally(l, c.what)
	received, timedOut := gather(ctx, replies, deadline, n, func(r reply[multiGrant]) bool {
		t.add(l, r, true)
		return len(t.granted) >= l.quorum || n-(t.answered-len(t.granted)) < l.quorum
	})
	if t.left > 0 {
		validUntil = minTime(validUntil, start.Add(t.left-l.cfg.drift()))
	}
	for _, ls := range c.leases {
		ls.validUntil = validUntil
	}
	ae := &t.err
	ae.Granted = len(t.granted)
	var failure error
	switch {
	case ctx.Err() != nil:
		failure = fmt.Errorf("redlock: acquire %s: %w", c.what, ctx.Err())
	case len(t.granted) < l.quorum:
		if timedOut {
			ae.NodeErrors = append(ae.NodeErrors, fmt.Errorf("%d nodes did not answer within %s", n-received, l.cfg.NodeCallTimeout))
		}
		failure = ae.finish(t.rejoining)
	}
	var fences []fencing.Token
	if failure == nil {
		fences, failure = l.confirmAll(ctx, c.leases, t.granted, t.counters, validUntil, ae)
	}
	if failure == nil && !time.Now().Before(validUntil) {
		ae.Reason = "validity elapsed during the attempt"
		failure = ae.finish(t.rejoining)
	}
	l.emitCtx(ctx, Event{Kind: EventAttempt, Resource: c.what, Granted: len(t.granted), Total: n, Latency: time.Since(start), Err: failure})
	if failure != nil {
		if (c.strict || len(t.granted)+len(t.unsure) > 0) && !timedOut && ctx.Err() == nil {
			// Let the calls still running answer, so that the clean-up
			// covers their grants at once.
			more, _ := gather(ctx, replies, deadline, n-received, func(r reply[multiGrant]) bool {
				t.add(l, r, false)
				return false
			})
			received += more
		}
		select {
		case <-l.cleanupCombined(c.leases, replies, append(t.granted, t.unsure...), t.heard):
		case <-ctx.Done():
		}
		if !isReport(failure) {
			return nil, nil, failure
		}
		return nil, ae, failure
	}
	for k, ls := range c.leases {
		if !l.establish(ls, t.granted, fences[k]) {
			for _, m := range c.leases[:k] {
				_ = m.Release(context.Background())
			}
			<-l.cleanupCombined(c.leases[k:], replies, append(t.granted, t.unsure...), t.heard)
			return nil, nil, ErrClosed
		}
	}
	return c.leases, nil, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// combinedTally is what a combined attempt heard from the nodes.
type combinedTally struct {
	granted, unsure []int
	heard           []bool // by node: answered (in time or late)
	answered        int
	counters        [][]fencing.Token // by node, by lease
	left            time.Duration
	rejoining       int
	err             AcquireError
}

func newCombinedTally(l *Locker, what string) *combinedTally {
	n := len(l.nodes)
	return &combinedTally{
		heard:    make([]bool, n),
		counters: make([][]fencing.Token, n),
		err:      AcquireError{Resource: what, Needed: l.quorum, Total: n},
	}
}

// add counts one node's answer; report says whether it goes into the
// attempt's report (answers read after the verdict do not).
func (t *combinedTally) add(l *Locker, r reply[multiGrant], report bool) {
	t.heard[r.idx] = true
	t.answered++
	switch {
	case r.err != nil:
		t.unsure = append(t.unsure, r.idx)
		if report {
			t.err.NodeErrors = append(t.err.NodeErrors, r.err)
		}
	case r.val.ok:
		t.granted = append(t.granted, r.idx)
		t.counters[r.idx] = r.val.counters
		if r.val.left > 0 && (t.left == 0 || r.val.left < t.left) {
			t.left = r.val.left
		}
	case report:
		refusal := l.nodes[r.idx].Addr()
		if r.val.reason != "" {
			refusal += " (" + r.val.reason + ")"
		}
		t.err.Refused = append(t.err.Refused, refusal)
		if rejoiningRefusal(r.val.reason) {
			t.rejoining++
		}
		if r.val.holderTTL < 0 || (t.err.HolderTTL >= 0 && r.val.holderTTL > t.err.HolderTTL) {
			t.err.HolderTTL = r.val.holderTTL
		}
	}
}

// confirmAll settles each lease's fencing token (confirmFence) from the
// granting nodes' counters, the leases at once.
func (l *Locker) confirmAll(ctx context.Context, leases []*Lease, granted []int, counters [][]fencing.Token, validUntil time.Time, ae *AcquireError) ([]fencing.Token, error) {
	fences := make([]fencing.Token, len(leases))
	errs := make([]error, len(leases))
	reports := make([]AcquireError, len(leases))
	var wg sync.WaitGroup
	for k, ls := range leases {
		byNode := make([]fencing.Token, len(l.nodes))
		for _, i := range granted {
			byNode[i] = counters[i][k]
		}
		reports[k] = *ae
		confirm := func() { fences[k], errs[k] = ls.confirmFence(ctx, granted, byNode, validUntil, &reports[k]) }
		if len(leases) == 1 {
			confirm()
		} else {
			wg.Go(confirm)
		}
	}
	wg.Wait()
	for k, err := range errs {
		if err != nil {
			if isReport(err) {
				*ae = reports[k]
				return nil, ae
			}
			return nil, err
		}
	}
	return fences, nil
}

// cleanupCombined removes a failed combined attempt's grants, as cleanup
// does for one lease: every lease is released at once on the nodes in now
// (granted, or failed with an unknown outcome), and on each node that had
// not answered once its call has ended, unless it refused. The channel is
// closed when the nodes in now are clean. It must be called while the
// attempt holds its count in l.bg.
func (l *Locker) cleanupCombined(leases []*Lease, replies <-chan reply[multiGrant], now []int, heard []bool) <-chan struct{} {
	for _, ls := range leases {
		ls.cancel(ErrLeaseReleased)
	}
	quick := make(chan struct{})
	releaseAll := func(idxs []int) {
		var wg sync.WaitGroup
		for _, ls := range leases {
			wg.Go(func() {
				l.releaseOn(context.Background(), idxs, releaseArgs{keys: ls.keys, token: ls.token}, allAnswers, namingHeads)
			})
		}
		wg.Wait()
	}
	answered := 0
	for _, h := range heard {
		if h {
			answered++
		}
	}
	heard = append([]bool(nil), heard...)
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		if len(now) > 0 {
			releaseAll(now)
		}
		close(quick)
		if answered == len(l.nodes) {
			return
		}
		for _, ls := range leases {
			ls.acquiring.Wait()
		}
		refused := make([]bool, len(l.nodes))
		for len(replies) > 0 {
			if r := <-replies; r.err == nil && !r.val.ok {
				refused[r.idx] = true
			}
		}
		var rest []int
		for i := range l.nodes {
			if !heard[i] && !refused[i] {
				rest = append(rest, i)
			}
		}
		if len(rest) > 0 {
			releaseAll(rest)
		}
	}()
	return quick
}

// splitVoteWait is how long a waiter pauses after an attempt that some
// nodes granted (two callers split the votes): a random time up to twice
// the attempt's duration, at least a millisecond, so as not to split them
// again.
func splitVoteWait(took time.Duration) time.Duration {
	limit := max(2*took, time.Millisecond)
	return time.Duration(mrand.Int64N(int64(limit))) + 1
}

// waitCombined runs attempt until it succeeds, as Acquire does without the
// queue: after a refusal it waits for a release announcement of one of
// keys, the backoff (never past the holder's TTL nor cap, when positive)
// or, after a split vote, a short random pause; it gives up when ctx
// ends (wrapping ctx.Err()), the Locker closes, or the nodes cannot grant
// at all.
func (l *Locker) waitCombined(ctx context.Context, what string, keys []string, limit time.Duration, attempt func() ([]*Lease, *AcquireError, error), onWait func()) ([]*Lease, error) {
	b := l.cfg.NewBackOff()
	b.Reset()
	var w *waiter
	defer func() {
		if w != nil {
			l.hub.leaveAll(keys, w)
		}
	}()
	began := time.Now()
	for attempts := 1; ; attempts++ {
		start := time.Now()
		leases, ae, err := attempt()
		if err == nil {
			l.emitCtx(ctx, Event{Kind: EventAcquired, Resource: what, Granted: len(leases[0].granted), Total: len(l.nodes), Attempts: attempts, Latency: time.Since(began)})
			return leases, nil
		}
		if ae == nil || ae.permanent {
			return nil, err
		}
		if onWait != nil {
			onWait()
		}
		if w == nil {
			w = l.hub.joinAll(keys)
		}
		var wait time.Duration
		if ae.Granted > 0 {
			wait = splitVoteWait(time.Since(start))
		} else {
			wait = b.NextBackOff()
			if wait < 0 {
				return nil, err
			}
			if ae.HolderTTL > 0 && ae.HolderTTL < wait {
				wait = ae.HolderTTL
			}
		}
		if limit > 0 && limit < wait {
			wait = limit
		}
		if l.await(ctx, w, wait) != nil {
			return nil, ctxEnded(ctx, what, err)
		}
	}
}
