// Package stats computes the latency summaries the benchmarks report.
package stats

import (
	"slices"
	"time"
)

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of ds by the nearest-rank
// method, sorting ds in place; zero when ds is empty.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	if !slices.IsSorted(ds) {
		slices.Sort(ds)
	}
	i := int(q*float64(len(ds))+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// Micros converts d to microseconds, for ReportMetric.
func Micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
