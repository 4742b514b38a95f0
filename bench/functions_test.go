package bench_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

var fnSlice = flag.Duration("fn.slice", 300*time.Millisecond, "BenchmarkFunctions: how long each side runs in a round")

// BenchmarkFunctions compares the two ways a redisnode.Node runs the
// scripts (issue 36): as FCALLs of the scripts' function library (the
// default on Redis 7) and as EVALSHA (nodes made WithoutFunctions), with a
// default Config, a fresh name per op (TryAcquire + Release), at N = 1
// and 3 nodes and 1 and 64 goroutines. Each of b.N rounds runs both sides
// for -fn.slice each, in an order that alternates, on the same servers,
// so that the load of other processes falls on both alike. It reports,
// as medians over the rounds, each side's ops/s and server CPU per op per
// node (INFO cpu, user + sys, summed over the N servers ÷ ops ÷ N), and
// the ratios fcall/evalsha of both. Run it with -benchtime=Nx (rounds).
func BenchmarkFunctions(b *testing.B) {
	c := startServers(b, 3)
	for _, n := range []int{1, 3} {
		for _, g := range []int{1, 64} {
			b.Run(fmt.Sprintf("N=%d/goroutines=%d", n, g), func(b *testing.B) {
				benchFunctions(b, c, n, g)
			})
		}
	}
}

// fnSide is one side of BenchmarkFunctions: a Locker and what each round
// measured.
type fnSide struct {
	name       string
	l          *redlock.Locker
	opsPerSec  []float64
	cpuPerOpUS []float64
}

func benchFunctions(b *testing.B, c *testutil.RedisCluster, n, g int) {
	ctx := context.Background()
	var sides []*fnSide
	for _, name := range []string{"fcall", "evalsha"} {
		nodes := make([]redlock.Node, n)
		for i := range n {
			node := redisnode.New(c.Server(i).Client())
			if name == "evalsha" {
				node.WithoutFunctions()
			}
			nodes[i] = node
		}
		l, err := redlock.New(nodes, redlock.Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = l.Close() })
		sides = append(sides, &fnSide{name: name, l: l})
	}
	r := round.Add(1)
	for _, s := range sides { // warm-up: load the library, fill the pools
		runFor(b, ctx, s, c, n, g, fmt.Sprintf("fnw:%d:%s", r, s.name), 100*time.Millisecond)
		s.opsPerSec, s.cpuPerOpUS = nil, nil
	}
	var opsRatio, cpuRatio []float64
	b.ResetTimer()
	for i := range b.N {
		order := sides
		if i%2 == 1 {
			order = []*fnSide{sides[1], sides[0]}
		}
		for _, s := range order {
			runFor(b, ctx, s, c, n, g, fmt.Sprintf("fn:%d:%d:%s", r, i, s.name), *fnSlice)
		}
		opsRatio = append(opsRatio, sides[0].opsPerSec[i]/sides[1].opsPerSec[i])
		cpuRatio = append(cpuRatio, sides[0].cpuPerOpUS[i]/sides[1].cpuPerOpUS[i])
	}
	b.StopTimer()
	for _, s := range sides {
		b.ReportMetric(median(s.opsPerSec), s.name+"-ops/s")
		b.ReportMetric(median(s.cpuPerOpUS), s.name+"-srvcpu-us/op/node")
	}
	b.ReportMetric(median(opsRatio), "ops-fcall/evalsha")
	b.ReportMetric(median(cpuRatio), "srvcpu-fcall/evalsha")
}

// runFor runs g goroutines of TryAcquire + Release on fresh names (prefix
// and a number) through side s for d, and records its ops/s and the
// servers' CPU per op per node.
func runFor(b *testing.B, ctx context.Context, s *fnSide, c *testutil.RedisCluster, n, g int, prefix string, d time.Duration) {
	cpu0 := serversCPU(b, c, n)
	var ops, seq atomic.Int64
	var errs opErrors
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			for time.Now().Before(end) {
				name := prefix + ":" + strconv.FormatInt(seq.Add(1), 10)
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				lease, err := s.l.TryAcquire(cctx, name)
				if err == nil {
					err = lease.Release(cctx)
				}
				cancel()
				errs.note(err)
				if err == nil {
					ops.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := serversCPU(b, c, n) - cpu0
	errs.check(b, int(ops.Load()))
	o := float64(max(ops.Load(), 1))
	s.opsPerSec = append(s.opsPerSec, o/elapsed.Seconds())
	s.cpuPerOpUS = append(s.cpuPerOpUS, cpu.Seconds()*1e6/o/float64(n))
}

// serversCPU sums used_cpu_user and used_cpu_sys of INFO cpu over the
// first n servers of c.
func serversCPU(b *testing.B, c *testutil.RedisCluster, n int) time.Duration {
	var total float64
	for i := range n {
		info, err := c.Server(i).Do(context.Background(), "INFO", "cpu").Text()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				total += f
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}

// median is the median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkFunctionScripts isolates the server's cost of one script call:
// on one node, pipelines of 100 acquire calls on fresh names (the keys
// and arguments a default Locker sends), then 100 releases of them, sent
// as EVALSHA and as FCALL in alternate rounds. It reports, per
// acquire+release pair of each, the server CPU (INFO cpu: the pipelines'
// reading and writing included) and the scripts' own time (INFO
// commandstats usec of EVALSHA or FCALL), as medians over b.N rounds, and
// the ratio of the CPU.
func BenchmarkFunctionScripts(b *testing.B) {
	c := startServers(b, 1)
	ctx := context.Background()
	cl := c.Server(0).Client()
	lib := scripts.Functions
	if err := cl.FunctionLoad(ctx, lib.Source()).Err(); err != nil && !strings.Contains(err.Error(), "already exists") {
		b.Fatal(err)
	}
	for _, s := range []*scripts.Script{scripts.Acquire, scripts.Release} {
		if err := cl.ScriptLoad(ctx, s.Source()).Err(); err != nil {
			b.Fatal(err)
		}
	}
	r := round.Add(1)
	run := func(byFcall bool, i int) (cpu, usec float64) { return scriptRound(b, c, cl, byFcall, r, i) }
	var fc, es, ratio, fu, eu []float64
	b.ResetTimer()
	for i := range b.N {
		var f, e, fs, evs float64
		if i%2 == 0 {
			f, fs = run(true, i)
			e, evs = run(false, i)
		} else {
			e, evs = run(false, i)
			f, fs = run(true, i)
		}
		fc, es, ratio = append(fc, f), append(es, e), append(ratio, f/e)
		fu, eu = append(fu, fs), append(eu, evs)
	}
	b.ReportMetric(median(fc), "fcall-srvcpu-us/pair")
	b.ReportMetric(median(es), "evalsha-srvcpu-us/pair")
	b.ReportMetric(median(ratio), "srvcpu-fcall/evalsha")
	b.ReportMetric(median(fu), "fcall-usec/pair")
	b.ReportMetric(median(eu), "evalsha-usec/pair")
}

// commandUsec is INFO commandstats' usec of command cmd on c's first
// server: the time spent running it (a script's nested calls included).
func commandUsec(b *testing.B, c *testutil.RedisCluster, cmd string) int64 {
	info, err := c.Server(0).Do(context.Background(), "INFO", "commandstats").Text()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":")
		if !ok {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					b.Fatal(err)
				}
				return n
			}
		}
	}
	return 0
}

// scriptRound runs, on c's first server through cl, a pipeline of batch
// acquires on fresh names (round r, step i) and one of their releases, by
// FCALL or EVALSHA, and returns the server CPU and the script command's
// usec per acquire+release pair.
func scriptRound(b *testing.B, c *testutil.RedisCluster, cl *redis.Client, byFcall bool, r int64, i int) (cpu, usec float64) {
	ctx := context.Background()
	lib := scripts.Functions
	const batch = 100
	keys := func(j int) []string {
		k := fmt.Sprintf("redlock:{fs:%d:%d:%t:%d}", r, i, byFcall, j)
		return []string{k, k + ":fence", k + ":queue", k + ":queue:exp", testutil.DefaultMarker}
	}
	call := func(p redis.Pipeliner, s *scripts.Script, keys []string, args ...any) {
		if byFcall {
			fn, _ := lib.Function(s)
			p.FCall(ctx, fn, keys, args...)
		} else {
			p.EvalSha(ctx, s.Hash(), keys, args...)
		}
	}
	cmd := "evalsha"
	if byFcall {
		cmd = "fcall"
	}
	usec0 := commandUsec(b, c, cmd)
	cpu0 := serversCPU(b, c, 1)
	for _, s := range []*scripts.Script{scripts.Acquire, scripts.Release} {
		p := cl.Pipeline()
		for j := range batch {
			if s == scripts.Acquire {
				call(p, s, keys(j), "0123456789abcdef0123456789abcdef", "me", 10000, "none", "", "alone", "", "", 0, 0, "none", "", "", "", "", 10000)
			} else {
				call(p, s, keys(j), "0123456789abcdef0123456789abcdef", keys(j)[0]+":released", "01234567", "announce", "none", "", "none", "")
			}
		}
		cmds, err := p.Exec(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if v, ok := cmds[0].(*redis.Cmd).Val().([]any); s == scripts.Acquire && (!ok || v[0] != "granted") {
			b.Fatalf("not granted: %v", cmds[0])
		}
	}
	cpu = (serversCPU(b, c, 1) - cpu0).Seconds() * 1e6 / batch
	usec = float64(commandUsec(b, c, cmd)-usec0) / batch
	return cpu, usec
}
