// Command matrix runs issue 36's benchmark matrix in one process, against
// redis-servers it starts (and stops) itself, and prints Markdown tables:
// N = 1, 3, 5 nodes × 1, 64, 256 goroutines, a fresh name per operation,
// TryAcquire + Release (one attempt: a try-style op for every peer), for
//
//	ours      this repository's Locker, redlock.Config{} (the default), over redisnode.Dial's go-redis nodes
//	oursR     the same Locker over rueidisnode (rueidis, auto-pipelined)
//	redsync   go-redsync v4, one try
//	bsm       bsm/redislock (N=1 only)
//	rueidislock  rueidis's rueidislock, KeyMajority 1 (N=1 only)
//	floor     SET NX PX + compare-and-delete EVALSHA on every node in parallel, majority, over go-redis
//	floorR    the same over rueidis
//
// Each cell runs in interleaved rounds: every implementation runs for
// -dur, one after another, in an order that rotates every round, and each
// ratio is taken within one round (medians and ranges over the rounds), so
// that the load of a shared machine falls on all of them alike. p50/p99 are
// over every op of every round (one op = acquire + release). Client CPU is
// the process's getrusage over the op count. Then, per cell, server CPU per
// op per node: INFO cpu deltas (and INFO commandstats after CONFIG
// RESETSTAT) around -serverops operations; allocations and bytes per op at
// one goroutine (runtime.MemStats deltas over -allocops ops, background
// goroutines included); and AcquireAll of 8 free resources against 8
// sequential TryAcquires (each followed by the 8 releases).
//
//	cd bench && go run ./cmd/matrix   # 12-14 min at load 25-38; -rounds 5 -dur 300ms: about 5
//	go run ./cmd/matrix -n 3 -g 1 -profile ours -cpuprofile cpu.out   # one cell, one impl, -dur 10s: pprof
//
// go-redis clients of the peers and floors have PoolSize 256. The servers
// run without persistence; the Locker's rejoin delay (10 s by default) is
// waited out once before the first round.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/redis/rueidis"

	"github.com/e6344662/go-redlock/bench/internal/impls"
	"github.com/e6344662/go-redlock/bench/internal/redisproc"
	"github.com/e6344662/go-redlock/bench/internal/stats"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/rueidisnode"
)

var (
	flagN        = flag.String("n", "1,3,5", "node counts")
	flagG        = flag.String("g", "1,64,256", "goroutine counts")
	flagRounds   = flag.Int("rounds", 9, "interleaved rounds per cell")
	flagDur      = flag.Duration("dur", 400*time.Millisecond, "run time of one implementation in one round")
	flagServer   = flag.Int("serverops", 1000, "operations per implementation for the server CPU measure (×4 at g≥64)")
	flagAllocOps = flag.Int("allocops", 1000, "operations per implementation for the allocation measure (g=1)")
	flagAllN     = flag.String("alln", "1,3", "node counts of the AcquireAll comparison (empty: none)")
	flagOnly     = flag.String("impls", "", "comma-separated implementations to run (default: all)")
	flagRFlush   = flag.Duration("rflush", 0, "when set, adds oursRf: oursR with this rueidis MaxFlushDelay")
	flagProfile  = flag.String("profile", "", "run only this implementation, in the first -n and -g cell, for -dur (default 10s here), with -cpuprofile/-memprofile")
	flagCPUProf  = flag.String("cpuprofile", "", "CPU profile file (with -profile)")
	flagMemProf  = flag.String("memprofile", "", "allocation profile file (with -profile)")
)

func main() {
	flag.Parse()
	log.SetFlags(0)
	ns, gs := ints(*flagN), ints(*flagG)
	maxN := slices.Max(append(slices.Clone(ns), ints(*flagAllN)...))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	servers, err := redisproc.Start(ctx, maxN)
	if err != nil {
		log.Fatal(err)
	}
	defer redisproc.Stop(servers)
	env, err := newEnv(ctx, servers)
	if err != nil {
		redisproc.Stop(servers)
		log.Fatal(err)
	}
	defer env.close()
	if *flagProfile != "" {
		if err := profile(ctx, env, ns[0], gs[0]); err != nil {
			redisproc.Stop(servers)
			log.Fatal(err)
		}
		return
	}
	fmt.Printf("# Round 4 matrix: %s, GOMAXPROCS %d, %d rounds × %s, load %s\n\n", time.Now().UTC().Format(time.RFC3339), runtime.GOMAXPROCS(0), *flagRounds, *flagDur, loadavg())
	var cells []cellResult
	for _, n := range ns {
		for _, g := range gs {
			if ctx.Err() != nil {
				return
			}
			r, err := runCell(ctx, env, n, g)
			if err != nil {
				redisproc.Stop(servers)
				log.Fatal(err)
			}
			cells = append(cells, r)
			printCell(r)
		}
	}
	printAllocs(ctx, env, ns)
	for _, n := range ints(*flagAllN) {
		printAcquireAll(ctx, env, n)
	}
	printTargets(cells)
	fmt.Printf("\nload at the end: %s\n", loadavg())
}

// env holds the clients every implementation is built on.
type env struct {
	addrs     []string
	goClients []*redis.Client  // PoolSize 256, the peers' and floor's
	rueidis   []rueidis.Client // floorR's
	rNodes    []*rueidisnode.Node
	rNodesF   []*rueidisnode.Node     // with -rflush
	ourNodes  map[int]redisnode.Nodes // redisnode.Dial's, per N
	admin     []*redis.Client
	tag       string // run tag: names never collide with an earlier run's
}

func newEnv(ctx context.Context, servers []*redisproc.Server) (*env, error) {
	e := &env{ourNodes: map[int]redisnode.Nodes{}, tag: strconv.FormatInt(time.Now().UnixNano()%1e9, 36)}
	for _, s := range servers {
		e.addrs = append(e.addrs, s.Addr)
		e.goClients = append(e.goClients, goClient(s.Addr))
		e.admin = append(e.admin, redisproc.Client(s.Addr))
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}, DisableCache: true})
		if err != nil {
			return e, err
		}
		e.rueidis = append(e.rueidis, rc)
		rn, err := rueidisnode.Dial("redis://" + s.Addr)
		if err != nil {
			return e, err
		}
		e.rNodes = append(e.rNodes, rn)
		if *flagRFlush > 0 {
			rf, err := rueidisnode.New(rueidis.ClientOption{InitAddress: []string{s.Addr}, MaxFlushDelay: *flagRFlush})
			if err != nil {
				return e, err
			}
			e.rNodesF = append(e.rNodesF, rf)
		}
	}
	for n := 1; n <= len(servers); n++ {
		urls := make([]string, n)
		for i := range n {
			urls[i] = "redis://" + e.addrs[i]
		}
		nodes, err := redisnode.Dial(ctx, urls...)
		if err != nil {
			return e, err
		}
		e.ourNodes[n] = nodes
	}
	return e, nil
}

func (e *env) close() {
	for _, ns := range e.ourNodes {
		_ = ns.Close()
	}
	for _, n := range append(e.rNodes, e.rNodesF...) {
		_ = n.Close()
	}
	for _, c := range e.rueidis {
		c.Close()
	}
	for _, c := range e.goClients {
		_ = c.Close()
	}
	for _, c := range e.admin {
		_ = c.Close()
	}
}

// goClient is redisproc.Client's options with a pool of 256 connections.
func goClient(addr string) *redis.Client {
	const timeout = 2 * time.Second
	return redis.NewClient(&redis.Options{
		Addr: addr, DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolTimeout: timeout,
		DialerRetries: 1, MaxRetries: -1, ContextTimeoutEnabled: true, DisableIdentity: true, PoolSize: 256,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}

// defaultConfig makes impls.Redlock use redlock.Config{}.
func defaultConfig(c *redlock.Config) { *c = redlock.Config{} }

// implsFor builds the implementations of one cell, ours first.
func implsFor(ctx context.Context, e *env, n int) ([]*impls.Impl, error) {
	rnodes := make([]redlock.Node, n)
	for i := range n {
		rnodes[i] = e.rNodes[i]
	}
	var list []*impls.Impl
	add := func(i *impls.Impl, err error) error {
		if err != nil {
			return err
		}
		if *flagOnly != "" && !slices.Contains(strings.Split(*flagOnly, ","), i.Name) && i.Name != "redsync" {
			return i.Close()
		}
		list = append(list, i)
		return nil
	}
	ours, err := impls.Redlock("ours", e.ourNodes[n], impls.Try, true, defaultConfig)
	if err := add(ours, err); err != nil {
		return nil, err
	}
	oursR, err := impls.Redlock("oursR", rnodes, impls.Try, true, defaultConfig)
	if err := add(oursR, err); err != nil {
		return nil, err
	}
	if len(e.rNodesF) > 0 {
		fnodes := make([]redlock.Node, n)
		for i := range n {
			fnodes[i] = e.rNodesF[i]
		}
		oursRf, err := impls.Redlock("oursRf", fnodes, impls.Try, true, defaultConfig)
		if err := add(oursRf, err); err != nil {
			return nil, err
		}
	}
	if err := add(impls.Redsync("redsync", e.goClients[:n], impls.RedsyncOptions{Tries: 1}), nil); err != nil {
		return nil, err
	}
	if n == 1 {
		if err := add(impls.Redislock("bsm", e.goClients[0]), nil); err != nil {
			return nil, err
		}
		if err := add(impls.Rueidislock("rueidislock", e.addrs[0])); err != nil {
			return nil, err
		}
	}
	if err := add(impls.Floor("floor", e.goClients[:n]), nil); err != nil {
		return nil, err
	}
	if err := add(impls.FloorRueidis("floorR", e.rueidis[:n]), nil); err != nil {
		return nil, err
	}
	// The Locker sits out its rejoin delay on fresh servers: wait until
	// ours can lock before the first round.
	for _, i := range list {
		if !strings.HasPrefix(i.Name, "ours") {
			continue
		}
		w := i.NewWorker()
		deadline := time.Now().Add(40 * time.Second)
		for k := 0; ; k++ {
			err := w.Acquire(ctx, fmt.Sprintf("warm:%s:%s:%d", e.tag, i.Name, k))
			if err == nil {
				_ = w.Release(ctx)
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return nil, fmt.Errorf("%s (N=%d) never acquired: %w", i.Name, n, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return list, nil
}

// runResult is one implementation's run in one round: ops counts the
// operations that succeeded (lat has their latencies), errs the others.
type runResult struct {
	ops, errs int
	elapsed   time.Duration
	lat       []time.Duration
	cpu       time.Duration // client process CPU
	firstErr  error
}

func (r runResult) rate() float64 { return float64(r.ops) / r.elapsed.Seconds() }

// run drives impl with g goroutines for dur, or until ops operations are
// done (successful or not) when ops > 0, each op on a fresh name.
func run(ctx context.Context, impl *impls.Impl, g int, dur time.Duration, ops int64, prefix string) runResult {
	ws := make([]impls.Worker, g)
	for i := range ws {
		ws[i] = impl.NewWorker()
	}
	lats := make([][]time.Duration, g)
	var (
		left     atomic.Int64
		errs     atomic.Int64
		firstErr atomic.Value
		wg       sync.WaitGroup
	)
	left.Store(ops)
	cpu0 := cpuTime()
	start := time.Now()
	end := start.Add(dur)
	for i := range g {
		wg.Go(func() {
			name := []byte(prefix + strconv.Itoa(i) + ":")
			base := len(name)
			for k := 0; ; k++ {
				if ops > 0 {
					if left.Add(-1) < 0 {
						return
					}
				} else if k%8 == 0 && time.Now().After(end) {
					return
				}
				key := string(strconv.AppendInt(name[:base], int64(k), 10))
				t0 := time.Now()
				err := ws[i].Acquire(ctx, key)
				if err == nil {
					err = ws[i].Release(ctx)
				}
				if err == nil {
					lats[i] = append(lats[i], time.Since(t0))
				} else if errs.Add(1) == 1 {
					firstErr.Store(err)
				}
				if ctx.Err() != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	r := runResult{elapsed: time.Since(start), cpu: cpuTime() - cpu0, errs: int(errs.Load())}
	if e, ok := firstErr.Load().(error); ok {
		r.firstErr = e
	}
	for _, l := range lats {
		r.lat = append(r.lat, l...)
	}
	r.ops = len(r.lat)
	return r
}

// cpuTime is the process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// implResult is one implementation's results in one cell.
type implResult struct {
	name      string
	rates     []float64 // per round
	ratio     []float64 // ÷ redsync, per round
	vsFloor   []float64
	vsRueidis []float64
	lat       []time.Duration
	cpuPerOp  []float64 // µs, per round
	errs, ops int
	firstErr  error
	server    serverCost
}

type cellResult struct {
	n, g    int
	results []*implResult
}

func (c cellResult) get(name string) *implResult {
	for _, r := range c.results {
		if r.name == name {
			return r
		}
	}
	return nil
}

func runCell(ctx context.Context, e *env, n, g int) (cellResult, error) {
	list, err := implsFor(ctx, e, n)
	if err != nil {
		return cellResult{}, err
	}
	defer func() {
		for _, i := range list {
			_ = i.Close()
		}
	}()
	cell := cellResult{n: n, g: g}
	for _, i := range list {
		cell.results = append(cell.results, &implResult{name: i.Name})
	}
	for round := range *flagRounds {
		rates := map[string]float64{}
		for k := range list {
			j := (k + round) % len(list)
			prefix := fmt.Sprintf("m:%s:%d:%d:%d:%s:", e.tag, n, g, round, list[j].Name)
			r := run(ctx, list[j], g, *flagDur, 0, prefix)
			res := cell.results[j]
			res.rates = append(res.rates, r.rate())
			res.lat = append(res.lat, r.lat...)
			res.cpuPerOp = append(res.cpuPerOp, float64(r.cpu.Microseconds())/float64(max(r.ops, 1)))
			res.ops += r.ops
			res.errs += r.errs
			if res.firstErr == nil {
				res.firstErr = r.firstErr
			}
			rates[list[j].Name] = r.rate()
		}
		for _, res := range cell.results {
			res.ratio = append(res.ratio, rates[res.name]/rates["redsync"])
			if f := rates["floor"]; f > 0 {
				res.vsFloor = append(res.vsFloor, rates[res.name]/f)
			}
			if rl := rates["rueidislock"]; rl > 0 {
				res.vsRueidis = append(res.vsRueidis, rates[res.name]/rl)
			}
		}
	}
	ops := int64(*flagServer)
	if g >= 64 {
		ops *= 4
	}
	for j, i := range list {
		cell.results[j].server = measureServer(ctx, e, n, func() int64 {
			r := run(ctx, i, g, 0, ops, fmt.Sprintf("s:%s:%d:%d:%s:", e.tag, n, g, i.Name))
			return int64(r.ops + r.errs)
		})
	}
	return cell, nil
}

// serverCost is what the servers spent per op per node.
type serverCost struct {
	cpuUS  float64            // INFO cpu (user + sys) µs per op per node
	usecUS float64            // commandstats usec per op per node (every command)
	calls  map[string]float64 // commandstats calls per op per node
	usec   map[string]float64 // commandstats usec per op per node, by command
}

// measureServer runs f (which returns its operation count) between CONFIG RESETSTAT + INFO cpu
// and INFO cpu + INFO commandstats on the first n servers.
func measureServer(ctx context.Context, e *env, n int, f func() int64) serverCost {
	before := make([]float64, n)
	for i := range n {
		_ = e.admin[i].ConfigResetStat(ctx).Err()
		before[i] = serverCPU(ctx, e.admin[i])
	}
	ops := f()
	sc := serverCost{calls: map[string]float64{}, usec: map[string]float64{}}
	per := float64(ops) * float64(n)
	for i := range n {
		sc.cpuUS += (serverCPU(ctx, e.admin[i]) - before[i]) * 1e6 / per
		info, _ := e.admin[i].Info(ctx, "commandstats").Result()
		for line := range strings.Lines(info) {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			name, isCmd := strings.CutPrefix(name, "cmdstat_")
			if !ok || !isCmd || name == "config|resetstat" || name == "hello" || name == "client" || name == "ping" || name == "select" {
				continue
			}
			for kv := range strings.SplitSeq(rest, ",") {
				k, v, _ := strings.Cut(kv, "=")
				x, _ := strconv.ParseFloat(v, 64)
				switch k {
				case "calls":
					sc.calls[name] += x / per
				case "usec":
					sc.usecUS += x / per
					sc.usec[name] += x / per
				}
			}
		}
	}
	return sc
}

func serverCPU(ctx context.Context, c *redis.Client) float64 {
	info, _ := c.Info(ctx, "cpu").Result()
	var s float64
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			x, _ := strconv.ParseFloat(v, 64)
			s += x
		}
	}
	return s
}

func printCell(c cellResult) {
	fmt.Printf("## N=%d, %d goroutine(s)\n\n", c.n, c.g)
	fmt.Println("| impl | ops/s median (range) | ÷ redsync median (range) | ÷ floor | ÷ rueidislock | p50 µs | p99 µs | client CPU µs/op | server CPU µs/op/node | ÷ redsync | cmd usec/op/node | calls/op/node | errors |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	rs := c.get("redsync")
	for _, r := range c.results {
		rl := ""
		if len(r.vsRueidis) > 0 {
			rl = f2(median(r.vsRueidis))
		}
		vf := ""
		if len(r.vsFloor) > 0 {
			vf = f2(median(r.vsFloor))
		}
		errs := strconv.Itoa(r.errs)
		if r.firstErr != nil {
			errs += fmt.Sprintf(" (%.60s)", r.firstErr.Error())
		}
		fmt.Printf("| %s | %s (%s–%s) | **%s** (%s–%s) | %s | %s | %s | %s | %.0f | %.1f | %s | %.1f | %s | %s |\n",
			r.name, f0(median(r.rates)), f0(slices.Min(r.rates)), f0(slices.Max(r.rates)),
			f2(median(r.ratio)), f2(slices.Min(r.ratio)), f2(slices.Max(r.ratio)), vf, rl,
			f0(stats.Micros(stats.Quantile(r.lat, 0.5))), f0(stats.Micros(stats.Quantile(r.lat, 0.99))),
			median(r.cpuPerOp), r.server.cpuUS, f2(r.server.cpuUS/rs.server.cpuUS), r.server.usecUS, calls(r.server.calls), errs)
	}
	fmt.Println()
}

// calls formats commandstats calls per op, largest first.
func calls(m map[string]float64) string {
	type kv struct {
		k string
		v float64
	}
	var l []kv
	for k, v := range m {
		if v >= 0.05 {
			l = append(l, kv{k, v})
		}
	}
	slices.SortFunc(l, func(a, b kv) int { return cmp.Or(cmp.Compare(b.v, a.v), cmp.Compare(a.k, b.k)) })
	var parts []string
	for _, x := range l {
		parts = append(parts, fmt.Sprintf("%s %.1f", x.k, x.v))
	}
	return strings.Join(parts, ", ")
}

// printAllocs measures allocations and bytes per op at one goroutine.
func printAllocs(ctx context.Context, e *env, ns []int) {
	fmt.Println("## Allocations per op (one goroutine, runtime.MemStats deltas, background goroutines included)")
	fmt.Println()
	fmt.Println("| N | impl | allocs/op | B/op | allocs ÷ redsync |")
	fmt.Println("|---|---|---|---|---|")
	for _, n := range ns {
		list, err := implsFor(ctx, e, n)
		if err != nil {
			log.Print(err)
			return
		}
		type ab struct{ a, b float64 }
		got := map[string]ab{}
		for _, i := range list {
			ops := int64(*flagAllocOps)
			run(ctx, i, 1, 0, 50, fmt.Sprintf("aw:%s:%d:%s:", e.tag, n, i.Name))
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			run(ctx, i, 1, 0, ops, fmt.Sprintf("a:%s:%d:%s:", e.tag, n, i.Name))
			runtime.ReadMemStats(&m1)
			got[i.Name] = ab{float64(m1.Mallocs-m0.Mallocs) / float64(ops), float64(m1.TotalAlloc-m0.TotalAlloc) / float64(ops)}
		}
		for _, i := range list {
			fmt.Printf("| %d | %s | %.0f | %.0f | %s |\n", n, i.Name, got[i.Name].a, got[i.Name].b, f2(got[i.Name].a/got["redsync"].a))
			_ = i.Close()
		}
	}
	fmt.Println()
}

// multiWorker takes 8 resources: with TryAcquireAll (all) or 8
// TryAcquires one after another (seq), then releases the 8 leases.
type multiWorker struct {
	l      *redlock.Locker
	all    bool
	leases []*redlock.Lease
	names  [8]string
}

func (w *multiWorker) Acquire(ctx context.Context, key string) error {
	for i := range w.names {
		w.names[i] = key + ":" + strconv.Itoa(i)
	}
	if w.all {
		var err error
		w.leases, err = w.l.TryAcquireAll(ctx, w.names[:]...)
		return err
	}
	w.leases = w.leases[:0]
	for _, name := range w.names {
		ls, err := w.l.TryAcquire(ctx, name)
		if err != nil {
			_ = w.Release(ctx)
			return err
		}
		w.leases = append(w.leases, ls)
	}
	return nil
}

func (w *multiWorker) Release(ctx context.Context) error {
	var errs []error
	for _, ls := range w.leases {
		errs = append(errs, ls.Release(ctx))
	}
	w.leases = w.leases[:0]
	return errors.Join(errs...)
}

func multiImpl(name string, nodes []redlock.Node, all bool) (*impls.Impl, error) {
	l, err := redlock.New(nodes, redlock.Config{})
	if err != nil {
		return nil, err
	}
	return &impls.Impl{Name: name, NewWorker: func() impls.Worker { return &multiWorker{l: l, all: all} }, Close: l.Close}, nil
}

// printAcquireAll compares AcquireAll of 8 with 8 sequential
// acquisitions, interleaved, over both transports.
func printAcquireAll(ctx context.Context, e *env, n int) {
	rnodes := make([]redlock.Node, n)
	for i := range n {
		rnodes[i] = e.rNodes[i]
	}
	var list []*impls.Impl
	for _, spec := range []struct {
		name  string
		nodes []redlock.Node
		all   bool
	}{{"all8", e.ourNodes[n], true}, {"seq8", e.ourNodes[n], false}, {"all8R", rnodes, true}, {"seq8R", rnodes, false}} {
		i, err := multiImpl(spec.name, spec.nodes, spec.all)
		if err != nil {
			log.Print(err)
			return
		}
		list = append(list, i)
	}
	defer func() {
		for _, i := range list {
			_ = i.Close()
		}
	}()
	fmt.Printf("## AcquireAll of 8 vs 8 sequential TryAcquires (N=%d; each op takes 8 fresh resources and releases them)\n\n", n)
	fmt.Println("| g | impl | sets/s median | resources/s | all ÷ seq (range) | p50 µs | allocs/op (g=1) | errors |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, g := range []int{1, 64} {
		res := make([]*implResult, len(list))
		for j := range list {
			res[j] = &implResult{name: list[j].Name}
		}
		for round := range *flagRounds {
			for k := range list {
				j := (k + round) % len(list)
				r := run(ctx, list[j], g, *flagDur, 0, fmt.Sprintf("am:%s:%d:%d:%d:%s:", e.tag, n, g, round, list[j].Name))
				res[j].rates = append(res[j].rates, r.rate())
				res[j].lat = append(res[j].lat, r.lat...)
				res[j].errs += r.errs
				if res[j].firstErr == nil {
					res[j].firstErr = r.firstErr
				}
			}
			for j := 0; j < len(list); j += 2 {
				res[j].ratio = append(res[j].ratio, res[j].rates[round]/res[j+1].rates[round])
			}
		}
		for j, i := range list {
			allocs := ""
			if g == 1 {
				var m0, m1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m0)
				run(ctx, i, 1, 0, 100, fmt.Sprintf("ama:%s:%d:%s:", e.tag, n, i.Name))
				runtime.ReadMemStats(&m1)
				allocs = f0(float64(m1.Mallocs-m0.Mallocs) / 100)
			}
			ratio := ""
			if j%2 == 0 {
				ratio = fmt.Sprintf("**%s** (%s–%s)", f2(median(res[j].ratio)), f2(slices.Min(res[j].ratio)), f2(slices.Max(res[j].ratio)))
			}
			errs := strconv.Itoa(res[j].errs)
			if res[j].firstErr != nil {
				errs += fmt.Sprintf(" (%.60s)", res[j].firstErr.Error())
			}
			fmt.Printf("| %d | %s | %s | %s | %s | %s | %s | %s |\n", g, i.Name, f0(median(res[j].rates)), f0(8*median(res[j].rates)),
				ratio, f0(stats.Micros(stats.Quantile(res[j].lat, 0.5))), allocs, errs)
		}
	}
	fmt.Println()
}

// printTargets prints issue 36's targets against the medians of the run.
func printTargets(cells []cellResult) {
	fmt.Println("## Issue 36's targets (medians of the in-round ratios)")
	fmt.Println()
	fmt.Println("| target | goal | ours (go-redis) | oursR (rueidis) |")
	fmt.Println("|---|---|---|---|")
	find := func(n, g int) *cellResult {
		for i := range cells {
			if cells[i].n == n && cells[i].g == g {
				return &cells[i]
			}
		}
		return nil
	}
	row := func(what, goal string, n, g int, f func(*implResult, cellResult) float64) {
		c := find(n, g)
		if c == nil {
			return
		}
		cell := func(name string) string {
			r := c.get(name)
			if r == nil {
				return "–"
			}
			return f2(f(r, *c))
		}
		fmt.Printf("| %s | %s | %s | %s |\n", what, goal, cell("ours"), cell("oursR"))
	}
	byRedsync := func(r *implResult, _ cellResult) float64 { return median(r.ratio) }
	row("N=1, g=1 ÷ redsync", "≥ 1.0", 1, 1, byRedsync)
	row("N=3, g=1 ÷ redsync", "≥ 1.15", 3, 1, byRedsync)
	row("N=5, g=1 ÷ redsync", "≥ 1.15", 5, 1, byRedsync)
	row("N=3, g=64 ÷ redsync", "≥ 2", 3, 64, byRedsync)
	row("N=1, g=64 ÷ rueidislock", "≥ 1.0", 1, 64, func(r *implResult, _ cellResult) float64 { return median(r.vsRueidis) })
	for _, n := range []int{1, 3, 5} {
		for _, g := range []int{1, 64} {
			row(fmt.Sprintf("server CPU/op/node ÷ redsync, N=%d g=%d", n, g), "≤ 1.2", n, g, func(r *implResult, c cellResult) float64 {
				return r.server.cpuUS / c.get("redsync").server.cpuUS
			})
		}
	}
	fmt.Println()
}

// profile runs one implementation in one cell under the profilers.
func profile(ctx context.Context, e *env, n, g int) error {
	list, err := implsFor(ctx, e, n)
	if err != nil {
		return err
	}
	defer func() {
		for _, i := range list {
			_ = i.Close()
		}
	}()
	var impl *impls.Impl
	for _, i := range list {
		if i.Name == *flagProfile {
			impl = i
		}
	}
	if impl == nil {
		return fmt.Errorf("no implementation %q", *flagProfile)
	}
	dur := *flagDur
	if dur == 400*time.Millisecond {
		dur = 10 * time.Second
	}
	if *flagMemProf != "" {
		runtime.MemProfileRate = 4096
	}
	if *flagCPUProf != "" {
		f, err := os.Create(*flagCPUProf)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	sc := measureServer(ctx, e, n, func() int64 {
		r := run(ctx, impl, g, dur, 0, fmt.Sprintf("p:%s:", e.tag))
		fmt.Printf("%s N=%d g=%d: %.0f ops/s, %d errors, client CPU %.0f µs/op\n", impl.Name, n, g, r.rate(), r.errs, float64(r.cpu.Microseconds())/float64(max(r.ops, 1)))
		if *flagCPUProf != "" {
			pprof.StopCPUProfile()
		}
		return int64(r.ops + r.errs)
	})
	fmt.Printf("server per op per node: CPU %.1f µs, commands' usec %.1f\n  calls: %s\n  usec:  %s\n", sc.cpuUS, sc.usecUS, calls(sc.calls), calls(sc.usec))
	if *flagMemProf != "" {
		f, err := os.Create(*flagMemProf)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		return pprof.Lookup("allocs").WriteTo(f, 0)
	}
	return nil
}

func ints(s string) []int {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil {
			log.Fatalf("bad number %q", f)
		}
		out = append(out, v)
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func f0(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
