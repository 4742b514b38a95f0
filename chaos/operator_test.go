package chaos_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/e6344662/go-redlock/chaos"
	"github.com/e6344662/go-redlock/testutil"
)

// The operator nemesis (issue 30, Safety v4: docs/design.md §6.2): what an
// operator, or a monitoring tool, does to running lock nodes while leases
// are held. One action at a time, at random, each bounded in time:
//
//   - FLUSHALL or FLUSHDB on a minority or a majority of the nodes;
//   - SWAPDB of db 0 with db 1, 2 or 3, again and again, so that a db
//     swapped away often comes back (Safety v4.1, trust.lua T4: the marker
//     of the db that took its place deleted the one it carries);
//   - CONFIG RESETSTAT (nothing is lost: the rule must not care);
//   - a maxmemory-policy flip to volatile-lru with a maxmemory that
//     evicts, until the lock key is evicted, then back to noeviction and
//     no maxmemory;
//   - a restart with the AOF (the data kept, the replication id new), or
//     without its data (the AOF removed);
//   - CONFIG SET appendonly no, then yes again (the AOF rewritten).
//
// The losses that must make a majority sit out the rejoin delay (a flush,
// a swap, a restart of a majority) are recorded as a majority down for
// that delay from the action; an eviction makes the nodes refuse only
// until the evicted lease's end, which the overlap and token checks
// cover. The run passes with no violation of the lock's guarantees and no
// stale write accepted.

// operatorRun is the state of the operator nemesis in one run.
type operatorRun struct {
	// swapped counts the SWAPDBs so far.
	swapped atomic.Int64
}

// operatorStates holds each run's operatorRun, by env.
var operatorStates struct {
	sync.Mutex
	m map[*env]*operatorRun
}

// operatorState returns e's operatorRun.
func operatorState(e *env) *operatorRun {
	operatorStates.Lock()
	defer operatorStates.Unlock()
	if operatorStates.m == nil {
		operatorStates.m = map[*env]*operatorRun{}
	}
	st := operatorStates.m[e]
	if st == nil {
		st = &operatorRun{}
		operatorStates.m[e] = st
	}
	return st
}

var operatorActs = nemesis{"operator", func(ctx context.Context, e *env, rng *rand.Rand) error {
	st := operatorState(e)
	e.awaitHeld(ctx, 2*time.Second)
	switch rng.IntN(7) {
	case 0:
		k, kind := e.strikeSize(rng, "flush")
		cmd := []any{"FLUSHALL"}
		if rng.IntN(2) == 0 {
			cmd = []any{"FLUSHDB"}
		}
		start := e.h.Now()
		var nodes []int
		for _, i := range pick(rng, k) {
			if e.inject(ctx, kind, i, cmd...) {
				nodes = append(nodes, i)
			}
		}
		e.lost(kind, nodes, start, e.h.Now())
	case 1:
		st.swapped.Add(1)
		db := 1 + rng.IntN(3) // few dbs: a db swapped away often comes back
		k, kind := e.strikeSize(rng, "swapdb")
		start := e.h.Now()
		var nodes []int
		for _, i := range pick(rng, k) {
			if e.inject(ctx, kind, i, "SWAPDB", 0, db) {
				nodes = append(nodes, i)
			}
		}
		e.lost(kind, nodes, start, e.h.Now())
	case 2:
		start := e.h.Now()
		nodes := pick(rng, 1+rng.IntN(lockNodes))
		for _, i := range nodes {
			e.inject(ctx, "resetstat", i, "CONFIG", "RESETSTAT")
		}
		e.h.AddFault(chaos.Fault{Kind: "resetstat", Nodes: nodes, Start: start, End: e.h.Now()})
	case 3:
		start := e.h.Now()
		nodes := pick(rng, 1+rng.IntN(lockNodes/2+1))
		key := "redlock:{" + resource + "}"
		for _, i := range nodes {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			if _, err := testutil.EvictUntilGone(cctx, e.nodes[i], "volatile-lru", key); err != nil {
				e.missed.Add(1)
				e.t.Logf("nemesis evict-flip: node %d (harness, not a violation): %v", i, err)
			}
			cancel()
			if err := testutil.NoEviction(context.WithoutCancel(ctx), e.nodes[i]); err != nil {
				return err // the run is broken: the node may go on evicting
			}
		}
		e.h.AddFault(chaos.Fault{Kind: "evict-flip", Nodes: nodes, Start: start, End: e.h.Now()})
	case 4, 5:
		empty := rng.IntN(2) == 0
		kind := "restart-aof"
		if empty {
			kind = "restart-empty"
		}
		nodes := pick(rng, 1+rng.IntN(lockNodes/2+1))
		start := e.h.Now()
		for _, i := range nodes {
			var err error
			if empty {
				err = e.nodes[i].RestartEmpty()
			} else {
				err = e.nodes[i].Restart()
			}
			if err != nil {
				return err
			}
		}
		// A restarted node takes a new replication id: the marker it
		// kept (with the AOF) names another, so it sits out as after a
		// flush, from its first script after the restart.
		e.lost(kind, nodes, start, e.h.Now())
	case 6:
		i := rng.IntN(lockNodes)
		start := e.h.Now()
		e.inject(ctx, "appendonly-flip", i, "CONFIG", "SET", "appendonly", "no")
		hold(ctx, between(rng, 50*time.Millisecond, 300*time.Millisecond))
		e.inject(context.WithoutCancel(ctx), "appendonly-flip", i, "CONFIG", "SET", "appendonly", "yes")
		e.h.AddFault(chaos.Fault{Kind: "appendonly-flip", Nodes: []int{i}, Start: start, End: e.h.Now()})
	}
	hold(ctx, between(rng, e.rejoinDelay(), 2*e.rejoinDelay()))
	return nil
}}

// operatorName is the operator scenario's name, for its row in
// RELIABILITY.md.
const operatorName = "operator"

// operatorScenario is the operator scenario (listed in scenarios()).
func operatorScenario() scenario {
	return scenario{name: operatorName, nemeses: []nemesis{operatorActs}, holdProb: 0.15, minDuration: 10 * time.Second}
}
