package chaos_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/chaos"
	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/fencing/redisfence"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// Environment variables that steer the suite.
const (
	// durationEnv sets how long each scenario runs (time.ParseDuration
	// syntax); "10m" makes a long soak.
	durationEnv = "REDLOCK_CHAOS_DURATION"
	// seedEnv replays a run: the nemesis schedule and every client's
	// choices derive from it. "random" draws a new seed.
	seedEnv = "REDLOCK_CHAOS_SEED"
	// reportEnv names a file to which every scenario appends its counts as
	// one JSON line.
	reportEnv = "REDLOCK_CHAOS_REPORT"
	// noRejoinEnv, set to 1, turns the clients' RejoinDelay off: the
	// no-persistence scenario then fails with overlapping leases, which
	// shows that its checks can see what the delay prevents.
	noRejoinEnv = "REDLOCK_CHAOS_NO_REJOIN"

	defaultSeed     = 20260601
	defaultDuration = 7 * time.Second
)

const (
	lockNodes = 5
	clients   = 6
	resource  = "chaos"
	register  = "register"
	// opTimeout bounds every read and write of the register and every
	// release: the resource server is never faulted.
	opTimeout = 2 * time.Second
	// acquireTimeout bounds every Acquire.
	acquireTimeout = 2 * time.Second
	// nodeTimeout bounds the clients' dials, reads and writes to the lock
	// nodes (the Lockers' NodeCallTimeout is shorter).
	nodeTimeout = 500 * time.Millisecond

	// semName is the semaphore every client's semaphore worker takes a
	// slot of, semLimit its limit: six workers contend for two slots.
	semName  = "chaos-sem"
	semLimit = 2
	// semLongHold is the chance that a semaphore worker holds its slot for
	// 0.5-1.5 times its lease (so that renewals run) rather than 20-100ms.
	semLongHold = 0.1
)

// scenario is one row of RELIABILITY.md's table.
type scenario struct {
	name string
	// nemeses are picked at random, one at a time, for the whole run.
	nemeses []nemesis
	// stallers is how many clients sometimes stall past their lease
	// before writing.
	stallers int
	// holdProb is the chance that a term holds its lease for 0.5-1.5
	// times its duration, so that renewals run (default 1.5%).
	holdProb float64
	// serverOpts configure the lock nodes (the resource server always
	// keeps the defaults: AOF, appendfsync always).
	serverOpts []testutil.Option
	// unsafe marks a run that breaks an assumption of the safety argument
	// on purpose: violations of the lock's guarantees are measured and
	// reported, not failed on. The resource side must still hold.
	unsafe bool

	// netns puts every lock node in a network namespace of its own, which
	// each client reaches from an address of its own (netns_test.go);
	// needs root and iproute2.
	netns bool
	// proxied makes the clients reach the nodes through a proxy each
	// (proxy_test.go).
	proxied bool
	// faketime runs the lock nodes under libfaketime (faketime_test.go).
	faketime bool
	// groups makes the first groups lock nodes Sentinel groups (a
	// primary, a replica and three sentinels each) rather than single
	// servers; the clients reach them through the sentinels.
	groups int
	// minDuration, when longer than the run's duration, is used instead:
	// a scenario whose fault takes seconds to play out (a failover).
	minDuration time.Duration
	// leaseMs are the bounds, in milliseconds, of the clients' lease
	// durations, drawn at random (default 300-800).
	leaseMs [2]int
	// wantFaults are fault kinds the run must have injected at least once,
	// or it tested nothing of what it is for.
	wantFaults []string
}

// noPersistence is the lock nodes' configuration without persistence: no
// AOF, no RDB snapshots; a restarted node comes back empty.
var noPersistence = testutil.WithConfig("appendonly no", `save ""`)

// evictingMaxMemory is the eviction scenario's maxmemory, far above what
// the run stores: keys are evicted only when the nemesis lowers it.
const evictingMaxMemory = "64mb"

// evicting is the eviction scenario's node configuration: a maxmemory
// with the policy that evicts keys with a TTL, which every lock key has.
var evicting = testutil.WithConfig("maxmemory "+evictingMaxMemory, "maxmemory-policy volatile-lru")

// failoverGroups is how many of the failover scenario's lock nodes are
// Sentinel groups: a majority, so that a lease can be forgotten by a
// majority through failovers alone.
const failoverGroups = lockNodes/2 + 1

func scenarios() []scenario {
	return []scenario{
		{name: "kill-restart", nemeses: []nemesis{killMinority}},
		{name: "pause", nemeses: []nemesis{pauseShort, pauseLong}},
		{name: "majority-loss", nemeses: []nemesis{majorityDown}},
		{name: "script-flush", nemeses: []nemesis{scriptFlush}},
		{name: "client-stalls", stallers: 2},
		{name: "mixed", stallers: 2, nemeses: []nemesis{killMinority, pauseShort, pauseLong, majorityDown, scriptFlush}},
		{name: "partition", nemeses: []nemesis{partition}, netns: true},
		// Leases of 0.8-1.5 s: the proxies relay every byte in goroutines of
		// their own, and at load 9-10 (two runs beside the suite) calls
		// through them outlasted a third of a 0.3-0.8 s lease, so no
		// attempt succeeded in 27 s (ci9, ci15). The faults still bite:
		// stalls of 200-600 ms against call timeouts of 266-500 ms.
		{name: "latency-loss", nemeses: []nemesis{latency, loss}, proxied: true, leaseMs: [2]int{800, 1500}},
		{name: "clock-jump", nemeses: []nemesis{clockJump}, faketime: true, holdProb: 0.15, unsafe: true},
		{name: "clock-fast", nemeses: []nemesis{clockFast}, faketime: true, holdProb: 0.15, unsafe: true},
		// Restarts without persistence, one node at a time: the Lockers'
		// RejoinDelay must make them safe.
		{name: "no-persistence", nemeses: []nemesis{restartEmpty}, serverOpts: []testutil.Option{noPersistence}, holdProb: 0.15},
		// FLUSHALL on a minority, then on a majority, of running nodes
		// while a lease is held: the marker (docs/design.md §6.2) must make
		// the wiped nodes sit out for the RejoinDelay.
		{name: "wipe", nemeses: []nemesis{wipe}, serverOpts: []testutil.Option{noPersistence}, holdProb: 0.15,
			wantFaults: []string{"wipe-minority", "wipe-majority"}},
		// Nodes that evict keys with a TTL (ours) under maxmemory; the
		// nemesis makes one to three of them evict every such key while a
		// lease is held.
		{name: "eviction", nemeses: []nemesis{evict}, serverOpts: []testutil.Option{evicting}, holdProb: 0.15,
			wantFaults: []string{"evict-minority", "evict-majority"}},
		// Three of the five nodes are Sentinel groups; once per run their
		// replicas stall, a lease is granted on the primaries alone, the
		// primaries are killed and the sentinels promote the replicas,
		// which missed it. One failover per run: a group takes about two
		// seconds to fail over, and a demoted primary about ten more to
		// rejoin as a replica. The leases (2.5-3.5s, often held) outlive
		// the failover, so that the promoted replicas (a majority) could
		// grant a lock that is still held, and repeat its token, if they
		// did not sit out; the run checks that nothing is granted from the
		// kill until the rejoin delay has passed. With the delay off
		// (REDLOCK_CHAOS_NO_REJOIN=1) runs so far found no violation: in
		// those examined, the promoted replicas still held the previous
		// holder's lock and the waiters' queue entries, replicated before
		// the stall, or the contending clients split the three promoted
		// groups among them (no attempt got all three), until the
		// forgotten lease had expired.
		{name: "failover", nemeses: []nemesis{failoverLagging}, groups: failoverGroups, holdProb: 0.5,
			leaseMs: [2]int{2500, 3500}, minDuration: 12 * time.Second, wantFaults: []string{"failover-lagging"}},
		operatorScenario(), // operator_test.go
	}
}

// TestChaos runs every scenario for REDLOCK_CHAOS_DURATION (default 7s)
// with the seed REDLOCK_CHAOS_SEED (default fixed, so CI runs the same
// schedule every time), then checks the history. Replay one scenario with
//
//	REDLOCK_CHAOS_SEED=<seed> go test -v -run 'TestChaos/<name>' ./chaos/
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos suite: real redis-server processes, about two minutes")
	}
	duration := chaosDuration(t)
	seed := chaosSeed(t)
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) { runScenario(t, sc, seed, duration) })
	}
}

func chaosDuration(t *testing.T) time.Duration {
	v := os.Getenv(durationEnv)
	if v == "" {
		return defaultDuration
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 15s or 10m", durationEnv, v)
	}
	return d
}

func chaosSeed(t *testing.T) uint64 {
	switch v := os.Getenv(seedEnv); v {
	case "":
		return defaultSeed
	case "random":
		return rand.Uint64() >> 1
	default:
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a decimal seed or \"random\"", seedEnv, v)
		}
		return s
	}
}

// env is one scenario's world.
type env struct {
	t     *testing.T
	sc    scenario
	nodes []*testutil.RedisServer
	// groups are the Sentinel groups of sc.groups, per node (nil for a
	// single server); nodes then holds the group's first primary.
	groups   []*testutil.SentinelGroup
	resource *testutil.RedisServer
	h        *chaos.History
	leases   []time.Duration // per client
	missed   atomic.Int64    // fault commands the nemesis could not apply
	// holding counts the clients that hold the lock now (between Acquire's
	// return and the Release call), for the nemeses that strike while a
	// lease is held.
	holding atomic.Int64
	// grants counts the leases granted so far; strikes the wipe and
	// eviction rounds; failedOver is set once the failover nemesis ran.
	grants atomic.Int64
	// holdingLong is, per client, when the lease it is holding on purpose
	// (for 0.5-1.5 times its duration, so that renewals run) was granted
	// (history time, nanoseconds; 0 while it is not).
	holdingLong [clients]atomic.Int64
	strikes     atomic.Int64
	failedOver  atomic.Bool
	// semGranted closes at the run's first semaphore lease (semOnce);
	// wrote at the run's first accepted write (wroteOnce).
	semGranted chan struct{}
	semOnce    sync.Once
	wrote      chan struct{}
	wroteOnce  sync.Once

	net     *netTopo     // sc.netns
	proxies []*proxy     // sc.proxied, per node
	clocks  []*fakeClock // sc.faketime, per node
}

func (e *env) minLease() time.Duration { return minDur(e.leases) }
func (e *env) maxLease() time.Duration { return maxDur(e.leases) }

func minDur(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = min(m, d)
	}
	return m
}

func maxDur(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// runScenario runs one scenario and checks it; it returns the report, or
// nil when the scenario was skipped.
func runScenario(t *testing.T, sc scenario, seed uint64, duration time.Duration) *chaos.Report {
	hs := fnv.New64a()
	_, _ = hs.Write([]byte(sc.name))
	rng := rand.New(rand.NewPCG(seed, hs.Sum64()))
	t.Logf("seed=%d duration=%s (replay: %s=%d %s=%s go test -v -run 'TestChaos/%s$' ./chaos/)",
		seed, duration, seedEnv, seed, durationEnv, duration, sc.name)

	if duration < sc.minDuration {
		duration = sc.minDuration
	}
	e := &env{t: t, sc: sc, semGranted: make(chan struct{}), wrote: make(chan struct{})}
	for range clients {
		lo, hi := 300, 800
		if sc.leaseMs[1] > 0 {
			lo, hi = sc.leaseMs[0], sc.leaseMs[1]
		}
		e.leases = append(e.leases, time.Duration(lo+rng.IntN(hi-lo+1))*time.Millisecond)
	}
	e.startNodes(seed)
	t.Logf("leases %v, %d of %d clients stall", e.leases, sc.stallers, clients)

	e.h = chaos.NewHistory()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The nemesis stops when the run ends, or earlier: when the run goes
	// on because its workload has not run yet (endRun).
	nctx, calm := context.WithCancel(ctx)
	defer calm()
	extended := e.endRun(ctx, cancel, calm, duration)

	var clientsDone sync.WaitGroup
	for i := range clients {
		crng := rand.New(rand.NewPCG(seed, hs.Sum64()+uint64(i)+1))
		srng := rand.New(rand.NewPCG(^seed, hs.Sum64()+uint64(i)+1))
		clientsDone.Go(func() { e.client(ctx, i, crng, srng, i < sc.stallers) })
	}
	nemesisDone := make(chan struct{})
	go func() {
		defer close(nemesisDone)
		e.nemesis(nctx, rng)
	}()
	<-nemesisDone
	clientsDone.Wait()
	if d := <-extended; d > 0 {
		t.Logf("the run went on %v past its %v: no semaphore lease had been granted or no write accepted yet (a loaded machine)", d.Round(time.Millisecond), duration)
	}
	e.healAll()
	e.finalRead()

	rep := chaos.Check(e.h)
	viz := filepath.Join(os.TempDir(), fmt.Sprintf("redlock-chaos-%s-%d.html", sc.name, seed))
	lin, err := chaos.CheckLinearizable(e.h.Ops, time.Minute, viz)
	if err != nil {
		t.Errorf("porcupine visualization: %v", err)
	}
	rep.NotLinearizable = lin == porcupine.Illegal
	rep.LinearizeUnknown = lin == porcupine.Unknown
	t.Logf("counts: %s", rep)
	if n := e.missed.Load(); n > 0 {
		t.Logf("nemesis: %d fault commands could not be injected (the machine was too busy); the checks above hold for the faults that were", n)
	}
	for _, ex := range rep.Examples {
		t.Logf("  example: %s", ex)
	}
	e.writeReport(seed, duration, rep)

	if lin != porcupine.Ok {
		t.Errorf("the register's history is not linearizable (%s); visualization in %s", lin, viz)
	}
	if n := rep.ResourceViolations(); n > 0 {
		t.Errorf("%d violations of the resource side's guarantees", n)
	}
	if rep.Accepted == 0 {
		t.Errorf("no write was accepted, even %v past the run's %v: the run tested nothing", workloadGrace(duration), duration)
	}
	if sc.stallers > 0 && rep.Stalls == 0 {
		t.Errorf("no client stalled: the run did not test fencing")
	}
	if rep.SemAcquired == 0 {
		t.Errorf("no semaphore lease was granted, even %v past the run's %v: the run did not test the semaphore", workloadGrace(duration), duration)
	}
	for _, k := range sc.wantFaults {
		if rep.FaultKinds[k] == 0 {
			t.Errorf("no %s fault was injected: the run did not test it", k)
		}
	}
	if sc.unsafe {
		t.Logf("assumption broken on purpose: %d violations of the lock's guarantees (overlapping leases %d, token regressions %d, duplicate tokens %d, lost in-window writes %d, "+
			"semaphore grants over its limit %d (at most %d valid at once, limit %d), overlapping leases of a semaphore slot %d)",
			rep.LockViolations(), rep.Overlaps, rep.TokenRegressions, rep.DuplicateTokens, rep.LostInWindow,
			rep.SemOverLimit, rep.SemMax[semName], semLimit, rep.SemSlotOverlaps)
		return rep
	}
	if n := rep.LockViolations(); n > 0 {
		t.Errorf("%d violations of the lock's guarantees", n)
	}
	return rep
}

// workloadGrace bounds how long a run goes on past its duration while its
// workload has not run (no semaphore lease granted yet): as long again as
// the run, at least 20 s.
func workloadGrace(duration time.Duration) time.Duration {
	return max(duration, 20*time.Second)
}

// endRun ends the run (cancel) once duration has passed, a semaphore
// lease has been granted and a fenced write accepted, or
// workloadGrace(duration) after duration if they have not: on a loaded machine the clients' first grants can come late
// (servers just started sit out their rejoin delay, every call is slow),
// and a run that tested nothing because of load must go on rather than
// fail, while a semaphore that grants nothing within the bound still fails
// the check. The channel it returns gets how long the run went on past
// duration once it ended. While it goes on, no new fault is injected and
// the current one ends (calm): on a loaded machine, faults that go on
// injecting can keep every lock refused however long the run lasts (seen:
// latency and loss beside two busy loops and a benchmark, no grant in 27
// s); the faults of the run's duration are those it checks.
func (e *env) endRun(ctx context.Context, cancel, calm context.CancelFunc, duration time.Duration) <-chan time.Duration {
	extended := make(chan time.Duration, 1)
	go func() {
		defer cancel()
		over := time.NewTimer(duration)
		defer over.Stop()
		select {
		case <-over.C:
		case <-ctx.Done():
			extended <- 0
			return
		}
		start := time.Now()
		if done(e.semGranted) && done(e.wrote) {
			extended <- 0
			return
		}
		// The workload has not run yet (a loaded machine, or faults that
		// kept every lock refused so far): go on until it has, bounded,
		// without new faults.
		calm()
		bound := time.NewTimer(workloadGrace(duration))
		defer bound.Stop()
		for _, ran := range []chan struct{}{e.semGranted, e.wrote} {
			select {
			case <-ran:
			case <-bound.C:
				extended <- time.Since(start)
				return
			case <-ctx.Done():
				extended <- time.Since(start)
				return
			}
		}
		extended <- time.Since(start)
	}()
	return extended
}

// startNodes starts the lock nodes and the resource server (skipping the
// test without redis-server, or failing it under REDLOCK_REQUIRE_REDIS=1),
// with what the scenario needs around them: namespaces, proxies or fake
// clocks.
func (e *env) startNodes(seed uint64) {
	t, sc := e.t, e.sc
	testutil.RedisServerPath(t) // skip before creating anything
	e.resource = testutil.StartRedisServer(t)
	switch {
	case sc.groups > 0:
		e.groups = make([]*testutil.SentinelGroup, lockNodes)
		e.nodes = make([]*testutil.RedisServer, lockNodes)
		for j, g := range testutil.StartSentinels(t, sc.groups, "chaos", sc.serverOpts...) {
			e.groups[j], e.nodes[j] = g, g.Servers()[0]
		}
		if rest := lockNodes - sc.groups; rest > 0 {
			copy(e.nodes[sc.groups:], testutil.StartRedis(t, rest, sc.serverOpts...).Servers())
		}
	case !sc.netns && !sc.faketime:
		e.nodes = testutil.StartRedis(t, lockNodes, sc.serverOpts...).Servers()
	default:
		// Registered before the servers start, so that it runs after
		// their cleanup has killed them.
		if sc.netns {
			e.net = setupNetns(t, lockNodes, clients)
		}
		if sc.faketime {
			lib := requireFaketime(t)
			t.Cleanup(func() {
				for _, c := range e.clocks {
					c.cleanup()
				}
			})
			for range lockNodes {
				c, err := newFakeClock(t.TempDir(), lib)
				if err != nil {
					t.Fatal(err)
				}
				e.clocks = append(e.clocks, c)
			}
		}
		for j := range lockNodes {
			opts := slices.Clone(sc.serverOpts)
			if e.net != nil {
				opts = append(opts, testutil.WithHost(e.net.NodeIP(j)), testutil.WithCommandPrefix(e.net.ServerPrefix(j)...))
			}
			if e.clocks != nil {
				opts = append(opts, testutil.WithEnv(e.clocks[j].env()...))
			}
			e.nodes = append(e.nodes, testutil.StartRedisServer(t, opts...))
			if e.clocks != nil {
				if err := e.clocks[j].notePID(e.nodes[j]); err != nil {
					t.Fatalf("node %d: %v", j, err)
				}
			}
		}
	}
	if sc.faketime {
		e.checkFaketime()
	}
	if sc.proxied {
		for j, s := range e.nodes {
			p, err := startProxy(s.Addr(), seed+uint64(j))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.close)
			e.proxies = append(e.proxies, p)
		}
	}
}

// checkFaketime makes sure that libfaketime controls the nodes' clocks
// before the run starts: a jump of node 0's clock must show in TIME.
func (e *env) checkFaketime() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := e.clocks[0]
	if err := c.write(100*time.Second, 1); err != nil {
		e.t.Fatal(err)
	}
	ahead, err := clockAhead(ctx, e.nodes[0])
	if werr := c.write(0, 1); werr != nil {
		e.t.Fatal(werr)
	}
	if err != nil {
		e.t.Fatalf("TIME on node 0: %v", err)
	}
	if ahead < 99*time.Second {
		e.t.Fatalf("libfaketime does not control the nodes' clocks: node 0 is %v ahead, want 100s", ahead)
	}
}

// writeReport appends the scenario's counts to REDLOCK_CHAOS_REPORT.
func (e *env) writeReport(seed uint64, duration time.Duration, rep *chaos.Report) {
	path := os.Getenv(reportEnv)
	if path == "" {
		return
	}
	line, err := json.Marshal(struct {
		Scenario string
		Seed     uint64
		Duration string
		Ops      int
		*chaos.Report
		ResourceViolationsTotal int
		LockViolationsTotal     int
	}{e.sc.name, seed, duration.String(), len(e.h.Ops), rep, rep.ResourceViolations(), rep.LockViolations()})
	if err != nil {
		e.t.Errorf("report: %v", err)
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		e.t.Errorf("report: %v", err)
		return
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Write(append(line, '\n')); err != nil {
		e.t.Errorf("report: %v", err)
	}
}

// healAll resumes and restarts every lock node, so that the final state
// can be inspected and the next scenario starts clean.
func (e *env) healAll() {
	for j, s := range e.nodes {
		if e.groups != nil && e.groups[j] != nil {
			// A group's killed primary stays down: restarted, it would be
			// a second primary until the sentinels demote it.
			for _, s := range e.groups[j].Servers() {
				if err := s.Resume(); err != nil {
					e.t.Errorf("heal: %v", err)
				}
			}
			continue
		}
		if err := s.Resume(); err != nil {
			e.t.Errorf("heal: %v", err)
		}
		if !s.Running() {
			if err := s.Restart(); err != nil {
				e.t.Errorf("heal: %v", err)
			}
		}
	}
}

// finalRead reads the register once every client has stopped; it is the
// history's last operation.
func (e *env) finalRead() {
	store := redisfence.New(e.resource.Client(), "chaos:")
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	call := e.h.Now()
	v, hi, found, err := store.Read(ctx, register)
	if err != nil {
		e.t.Fatalf("final read of the register: %v", err)
	}
	e.h.AddOp(chaos.Op{Client: clients, Lease: -1, Kind: chaos.Read, Call: call, Return: e.h.Now(), Value: v, Highest: hi, Found: found})
}

// client is one process of the application: its own Locker (and
// connections) over the five lock nodes, looping acquire → fenced
// read-modify-writes of the register → release until ctx ends, while a
// second goroutine of the process takes slots of the semaphore on the same
// Locker (semWorker, with srng). A staller sometimes freezes, with its node
// calls, for longer than its lease between reading and writing, and then
// writes without checking the lease: a stand-in for a GC pause, which only
// fencing can make harmless (the semaphore worker's node calls freeze too).
func (e *env) client(ctx context.Context, id int, rng, srng *rand.Rand, staller bool) {
	g := &gate{}
	nodes := make([]redlock.Node, 0, lockNodes)
	for j := range e.nodes {
		n, err := e.lockNode(id, j)
		if err != nil {
			e.t.Errorf("client %d: node %d: %v", id, j, err)
			return
		}
		defer func() { _ = n.Close() }() // after the Locker's Close below
		nodes = append(nodes, &gatedNode{Node: n, g: g})
	}
	ttl := e.leases[id]
	locker, err := redlock.New(nodes, redlock.Config{
		LeaseDuration: ttl,
		// Every client keeps a restarted node that lost its data out of
		// its quorums until the longest lease of any client has expired.
		RejoinDelay: e.clientRejoinDelay(),
		Owner:       "chaos-client-" + strconv.Itoa(id),
		NewBackOff: func() backoff.BackOff {
			return backoff.NewExponentialBackOff(
				backoff.WithInitialInterval(10*time.Millisecond),
				backoff.WithMaxInterval(200*time.Millisecond),
				backoff.WithMaxElapsedTime(0))
		},
	})
	if err != nil {
		e.t.Errorf("client %d: %v", id, err)
		return
	}
	defer func() {
		if err := locker.Close(); err != nil && !errors.Is(err, redlock.ErrNoQuorum) {
			e.t.Errorf("client %d: close: %v", id, err)
		}
	}()
	var semDone sync.WaitGroup
	defer semDone.Wait() // before the Locker closes
	semDone.Go(func() { e.semWorker(ctx, id, locker, srng) })
	store := redisfence.New(e.resource.Client(), "chaos:")
	h := e.h
	seq := 0

	for ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, acquireTimeout)
		called := h.Now()
		lease, err := locker.Acquire(actx, resource)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				h.Count(func(h *chaos.History) { h.AcquireErrors[acquireReason(err)]++ })
			}
			continue
		}
		acquired := h.Now()
		e.holding.Add(1)
		e.grants.Add(1)
		li := h.AddLease(chaos.Lease{Client: id, Fence: lease.Fence(), CalledAt: called, AcquiredAt: acquired, HeldUntil: acquired})
		verify := func() bool {
			now := time.Now()
			if lease.Context().Err() != nil || !now.Before(lease.ValidUntil()) {
				return false
			}
			at := h.Since(now)
			h.UpdateLease(li, func(l *chaos.Lease) { l.HeldUntil = max(l.HeldUntil, at) })
			return true
		}
		verify()

		stall := staller && rng.Float64() < 0.3
		if stall {
			h.UpdateLease(li, func(l *chaos.Lease) { l.Stalled = true })
		}
		writes := 1 + rng.IntN(3)
		holdAt := -1
		if !stall && rng.Float64() < cmp.Or(e.sc.holdProb, 0.015) {
			holdAt = rng.IntN(writes)
		}
		for k := range writes {
			if k == holdAt {
				// Hold the lease long enough for renewals to run.
				e.holdingLong[id].Store(int64(acquired))
				sleep(ctx, between(rng, ttl/2, ttl*3/2))
				e.holdingLong[id].Store(0)
			}
			if !stall && !verify() {
				break
			}
			prev, ok := e.read(store, id, li)
			if !ok {
				break
			}
			if stall && k == 0 {
				g.freeze()
				time.Sleep(ttl + time.Duration(rng.Int64N(int64(ttl*3/2)))) // past the lease
				g.thaw()
				h.Count(func(h *chaos.History) { h.Stalls++ })
			}
			seq++
			e.write(store, id, li, lease.Fence(), chaos.NewValue(fmt.Sprintf("c%d.%d", id, seq), prev))
			if !stall {
				verify()
			}
		}
		if !stall {
			verify()
		}
		e.holding.Add(-1)
		rctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		err = lease.Release(rctx)
		cancel()
		if errors.Is(err, redlock.ErrLeaseLost) {
			h.UpdateLease(li, func(l *chaos.Lease) { l.Lost = true })
			h.Count(func(h *chaos.History) { h.LostLeases++ })
		}
	}
}

// semWorker loops on the client's Locker until ctx ends: Acquire a slot
// of the semaphore semName (limit semLimit), hold it 20-100ms (or, with
// chance semLongHold, 0.5-1.5 times the client's lease, so that it renews)
// or until its Context ends, Release it. It records each lease's valid
// window, from Acquire's return to the earlier of the Release call and
// ValidUntil (read after Release, which stops renewal, so that it includes
// every renewal); the checker counts how many were valid at once.
func (e *env) semWorker(ctx context.Context, id int, locker *redlock.Locker, rng *rand.Rand) {
	sem, err := locker.NewSemaphore(semName, semLimit)
	if err != nil {
		e.t.Errorf("client %d: semaphore: %v", id, err)
		return
	}
	h, ttl := e.h, e.leases[id]
	for ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, acquireTimeout)
		lease, err := sem.Acquire(actx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				h.Count(func(h *chaos.History) { h.SemAcquireErrors++ })
			}
			continue
		}
		acquired := h.Now()
		e.semOnce.Do(func() { close(e.semGranted) })
		d := between(rng, 20*time.Millisecond, 100*time.Millisecond)
		if rng.Float64() < semLongHold {
			d = between(rng, ttl/2, ttl*3/2)
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-lease.Context().Done():
		case <-ctx.Done():
		}
		t.Stop()
		released := h.Now()
		rctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		_ = lease.Release(rctx) // lost or not, the window ends here
		cancel()
		h.AddSemLease(chaos.SemLease{
			Semaphore: semName, Limit: semLimit, Slot: lease.Resource(), Client: id, Fence: lease.Fence(),
			AcquiredAt: acquired, Until: min(released, h.Since(lease.ValidUntil())),
		})
	}
}

// rejoinDelay is every client's RejoinDelay: the longest lease of any
// client, with a margin for the nodes' uptime being counted in whole
// seconds on their own clocks.
func (e *env) rejoinDelay() time.Duration { return e.maxLease() + 200*time.Millisecond }

// clientRejoinDelay is the clients' Config.RejoinDelay: rejoinDelay, or
// off (-1) under REDLOCK_CHAOS_NO_REJOIN=1.
func (e *env) clientRejoinDelay() time.Duration {
	if off, _ := strconv.ParseBool(os.Getenv(noRejoinEnv)); off {
		return -1
	}
	return e.rejoinDelay()
}

// nodeClient returns a new client of client id to node j, with the short
// timeouts and single attempts of testutil's clients: through the node's
// proxy (sc.proxied), or from the client's own address (sc.netns).
func (e *env) nodeClient(id, j int) *redis.Client {
	opts := testutil.FastFailOptions(e.nodes[j].Addr(), "", nodeTimeout)
	switch {
	case e.proxies != nil:
		opts.Addr = e.proxies[j].Addr()
	case e.net != nil:
		d := &net.Dialer{Timeout: nodeTimeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(e.net.ClientIP(id, j))}}
		opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		}
	}
	return redis.NewClient(opts)
}

// lockNode returns a new node of client id for lock node j: nodeClient's
// client, or for a Sentinel group a node dialled from its URL (which
// follows the group's primary, and whose subscription follows it too),
// with the same short timeouts.
func (e *env) lockNode(id, j int) (*redisnode.Node, error) {
	if e.groups == nil || e.groups[j] == nil {
		return redisnode.New(e.nodeClient(id, j)), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t := nodeTimeout.String()
	ns, err := redisnode.Dial(ctx, e.groups[j].URL()+"&dial_timeout="+t+"&read_timeout="+t+"&write_timeout="+t+"&pool_timeout="+t)
	if err != nil {
		return nil, err
	}
	return ns[0].(*redisnode.Node), nil
}

// read reads the register and records the read; it reports the value and
// whether the read succeeded.
func (e *env) read(store *redisfence.Store, client, lease int) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	call := e.h.Now()
	v, hi, found, err := store.Read(ctx, register)
	ret := e.h.Now()
	if err != nil {
		e.h.Count(func(h *chaos.History) { h.ReadErrors++ })
		return "", false
	}
	e.h.AddOp(chaos.Op{Client: client, Lease: lease, Kind: chaos.Read, Call: call, Return: ret, Value: v, Highest: hi, Found: found})
	return v, true
}

// write writes value with token and records the outcome.
func (e *env) write(store *redisfence.Store, client, lease int, token fencing.Token, value string) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	call := e.h.Now()
	err := store.Write(ctx, register, value, token)
	ret := e.h.Now()
	op := chaos.Op{Client: client, Lease: lease, Kind: chaos.Write, Call: call, Return: ret, Value: value, Token: token}
	var stale *fencing.StaleError
	switch {
	case err == nil:
		op.Outcome = chaos.Accepted
		e.wroteOnce.Do(func() { close(e.wrote) })
	case errors.As(err, &stale):
		op.Outcome, op.Highest = chaos.Stale, stale.Highest
	default:
		op.Outcome = chaos.Unknown
		e.t.Logf("client %d: write with unknown outcome: %v", client, err)
	}
	e.h.AddOp(op)
}

func acquireReason(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, redlock.ErrNoQuorum):
		return "no-quorum"
	case errors.Is(err, redlock.ErrNotAcquired):
		return "not-acquired"
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, ':'); i > 0 {
		msg = msg[:i]
	}
	return "other: " + msg
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// gate freezes one client's node calls, as a process pause would: while
// frozen, a call waits until the gate thaws or its context ends (then it
// fails without reaching the node), so the client's renewals fail and its
// lock expires on the nodes by its TTL.
type gate struct {
	mu     sync.Mutex
	thawed chan struct{} // nil while not frozen
}

func (g *gate) freeze() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.thawed == nil {
		g.thawed = make(chan struct{})
	}
}

func (g *gate) thaw() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.thawed != nil {
		close(g.thawed)
		g.thawed = nil
	}
}

func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	ch := g.thawed
	g.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gatedNode is a redisnode.Node whose script calls pass through a gate. It
// keeps the node's release announcements and uptime (Node).
type gatedNode struct {
	*redisnode.Node
	g *gate
}

func (n *gatedNode) Eval(ctx context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	if err := n.g.wait(ctx); err != nil {
		return nil, err
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// done reports whether ch is closed.
func done(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
