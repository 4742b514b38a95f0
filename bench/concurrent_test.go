package bench_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e6344662/go-redlock/bench/internal/impls"
	"github.com/e6344662/go-redlock/bench/internal/stats"
	"github.com/e6344662/go-redlock/testutil"
)

// concurrentRounds is how many slices each implementation's b.N ops are cut
// into in BenchmarkConcurrent; the implementations take turns slice by
// slice.
const concurrentRounds = 10

// concurrentImpls builds the implementations compared by
// BenchmarkConcurrent on the first n servers: redlock (batched node
// calls), redlock-unbatched (the same Locker over nodes that make one
// round trip per call: the transport before issue 24), redsync, and on
// one node bsm/redislock and rueidislock.
func concurrentImpls(b *testing.B, c *testutil.RedisCluster, n int) []*impls.Impl {
	b.Helper()
	nodes := c.Nodes()[:n]
	rl, err := impls.Redlock("redlock", nodes, impls.Try, true)
	if err != nil {
		b.Fatal(err)
	}
	plain, err := impls.Redlock("redlock-unbatched", impls.Unbatched(c.Nodes()[:n]), impls.Try, true)
	if err != nil {
		b.Fatal(err)
	}
	list := []*impls.Impl{rl, plain, impls.Redsync("redsync", clients(c, n), impls.RedsyncOptions{Tries: 1})}
	if n == 1 {
		rue, err := impls.Rueidislock("rueidislock", c.Server(0).Addr())
		if err != nil {
			b.Fatal(err)
		}
		list = append(list, impls.Redislock("redislock", c.Server(0).Client()), rue)
	}
	return list
}

// BenchmarkConcurrent is many goroutines (1, 64, 256), each taking and
// releasing fresh names (per-entity locks: no contention), on N=1 and N=3
// nodes: redlock TryAcquire+Release with fencing, the same Locker over
// unbatched nodes, redsync Lock+Unlock (one try), and on one node
// bsm/redislock and rueidislock. Each implementation's b.N ops are cut into
// slices that the implementations run in turns (the order rotating), with
// the given number of goroutines each, so that load from other processes
// falls on all of them alike. It reports each one's ops/s (its ops over the
// time its own slices took), p50 and p99 latency, and the ratios the
// targets of issue 24 are about: ops-vs-redsync (redlock's ops/s over
// redsync's), p99-vs-redsync, ops-vs-unbatched (the lone caller must not
// get slower), and on one node ops-vs-rueidislock.
func BenchmarkConcurrent(b *testing.B) {
	c := startServers(b, 3)
	for _, n := range []int{1, 3} {
		list := concurrentImpls(b, c, n)
		for _, g := range []int{1, 64, 256} {
			b.Run(fmt.Sprintf("N=%d/goroutines=%d", n, g), func(b *testing.B) {
				ctx := context.Background()
				ws := make([][]impls.Worker, len(list))
				keys := make([][]string, len(list))
				lat := make([][]time.Duration, len(list))
				took := make([]time.Duration, len(list))
				for j, impl := range list {
					ws[j] = make([]impls.Worker, g)
					var wg sync.WaitGroup
					for k := range ws[j] {
						ws[j][k] = impl.NewWorker()
						wg.Go(func() { // open the connections
							if err := cycle(ctx, ws[j][k], fmt.Sprintf("warm:%s:%d:%d", impl.Name, round.Add(1), k)); err != nil {
								b.Error(err)
							}
						})
					}
					wg.Wait()
					keys[j] = freshKeys(b, impl)
					lat[j] = make([]time.Duration, b.N)
				}
				if b.Failed() {
					return
				}
				var errs opErrors
				b.ResetTimer()
				per := (b.N + concurrentRounds - 1) / concurrentRounds
				for r := range concurrentRounds {
					lo, hi := min(r*per, b.N), min((r+1)*per, b.N)
					for k := range list {
						j := (r + k) % len(list)
						var next atomic.Int64
						next.Store(int64(lo))
						var wg sync.WaitGroup
						t0 := time.Now()
						for _, w := range ws[j] {
							wg.Go(func() {
								for {
									i := next.Add(1) - 1
									if i >= int64(hi) {
										return
									}
									s := time.Now()
									errs.note(cycle(ctx, w, keys[j][i]))
									lat[j][i] = time.Since(s)
								}
							})
						}
						wg.Wait()
						took[j] += time.Since(t0)
					}
				}
				b.StopTimer()
				errs.check(b, len(list)*b.N)
				rate := make([]float64, len(list))
				p99 := make([]time.Duration, len(list))
				for j, impl := range list {
					rate[j] = float64(b.N) / took[j].Seconds()
					p99[j] = stats.Quantile(lat[j], 0.99)
					b.ReportMetric(rate[j], impl.Name+"-ops/s")
					b.ReportMetric(stats.Micros(stats.Quantile(lat[j], 0.50)), impl.Name+"-p50-us")
					b.ReportMetric(stats.Micros(p99[j]), impl.Name+"-p99-us")
				}
				// list: redlock, redlock-unbatched, redsync[, redislock, rueidislock]
				b.ReportMetric(rate[0]/rate[2], "ops-vs-redsync")
				b.ReportMetric(float64(p99[0])/float64(p99[2]), "p99-vs-redsync")
				b.ReportMetric(rate[0]/rate[1], "ops-vs-unbatched")
				if len(list) == 5 {
					b.ReportMetric(rate[0]/rate[4], "ops-vs-rueidislock")
				}
			})
		}
		for _, impl := range list {
			if err := impl.Close(); err != nil {
				b.Error(err)
			}
		}
	}
}
