package redlock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// MaxSlots is the largest semaphore limit NewSemaphore accepts.
const MaxSlots = 1024

// Semaphore lets at most K holders use a resource at once, over the same
// independent nodes as the Locker's mutexes. It is K locks, its slots
// (resources "R#0" … "R#K-1"), each a Redlock with its own lease and
// fencing token: a holder holds one slot, so at most K leases are valid at
// once whatever the nodes' faults. (Counting holders on each node would not
// be safe under majority quorums: with 3 nodes and a limit of 2, holders
// granted by {1,2}, {1,3} and {2,3} fit every node's count and make 3.) A
// slot's lease renews and ends like any lease; a holder that dies frees its
// slot when its TTL expires. A Semaphore is safe for concurrent use.
//
// Waiting is fair when the Locker's wait queue is on (Config.QueueTTL):
// callers pass one at a time through the semaphore's gate, a lock on
// "R#gate" taken with Locker.Acquire, so they get slots in the order they
// queued at the gate, across processes. The gate is held only while its
// holder takes a slot (or waits for one); it costs two round trips per
// acquisition. TryAcquire does not take the gate; it checks that no one
// waits there.
type Semaphore struct {
	l        *Locker
	resource string
	slots    []string
	gate     string // "" when the Locker does not queue
}

// NewSemaphore returns the semaphore of limit k on resource. Every process
// must use the same k for the same resource. k outside [1, MaxSlots], or a
// resource name whose slot names the Locker would refuse, is an error
// wrapping ErrInvalidConfig or ErrInvalidResource.
func (l *Locker) NewSemaphore(resource string, k int) (*Semaphore, error) {
	if k < 1 || k > MaxSlots {
		return nil, fmt.Errorf("%w: semaphore limit %d is outside [1, %d]", ErrInvalidConfig, k, MaxSlots)
	}
	if err := checkResource(resource); err != nil {
		return nil, err
	}
	s := &Semaphore{l: l, resource: resource, slots: make([]string, k)}
	for i := range s.slots {
		s.slots[i] = SlotResource(resource, i)
		if err := checkResource(s.slots[i]); err != nil {
			return nil, err
		}
	}
	if l.fair {
		s.gate = resource + "#gate"
		if err := checkResource(s.gate); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// pass waits for the semaphore's gate in its fair queue and returns the
// function that gives it back; without a gate it does nothing.
func (s *Semaphore) pass(ctx context.Context) (func(), error) {
	if s.gate == "" {
		return func() {}, nil
	}
	g, err := s.l.Acquire(ctx, s.gate)
	if err != nil {
		return nil, fmt.Errorf("redlock: semaphore %q: waiting at its gate: %w", s.resource, err)
	}
	return func() { _ = g.Release(context.WithoutCancel(ctx)) }, nil
}

// gateClear reports, as an error wrapping ErrNotAcquired, that callers are
// waiting at the semaphore's gate (its lock held, or places in its queue on
// a node that answered); nil when none are, or when the nodes cannot tell
// (the slots' own attempts then report it).
func (s *Semaphore) gateClear(ctx context.Context) error {
	if s.gate == "" {
		return nil
	}
	st, err := s.l.Inspect(ctx, s.gate)
	if err != nil {
		return err
	}
	waiting := 0
	for _, n := range st.Nodes {
		if n.Err == nil {
			waiting = max(waiting, n.Info.Waiters)
		}
	}
	if st.State != Held && waiting == 0 {
		return nil
	}
	if st.State == Held {
		waiting++
	}
	return fmt.Errorf("redlock: semaphore %q: %d callers wait for a slot: %w", s.resource, waiting,
		&AcquireError{Resource: s.gate, Needed: s.l.quorum, Total: len(s.l.nodes), Reason: "callers wait at the semaphore's gate", kind: ErrNotAcquired})
}

// SlotResource is the resource name of slot i of the semaphore on
// resource: the lock that a holder of that slot holds.
func SlotResource(resource string, i int) string { return resource + "#" + strconv.Itoa(i) }

// Slots returns the resource names of the slots, in order.
func (s *Semaphore) Slots() []string { return append([]string(nil), s.slots...) }

// TryAcquire makes one attempt at each slot, in random order, and returns
// the lease of the first it gets. When none is granted it returns an error
// wrapping the last slot's *AcquireError (ErrNotAcquired when the slots are
// taken, ErrNoQuorum when nodes failed), whose HolderTTL is the shortest
// holder TTL seen. It does not pass callers waiting in Acquire: while
// any wait at the gate it is refused (ErrNotAcquired) without trying the
// slots, which costs one round trip to the nodes before the slots.
func (s *Semaphore) TryAcquire(ctx context.Context) (lease *Lease, err error) {
	ctx, op := s.l.beginAcquire(ctx, "try_acquire", LockSemaphore, s.resource)
	defer s.l.endAcquire(ctx, &op, &lease, nil, &err)
	op.try()
	if err := s.gateClear(ctx); err != nil {
		return nil, err
	}
	return s.trySlots(ctx)
}

// trySlots is TryAcquire past the gate.
func (s *Semaphore) trySlots(ctx context.Context) (*Lease, error) {
	start := time.Now()
	leases, _, err := s.attemptSlots(ctx, noWait{})
	if err != nil {
		return nil, err
	}
	s.l.emitCtx(ctx, Event{Kind: EventAcquired, Resource: leases[0].resource, Granted: len(leases[0].granted), Total: len(s.l.nodes), Attempts: 1, Latency: time.Since(start)})
	return leases[0], nil
}

// attemptSlots makes one attempt at each slot, in random order, under w's
// hooks, until one is granted. When none is, its outcome is the last
// slot's, with the shortest holder TTL seen, and its error wraps that
// slot's *AcquireError.
func (s *Semaphore) attemptSlots(ctx context.Context, w attemptHooks) ([]*Lease, *outcome, error) {
	l := s.l
	var last *outcome
	shortest := time.Duration(0)
	for _, i := range rand.Perm(len(s.slots)) {
		leases, o, err := l.attempt(ctx, l.mutexRequest(s.slots[i], w), w)
		if err == nil {
			return leases, nil, nil
		}
		if o == nil || o.err.permanent {
			return nil, o, err // closed, cancelled, or nodes that cannot grant
		}
		if ttl := o.err.HolderTTL; ttl > 0 && (shortest == 0 || ttl < shortest) {
			shortest = ttl
		}
		last = o
	}
	if shortest > 0 {
		last.err.HolderTTL = shortest
	}
	return nil, last, fmt.Errorf("redlock: semaphore %q: no slot of %d acquired: %w", s.resource, len(s.slots), &last.err)
}

// Acquire waits for a free slot and returns its lease, or an error when
// ctx ends (wrapping ctx.Err(), never ErrNotAcquired) or the nodes cannot
// grant at all. Callers wait their turn at the gate in arrival order (see
// Semaphore); the one at the gate is woken by the release of any slot
// (announced by a majority of nodes), and otherwise retries after the
// Locker's backoff (a random short pause after a split vote), never later
// than the shortest holder TTL seen.
func (s *Semaphore) Acquire(ctx context.Context) (lease *Lease, err error) {
	ctx, op := s.l.beginAcquire(ctx, "acquire", LockSemaphore, s.resource)
	defer s.l.endAcquire(ctx, &op, &lease, nil, &err)
	done, err := s.pass(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	keys := make([]string, len(s.slots))
	for i, slot := range s.slots {
		keys[i] = s.l.Key(slot)
	}
	leases, err := s.l.acquire(ctx, &op, s.l.waitOn(s.resource, keys, 0), func(w attemptHooks) ([]*Lease, *outcome, error) {
		return s.attemptSlots(ctx, w)
	})
	if err != nil {
		return nil, err
	}
	return leases[0], nil
}

// Inspect reads every slot (Locker.Inspect): which are held, and by whom.
func (s *Semaphore) Inspect(ctx context.Context) ([]*Status, error) {
	out := make([]*Status, len(s.slots))
	for i, slot := range s.slots {
		st, err := s.l.Inspect(ctx, slot)
		if err != nil {
			return nil, err
		}
		out[i] = st
	}
	return out, nil
}
