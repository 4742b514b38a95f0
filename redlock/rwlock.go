package redlock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/scripts"
)

// RWLock is a read-write lock on one resource over the Locker's nodes
// (docs/design.md §14): any number of readers (AcquireShared) share it,
// and a writer (Acquire) excludes every reader and writer. Every lease,
// shared or exclusive, is a *Lease with its own token and fencing token,
// renewed, lost and released like a mutex lease; a holder that dies frees
// its share when its TTL expires.
//
// A reader is recorded on a majority of nodes with its own TTL; a writer
// is granted only by nodes where no live reader or writer is recorded, so
// any two majorities sharing a node keep a writer apart from every other
// holder. Tokens come from one counter per node that every grant raises:
// a writer's token exceeds every token granted on the resource before it,
// and a reader's every earlier writer's (fencing.RWFence checks both).
//
// Writers are not starved: a writer that waits (Acquire) records its
// intent on the nodes that refuse it, and new readers wait while a live
// intent stands (it lapses after Config.QueueTTL, or the lease duration
// when the queue is off, unless its writer keeps waiting). Writers do not
// queue among themselves; they race like TryAcquire callers with backoff.
// An RWLock is safe for concurrent use. Its keys are its own: the mutex
// on the same resource name is another lock.
type RWLock struct {
	l        *Locker
	resource string
	keys     []string // the writer's lock keys: W, W:fence, W:queue, W:queue:exp
	readers  string   // W:readers
	intent   string   // W:intent
	prefix   string   // W:reader:, followed by a reader's token
}

// rwSuffix ends a read-write lock's writer key: W = Key(resource) + rwSuffix.
const rwSuffix = ":rw"

// readerInfix follows W in a reader's key, before its token.
const readerInfix = ":reader:"

// NewRWLock returns the read-write lock on resource. A name the Locker
// would refuse is an error wrapping ErrInvalidResource.
func (l *Locker) NewRWLock(resource string) (*RWLock, error) {
	if err := checkResource(resource); err != nil {
		return nil, err
	}
	w := l.Key(resource) + rwSuffix
	return &RWLock{l: l, resource: resource, keys: lockKeys(w), readers: w + ":readers", intent: w + ":intent", prefix: w + readerInfix}, nil
}

// newKeyedLease is newLease for a lease whose keys are not the mutex's
// (lockKeys(Key(resource))): a read-write lock's writer or reader.
func newKeyedLease(l *Locker, resource string, keys []string, token string) *Lease {
	ls := newLease(l, resource, token)
	ls.key, ls.keys = keys[0], keys
	return ls
}

// intentTTL is how long a waiting writer's intent lasts on a node without
// a new attempt: QueueTTL, or the lease duration when the queue is off.
func (rw *RWLock) intentTTL() time.Duration {
	if d := rw.l.cfg.QueueTTL; d > 0 {
		return d
	}
	return rw.l.cfg.LeaseDuration
}

// TryAcquire makes one attempt to take the lock exclusively (a writer).
// When readers or a writer hold it the error wraps ErrNotAcquired and is
// an *AcquireError. It records no intent: readers are not held up by it.
func (rw *RWLock) TryAcquire(ctx context.Context) (lease *Lease, err error) {
	ctx, op := rw.l.beginAcquire(ctx, "try_acquire", LockWrite, rw.resource)
	defer rw.l.endAcquire(ctx, &op, &lease, nil, &err)
	op.try()
	return rw.once(ctx, rw.writeRequest("", nil))
}

// TryAcquireShared makes one attempt to take the lock shared (a reader).
// When a writer holds it, or waits for it, the error wraps
// ErrNotAcquired and is an *AcquireError.
func (rw *RWLock) TryAcquireShared(ctx context.Context) (lease *Lease, err error) {
	ctx, op := rw.l.beginAcquire(ctx, "try_acquire", LockRead, rw.resource)
	defer rw.l.endAcquire(ctx, &op, &lease, nil, &err)
	op.try()
	return rw.once(ctx, rw.readRequest())
}

// once makes one attempt and reports it as TryAcquire does.
func (rw *RWLock) once(ctx context.Context, rq request) (*Lease, error) {
	leases, _, err := rw.l.tryOnce(ctx, rw.resource, rq)
	if err != nil {
		return nil, err
	}
	return leases[0], nil
}

// Acquire waits until it holds the lock exclusively (a writer), or ctx
// ends (the error then wraps ctx.Err(), never ErrNotAcquired). While it
// waits, its intent stands on the nodes that refused it, so new readers
// wait behind it; it takes the intent back when it returns. It is woken
// by every release of the lock, a reader's or a writer's, and otherwise
// retries on its backoff, never later than the longest reader's TTL or a
// third of the intent's TTL.
func (rw *RWLock) Acquire(ctx context.Context) (lease *Lease, err error) {
	ctx, op := rw.l.beginAcquire(ctx, "acquire", LockWrite, rw.resource)
	defer rw.l.endAcquire(ctx, &op, &lease, nil, &err)
	id := newToken()[:16]
	intended := false
	// Any attempt may record the intent on a node that refuses, even one
	// that succeeds elsewhere, or whose calls outlive a context that ended
	// meanwhile: once one ran, the intent is taken back.
	var last *Lease
	leases, err := rw.l.acquire(ctx, &op, rw.l.waitOn(rw.resource, rw.keys[:1], rw.intentTTL()/3), func(w attemptHooks) ([]*Lease, *outcome, error) {
		intended = true
		return rw.l.attempt(ctx, rw.writeRequest(id, &last), w)
	})
	if intended {
		rw.withdraw(id, last)
	}
	if err != nil {
		return nil, err
	}
	return leases[0], nil
}

// AcquireShared waits until it holds the lock shared (a reader), or ctx
// ends (the error then wraps ctx.Err(), never ErrNotAcquired). It waits
// while a writer holds the lock or waits for it, and is woken by the
// writer's release.
func (rw *RWLock) AcquireShared(ctx context.Context) (lease *Lease, err error) {
	ctx, op := rw.l.beginAcquire(ctx, "acquire", LockRead, rw.resource)
	defer rw.l.endAcquire(ctx, &op, &lease, nil, &err)
	leases, err := rw.l.acquire(ctx, &op, rw.l.waitOn(rw.resource, rw.keys[:1], 0), func(w attemptHooks) ([]*Lease, *outcome, error) {
		return rw.l.attempt(ctx, rw.readRequest(), w)
	})
	if err != nil {
		return nil, err
	}
	return leases[0], nil
}

// withdraw takes a waiting writer's intent back on every node, in the
// background (bounded by NodeCallTimeout), once the calls of its last
// attempt (last, when not nil) have ended: a late one could record the
// intent again. A node that misses it lets the intent lapse.
func (rw *RWLock) withdraw(id string, last *Lease) {
	l := rw.l
	if !l.enter() {
		return
	}
	go func() {
		defer l.bg.Done()
		if last != nil {
			last.acquiring.Wait()
		}
		l.yesNo(context.Background(), "withdraw", l.allIdxs(), allAnswers, func(ctx context.Context, i int) (bool, error) {
			reply, err := l.nodes[i].Eval(ctx, scripts.RWWithdraw, []string{rw.intent}, id)
			return reply == int64(1), scriptErr(err, "")
		})
	}()
}

// writeRequest is one writer's attempt; id is the waiting writer's id
// ("": it records no intent); last, when not nil, is set to its lease.
func (rw *RWLock) writeRequest(id string, last **Lease) request {
	l := rw.l
	ls := newKeyedLease(l, rw.resource, rw.keys, newToken())
	if last != nil {
		*last = ls
	}
	keys := []string{rw.keys[0], rw.keys[1], rw.readers, rw.intent}
	mode := "wait" // a refusal records the intent (rw_write.lua)
	if id == "" {
		mode = "try"
	}
	return rw.request(ls, func(ctx context.Context, i int, g grantGate) (any, error) {
		fm, fv := floorArgs(g.floor)
		args := append([]any{ls.token, l.cfg.Owner, nodeTTL(l.cfg.LeaseDuration), fm, fv, mode, id, nodeTTL(rw.intentTTL())}, g.trust...)
		return l.nodes[i].Eval(ctx, scripts.RWWrite, g.withMarker(keys, keys[0]), args...)
	})
}

// readRequest is one reader's attempt: its lease's keys are its own
// reader key (W:reader:<token>) and the shared fence counter, so that the
// mutex's renew, fence and release scripts serve it.
func (rw *RWLock) readRequest() request {
	l := rw.l
	token := newToken()
	rk := rw.prefix + token
	// The readers index last: renew and release declare it (the scripts
	// touch only the keys they are given).
	ls := newKeyedLease(l, rw.resource, []string{rk, rw.keys[1], rk + ":queue", rk + ":queue:exp", rw.readers}, token)
	ls.notify = rw.keys[0] // a waiting writer hears the release
	keys := []string{rw.keys[0], rw.keys[1], rw.readers, rw.intent, rk}
	return rw.request(ls, func(ctx context.Context, i int, g grantGate) (any, error) {
		fm, fv := floorArgs(g.floor)
		args := append([]any{token, l.cfg.Owner, nodeTTL(l.cfg.LeaseDuration), fm, fv}, g.trust...)
		return l.nodes[i].Eval(ctx, scripts.RWRead, g.withMarker(keys, keys[0]), args...)
	})
}

// request is an attempt at lease ls by one of the read-write lock's
// granting scripts (eval), on each node under the rejoin rule.
func (rw *RWLock) request(ls *Lease, eval func(ctx context.Context, i int, g grantGate) (any, error)) request {
	l := rw.l
	return request{resource: rw.resource, leases: []*Lease{ls}, call: func(ctx context.Context, i int) (vote, error) {
		return grantOn(l, ctx, i, func(gate grantGate) (vote, bool, error) {
			reply, err := eval(ctx, i, gate)
			if err != nil {
				return vote{}, false, scriptErr(err, ls.token)
			}
			v, err := parseRWGrant(reply)
			return v, v.ok, err
		}, func(why string, left time.Duration) vote {
			return vote{reason: why, holderTTL: left}
		}, func() error {
			_, err := release(ctx, l.nodes[i], releaseArgs{keys: ls.keys, token: ls.token})
			return err
		})
	}}
}

// parseRWGrant decodes rw_write's and rw_read's replies (parseVote, one
// lock, lock 1), whose refusals are "held" (a writer holds it), "readers"
// (that many readers hold it: rw_write) or "intent" (a writer waits:
// rw_read).
func parseRWGrant(reply any) (vote, error) {
	return parseVote(reply, 1, "read-write lock", func(r voteReply) (string, bool) {
		if r.lock != 1 || r.readers != 0 && r.verdict != verdictReaders {
			return "", false
		}
		switch r.verdict {
		case verdictHeld:
			return "", true
		case verdictReaders:
			return fmt.Sprintf("%d readers hold it", r.readers), r.readers > 0
		case verdictIntent:
			return "a writer waits for it", true
		}
		return "", false
	})
}

// The read-write lock's own refusals (scripts/rw_write.lua, rw_read.lua).
const (
	verdictReaders = "readers" // live readers hold it
	verdictIntent  = "intent"  // a writer waits for it
)

// RWStatus is the state of a read-write lock across the nodes
// (RWLock.Inspect).
type RWStatus struct {
	// Resource is the inspected resource.
	Resource string
	// Writer is the writer's state on one of a majority of nodes that
	// agree on its token; nil when no majority does.
	Writer *LockInfo
	// Readers are the readers recorded on a majority of nodes, each as
	// one of them shows it (Token, Owner, TTL).
	Readers []LockInfo
	// WritersWaiting is the most live writers' intents any node shows.
	WritersWaiting int
	// Nodes has one entry per node, in the Locker's node order.
	Nodes []RWNodeStatus
}

// RWNodeStatus is one node's view of a read-write lock.
type RWNodeStatus struct {
	// Addr names the node.
	Addr string
	// Writer is the writer's lock on the node, if one stands.
	Writer *LockInfo
	// Readers are the live readers recorded on the node.
	Readers []LockInfo
	// Fence is the node's fence counter for the lock (zero if never
	// locked).
	Fence fencing.Token
	// WritersWaiting counts the live writers' intents on the node.
	WritersWaiting int
	// Err is the node's error (a *NodeError), if it failed.
	Err error
}

// Inspect reads the lock on every node without changing it: the writer
// and the readers that a majority of nodes record, and each node's view.
// It never fails for a node's error; those are in RWStatus.Nodes.
func (rw *RWLock) Inspect(ctx context.Context) (*RWStatus, error) {
	l := rw.l
	st := &RWStatus{Resource: rw.resource, Nodes: make([]RWNodeStatus, len(l.nodes))}
	for i, n := range l.nodes {
		st.Nodes[i] = RWNodeStatus{Addr: n.Addr(), Err: &NodeError{Addr: n.Addr(), Err: fmt.Errorf("no answer within %s", l.cfg.NodeCallTimeout)}}
	}
	var wg sync.WaitGroup
	replies, deadline := fanout(l, ctx, "inspect", l.allIdxs(), &wg, nil, rw.inspectNode)
	gather(ctx, replies, deadline, len(l.nodes), func(r reply[RWNodeStatus]) bool {
		ns := r.val
		ns.Addr, ns.Err = l.nodes[r.idx].Addr(), r.err
		st.Nodes[r.idx] = ns
		return false
	})
	writers := map[string]int{}
	readers := map[string]int{}
	for _, ns := range st.Nodes {
		if ns.Err != nil {
			continue
		}
		st.WritersWaiting = max(st.WritersWaiting, ns.WritersWaiting)
		if ns.Writer != nil {
			if writers[ns.Writer.Token]++; writers[ns.Writer.Token] == l.quorum {
				st.Writer = ns.Writer
			}
		}
		for _, r := range ns.Readers {
			if readers[r.Token]++; readers[r.Token] == l.quorum {
				st.Readers = append(st.Readers, r)
			}
		}
	}
	return st, nil
}

// inspectNode reads the lock on node i: rw_inspect once, and while the
// index has live readers whose keys it did not name, again with their
// keys declared, to read their owners (a script may touch only the keys
// it is given); at most three times (readers that keep arriving are
// shown without an owner).
func (rw *RWLock) inspectNode(ctx context.Context, i int) (RWNodeStatus, error) {
	n := rw.l.nodes[i]
	keys := []string{rw.keys[0], rw.keys[1], rw.readers, rw.intent}
	named := map[string]bool{}
	for round := 1; ; round++ {
		reply, err := n.Eval(ctx, scripts.RWInspect, keys)
		if err != nil {
			return RWNodeStatus{}, scriptErr(err, "")
		}
		ns, err := parseRWInspect(reply)
		more := false
		for _, r := range ns.Readers {
			if !named[r.Token] {
				named[r.Token], more = true, true
				keys = append(keys, rw.prefix+r.Token)
			}
		}
		if err != nil || !more || round == 3 {
			return ns, err
		}
	}
}

// parseRWInspect decodes rw_inspect's reply: the writer, the counter, the
// intents, then a token, ms left and value (or nil) per live reader.
func parseRWInspect(reply any) (RWNodeStatus, error) {
	bad := fmt.Errorf("%w: rw_inspect reply %s", errBadReply, describeReply(reply))
	vals, ok := reply.([]any)
	if !ok || len(vals) < 4 || (len(vals)-4)%3 != 0 {
		return RWNodeStatus{}, bad
	}
	var ns RWNodeStatus
	holder := func(v any, ms any) (*LockInfo, bool) {
		s, ok1 := v.(string)
		t, ok2 := ms.(int64)
		if !ok1 || !ok2 {
			return nil, false
		}
		token, owner, _ := strings.Cut(s, " ")
		return &LockInfo{Held: true, Token: token, Owner: owner, TTL: pttl(t)}, true
	}
	if vals[0] != nil {
		w, ok := holder(vals[0], vals[1])
		if !ok {
			return RWNodeStatus{}, bad
		}
		ns.Writer = w
	}
	if s, ok := vals[2].(string); ok {
		c, err := fencing.ParseToken(s)
		if err != nil {
			return RWNodeStatus{}, bad
		}
		ns.Fence = c
	}
	waiting, ok := vals[3].(int64)
	if !ok {
		return RWNodeStatus{}, bad
	}
	ns.WritersWaiting = int(waiting)
	for k := 4; k < len(vals); k += 3 {
		r, ok := rwReader(vals[k : k+3])
		if !ok {
			return RWNodeStatus{}, bad
		}
		ns.Readers = append(ns.Readers, r)
	}
	return ns, nil
}

// rwReader decodes one reader of rw_inspect's reply: its token, the ms
// its end has left, and its key's value "<token> <owner>" (nil when the
// key was not named or is gone: the owner is then unknown).
func rwReader(f []any) (LockInfo, bool) {
	token, ok1 := f[0].(string)
	ms, ok2 := f[1].(int64)
	if !ok1 || !ok2 || token == "" {
		return LockInfo{}, false
	}
	r := LockInfo{Held: true, Token: token, TTL: pttl(ms)}
	if f[2] == nil {
		return r, true
	}
	s, ok := f[2].(string)
	tok, owner, _ := strings.Cut(s, " ")
	r.Owner = owner
	return r, ok && tok == token
}
