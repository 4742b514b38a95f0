package bench_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/e6344662/go-redlock/bench/internal/impls"
	"github.com/e6344662/go-redlock/bench/internal/stats"
)

// BenchmarkInterleaved is BenchmarkUncontended with the implementations
// interleaved op by op (floor, redlock, redsync, in an order that rotates
// every iteration) on the same servers, so that load from other processes
// falls on all of them alike and the ratios the targets are about stay
// meaningful on a busy machine. One op is one acquire+release of each
// implementation. It reports each one's p50 and mean, and the ratios:
// p50-vs-floor (redlock p50 / floor p50), p50-vs-redsync, and
// ops-vs-redsync (redsync mean latency / redlock mean latency, i.e.
// redlock's ops/s over redsync's; the mean makes it sensitive to stalls).
// Each N runs twice: names=fresh takes a name never used before for every
// op (per-entity locks), names=reused the same name every time.
func BenchmarkInterleaved(b *testing.B) {
	c := startServers(b, 7)
	for _, n := range []int{1, 3, 5, 7} {
		list := uncontendedImpls(b, c, n)[:3] // floor, redlock, redsync
		for _, names := range []string{"fresh", "reused"} {
			b.Run(fmt.Sprintf("N=%d/names=%s", n, names), func(b *testing.B) {
				lat := interleave(b, list, names == "reused")
				mean := make([]time.Duration, len(list))
				for j, impl := range list {
					var sum time.Duration
					for _, d := range lat[j] {
						sum += d
					}
					mean[j] = sum / time.Duration(b.N)
					b.ReportMetric(stats.Micros(stats.Quantile(lat[j], 0.5)), impl.Name+"-p50-us")
				}
				floorP50, redlockP50, redsyncP50 := stats.Quantile(lat[0], 0.5), stats.Quantile(lat[1], 0.5), stats.Quantile(lat[2], 0.5)
				b.ReportMetric(float64(redlockP50)/float64(floorP50), "p50-vs-floor")
				b.ReportMetric(float64(redlockP50)/float64(redsyncP50), "p50-vs-redsync")
				b.ReportMetric(float64(mean[2])/float64(mean[1]), "ops-vs-redsync")
			})
		}
		for _, impl := range list {
			if err := impl.Close(); err != nil {
				b.Error(err)
			}
		}
	}
}

// interleave runs b.N acquire+release cycles of every implementation of
// list, interleaved op by op in an order that rotates every iteration, on
// a fresh name per op (or, reused, the same name every time), after one
// warm-up cycle each; it returns each one's latencies, by op.
func interleave(b *testing.B, list []*impls.Impl, reused bool) [][]time.Duration {
	ctx := context.Background()
	ws := make([]impls.Worker, len(list))
	keys := make([][]string, len(list))
	lat := make([][]time.Duration, len(list))
	for j, impl := range list {
		ws[j] = impl.NewWorker()
		if err := cycle(ctx, ws[j], freshKeys(b, impl)[0]); err != nil {
			b.Fatal(err)
		}
		keys[j] = freshKeys(b, impl)
		if reused {
			for i := range keys[j] {
				keys[j][i] = keys[j][0]
			}
		}
		lat[j] = make([]time.Duration, b.N)
	}
	var errs opErrors
	b.ResetTimer()
	for i := range b.N {
		for k := range list {
			j := (i + k) % len(list)
			t0 := time.Now()
			errs.note(cycle(ctx, ws[j], keys[j][i]))
			lat[j][i] = time.Since(t0)
		}
	}
	b.StopTimer()
	errs.check(b, len(list)*b.N)
	return lat
}
