package redlock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/e6344662/go-redlock/fencing"
)

// The attempt engine, one for every lock kind: one attempt fans a request
// out to every node, tallies the votes until a majority decides, confirms
// each lease's fencing token and makes the leases (docs/design.md §5, §6,
// §7), or cleans a failed attempt up. A request makes one lease (a mutex,
// a read-write lock's writer or reader, a semaphore's slot) or many at
// once (AcquireAll): each node grants all of them or none. How a caller
// waits between attempts is its waiting's business (wait.go): the attempt
// only calls its hooks.

// request is what one attempt asks of the nodes: the leases it makes
// (fresh, with their keys and tokens) and the node call that asks node i
// for all of them. resource names the request in reports (Event,
// AcquireError) and, quoted or not, in error texts (name). strict makes a failed attempt hear
// every node (within NodeCallTimeout) before its clean-up, so that it
// returns with nothing held on the nodes that answered by then
// (TryAcquireAll).
type request struct {
	resource string
	// quoted says that errors name the resource quoted (a mutex's).
	quoted bool
	leases []*Lease
	call   func(ctx context.Context, i int) (vote, error)
	strict bool
}

// name is how errors name the request's resource.
func (rq request) name() string {
	if rq.quoted {
		return strconv.Quote(rq.resource)
	}
	return rq.resource
}

// vote is one node's answer to an attempt, whatever the lock kind and its
// script's reply: the one reply family the engine reads.
type vote struct {
	ok bool
	// counters holds each lease's fence counter, by the request's order,
	// when ok.
	counters []fencing.Token
	// left is the least time a lock had left where the lease's token
	// already held it (a client-side retry of a call that was applied); 0
	// when every grant is new.
	left time.Duration
	// holderTTL is the refusing holder's remaining time (negative: no
	// expiry; for a rejoining node, the time it still sits out); reason
	// says why the node refused when it was not a holder.
	holderTTL time.Duration
	reason    string
}

// voteReply is a reply of the granting scripts' family
// (scripts/acquire_all.lua, rw_write.lua, rw_read.lua): {verdict, ms, why,
// lock, readers}, followed for "granted" by a counter and a time left per
// lock (grants). Its fields are read by their places and checked for their
// types, not yet for their values.
type voteReply struct {
	verdict, why      string
	ms, lock, readers int64
	grants            []any
}

// readVoteReply reads reply's fields; ok is false for a reply of another
// shape.
func readVoteReply(reply any) (r voteReply, ok bool) {
	vals, isArray := reply.([]any)
	if !isArray || len(vals) < 5 {
		return r, false
	}
	var okV, okM, okY, okL, okR bool
	r.verdict, okV = vals[0].(string)
	r.ms, okM = vals[1].(int64)
	r.why, okY = vals[2].(string)
	r.lock, okL = vals[3].(int64)
	r.readers, okR = vals[4].(int64)
	r.grants = vals[5:]
	return r, okV && okM && okY && okL && okR
}

// parseVote decodes a reply of the granting scripts' family (what names
// the script in errors): "granted" with k pairs {counter, left}, each
// lock's fence counter (a canonical decimal) and the time it had left when
// the caller's token already held it (0 for a new grant); "sitout", a node
// sitting out after a loss of data for ms (parseSitOut); any other verdict
// is a refusal, by a holder with ms left, whose reason refusal reads from
// the reply's fields (false: a verdict or fields the script never sends).
func parseVote(reply any, k int, what string, refusal func(r voteReply) (reason string, ok bool)) (vote, error) {
	bad := fmt.Errorf("%w: %s reply %s", errBadReply, what, describeReply(reply))
	r, ok := readVoteReply(reply)
	if !ok {
		return vote{}, bad
	}
	var v vote
	switch {
	case r.verdict == verdictSitOut:
		if r.lock != 0 || r.readers != 0 || len(r.grants) != 0 {
			return vote{}, bad
		}
		return sitOutGrant(reply, r.ms, r.why)
	case r.verdict == verdictGranted:
		ok = r.ms == 0 && r.why == "" && r.readers == 0
		if ok {
			v, ok = parseGrants(r.grants, k)
		}
	default:
		v.holderTTL = pttl(r.ms)
		v.reason, ok = refusal(r)
		ok = ok && r.why == "" && len(r.grants) == 0
	}
	if !ok {
		return vote{}, bad
	}
	return v, nil
}

// parseGrants decodes k pairs {counter, left} into a granting vote.
func parseGrants(vals []any, k int) (vote, bool) {
	if len(vals) != 2*k {
		return vote{}, false
	}
	v := vote{ok: true, counters: make([]fencing.Token, k)}
	for j := range k {
		s, isStr := vals[2*j].(string)
		c, err := fencing.ParseToken(s)
		ms, isInt := vals[2*j+1].(int64)
		if !isStr || !isInt || err != nil || ms < 0 {
			return vote{}, false
		}
		v.counters[j] = c
		if left := time.Duration(ms) * time.Millisecond; ms > 0 && (v.left == 0 || left < v.left) {
			v.left = left
		}
	}
	return v, true
}

// multiGrant is multi.go's and replies.go's name for a vote (an
// AcquireAll node call's answer).
type multiGrant = vote

// outcome is what one attempt heard from the nodes: who granted (with
// their votes), who refused and why, who failed or stayed silent. err is
// the attempt's report, the error Acquire returns when it gives up.
type outcome struct {
	start                     time.Time
	granted, answered, unsure []int
	// votes holds the granting nodes' votes, by node index.
	votes []vote
	// left is the least time left of a lock the attempt's tokens already
	// held; 0 for none.
	left time.Duration
	// silent counts the nodes that had not answered when the attempt was
	// decided; rejoining the refusals of nodes within their rejoin delay.
	silent, rejoining int
	err               AcquireError
}

// newOutcome returns an empty outcome for n nodes, its index slices
// sharing one backing array.
func newOutcome(resource string, needed, n int) *outcome {
	idx := make([]int, 3*n)
	o := &outcome{start: time.Now(), votes: make([]vote, n)}
	o.granted, o.answered, o.unsure = idx[0:0:n], idx[n:n:2*n], idx[2*n:2*n]
	o.err = AcquireError{Resource: resource, Needed: needed, Total: n}
	return o
}

// note records one node's answer, without reporting it: for answers that
// arrive after the verdict.
func (o *outcome) note(r reply[vote]) {
	o.answered = append(o.answered, r.idx)
	switch {
	case r.err != nil:
		o.unsure = append(o.unsure, r.idx)
	case r.val.ok:
		o.granted = append(o.granted, r.idx)
		o.votes[r.idx] = r.val
		if r.val.left > 0 && (o.left == 0 || r.val.left < o.left) {
			o.left = r.val.left
		}
	}
}

// add records one node's answer in the outcome and its report, and tells
// whether the attempt is decided: a majority granted, or so many did not
// that no majority can.
func (o *outcome) add(l *Locker, r reply[vote]) bool {
	o.note(r)
	switch {
	case r.err != nil:
		o.err.NodeErrors = append(o.err.NodeErrors, r.err)
	case !r.val.ok:
		refusal := l.nodes[r.idx].Addr()
		if r.val.reason != "" {
			refusal += " (" + r.val.reason + ")"
		}
		o.err.Refused = append(o.err.Refused, refusal)
		if rejoiningRefusal(r.val.reason) {
			o.rejoining++
		}
		if r.val.holderTTL < 0 || (o.err.HolderTTL >= 0 && r.val.holderTTL > o.err.HolderTTL) {
			o.err.HolderTTL = r.val.holderTTL
		}
	}
	n := len(l.nodes)
	return len(o.granted) >= l.quorum || n-(len(o.answered)-len(o.granted)) < l.quorum
}

// attempt makes one acquisition attempt of rq under w's hooks (noWait:
// nobody waits behind it). It returns the leases, or the outcome and the
// error to report: the outcome's *AcquireError, or nil outcome for a
// Locker that is closed or a context that ended.
func (l *Locker) attempt(ctx context.Context, rq request, w attemptHooks) ([]*Lease, *outcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("redlock: acquire %s: %w", rq.name(), err)
	}
	if !l.enter() {
		return nil, nil, ErrClosed
	}
	defer l.bg.Done()
	ctx = l.begin(ctx, Event{Kind: EventAttemptStart, Resource: rq.resource, Total: len(l.nodes)})
	o := newOutcome(rq.resource, l.quorum, len(l.nodes))
	r := l.ask(ctx, rq, o, w)
	fences, failure := l.decide(ctx, rq, o, r)
	l.emitCtx(ctx, Event{Kind: EventAttempt, Resource: rq.resource, Granted: len(o.granted), Total: len(l.nodes), Latency: time.Since(o.start), Err: failure})
	if failure != nil {
		l.fail(ctx, rq, o, r, w)
		if !isReport(failure) {
			return nil, nil, failure // ctx ended
		}
		return nil, o, failure
	}
	for k, ls := range rq.leases {
		w.granted(ls)
		if !l.establish(ls, o.granted, fences[k]) {
			for _, m := range rq.leases[:k] {
				_ = m.Release(context.Background())
			}
			<-l.cleanup(rq.leases[k:], r.replies, append(o.granted, o.unsure...), o.answered)
			return nil, nil, ErrClosed
		}
	}
	return rq.leases, nil, nil
}

// round is an attempt's fan-out: the answers still to read, the deadline
// (NodeCallTimeout), how many were read and whether time ran out.
type round struct {
	replies  <-chan reply[vote]
	deadline <-chan struct{}
	received int
	timedOut bool
}

// ask fans rq out to every node and reads the answers into o until the
// attempt is decided (and as long as w wants to listen after), then sets
// the leases' validity. Node calls run on their own context so that the
// caller's cancellation after success does not cut short calls still
// pending; the fan-out bounds them by NodeCallTimeout, which is below the
// validity, and a client that ignores context deadlines does not hold the
// attempt up past it: the unanswered nodes count as failed. Every lease
// counts every call in its acquiring: none is released before they end.
func (l *Locker) ask(ctx context.Context, rq request, o *outcome, w attemptHooks) round {
	n := len(l.nodes)
	first, call := rq.leases[0], rq.call
	if rest := rq.leases[1:]; len(rest) > 0 {
		for _, ls := range rest {
			ls.acquiring.Add(n)
			for i := range n {
				ls.busy[i].Add(1)
			}
		}
		call = func(ctx context.Context, i int) (vote, error) {
			defer func() {
				for _, ls := range rest {
					ls.busy[i].Add(-1)
					ls.acquiring.Done()
				}
			}()
			return rq.call(ctx, i)
		}
	}
	var r round
	r.replies, r.deadline = fanout(l, context.WithoutCancel(ctx), "acquire", l.allIdxs(), &first.acquiring, first.busy, call)
	w.started(startedCalls{at: o.start, wg: &first.acquiring, over: r.deadline})
	r.received, r.timedOut = gather(ctx, r.replies, r.deadline, n, func(rp reply[vote]) bool { return o.add(l, rp) })
	if d := w.listen(o); d > 0 && r.received < n && !r.timedOut && ctx.Err() == nil {
		brief, cancel := context.WithTimeout(context.Background(), d)
		more, _ := gather(ctx, r.replies, brief.Done(), n-r.received, func(rp reply[vote]) bool {
			o.add(l, rp)
			return false
		})
		cancel()
		r.received += more
	}
	o.silent = n - r.received
	validUntil := o.start.Add(l.validity)
	if o.left > 0 {
		// Where our token already held the lock, it keeps it only for
		// what it had left.
		validUntil = minTime(validUntil, o.start.Add(o.left-l.drift))
	}
	for _, ls := range rq.leases {
		ls.validUntil = validUntil
	}
	return r
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// decide gives the attempt's verdict: each lease's fencing token, or why
// it failed (the outcome's report, or ctx's error).
func (l *Locker) decide(ctx context.Context, rq request, o *outcome, r round) ([]fencing.Token, error) {
	ae := &o.err
	ae.Granted = len(o.granted)
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("redlock: acquire %s: %w", rq.name(), ctx.Err())
	case r.timedOut:
		ae.NodeErrors = append(ae.NodeErrors, fmt.Errorf("%d nodes did not answer within %s", len(l.nodes)-r.received, l.cfg.NodeCallTimeout))
	}
	if len(o.granted) < l.quorum {
		return nil, ae.finish(o.rejoining)
	}
	validUntil := rq.leases[0].validUntil
	fences, err := l.confirmAll(ctx, rq.leases, o, validUntil)
	if err == nil && !time.Now().Before(validUntil) {
		ae.Reason = "validity elapsed during the attempt"
		err = ae.finish(o.rejoining)
	}
	return fences, err
}

// confirmAll settles each lease's fencing token (confirmFence) from the
// granting nodes' counters, the leases at once.
func (l *Locker) confirmAll(ctx context.Context, leases []*Lease, o *outcome, validUntil time.Time) ([]fencing.Token, error) {
	if len(leases) == 1 {
		return l.confirmOne(ctx, leases[0], o, validUntil)
	}
	fences := make([]fencing.Token, len(leases))
	errs := make([]error, len(leases))
	reports := make([]AcquireError, len(leases))
	var wg sync.WaitGroup
	for k, ls := range leases {
		byNode := o.countersOf(k, len(l.nodes))
		reports[k] = o.err
		wg.Go(func() { fences[k], errs[k] = ls.confirmFence(ctx, o.granted, byNode, validUntil, &reports[k]) })
	}
	wg.Wait()
	for k, err := range errs {
		if err != nil {
			if isReport(err) {
				o.err = reports[k]
				return nil, &o.err
			}
			return nil, err
		}
	}
	return fences, nil
}

// confirmOne is confirmAll of a single lease, on the caller's goroutine.
func (l *Locker) confirmOne(ctx context.Context, ls *Lease, o *outcome, validUntil time.Time) ([]fencing.Token, error) {
	report := o.err
	f, err := ls.confirmFence(ctx, o.granted, o.countersOf(0, len(l.nodes)), validUntil, &report)
	if err != nil {
		if isReport(err) {
			o.err = report
			return nil, &o.err
		}
		return nil, err
	}
	return []fencing.Token{f}, nil
}

// countersOf returns the k-th lease's fence counter on each granting node
// of o, by node index.
func (o *outcome) countersOf(k, n int) []fencing.Token {
	byNode := make([]fencing.Token, n)
	for _, i := range o.granted {
		byNode[i] = o.votes[i].counters[k]
	}
	return byNode
}

// fail cleans a failed attempt up: it lets the calls still running that
// may hold our locks answer (within the attempt's NodeCallTimeout; every
// call for a strict request), so that the clean-up covers them and a
// retry does not find our leftovers (a busy lock, nothing granted, answers
// at once); w may take grants over; the caller then waits for the nodes
// that answered and may hold the locks, not for the others (a paused node
// never holds it up).
func (l *Locker) fail(ctx context.Context, rq request, o *outcome, r round, w attemptHooks) {
	if (rq.strict || len(o.granted)+len(o.unsure) > 0) && !r.timedOut && ctx.Err() == nil {
		gather(ctx, r.replies, r.deadline, len(l.nodes)-r.received, func(rp reply[vote]) bool {
			o.note(rp)
			return false
		})
	}
	kept := w.failed(ctx, o, rq.leases[0].token)
	mayHold := slices.DeleteFunc(append(slices.Clone(o.granted), o.unsure...), func(i int) bool { return slices.Contains(kept, i) })
	select {
	case <-l.cleanup(rq.leases, r.replies, mayHold, o.answered):
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
	replies, deadline := fanout(l, context.WithoutCancel(ctx), "fence", granted, &ls.acquiring, ls.busy, func(ctx context.Context, i int) (bool, error) {
		return fenceAt(ctx, l.nodes[i], ls.keys, ls.token, f, l.seedStep, l.gateFor(ctx, i).marker(ls.keys[0]))
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
// every lease is released at once on the nodes in now (those that
// granted, or failed with an unknown outcome), and on each node that had
// not answered once its call has ended, so that no late grant outlives
// the attempt. Nodes that answered with a refusal hold nothing of ours, in
// time or late: the late answers still in replies spare those nodes a
// call. The clean-up hands no lock over, it only names the head of each
// node's queue: a split vote frees the lock on several nodes at once,
// usually while the waiters it queued do not yet agree on their tickets,
// and handing each node's lock to its own head would leave each with a
// minority. The channel it returns is closed when the nodes in now are
// clean. It must be called while the attempt holds its count in l.bg
// (enter).
func (l *Locker) cleanup(leases []*Lease, replies <-chan reply[vote], now, answered []int) <-chan struct{} {
	for _, ls := range leases {
		ls.cancel(ErrLeaseReleased)
	}
	quick := make(chan struct{})
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		if len(now) > 0 {
			l.releaseAll(leases, now)
		}
		close(quick)
		if len(answered) == len(l.nodes) {
			return
		}
		for _, ls := range leases {
			ls.acquiring.Wait()
		}
		// Every call has ended, so every answer not yet read is in
		// replies.
		refused := make([]bool, len(l.nodes))
		for len(replies) > 0 {
			if r := <-replies; r.err == nil && !r.val.ok {
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
			l.releaseAll(leases, rest)
		}
	}()
	return quick
}

// releaseAll releases the leases' locks on the nodes idxs, the leases at
// once, each call bounded by NodeCallTimeout (bareRelease).
func (l *Locker) releaseAll(leases []*Lease, idxs []int) {
	ctx := context.Background()
	if len(leases) == 1 {
		l.releaseOn(ctx, idxs, newBareRelease(releaseArgs{keys: leases[0].keys, token: leases[0].token}), allAnswers)
		return
	}
	var wg sync.WaitGroup
	for _, ls := range leases {
		wg.Go(func() {
			l.releaseOn(ctx, idxs, newBareRelease(releaseArgs{keys: ls.keys, token: ls.token}), allAnswers)
		})
	}
	wg.Wait()
}
