package bench_test

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/bench/internal/hotkey"
	"github.com/e6344662/go-redlock/bench/internal/impls"
	"github.com/e6344662/go-redlock/bench/internal/stats"
	"github.com/e6344662/go-redlock/testutil"
)

var (
	aof     = flag.Bool("bench.aof", false, "keep testutil's AOF persistence (appendfsync always) instead of appendonly no")
	hold    = flag.Duration("bench.hold", time.Millisecond, "how long each hot-key holder keeps the lock")
	workers = flag.Int("bench.parallel", 8, "goroutines in BenchmarkParallel")
)

// round numbers every benchmark round, so that each uses fresh keys.
var round atomic.Int64

// startServers starts n redis-servers for the whole benchmark function.
func startServers(b *testing.B, n int) *testutil.RedisCluster {
	b.Helper()
	if *aof {
		return testutil.StartRedis(b, n)
	}
	return testutil.StartRedis(b, n, testutil.WithConfig("appendonly no"))
}

// clients returns a new go-redis client (testutil's options) to each of the
// first n servers.
func clients(c *testutil.RedisCluster, n int) []*redis.Client {
	cs := make([]*redis.Client, n)
	for i := range n {
		cs[i] = c.Server(i).Client()
	}
	return cs
}

// uncontendedImpls builds the implementations compared on n nodes, each over
// its own clients; mode selects one try or waiting.
func uncontendedImpls(b *testing.B, c *testutil.RedisCluster, n int) []*impls.Impl {
	b.Helper()
	nodes := c.Nodes()[:n]
	rl, err := impls.Redlock("redlock", nodes, impls.Try, true)
	if err != nil {
		b.Fatal(err)
	}
	list := []*impls.Impl{
		impls.Floor("floor", clients(c, n)),
		rl,
		impls.Redsync("redsync", clients(c, n), impls.RedsyncOptions{Tries: 1}),
	}
	if n == 1 {
		list = append(list, impls.Redislock("redislock", c.Server(0).Client()))
	}
	return list
}

// forEachImpl runs fn as sub-benchmark N=n/impl=name for every implementation,
// nodes outermost so that the implementations compared at one N run back to
// back on the same servers.
func forEachImpl(b *testing.B, fn func(b *testing.B, impl *impls.Impl)) {
	c := startServers(b, 7)
	for _, n := range []int{1, 3, 5, 7} {
		for _, impl := range uncontendedImpls(b, c, n) {
			b.Run(fmt.Sprintf("N=%d/impl=%s", n, impl.Name), func(b *testing.B) { fn(b, impl) })
			if err := impl.Close(); err != nil {
				b.Error(err)
			}
		}
	}
}

// freshKeys returns b.N lock names never used before.
func freshKeys(b *testing.B, impl *impls.Impl) []string {
	r := round.Add(1)
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench:%s:%d:%d", impl.Name, r, i)
	}
	return keys
}

// reportLatency reports ops/s and the p50 and p99 of the per-op latencies.
func reportLatency(b *testing.B, lat []time.Duration) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(stats.Micros(stats.Quantile(lat, 0.50)), "p50-us")
	b.ReportMetric(stats.Micros(stats.Quantile(lat, 0.99)), "p99-us")
}

// opErrors counts failed ops. On this busy 2-core machine a node call now
// and then exceeds a client timeout (500ms: testutil's clients, redsync's
// 0.05 × expiry); such an op counts with its latency, and only a failure
// rate above 1% fails the benchmark.
type opErrors struct {
	mu    sync.Mutex
	n     int
	first error
}

func (e *opErrors) note(err error) {
	if err == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == 0 {
		e.first = err
	}
	e.n++
}

func (e *opErrors) check(b *testing.B, ops int) {
	b.Helper()
	e.mu.Lock()
	n, first := e.n, e.first
	e.mu.Unlock()
	if n == 0 {
		return
	}
	b.Logf("%d of %d ops failed; first: %v", n, ops, first)
	if n > max(ops/100, 1) {
		b.Errorf("too many failed ops: %d of %d", n, ops)
	}
}

// cycle takes and releases key once.
func cycle(ctx context.Context, w impls.Worker, key string) error {
	if err := w.Acquire(ctx, key); err != nil {
		return fmt.Errorf("acquire %s: %w", key, err)
	}
	if err := w.Release(ctx); err != nil {
		return fmt.Errorf("release %s: %w", key, err)
	}
	return nil
}

// BenchmarkUncontended is one goroutine taking and releasing a fresh key:
// redlock TryAcquire+Release (with fencing), redsync Lock+Unlock (one try),
// the floor, and redislock for N=1. One op is one acquire+release; besides
// its p50 and p99 it reports the p50 of the acquire and of the release alone.
func BenchmarkUncontended(b *testing.B) {
	forEachImpl(b, func(b *testing.B, impl *impls.Impl) {
		ctx := context.Background()
		w := impl.NewWorker()
		if err := cycle(ctx, w, freshKeys(b, impl)[0]); err != nil { // dial, load scripts
			b.Fatal(err)
		}
		keys := freshKeys(b, impl)
		lat := make([]time.Duration, b.N)
		acq := make([]time.Duration, b.N)
		rel := make([]time.Duration, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		var errs opErrors
		for i := range b.N {
			t0 := time.Now()
			err := w.Acquire(ctx, keys[i])
			t1 := time.Now()
			if err == nil {
				err = w.Release(ctx)
			}
			t2 := time.Now()
			errs.note(err)
			lat[i], acq[i], rel[i] = t2.Sub(t0), t1.Sub(t0), t2.Sub(t1)
		}
		b.StopTimer()
		errs.check(b, b.N)
		reportLatency(b, lat)
		b.ReportMetric(stats.Micros(stats.Quantile(acq, 0.50)), "acquire-p50-us")
		b.ReportMetric(stats.Micros(stats.Quantile(rel, 0.50)), "release-p50-us")
	})
}

// BenchmarkParallel is BenchmarkUncontended with -bench.parallel (8)
// goroutines, each with its own worker over the implementation's shared
// clients (one shared Locker for redlock), on distinct fresh keys.
func BenchmarkParallel(b *testing.B) {
	forEachImpl(b, func(b *testing.B, impl *impls.Impl) {
		ctx := context.Background()
		ws := make([]impls.Worker, *workers)
		warm := freshKeys(b, impl)[0]
		var wg sync.WaitGroup
		for g := range ws {
			ws[g] = impl.NewWorker()
			wg.Go(func() { // open one connection per goroutine and node
				if err := cycle(ctx, ws[g], fmt.Sprintf("%s:warm%d", warm, g)); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		if b.Failed() {
			return
		}
		keys := freshKeys(b, impl)
		lat := make([]time.Duration, b.N)
		var next atomic.Int64
		var errs opErrors
		b.ReportAllocs()
		b.ResetTimer()
		for _, w := range ws {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= int64(b.N) {
						return
					}
					t0 := time.Now()
					errs.note(cycle(ctx, w, keys[i]))
					lat[i] = time.Since(t0)
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		errs.check(b, b.N)
		reportLatency(b, lat)
	})
}

// BenchmarkHotKey is one key on 3 nodes contended by 4 and 16 workers, each
// holding it for -bench.hold (1ms) once acquired: redlock Acquire (waiting on
// the release announcement) with one Locker shared by all workers and with
// a Locker per worker, and redsync Lock with its default retry delay
// (50-250ms) and with 10ms. One op is one acquisition.
func BenchmarkHotKey(b *testing.B) {
	const n = 3
	c := startServers(b, n)
	for _, nw := range []int{4, 16} {
		shared, err := impls.Redlock("redlock", c.Nodes(), impls.Wait, true)
		if err != nil {
			b.Fatal(err)
		}
		own, err := impls.Redlock("redlock-own", c.Nodes(), impls.Wait, false)
		if err != nil {
			b.Fatal(err)
		}
		list := []*impls.Impl{
			shared,
			own,
			impls.Redsync("redsync", clients(c, n), impls.RedsyncOptions{Tries: 1 << 30}),
			impls.Redsync("redsync-10ms", clients(c, n), impls.RedsyncOptions{Tries: 1 << 30, RetryDelay: 10 * time.Millisecond}),
		}
		for _, impl := range list {
			ws := make([]impls.Worker, nw)
			for i := range ws {
				ws[i] = impl.NewWorker()
			}
			b.Run(fmt.Sprintf("N=%d/workers=%d/impl=%s", n, nw, impl.Name), func(b *testing.B) {
				key := fmt.Sprintf("hot:%s:%d", impl.Name, round.Add(1))
				var attempts0 int64
				if impl.Attempts != nil {
					attempts0 = impl.Attempts()
				}
				b.ReportAllocs()
				b.ResetTimer()
				res := hotkey.Run(context.Background(), ws, hotkey.Options{Key: key, Hold: *hold, Limit: int64(b.N)})
				b.StopTimer()
				if impl.Attempts != nil {
					b.ReportMetric(float64(impl.Attempts()-attempts0)/float64(max(res.Acquisitions, 1)), "attempts/acq")
				}
				if res.Overlaps > 0 {
					b.Errorf("%d acquisitions overlapped another holder", res.Overlaps)
				}
				if res.Errors > 0 {
					b.Logf("%d acquisitions or releases failed", res.Errors)
				}
				if int64(res.Errors) > max(res.Acquisitions/100, 1) {
					b.Errorf("%d of %d acquisitions or releases failed", res.Errors, res.Acquisitions)
				}
				share, starved := res.ShareRatio()
				b.ReportMetric(res.Rate(), "acq/s")
				b.ReportMetric(stats.Micros(stats.Quantile(res.Handoffs, 0.50)), "handoff-p50-us")
				b.ReportMetric(stats.Micros(stats.Quantile(res.Handoffs, 0.99)), "handoff-p99-us")
				b.ReportMetric(stats.Micros(stats.Quantile(res.Waits, 0.99)), "wait-p99-us")
				b.ReportMetric(float64(len(res.Handoffs))/float64(max(res.Acquisitions, 1)), "handoffs/acq")
				b.ReportMetric(share, "share-max/min")
				b.ReportMetric(float64(starved), "starved")
			})
			if err := impl.Close(); err != nil {
				b.Error(err)
			}
		}
	}
}
