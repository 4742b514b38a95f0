package chaos_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/e6344662/go-redlock/chaos"
	"github.com/e6344662/go-redlock/testutil"
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
		err = e.nodes[i].Do(cctx, args...).Err()
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

// kill SIGKILLs nodes, waits, and restarts them (AOF reloaded), one after
// the other. It returns when the first restart began: the earliest a
// restarted node can answer, and so notice its loss.
func (e *env) kill(ctx context.Context, kind string, nodes []int, d time.Duration, majority bool) (restarting time.Duration, err error) {
	for _, i := range nodes {
		if err := e.nodes[i].Kill(); err != nil {
			return 0, err
		}
	}
	f := chaos.Fault{Kind: kind, Nodes: nodes, Start: e.h.Now(), MajorityDown: majority}
	hold(ctx, d)
	f.End = e.h.Now()
	e.h.AddFault(f)
	for _, i := range nodes {
		if err := e.nodes[i].Restart(); err != nil {
			return f.End, err
		}
	}
	return f.End, nil
}

// pause SIGSTOPs nodes, waits, and resumes them.
func (e *env) pause(ctx context.Context, kind string, nodes []int, d time.Duration, majority bool) error {
	for _, i := range nodes {
		if err := e.nodes[i].Pause(); err != nil {
			return err
		}
	}
	f := chaos.Fault{Kind: kind, Nodes: nodes, Start: e.h.Now(), MajorityDown: majority}
	hold(ctx, d)
	f.End = e.h.Now()
	e.h.AddFault(f)
	for _, i := range nodes {
		if err := e.nodes[i].Resume(); err != nil {
			return err
		}
	}
	return nil
}

var (
	// killMinority crashes one or two of the five nodes for 0.2-1.5s.
	killMinority = nemesis{"kill-minority", func(ctx context.Context, e *env, rng *rand.Rand) error {
		_, err := e.kill(ctx, "kill-minority", pick(rng, 1+rng.IntN(2)), between(rng, 200*time.Millisecond, 1500*time.Millisecond), false)
		return err
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
			restarting, err := e.kill(ctx, "majority-killed", nodes, d, true)
			if err != nil {
				return err
			}
			// Safety v4: every restart takes a new replication id, so the
			// restarted majority sits out the rejoin delay (checked as an
			// outage), and the clients get one to two delays of work. The
			// nodes restart one after the other, each sitting out from
			// when a call first reached it: the outage is checked from
			// the first restart (a slow machine takes a while over each;
			// from the last one, the first node's sit-out, ended by then,
			// read as a grant during the outage).
			e.lost("majority-restarted", nodes, restarting, e.h.Now())
			hold(ctx, between(rng, e.rejoinDelay(), 2*e.rejoinDelay()))
			return nil
		}
		return e.pause(ctx, "majority-paused", nodes, d, true)
	}}
	// scriptFlush empties the script cache and the function libraries of
	// random nodes every 10-50ms for 0.3-1s, so that FCALL keeps failing
	// with "Function not found" and EVALSHA with NOSCRIPT.
	scriptFlush = nemesis{"script-flush", func(ctx context.Context, e *env, rng *rand.Rand) error {
		end := time.Now().Add(between(rng, 300*time.Millisecond, time.Second))
		for ctx.Err() == nil && time.Now().Before(end) {
			var nodes []int
			for _, i := range pick(rng, 1+rng.IntN(lockNodes)) {
				if e.inject(ctx, "script-flush", i, "SCRIPT", "FLUSH") && e.inject(ctx, "script-flush", i, "FUNCTION", "FLUSH") {
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

	// restartEmpty crashes nodes without persistence one at a time, in
	// bursts of 0.5-1.5s: one random node is killed and restarted at once
	// (it comes back empty, with no locks and no fence counters), then the
	// next one 50-200ms later. A lease held through a burst can lose its
	// key on a majority of nodes; only the Lockers' RejoinDelay, which
	// keeps a restarted node out of every quorum until the locks it forgot
	// have expired, keeps a second holder out. After a burst the nodes get
	// one to two rejoin delays to come back, so that leases are granted
	// again before the next one.
	restartEmpty = nemesis{"restart-empty", func(ctx context.Context, e *env, rng *rand.Rand) error {
		end := time.Now().Add(between(rng, 500*time.Millisecond, 1500*time.Millisecond))
		for ctx.Err() == nil && time.Now().Before(end) {
			if _, err := e.kill(ctx, "restart-empty", pick(rng, 1), between(rng, 0, 20*time.Millisecond), false); err != nil {
				return err
			}
			sleep(ctx, between(rng, 50*time.Millisecond, 200*time.Millisecond))
		}
		hold(ctx, between(rng, e.rejoinDelay(), 2*e.rejoinDelay()))
		return nil
	}}
	// wipe runs FLUSHALL on a minority (one or two nodes; odd rounds) or a
	// majority (three or four; even rounds) of the running nodes, at once,
	// once a client holds the lock: their locks, fence counters and
	// markers vanish while they keep running, as after a failover to an
	// empty replica. Each wiped node must notice the loss in band (its
	// marker is gone, INFO shows a FLUSHALL) and grant nothing for the
	// rejoin delay: after a majority wipe, no lease may be granted within
	// that delay (recorded as a majority down). Then the nodes get one to
	// two rejoin delays to come back.
	wipe = nemesis{"wipe", func(ctx context.Context, e *env, rng *rand.Rand) error {
		k, kind := e.strikeSize(rng, "wipe")
		e.awaitHeld(ctx, 2*time.Second)
		var nodes []int
		start := e.h.Now()
		for _, i := range pick(rng, k) {
			if e.inject(ctx, kind, i, "FLUSHALL") {
				nodes = append(nodes, i)
			}
		}
		e.lost(kind, nodes, start, e.h.Now())
		hold(ctx, between(rng, e.rejoinDelay(), 2*e.rejoinDelay()))
		return nil
	}}
	// evict makes one or two (odd rounds), or three (even rounds), nodes
	// of the eviction scenario evict every key with a TTL, once a client
	// holds the lock: maxmemory is lowered to one byte, a write makes the
	// server evict (volatile-lru: our lock keys, fence counters and
	// semaphore keys, never the marker, which has no TTL) and is then
	// refused, and maxmemory is restored. Nodes whose evicted_keys did
	// not grow lost nothing and are not counted. Each node that evicted a
	// live lease's lock key refuses it until that lease's end.
	evict = nemesis{"evict", func(ctx context.Context, e *env, rng *rand.Rand) error {
		k, kind := e.strikeSize(rng, "evict")
		if k > lockNodes/2 {
			k = lockNodes/2 + 1
		}
		e.awaitHeld(ctx, 2*time.Second)
		var nodes []int
		start := e.h.Now()
		for _, i := range pick(rng, k) {
			ok, err := e.evictAll(ctx, i)
			if err != nil {
				return err
			}
			if ok {
				nodes = append(nodes, i)
			}
		}
		// Safety v4: an eviction takes lock keys, never a live lease's
		// record (its counter has no TTL then), so the nodes refuse the
		// lost lock until that lease's end, not for the rejoin delay: no
		// majority outage is recorded; the overlap and token checks cover
		// it.
		if len(nodes) > 0 {
			e.h.AddFault(chaos.Fault{Kind: kind, Nodes: nodes, Start: start, End: e.h.Now()})
		}
		hold(ctx, between(rng, e.rejoinDelay(), 2*e.rejoinDelay()))
		return nil
	}}
)

// strikeSize returns how many nodes a wipe or an eviction round hits, and
// the fault's kind: a minority (one or two) in odd rounds, a majority
// (three or four) in even ones, so that every run has both.
func (e *env) strikeSize(rng *rand.Rand, what string) (int, string) {
	if e.strikes.Add(1)%2 == 1 {
		return 1 + rng.IntN(2), what + "-minority"
	}
	return lockNodes/2 + 1 + rng.IntN(2), what + "-majority"
}

// awaitHeld waits until a client holds the lock, at most d (a busy
// machine may grant nothing for a while; the fault then strikes anyway).
func (e *env) awaitHeld(ctx context.Context, d time.Duration) {
	end := time.Now().Add(d)
	for e.holding.Load() == 0 && ctx.Err() == nil && time.Now().Before(end) {
		sleep(ctx, 5*time.Millisecond)
	}
}

// lost records nodes' loss of data, which happened between first (the
// first fault command) and last (when every node had lost it). When they
// are a majority, no lease may be granted from last until the rejoin
// delay after first, less a margin: every majority then includes a node
// that noticed the loss at or after first and sits out for the delay
// (counted on the node's clock, the machine's). The checker counts such a
// grant as a grant while a majority was down.
func (e *env) lost(kind string, nodes []int, first, last time.Duration) {
	if len(nodes) == 0 {
		return
	}
	f := chaos.Fault{Kind: kind, Nodes: nodes, Start: last, End: last}
	if len(nodes) > lockNodes/2 && e.clientRejoinDelay() > 0 {
		f.MajorityDown = true
		f.End = max(last, first+e.clientRejoinDelay()-sitOutMargin)
	}
	e.h.AddFault(f)
}

// sitOutMargin is taken off the time a node must sit out after a loss
// when checking that nothing was granted meanwhile: the node's TIME and
// this process's monotonic clock may disagree by a little.
const sitOutMargin = 50 * time.Millisecond

// evictAll makes node i evict every key with a TTL (evict) and reports
// whether it evicted any. An error means maxmemory could not be restored:
// the run is then broken.
func (e *env) evictAll(ctx context.Context, i int) (bool, error) {
	before, err := e.evictedKeys(ctx, i)
	if err != nil {
		e.missed.Add(1)
		e.t.Logf("nemesis evict: not injected on node %d (harness, not a violation): %v", i, err)
		return false, nil
	}
	if !e.inject(ctx, "evict", i, "CONFIG", "SET", "maxmemory", "1") {
		return false, nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	_ = e.nodes[i].Do(cctx, "SET", "chaos-filler", "x").Err() // evicts, then is refused (OOM)
	cancel()
	if !e.inject(context.WithoutCancel(ctx), "evict", i, "CONFIG", "SET", "maxmemory", evictingMaxMemory) {
		return false, errors.New("maxmemory of node " + strconv.Itoa(i) + " not restored")
	}
	after, err := e.evictedKeys(ctx, i)
	if err != nil {
		e.t.Logf("nemesis evict: evicted_keys of node %d unknown (counted as evicted): %v", i, err)
		return true, nil
	}
	return after > before, nil
}

// evictedKeys reads node i's evicted_keys (INFO stats).
func (e *env) evictedKeys(ctx context.Context, i int) (int64, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	info, err := e.nodes[i].Do(cctx, "INFO", "stats").Text()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "evicted_keys:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("INFO stats has no evicted_keys")
}

// failoverLagging fails the failover scenario's Sentinel groups over to
// replicas that missed the latest lock writes, once per run: after a
// second of normal work, every group's replica is stopped (SIGSTOP:
// replication stalls), and once a lease has been granted since (its keys
// are on the primaries only) and is being held on purpose (for 0.5-1.5
// times its duration), the primaries are killed and
// the replicas resumed; the sentinels then promote them. A promoted
// replica's marker names the old primary and INFO shows a promotion: it
// must sit out for the rejoin delay. With a majority of groups, no lease
// may be granted from the kill until the delay has passed (recorded as a
// majority down). Later calls do nothing.
var failoverLagging = nemesis{"failover-lagging", func(ctx context.Context, e *env, rng *rand.Rand) error {
	if !e.failedOver.CompareAndSwap(false, true) {
		hold(ctx, time.Second)
		return nil
	}
	hold(ctx, time.Second)
	type group struct {
		j                int
		primary, replica *testutil.RedisServer
		offset           int64
	}
	var groups []group
	for j, g := range e.groups {
		if g == nil {
			continue
		}
		p := g.Primary()
		if p == nil {
			return errors.New("no sentinel of node " + strconv.Itoa(j) + " names its primary")
		}
		r := g.Servers()[0]
		if r == p {
			r = g.Servers()[1]
		}
		groups = append(groups, group{j: j, primary: p, replica: r, offset: replOffset(ctx, r)})
	}
	for _, g := range groups {
		if err := g.replica.Pause(); err != nil {
			return err
		}
	}
	// Wait until a client holds on purpose a lease granted since the stall
	// (its keys are on the primaries only), at most 6s.
	paused := e.h.Now()
	end := time.Now().Add(6 * time.Second)
	for !e.holdsLongSince(paused) && ctx.Err() == nil && time.Now().Before(end) {
		sleep(ctx, 5*time.Millisecond)
	}
	var nodes, missed []int
	for _, g := range groups {
		nodes = append(nodes, g.j)
		if replOffset(ctx, g.primary) > g.offset {
			missed = append(missed, g.j)
		}
		if err := g.primary.Kill(); err != nil {
			return err
		}
	}
	killed := e.h.Now()
	for _, g := range groups {
		if err := g.replica.Resume(); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, g := range groups {
		for e.groups[g.j].Primary() != g.replica {
			if time.Now().After(deadline) {
				return errors.New("the sentinels did not promote the replica of node " + strconv.Itoa(g.j) + " within 30s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	e.t.Logf("nemesis failover-lagging: primaries of nodes %v killed at %v; the replicas of %v had missed writes; all promoted by %v",
		nodes, killed, missed, e.h.Now())
	// Until a promoted replica grants, fewer than a majority can: from the
	// kill until the rejoin delay has passed (a replica is promoted after
	// the kill, notices the loss after that, and sits out the delay).
	f := chaos.Fault{Kind: "failover-lagging", Nodes: nodes, Start: killed, End: killed}
	if len(missed) <= lockNodes/2 {
		f.Kind = "failover" // a majority lost nothing: not the fault the scenario is for
	}
	if d := e.clientRejoinDelay(); d > 0 && len(nodes) > lockNodes/2 {
		f.MajorityDown, f.End = true, killed+d-sitOutMargin
	}
	e.h.AddFault(f)
	return nil
}}

// holdsLongSince reports whether a client holds on purpose a lease granted
// after since.
func (e *env) holdsLongSince(since time.Duration) bool {
	for i := range e.holdingLong {
		if at := time.Duration(e.holdingLong[i].Load()); at > since {
			return true
		}
	}
	return false
}

// replOffset reads a server's master_repl_offset (INFO replication): how
// much of the primary's stream it has, or -1 if it cannot tell.
func replOffset(ctx context.Context, s *testutil.RedisServer) int64 {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	info, err := s.Do(cctx, "INFO", "replication").Text()
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "master_repl_offset:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

var (
	// partition cuts one to three clients, each from its own one to three
	// nodes (three: a majority, so that client can neither acquire nor
	// renew), for 0.3s to twice the longest lease plus 0.5s. Two times in
	// three the cut drops both directions, else only the nodes' replies:
	// the nodes still act on that client's commands.
	partition = nemesis{"partition", func(ctx context.Context, e *env, rng *rand.Rand) error {
		strict := rng.IntN(3) != 0
		kind := "partition"
		if !strict {
			kind = "partition-one-way"
		}
		if err := e.net.setStrictAll(strict); err != nil {
			return err
		}
		type cut struct {
			client int
			nodes  []int
		}
		var cuts []cut
		for _, c := range rng.Perm(clients)[:1+rng.IntN(3)] {
			cuts = append(cuts, cut{c, pick(rng, 1+rng.IntN(3))})
		}
		var err error
		for _, c := range cuts {
			for _, j := range c.nodes {
				err = errors.Join(err, e.net.Cut(c.client, j))
			}
		}
		start := e.h.Now()
		if err == nil {
			hold(ctx, between(rng, 300*time.Millisecond, 2*e.maxLease()+500*time.Millisecond))
		}
		end := e.h.Now()
		for _, c := range cuts {
			e.h.AddFault(chaos.Fault{Kind: kind, Nodes: c.nodes, Clients: []int{c.client}, Start: start, End: end,
				MajorityDown: len(c.nodes) > lockNodes/2})
			for _, j := range c.nodes {
				if herr := e.net.Heal(c.client, j); herr != nil && !strings.Contains(herr.Error(), "No such process") {
					err = errors.Join(err, herr)
				}
			}
		}
		return err
	}}

	// latency delays every byte between the clients and one to five nodes
	// by 1-60ms each way, plus up to half as much jitter, for 0.5-2s: the
	// longest round trips outlast the shortest leases' node call timeout.
	latency = nemesis{"latency", func(ctx context.Context, e *env, rng *rand.Rand) error {
		d := between(rng, time.Millisecond, 60*time.Millisecond)
		return e.degrade(ctx, "latency", pick(rng, 1+rng.IntN(lockNodes)), proxyFaults{delay: d, jitter: d / 2},
			between(rng, 500*time.Millisecond, 2*time.Second))
	}}
	// loss makes one to three nodes' connections lose 5-30% of their
	// segments (each loss stalls the stream for a 200-600ms
	// retransmission) and resets 1-5% of them at a chunk, for 0.5-2s.
	loss = nemesis{"loss", func(ctx context.Context, e *env, rng *rand.Rand) error {
		f := proxyFaults{
			loss: 0.05 + 0.25*rng.Float64(), stallMin: 200 * time.Millisecond, stallMax: 600 * time.Millisecond,
			drop: 0.01 + 0.04*rng.Float64(),
		}
		return e.degrade(ctx, "loss", pick(rng, 1+rng.IntN(3)), f, between(rng, 500*time.Millisecond, 2*time.Second))
	}}

	// clockJump steps the clocks of one, two or three nodes (half, a
	// quarter, a quarter of the time) forward by 1.2-3 times the longest
	// lease, at once: every lock on them expires. Three is a majority.
	clockJump = nemesis{"clock-jump", func(ctx context.Context, e *env, rng *rand.Rand) error {
		nodes := pick(rng, clockVictims(rng))
		d := between(rng, e.maxLease()*6/5, 3*e.maxLease())
		for _, j := range nodes {
			want, err := e.clocks[j].jump(d)
			if err != nil {
				return err
			}
			e.checkClock(ctx, j, want)
		}
		at := e.h.Now()
		e.h.AddFault(chaos.Fault{Kind: "clock-jump", Nodes: nodes, Start: at, End: at})
		return nil
	}}
	// clockFast restarts one, two or three nodes with clocks running 2-5
	// times too fast for 1-3s: their locks expire that much early.
	clockFast = nemesis{"clock-fast", func(ctx context.Context, e *env, rng *rand.Rand) error {
		nodes := pick(rng, clockVictims(rng))
		rate := 2 + rng.IntN(4)
		var ends []func() error
		var err error
		for _, j := range nodes {
			end, ferr := e.clocks[j].fast(e.nodes[j], rate)
			if ferr != nil {
				err = ferr
				break
			}
			ends = append(ends, end)
		}
		f := chaos.Fault{Kind: "clock-fast", Nodes: nodes, Start: e.h.Now()}
		if err == nil {
			d := between(rng, time.Second, 3*time.Second)
			e.checkRate(ctx, nodes[0], rate, d)
		}
		f.End = e.h.Now()
		e.h.AddFault(f)
		for _, end := range ends {
			err = errors.Join(err, end())
		}
		return err
	}}
)

// clockVictims draws how many nodes a clock fault hits: 1 (half the time),
// 2 or 3 (a majority).
func clockVictims(rng *rand.Rand) int {
	switch n := rng.IntN(4); n {
	case 0, 1:
		return 1
	default:
		return n
	}
}

// degrade applies proxy faults to nodes for d, records the fault and heals.
func (e *env) degrade(ctx context.Context, kind string, nodes []int, f proxyFaults, d time.Duration) error {
	for _, j := range nodes {
		e.proxies[j].set(f)
	}
	fault := chaos.Fault{Kind: kind, Nodes: nodes, Start: e.h.Now()}
	hold(ctx, d)
	fault.End = e.h.Now()
	e.h.AddFault(fault)
	for _, j := range nodes {
		e.proxies[j].set(proxyFaults{})
	}
	return nil
}

// checkClock verifies that node j's clock is about want ahead of ours: a
// harness check (libfaketime must work), not a property of the lock.
func (e *env) checkClock(ctx context.Context, j int, want time.Duration) {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	got, err := clockAhead(cctx, e.nodes[j])
	if err != nil {
		e.missed.Add(1)
		e.t.Logf("clock of node %d not measured (harness, not a violation): %v", j, err)
		return
	}
	if diff := got - want; diff < -250*time.Millisecond || diff > 250*time.Millisecond {
		e.t.Errorf("node %d's clock is %v ahead, want %v: libfaketime did not apply the jump", j, got, want)
	}
}

// checkRate holds the fast clock of node j for d and verifies that it ran
// at about rate (a harness check, like checkClock).
func (e *env) checkRate(ctx context.Context, j, rate int, d time.Duration) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d+2*time.Second)
	defer cancel()
	a, err := clockAhead(cctx, e.nodes[j])
	start := time.Now()
	hold(ctx, d)
	if err != nil {
		e.t.Logf("clock of node %d not measured (harness, not a violation): %v", j, err)
		return
	}
	b, err := clockAhead(cctx, e.nodes[j])
	if err != nil {
		e.t.Logf("clock of node %d not measured (harness, not a violation): %v", j, err)
		return
	}
	el := time.Since(start)
	if el < 500*time.Millisecond {
		return // the run ended: too short to measure
	}
	got := 1 + float64(b-a)/float64(el)
	if got < 1+float64(rate-1)/2 {
		e.t.Errorf("node %d's clock ran x%.2f, want x%d: libfaketime did not apply the rate", j, got, rate)
	}
}
