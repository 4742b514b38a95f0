package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/scripts"
)

// MaxAcquireAll is the most resources AcquireAll and TryAcquireAll take
// at once.
const MaxAcquireAll = 256

// AcquireAll waits until it holds a lease on every resource, and returns
// them in the order given: all or none. Each lease is an ordinary mutex
// lease (its own token, fencing token, renewal and Release), the same
// lock Acquire takes on that resource. A resource named twice, none, or
// more than MaxAcquireAll is an error wrapping ErrInvalidResource.
//
// Each node grants every lock or none in one script call
// (docs/design.md §13), so k free resources cost one round trip per node,
// not k; on a Redis Cluster node whose keys fall in several hash slots,
// one call per slot, in slot order, each given back at the first refusal.
// Nobody holds part of a set while waiting for the rest: an attempt that
// does not win a majority gives back what it took and waits (a release
// announcement of any of the resources, the backoff, or a short random
// pause after a split vote), so callers asking for overlapping sets in any
// order cannot deadlock, and the random pauses end their contention.
// AcquireAll does not queue: it is refused while a fair Acquire waits for
// one of the resources, as TryAcquire is. When ctx ends the error wraps
// ctx.Err(), never ErrNotAcquired.
func (l *Locker) AcquireAll(ctx context.Context, resources ...string) (leases []*Lease, err error) {
	if err := checkResources(resources); err != nil {
		return nil, err
	}
	ctx, op := l.beginAcquire(ctx, "acquire", LockAll, allName(resources))
	defer l.endAcquire(ctx, &op, nil, &leases, &err)
	keys := make([]string, len(resources))
	for k, r := range resources {
		keys[k] = l.Key(r)
	}
	return l.acquire(ctx, &op, l.waitOn(op.resource, keys, 0), func(w attemptHooks) ([]*Lease, *outcome, error) {
		return l.attempt(ctx, l.requestAll(resources, false), w)
	})
}

// TryAcquireAll makes one attempt at every resource at once (see
// AcquireAll): it returns their leases in the order given, or an error
// wrapping ErrNotAcquired (an *AcquireError) when any is busy. A failed
// attempt leaves none of the resources held: it hears every node (within
// NodeCallTimeout, so a paused node makes a refusal that slow) and gives
// back what any granted before it returns; a node still silent then is
// released as soon as its call ends.
func (l *Locker) TryAcquireAll(ctx context.Context, resources ...string) (leases []*Lease, err error) {
	if err := checkResources(resources); err != nil {
		return nil, err
	}
	ctx, op := l.beginAcquire(ctx, "try_acquire", LockAll, allName(resources))
	defer l.endAcquire(ctx, &op, nil, &leases, &err)
	op.try()
	leases, _, err = l.tryOnce(ctx, op.resource, l.requestAll(resources, true))
	return leases, err
}

// allName names a set of resources in reports.
func allName(resources []string) string {
	if len(resources) == 1 {
		return resources[0]
	}
	return "{" + strings.Join(resources, ", ") + "}"
}

// checkResources rejects a set of resources AcquireAll will not take.
func checkResources(resources []string) error {
	switch {
	case len(resources) == 0:
		return fmt.Errorf("%w: no resources", ErrInvalidResource)
	case len(resources) > MaxAcquireAll:
		return fmt.Errorf("%w: %d resources, over the limit of %d", ErrInvalidResource, len(resources), MaxAcquireAll)
	}
	seen := make(map[string]bool, len(resources))
	for _, r := range resources {
		if err := checkResource(r); err != nil {
			return err
		}
		if seen[r] {
			return fmt.Errorf("%w: resource %q named twice", ErrInvalidResource, r)
		}
		seen[r] = true
	}
	return nil
}

// requestAll is one attempt at every resource (strict: see request).
func (l *Locker) requestAll(resources []string, strict bool) request {
	leases := make([]*Lease, len(resources))
	for k, r := range resources {
		leases[k] = newLease(l, r, newToken())
	}
	groups := slotGroups(leases)
	what := allName(resources)
	return request{resource: what, leases: leases, strict: strict, call: func(ctx context.Context, i int) (multiGrant, error) {
		return l.acquireAllOn(ctx, i, leases, groups)
	}}
}

// acquireAllOn asks node i for every lease's lock under the rejoin rule
// (grantOn): in one call, or, on a node that refused keys of several
// slots in one script (a Redis Cluster), one call per slot group.
func (l *Locker) acquireAllOn(ctx context.Context, i int, leases []*Lease, groups [][]int) (multiGrant, error) {
	return grantOn(l, ctx, i, func(gate grantGate) (multiGrant, bool, error) {
		split := len(groups) > 1 && (gate.sharded || l.slotted[i].Load())
		g, err := l.acquireGroups(ctx, i, leases, groups, split, gate)
		if err != nil && !split && len(groups) > 1 && strings.Contains(err.Error(), "CROSSSLOT") {
			// Nothing was written: the server refused the call before
			// running it.
			l.slotted[i].Store(true)
			g, err = l.acquireGroups(ctx, i, leases, groups, true, gate)
		}
		return g, g.ok, err
	}, func(why string, left time.Duration) multiGrant {
		return multiGrant{reason: why, holderTTL: left}
	}, func() error {
		return releaseHere(ctx, l.nodes[i], leases)
	})
}

// acquireGroups runs the acquire_all script on node i: once for every
// lease, or (split) once per slot group in order, giving back the groups
// already granted at the first refusal. A group that sits out after a
// loss of data (its slot's marker) does not keep the groups after it
// from being asked: they are asked at once, in one round, so that every
// slot's marker notices a loss now and every sit-out ends about together,
// one RejoinDelay after the loss and not one per slot (Safety v4, rule 6);
// what they grant is given back with the rest. A group refused because a
// lock is held stops the call, as before: taking the later groups' locks
// only to give them back would stand in the way of the holder's own
// AcquireAll.
func (l *Locker) acquireGroups(ctx context.Context, i int, leases []*Lease, groups [][]int, split bool, gate grantGate) (multiGrant, error) {
	if !split {
		groups = [][]int{allPositions(len(leases))}
	}
	out := multiGrant{ok: true, counters: make([]fencing.Token, len(leases))}
	for gi, group := range groups {
		g, err := acquireAllCall(ctx, l.nodes[i], l, leases, group, gate)
		if err == nil && g.ok {
			out.merge(g, group)
			continue
		}
		if rerr := l.giveBack(ctx, i, leases, groups, gi, g, err, gate); rerr != nil {
			return multiGrant{}, errors.Join(err, fmt.Errorf("giving back the slots granted first failed: %w", rerr))
		}
		return g, err
	}
	return out, nil
}

// allPositions is the group of every lease: positions 0 to n-1.
func allPositions(n int) []int {
	group := make([]int, n)
	for k := range group {
		group[k] = k
	}
	return group
}

// merge adds a group's grant to the node's: its counters at the group's
// positions, and the shortest TTL left of a lock granted over a remainder.
func (m *multiGrant) merge(g multiGrant, group []int) {
	for k, p := range group {
		m.counters[p] = g.counters[k]
	}
	if g.left > 0 && (m.left == 0 || g.left < m.left) {
		m.left = g.left
	}
}

// giveBack ends a split call at group gi, which was refused (g) or
// failed (err): it releases on node i the groups granted before it and,
// when gi sat out after a loss of data, asks the groups after it (askRest)
// and releases what they granted. It returns the release's failure.
func (l *Locker) giveBack(ctx context.Context, i int, leases []*Lease, groups [][]int, gi int, g multiGrant, err error, gate grantGate) error {
	var held []*Lease
	for _, prev := range groups[:gi] {
		for _, p := range prev {
			held = append(held, leases[p])
		}
	}
	if err == nil && rejoiningRefusal(g.reason) {
		held = append(held, l.askRest(ctx, i, leases, groups[gi+1:], gate)...)
	}
	if len(held) == 0 {
		return nil
	}
	return releaseHere(ctx, l.nodes[i], held)
}

// askRest asks node i for the given slot groups at once (their calls go
// out together), after an earlier group sat out, only so that each slot's
// marker notices a loss in this round. It returns the leases that a group
// granted, or may have (its call failed), to be given back.
func (l *Locker) askRest(ctx context.Context, i int, leases []*Lease, groups [][]int, gate grantGate) []*Lease {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var back []*Lease
	for _, group := range groups {
		wg.Go(func() {
			g, err := acquireAllCall(ctx, l.nodes[i], l, leases, group, gate)
			if err != nil || g.ok {
				mu.Lock()
				for _, p := range group {
					back = append(back, leases[p])
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return back
}

// acquireAllCall runs the acquire_all script once, for the leases at the
// given positions, and decodes its reply into counters by that order.
func acquireAllCall(ctx context.Context, n Node, l *Locker, leases []*Lease, group []int, gate grantGate) (multiGrant, error) {
	keys := make([]string, 0, 4*len(group)+1)
	args := make([]any, 0, 4+len(group)+len(gate.trust))
	fm, fv := floorArgs(gate.floor)
	args = append(args, l.cfg.Owner, nodeTTL(l.cfg.LeaseDuration), fm, fv)
	for _, p := range group {
		keys = append(keys, leases[p].keys[:4]...)
		args = append(args, leases[p].token)
	}
	// The group's keys share a slot (or the node is not sharded): one
	// marker serves them all.
	if m := gate.marker(leases[group[0]].key); m != "" {
		keys = append(keys, m)
		args = append(args, gate.trust...)
	}
	reply, err := n.Eval(ctx, scripts.AcquireAll, keys, args...)
	if err != nil {
		return multiGrant{}, scriptErr(err, "")
	}
	return parseAllGrant(reply, leases, group)
}

// parseAllGrant decodes acquire_all's reply (parseVote, one pair per lock
// of the group): its refusals are "held" (the lock-th lock of the group is
// held) and "behind" (a waiter is next for it), the reason naming its
// resource.
func parseAllGrant(reply any, leases []*Lease, group []int) (multiGrant, error) {
	return parseVote(reply, len(group), "acquire_all", func(r voteReply) (string, bool) {
		if r.lock < 1 || r.lock > int64(len(group)) || r.readers != 0 {
			return "", false
		}
		res := leases[group[r.lock-1]].resource
		switch r.verdict {
		case verdictHeld:
			return fmt.Sprintf("%q is held", res), true
		case verdictBehind:
			return fmt.Sprintf("%q: %s", res, queuedReason), r.ms == 0
		}
		return "", false
	})
}

// releaseHere deletes the given leases' locks on one node, where their
// tokens hold them, announcing nothing; the errors, if any. The calls go
// out at once (the node's transport sends them together).
func releaseHere(ctx context.Context, n Node, leases []*Lease) error {
	errs := make([]error, len(leases))
	var wg sync.WaitGroup
	for k, ls := range leases {
		wg.Go(func() {
			_, errs[k] = release(ctx, n, releaseArgs{keys: ls.keys, token: ls.token})
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// slotGroups groups the leases' positions by the Redis Cluster hash slot
// of their keys, the groups in slot order (a canonical order every caller
// shares) and positions in each in the order given.
func slotGroups(leases []*Lease) [][]int {
	bySlot := map[int][]int{}
	var slots []int
	for p, ls := range leases {
		s := keySlot(ls.key)
		if _, ok := bySlot[s]; !ok {
			slots = append(slots, s)
		}
		bySlot[s] = append(bySlot[s], p)
	}
	slices.Sort(slots)
	groups := make([][]int, len(slots))
	for k, s := range slots {
		groups[k] = bySlot[s]
	}
	return groups
}
