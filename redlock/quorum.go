package redlock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The majority rule, written once. Every operation on the nodes fans out
// to them in parallel (fanout), reads the answers until its verdict is
// decided or NodeCallTimeout has passed (gather), and, for the yes/no
// operations, counts them in a tally whose verdict is the same for all of
// them: yes from a majority, or a *QuorumError saying which majority was
// missing (docs/design.md §2).

// reply is one node's answer in a fan-out.
type reply[T any] struct {
	idx int
	val T
	err error
}

// fanout calls fn with each of the given node indexes, in parallel on the
// Locker's workers, under one NodeCallTimeout deadline derived from ctx
// (one context for the whole fan-out, not one per call). Replies arrive on
// the returned channel, which has room for all of them; wg.Done runs after
// each call. The second channel closes when the deadline passes or every
// call has finished (then every reply is in the channel). busy, when not
// nil, counts each node's calls not finished (a lease's, Lease.busy).
// Failed calls are reported to the Observer as op.
func fanout[T any](l *Locker, ctx context.Context, op string, idxs []int, wg *sync.WaitGroup, busy []atomic.Int32, fn func(ctx context.Context, i int) (T, error)) (<-chan reply[T], <-chan struct{}) {
	f := &fan[T]{l: l, op: op, fn: fn, wg: wg, busy: busy, out: make(chan reply[T], len(idxs))}
	f.ctx, f.cancel = context.WithTimeout(ctx, l.cfg.NodeCallTimeout)
	if len(idxs) == 0 {
		f.cancel()
		return f.out, f.ctx.Done()
	}
	f.left.Store(int32(len(idxs)))
	wg.Add(len(idxs))
	if busy != nil {
		for _, i := range idxs {
			busy[i].Add(1)
		}
	}
	if len(idxs) == 1 && l.inline {
		f.call(idxs[0]) // returns by the deadline: no hand-over needed
		return f.out, f.ctx.Done()
	}
	for _, i := range idxs {
		l.workers.run(f, i)
	}
	return f.out, f.ctx.Done()
}

// fan is one fan-out: what its calls share, in one allocation (a worker
// takes it as its job, without a closure per fan-out).
type fan[T any] struct {
	l      *Locker
	op     string
	fn     func(ctx context.Context, i int) (T, error)
	wg     *sync.WaitGroup
	busy   []atomic.Int32
	out    chan reply[T]
	ctx    context.Context // the fan-out's deadline
	cancel context.CancelFunc
	left   atomic.Int32 // calls not finished; the last frees the deadline
}

// call makes the fan-out's call to node i and sends its reply. The call
// counts as finished in busy before its reply is sent: whoever reads the
// reply sees no call of it running on node i.
func (f *fan[T]) call(i int) {
	defer f.wg.Done()
	l := f.l
	nctx, start := l.beginNodeCall(f.ctx, f.op, i)
	v, err := f.fn(nctx, i)
	if f.busy != nil {
		f.busy[i].Add(-1)
	}
	if err != nil {
		err = &NodeError{Addr: l.nodes[i].Addr(), Err: err}
		l.emitCtx(nctx, Event{Kind: EventNodeError, Node: l.nodes[i].Addr(), Op: f.op, Err: err})
	}
	endNodeCall(l, nctx, f.ctx, f.op, i, start, v, err)
	f.out <- reply[T]{idx: i, val: v, err: err}
	if f.left.Add(-1) == 0 {
		f.cancel()
	}
}

// gather reads up to n replies of a fan-out, passing each to take, until
// take reports the verdict decided, ctx ends, or the fan-out's deadline
// (NodeCallTimeout) has passed: a node whose client ignores its context
// never holds the caller up. It returns how many replies it read and
// whether it stopped because time ran out.
func gather[T any](ctx context.Context, replies <-chan reply[T], deadline <-chan struct{}, n int, take func(reply[T]) (decided bool)) (read int, late bool) {
	for read < n {
		var r reply[T]
		select {
		case r = <-replies:
		case <-ctx.Done():
			return read, false
		case <-deadline:
			// Time is up, or every call finished and its reply is waiting.
			select {
			case r = <-replies:
			default:
				return read, true
			}
		}
		read++
		if take(r) {
			return read, false
		}
	}
	return read, false
}

// tally counts the answers of a yes/no operation (renew, release, fence).
type tally struct {
	yes, no int
	errs    []error
	// silent lists the indexes of the nodes that gave no answer (an error
	// or none in time); filled by yesNo.
	silent []int
}

// add counts one reply.
func (t *tally) add(r reply[bool]) {
	switch {
	case r.err != nil:
		t.errs = append(t.errs, r.err)
	case r.val:
		t.yes++
	default:
		t.no++
	}
}

// decided reports whether the answers so far settle the verdict among n
// nodes: a majority said yes, or so many said no or failed that no
// majority can.
func (t *tally) decided(quorum, n int) bool {
	return t.yes >= quorum || n-t.no-len(t.errs) < quorum
}

// stopRule says when a yes/no operation stops reading answers.
type stopRule int

const (
	// allAnswers reads every answer (within NodeCallTimeout).
	allAnswers stopRule = iota
	// majorityYes stops once a majority said yes; the other calls finish
	// on the workers, bounded by NodeCallTimeout.
	majorityYes
)

// yesNo runs a yes/no operation on the nodes with the given indexes and
// tallies the answers, as stop says. It waits no longer than
// NodeCallTimeout.
func (l *Locker) yesNo(ctx context.Context, op string, idxs []int, stop stopRule, fn func(ctx context.Context, i int) (bool, error)) tally {
	return l.startYesNo(ctx, op, idxs, fn).count(ctx, stop, nil)
}

// yesNoCalls is a yes/no operation whose calls are running (startYesNo);
// count reads their answers.
type yesNoCalls struct {
	l        *Locker
	idxs     []int
	wg       sync.WaitGroup
	replies  <-chan reply[bool]
	deadline <-chan struct{}
}

// startYesNo starts a yes/no operation's calls to the nodes with the given
// indexes, under one NodeCallTimeout deadline from now.
func (l *Locker) startYesNo(ctx context.Context, op string, idxs []int, fn func(ctx context.Context, i int) (bool, error)) *yesNoCalls {
	c := &yesNoCalls{l: l, idxs: idxs}
	c.replies, c.deadline = fanout(l, ctx, op, idxs, &c.wg, nil, fn)
	return c
}

// count tallies the answers of the calls, and of then's when then is not
// nil (calls of the same operation started later: a lease's release on
// the nodes it had to wait for, Lease.releaseNodes), until the verdict is
// decided as stop says and every call of then answered, ctx ends, or each
// group's deadline passed; a node that gave no answer by then counts as
// an error and is listed in silent. Both groups are read at once: a
// majority stop needs no more answers of the first than the majority
// lacks.
func (c *yesNoCalls) count(ctx context.Context, stop stopRule, then *yesNoCalls) tally {
	l := c.l
	k := counting{l: l, answered: make([]bool, len(l.nodes)), groups: [2]*yesNoCalls{c, then}}
	for g, x := range k.groups {
		if x != nil && len(x.idxs) > 0 {
			k.left[g], k.replies[g], k.deadline[g] = len(x.idxs), x.replies, x.deadline
		}
	}
	for k.left[0]+k.left[1] > 0 && !(stop == majorityYes && k.t.yes >= l.quorum && k.left[1] == 0) {
		select {
		case r := <-k.replies[0]:
			k.take(0, r)
		case r := <-k.replies[1]:
			k.take(1, r)
		case <-k.deadline[0]:
			k.drain(0)
		case <-k.deadline[1]:
			k.drain(1)
		case <-ctx.Done():
			k.late(0, ctx.Err())
			k.late(1, ctx.Err())
		}
	}
	return k.t
}

// counting is count's state: the tally so far, the nodes that answered,
// and for each group its calls not yet answered, its replies and its
// deadline (nil once every call answered or the deadline passed).
type counting struct {
	l        *Locker
	t        tally
	answered []bool
	groups   [2]*yesNoCalls
	left     [2]int
	replies  [2]<-chan reply[bool]
	deadline [2]<-chan struct{}
}

// take counts one answer of group g.
func (k *counting) take(g int, r reply[bool]) {
	k.answered[r.idx] = true
	if r.err != nil {
		k.t.silent = append(k.t.silent, r.idx)
	}
	k.t.add(r)
	if k.left[g]--; k.left[g] == 0 {
		k.replies[g], k.deadline[g] = nil, nil
	}
}

// drain runs when group g's deadline channel closed: time is up, or every
// call finished and its reply is waiting. It counts the replies waiting
// and the calls without one as late.
func (k *counting) drain(g int) {
	for k.left[g] > 0 {
		select {
		case r := <-k.replies[g]:
			k.take(g, r)
		default:
			k.late(g, fmt.Errorf("no answer within %s", k.l.cfg.NodeCallTimeout))
		}
	}
}

// late counts group g's calls that gave no answer as failed, with why.
func (k *counting) late(g int, why error) {
	if k.left[g] == 0 {
		return
	}
	for _, i := range k.groups[g].idxs {
		if !k.answered[i] {
			k.t.errs = append(k.t.errs, &NodeError{Addr: k.l.nodes[i].Addr(), Err: why})
			k.t.silent = append(k.t.silent, i)
		}
	}
	k.left[g], k.replies[g], k.deadline[g] = 0, nil, nil
}

// verdict is the outcome of a yes/no operation by token on resource: nil
// when a majority said yes, a *QuorumError otherwise.
func (l *Locker) verdict(op, resource string, t tally) error {
	if t.yes >= l.quorum {
		return nil
	}
	return &QuorumError{Op: op, Resource: resource, Yes: t.yes, No: t.no, Total: len(l.nodes), Needed: l.quorum, Nodes: t.errs}
}

// releaseOn deletes a lock where its token holds it on the nodes with the
// given indexes (each announces the release to waiters), reading the
// answers as stop says. r makes each node's call (the lock, the token,
// and what the waiting adds: wait.go) and hears each answer, which may
// still come after releaseOn returned before every node answered.
func (l *Locker) releaseOn(ctx context.Context, idxs []int, r releasing, stop stopRule) tally {
	return l.startRelease(ctx, idxs, r).count(ctx, stop, nil)
}

// startRelease starts releaseOn's calls; count reads their answers.
func (l *Locker) startRelease(ctx context.Context, idxs []int, r releasing) *yesNoCalls {
	return l.startYesNo(ctx, "release", idxs, func(ctx context.Context, i int) (bool, error) {
		rp, err := release(ctx, l.nodes[i], r.args(ctx, i))
		r.heard(i, rp)
		return rp.released, err
	})
}

// allIdxs returns the indexes of every node (shared; never modified).
func (l *Locker) allIdxs() []int { return l.all }

// QuorumError is the failure of an operation by token (renew, release)
// that no majority of the nodes confirmed. It wraps ErrNotHeld when a
// majority answered but fewer than a majority hold the token there, and
// ErrNoQuorum when no majority answered; and each node's error.
type QuorumError struct {
	// Op is the operation: "renew" or "release".
	Op string
	// Resource is the resource the operation was on.
	Resource string
	// Yes counts the nodes where the token held the lock (and the
	// operation was applied); No those where it did not.
	Yes, No int
	// Total counts all nodes, Needed the majority.
	Total, Needed int
	// Nodes holds one *NodeError per node that failed or did not answer in
	// time.
	Nodes []error
}

// Answered returns how many nodes answered.
func (e *QuorumError) Answered() int { return e.Yes + e.No }

func (e *QuorumError) kind() error {
	if e.Answered() >= e.Needed {
		return ErrNotHeld
	}
	return ErrNoQuorum
}

func (e *QuorumError) Error() string {
	if e.kind() == ErrNotHeld {
		return fmt.Sprintf("%s: %s %q: token held on %d of %d nodes, %d needed%s", ErrNotHeld, e.Op, e.Resource, e.Yes, e.Total, e.Needed, nodeErrors(e.Nodes).Error())
	}
	return fmt.Sprintf("%s: %s %q: %d of %d nodes answered, %d needed%s", ErrNoQuorum, e.Op, e.Resource, e.Answered(), e.Total, e.Needed, nodeErrors(e.Nodes).Error())
}

// Unwrap returns the sentinel (ErrNotHeld or ErrNoQuorum) and the node
// errors, for errors.Is and errors.As.
func (e *QuorumError) Unwrap() []error { return append([]error{e.kind()}, e.Nodes...) }

// workerIdle is how long an idle fan-out worker waits for more work.
const workerIdle = 10 * time.Second

// workers runs node calls on goroutines that stay alive between calls. A
// fresh goroutine per call would start on a small stack and grow it on
// every call through the Redis client; a kept worker has grown it already.
// Workers beyond the ones in use exit after workerIdle, and all of them at
// stop.
type workers struct {
	jobs chan job
	quit chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	stopped bool
}

// caller makes one node call of a fan-out (a *fan).
type caller interface{ call(i int) }

// job is one call: c.call(arg). One caller serves every node of a
// fan-out.
type job struct {
	c   caller
	arg int
}

func newWorkers() *workers {
	return &workers{jobs: make(chan job), quit: make(chan struct{})}
}

// run starts c.call(arg) on an idle worker, or on a new one if none is
// idle. After stop, it runs it on a goroutine of its own.
func (w *workers) run(c caller, arg int) {
	j := job{c, arg}
	select {
	case w.jobs <- j:
		return
	default:
	}
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		go c.call(arg)
		return
	}
	w.wg.Add(1)
	w.mu.Unlock()
	go w.work(j)
}

func (w *workers) work(job job) {
	defer w.wg.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		job.c.call(job.arg)
		idle.Reset(workerIdle)
		select {
		case job = <-w.jobs:
		case <-idle.C:
			return
		case <-w.quit:
			return
		}
	}
}

// stop ends every worker once its current job is done, and waits for them.
func (w *workers) stop() {
	w.mu.Lock()
	if !w.stopped {
		w.stopped = true
		close(w.quit)
	}
	w.mu.Unlock()
	w.wg.Wait()
}
