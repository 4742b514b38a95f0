package chaos_test

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/e6344662/go-redlock/chaos"
)

// A nemesis injects one fault, holds it for a while, heals it and records
// it. It returns an error only when it could not heal (the run is then
// broken). Every fault is bounded in time.
type nemesis struct {
	name string
	run  func(ctx context.Context, e *env, rng *rand.Rand) error
}

// nemesis runs randomly chosen nemeses of the scenario one at a time, with
// random quiet gaps, until ctx ends. Scenarios without nemeses only sleep.
func (e *env) nemesis(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		sleep(ctx, time.Duration(100+rng.IntN(400))*time.Millisecond)
		if ctx.Err() != nil || len(e.sc.nemeses) == 0 {
			continue
		}
		n := e.sc.nemeses[rng.IntN(len(e.sc.nemeses))]
		if err := n.run(ctx, e, rng); err != nil {
			e.t.Errorf("nemesis %s: %v", n.name, err)
			return
		}
	}
}

// inject sends one fault command to node i, retrying a few times: on a
// busy machine the nemesis's own command can time out like any client's.
// A fault that could not be injected is counted and logged, not fatal: it
// is the harness that failed, and the run's checks stay valid without it.
// It reports whether the command was applied.
func (e *env) inject(ctx context.Context, kind string, i int, args ...any) bool {
	var err error
	for try := 0; try < 3 && ctx.Err() == nil; try++ {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		err = e.nodes.Server(i).Do(cctx, args...).Err()
		cancel()
		if err == nil {
			return true
		}
	}
	if ctx.Err() == nil {
		e.missed.Add(1)
		e.t.Logf("nemesis %s: not injected on node %d (harness, not a violation): %v", kind, i, err)
	}
	return false
}

// pick returns k distinct node indexes.
func pick(rng *rand.Rand, k int) []int {
	return rng.Perm(lockNodes)[:k]
}

// hold waits d, or less if the run ends; faults never outlive the run by
// more than their healing.
func hold(ctx context.Context, d time.Duration) { sleep(ctx, d) }

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// kill SIGKILLs nodes, waits, and restarts them (AOF reloaded).
func (e *env) kill(ctx context.Context, kind string, nodes []int, d time.Duration, majority bool) error {
	for _, i := range nodes {
		if err := e.nodes.Server(i).Kill(); err != nil {
			return err
		}
	}
	f := chaos.Fault{Kind: kind, Nodes: nodes, Start: e.h.Now(), MajorityDown: majority}
	hold(ctx, d)
	f.End = e.h.Now()
	e.h.AddFault(f)
	for _, i := range nodes {
		if err := e.nodes.Server(i).Restart(); err != nil {
			return err
		}
	}
	return nil
}

// pause SIGSTOPs nodes, waits, and resumes them.
func (e *env) pause(ctx context.Context, kind string, nodes []int, d time.Duration, majority bool) error {
	for _, i := range nodes {
		if err := e.nodes.Server(i).Pause(); err != nil {
			return err
		}
	}
	f := chaos.Fault{Kind: kind, Nodes: nodes, Start: e.h.Now(), MajorityDown: majority}
	hold(ctx, d)
	f.End = e.h.Now()
	e.h.AddFault(f)
	for _, i := range nodes {
		if err := e.nodes.Server(i).Resume(); err != nil {
			return err
		}
	}
	return nil
}

var (
	// killMinority crashes one or two of the five nodes for 0.2-1.5s.
	killMinority = nemesis{"kill-minority", func(ctx context.Context, e *env, rng *rand.Rand) error {
		return e.kill(ctx, "kill-minority", pick(rng, 1+rng.IntN(2)), between(rng, 200*time.Millisecond, 1500*time.Millisecond), false)
	}}
	// pauseShort freezes one or two nodes for less than half the shortest
	// lease: the nodes' replies arrive late, the locks on them stand.
	pauseShort = nemesis{"pause-short", func(ctx context.Context, e *env, rng *rand.Rand) error {
		return e.pause(ctx, "pause-short", pick(rng, 1+rng.IntN(2)), between(rng, 20*time.Millisecond, e.minLease()/2), false)
	}}
	// pauseLong freezes one or two nodes for 1.2-2.5 times the longest
	// lease: every lock on them expires while they are frozen.
	pauseLong = nemesis{"pause-long", func(ctx context.Context, e *env, rng *rand.Rand) error {
		return e.pause(ctx, "pause-long", pick(rng, 1+rng.IntN(2)), between(rng, e.maxLease()*6/5, e.maxLease()*5/2), false)
	}}
	// majorityDown kills or freezes three of the five nodes for 0.5-2s:
	// the lock must become unavailable, not unsafe.
	majorityDown = nemesis{"majority-down", func(ctx context.Context, e *env, rng *rand.Rand) error {
		nodes, d := pick(rng, 3), between(rng, 500*time.Millisecond, 2*time.Second)
		if rng.IntN(2) == 0 {
			return e.kill(ctx, "majority-killed", nodes, d, true)
		}
		return e.pause(ctx, "majority-paused", nodes, d, true)
	}}
	// scriptFlush empties the script cache of random nodes every 10-50ms
	// for 0.3-1s, so that EVALSHA keeps failing with NOSCRIPT.
	scriptFlush = nemesis{"script-flush", func(ctx context.Context, e *env, rng *rand.Rand) error {
		end := time.Now().Add(between(rng, 300*time.Millisecond, time.Second))
		for ctx.Err() == nil && time.Now().Before(end) {
			var nodes []int
			for _, i := range pick(rng, 1+rng.IntN(lockNodes)) {
				if e.inject(ctx, "script-flush", i, "SCRIPT", "FLUSH") {
					nodes = append(nodes, i)
				}
			}
			if len(nodes) > 0 {
				at := e.h.Now()
				e.h.AddFault(chaos.Fault{Kind: "script-flush", Nodes: nodes, Start: at, End: at})
			}
			sleep(ctx, between(rng, 10*time.Millisecond, 50*time.Millisecond))
		}
		return nil
	}}

	// restartEmpty (assumption broken on purpose) crashes one node and
	// restarts it at once without persistence: it comes back empty, with
	// no locks and its fence counters back at zero.
	restartEmpty = nemesis{"restart-empty", func(ctx context.Context, e *env, rng *rand.Rand) error {
		return e.kill(ctx, "restart-empty", pick(rng, 1), between(rng, 0, 50*time.Millisecond), false)
	}}
	// wipe (assumption broken on purpose) runs FLUSHALL on one random node
	// every 20-80ms for 0.5-1.5s: its locks and fence counters vanish, as
	// after restarts without persistence or failovers to empty replicas.
	wipe = nemesis{"wipe", func(ctx context.Context, e *env, rng *rand.Rand) error {
		end := time.Now().Add(between(rng, 500*time.Millisecond, 1500*time.Millisecond))
		for ctx.Err() == nil && time.Now().Before(end) {
			i := pick(rng, 1)[0]
			if e.inject(ctx, "wipe", i, "FLUSHALL") {
				at := e.h.Now()
				e.h.AddFault(chaos.Fault{Kind: "wipe", Nodes: []int{i}, Start: at, End: at})
			}
			sleep(ctx, between(rng, 20*time.Millisecond, 80*time.Millisecond))
		}
		return nil
	}}
)
