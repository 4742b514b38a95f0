package redlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/e6344662/go-redlock/fencing"
)

var (
	// ErrNoLeader means a majority of nodes hold no lock on the role: nobody
	// leads.
	ErrNoLeader = errors.New("redlock: no leader")
	// ErrLeaderUnknown means no majority of nodes agrees on a leader: too
	// few answered, or they disagree (a term being taken or lost, or node
	// counters that diverged after faults while a node is down).
	ErrLeaderUnknown = errors.New("redlock: leader unknown")
)

// Elector runs leader election for one role over a Locker: leadership is a
// lease on the resource named by the role, renewed automatically, and each
// term carries the lease's fencing token, which grows with every new term.
// Candidates call Campaign; anyone (candidate or not) can ask who leads with
// Leader, or follow the terms with Observe. An Elector is safe for
// concurrent use and holds no state of its own besides its Locker and role.
//
// The role is an ordinary resource of the Locker: `redlock-cli status`
// shows its leader, and it must not be locked for anything else. Every
// process electing a leader for the role must use the same nodes and key
// prefix.
type Elector struct {
	locker   *Locker
	role     string
	interval time.Duration
}

// NewElector returns an Elector for role over l. It fails with an error
// wrapping ErrInvalidConfig for a nil Locker, and with one wrapping
// ErrInvalidResource for a role that is not a valid resource name (empty,
// or longer than MaxResourceLen).
func NewElector(l *Locker, role string) (*Elector, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: elector for %q has a nil Locker", ErrInvalidConfig, role)
	}
	if err := checkResource(role); err != nil {
		return nil, fmt.Errorf("redlock: elector role: %w", err)
	}
	return &Elector{
		locker:   l,
		role:     role,
		interval: max(l.cfg.LeaseDuration/4, time.Millisecond),
	}, nil
}

// Campaign blocks until this process leads the role, or ctx ends (the
// error then wraps ctx.Err()), or the Locker is closed (ErrClosed). It waits
// like Locker.Acquire: a resignation wakes it at once, a crashed leader's
// term is taken over as soon as it expires on the nodes.
//
// The returned Term lasts until Resign, until its renewal fails (its
// Context ends with cause ErrLeaseLost), or until the Locker is closed; ctx
// bounds only the waiting. Campaign never returns a term that already ended
// or whose validity has run out while the call returned: it campaigns again
// instead. That check is no guarantee for the future (the process may be
// paused right after it), so work done as leader must still watch
// Term.Context and carry Term.Fence to the resource.
//
// Calling Campaign again while this process leads makes it a candidate
// like any other, waiting for the term to end.
func (e *Elector) Campaign(ctx context.Context) (*Term, error) {
	for {
		lease, err := e.locker.Acquire(ctx, e.role)
		if err != nil {
			return nil, fmt.Errorf("redlock: campaign for %q: %w", e.role, err)
		}
		if lease.Context().Err() == nil && time.Now().Before(lease.ValidUntil()) {
			return &Term{lease: lease}, nil
		}
		// Lost between the grant and now (a pause of this process, or
		// renewal failing at once): not a leader. Tidy up and try again.
		_ = lease.Release(context.WithoutCancel(ctx))
	}
}

// Leader reports who leads the role now, as a majority of the nodes sees it,
// without changing anything. It fails with an error wrapping ErrNoLeader
// when a majority of nodes hold no term, with one wrapping ErrLeaderUnknown
// when no majority agrees on a leader and its fencing token, and with one
// wrapping ctx.Err() when ctx ends first.
//
// The answer is a snapshot: the term may end the moment after. It can also
// show a term whose Campaign is still completing (or, rarely, an attempt
// that fails after reaching a majority); its fence is then never above the
// one the term gets, and always above the fence of every term seen before.
func (e *Elector) Leader(ctx context.Context) (Leader, error) {
	st, err := e.locker.Inspect(ctx, e.role)
	if err != nil {
		return Leader{}, fmt.Errorf("redlock: leader of %q: %w", e.role, err)
	}
	if err := ctx.Err(); err != nil {
		return Leader{}, fmt.Errorf("redlock: leader of %q: %w", e.role, err)
	}
	return leaderOf(st, e.locker.quorum)
}

// leaderOf reads a leader from a Status. The leader is the token held by a
// majority; its fence is the counter value that a majority of the nodes
// holding that token agree on. That value is unique (two majorities
// overlap), is the term's fencing token once the term is established, and
// exceeds the agreed fence of every earlier term: the counters of nodes that
// granted a later term only grew after the earlier term's lock left them.
func leaderOf(st *Status, quorum int) (Leader, error) {
	answered := 0
	for _, ns := range st.Nodes {
		if ns.Err == nil {
			answered++
		}
	}
	switch st.State {
	case Free:
		return Leader{}, fmt.Errorf("%w: %q is free on a majority of nodes", ErrNoLeader, st.Resource)
	case Unknown:
		var errs []error
		for _, ns := range st.Nodes {
			if ns.Err != nil {
				errs = append(errs, ns.Err)
			}
		}
		return Leader{}, fmt.Errorf("%w: %q: %d of %d nodes answered and no majority agrees on a holder%w",
			ErrLeaderUnknown, st.Resource, answered, len(st.Nodes), nodeErrors(errs))
	}
	var ttls []time.Duration
	fences := make(map[fencing.Token]int)
	for _, ns := range st.Nodes {
		if ns.Err == nil && ns.Info.Held && ns.Info.Token == st.Holder.Token {
			ttls = append(ttls, ns.Info.TTL)
			fences[ns.Info.Fence]++
		}
	}
	var fence fencing.Token
	for f, n := range fences {
		if n >= quorum && f > 0 {
			fence = f
		}
	}
	if fence == 0 {
		return Leader{}, fmt.Errorf("%w: %q: the %d nodes holding its lock do not agree on the term's fencing token",
			ErrLeaderUnknown, st.Resource, len(ttls))
	}
	// The term stands on a majority until the quorum-th longest TTL runs out.
	slices.SortFunc(ttls, func(a, b time.Duration) int { return cmp.Compare(b, a) })
	return Leader{Owner: st.Holder.Owner, Fence: fence, TTL: ttls[quorum-1]}, nil
}

// Observe follows the role's leadership: it sends the current leader at
// once, then every change of leader or term, until ctx ends; then it closes
// the channel and its goroutine stops. A Leader with Fence zero means that no
// leader is known (the role is free, or no majority agrees on a leader, as
// when Leader fails); terms are never reported unless a majority agrees.
//
// Observe polls Leader every LeaseDuration/4 (at least 1ms), so a term
// shorter than that can go unseen. Values arrive in the order seen, and
// every term reported has a higher fence than every other term reported
// before it. The same term is reported again after a "no leader" (say, a
// poll that too few nodes answered), or with a higher fence if it was first
// seen while it was being established. If the receiver falls behind, it gets
// the newest value, not a queue of stale ones. TTL is as of the poll that saw the change; polls
// that change only the TTL are not sent.
func (e *Elector) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	go func() {
		defer close(out)
		poll := func() Leader {
			ld, err := e.Leader(ctx)
			if err != nil {
				return Leader{}
			}
			return ld
		}
		t := time.NewTicker(e.interval)
		defer t.Stop()
		pending := poll()
		seen := pending // the latest value polled
		var sent Leader // the latest value received, once sentAny
		sentAny, hasPending := false, true
		for {
			var send chan<- Leader
			if hasPending {
				send = out
			}
			select {
			case <-ctx.Done():
				return
			case send <- pending:
				sent, sentAny, hasPending = pending, true, false
			case <-t.C:
				ld := poll()
				if ctx.Err() != nil {
					return
				}
				if ld.sameTerm(seen) {
					continue
				}
				seen = ld
				pending, hasPending = ld, !sentAny || !ld.sameTerm(sent)
			}
		}
	}()
	return out
}

// Leader is the leader of a role as a majority of nodes sees it.
type Leader struct {
	// Owner is the leader's owner label (its Locker's Config.Owner).
	Owner string
	// Fence is the term's fencing token; zero when there is no leader.
	Fence fencing.Token
	// TTL is how long the term stands on a majority of nodes if it is not
	// renewed, as measured by the nodes when they were asked.
	TTL time.Duration
}

// sameTerm reports whether a and b show the same leader and term.
func (a Leader) sameTerm(b Leader) bool { return a.Owner == b.Owner && a.Fence == b.Fence }

// Term is one term of leadership won by Campaign. It is a lease on the role,
// renewed automatically. A Term is safe for concurrent use.
type Term struct {
	lease *Lease
}

// Fence returns the term's fencing token: greater than that of every
// earlier term of the role. Every write the leader makes to a shared
// resource should carry it, and the resource should check it (package
// fencing), so that a leader paused past its term cannot write after its
// successor.
func (t *Term) Fence() fencing.Token { return t.lease.Fence() }

// Context returns a context that ends when the term ends: with cause
// ErrLeaseLost when renewal could not keep it (before the term can expire
// on the nodes), or ErrLeaseReleased after Resign or the Locker's Close.
func (t *Term) Context() context.Context { return t.lease.Context() }

// ValidUntil returns the instant, on this process's monotonic clock, until
// which the term is guaranteed to be held (see Lease.ValidUntil).
func (t *Term) ValidUntil() time.Time { return t.lease.ValidUntil() }

// Resign ends the term at once: it releases the role on the nodes, which
// wakes the waiting candidates, and ends Context with cause
// ErrLeaseReleased. It returns what Lease.Release returns: nil when a
// majority released it, an error wrapping ErrLeaseLost when the term had
// already been lost, one wrapping ErrNoQuorum when no majority could be
// reached (the term then expires by its TTL), and one wrapping
// ErrLeaseReleased when called again.
func (t *Term) Resign(ctx context.Context) error { return t.lease.Release(ctx) }
