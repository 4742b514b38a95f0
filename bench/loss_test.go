package bench_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/e6344662/go-redlock/bench/internal/impls"
	"github.com/e6344662/go-redlock/bench/internal/stats"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// BenchmarkLossCheck measures what the data-loss rule (docs/design.md
// §6.2) costs an uncontended acquire+release at N=3 with fresh names: the
// default Config (the marker read in the acquire script) against the rule
// turned off (RejoinDelay -1), interleaved op by op on the same durable
// servers. With evict=yes the servers have maxmemory and volatile-lru, so
// the script also reads INFO stats on every grant. It reports each one's
// p50 and the ratio ops-vs-off (the rule's ops/s over the rule off's).
func BenchmarkLossCheck(b *testing.B) {
	for _, evict := range []bool{false, true} {
		opts := []testutil.Option{}
		if evict {
			opts = append(opts, testutil.WithConfig("maxmemory 512mb", "maxmemory-policy volatile-lru"))
		}
		c := testutil.StartRedis(b, 3, opts...) // AOF always: no rejoin wait after the start
		on, err := impls.Redlock("on", c.Nodes(), impls.Try, true, func(cfg *redlock.Config) { cfg.RejoinDelay = 0 })
		if err != nil {
			b.Fatal(err)
		}
		off, err := impls.Redlock("off", c.Nodes(), impls.Try, true)
		if err != nil {
			b.Fatal(err)
		}
		list := []*impls.Impl{on, off}
		b.Run(fmt.Sprintf("N=3/evict=%v", map[bool]string{false: "no", true: "yes"}[evict]), func(b *testing.B) {
			lat := interleave(b, list, false)
			var sum [2]time.Duration
			for j, impl := range list {
				for _, d := range lat[j] {
					sum[j] += d
				}
				b.ReportMetric(stats.Micros(stats.Quantile(lat[j], 0.5)), impl.Name+"-p50-us")
			}
			b.ReportMetric(float64(sum[1])/float64(sum[0]), "ops-vs-off")
		})
		for _, impl := range list {
			if err := impl.Close(); err != nil {
				b.Error(err)
			}
		}
	}
}
