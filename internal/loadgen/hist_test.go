package loadgen

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHistIndexBounds: every value falls in a bucket that contains it and
// is no wider than 1/histSub of its low bound.
func TestHistIndexBounds(t *testing.T) {
	t.Parallel()
	prev := -1
	check := func(v uint64) {
		i := histIndex(v)
		require.GreaterOrEqual(t, i, prev, "index not monotonic at %d", v)
		require.Less(t, i, histBuckets)
		prev = i
		low, width := histBounds(i)
		if v < 1<<histMaxBits {
			require.True(t, low <= v && v < low+width, "v=%d in bucket %d [%d, %d)", v, i, low, low+width)
			require.LessOrEqual(t, float64(width-1), float64(low)/histSub, "bucket %d too wide", i)
		}
	}
	for v := uint64(0); v < 5000; v++ {
		check(v)
	}
	for v := uint64(5000); v < 1<<histMaxBits; v = v*17/16 + 1 {
		check(v)
	}
	check(1<<histMaxBits - 1)
	require.Equal(t, histBuckets-1, histIndex(1<<histMaxBits-1))
	require.Equal(t, histBuckets-1, histIndex(math.MaxUint64), "huge values share the last bucket")
}

// snap records ds into a fresh histogram.
func snap(ds ...time.Duration) Snapshot {
	h := NewHist()
	for _, d := range ds {
		h.Record(d)
	}
	return h.Snapshot()
}

// ns makes durations of the given nanoseconds (exact in the histogram
// below 256).
func ns(vs ...int) []time.Duration {
	out := make([]time.Duration, len(vs))
	for i, v := range vs {
		out[i] = time.Duration(v)
	}
	return out
}

// TestQuantileNearestRank: quantiles by nearest rank, exact for small
// values, with the maximum and mean.
func TestQuantileNearestRank(t *testing.T) {
	t.Parallel()
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name          string
		values        []time.Duration
		p50, p90, p99 time.Duration
		max, mean     time.Duration
	}{
		{"none", nil, 0, 0, 0, 0, 0},
		{"one", ns(7), 7, 7, 7, 7, 7},
		{"two", ns(10, 20), 10, 20, 20, 20, 15},
		{"unsorted", ns(5, 1, 4, 2, 3), 3, 5, 5, 5, 3},
		{"1..100", ns(hundred...), 50, 90, 99, 100, 50},
		{"ties", ns(9, 9, 9, 9, 200), 9, 200, 200, 200, 47},
		{"negative is zero", ns(-5, 0, 10), 0, 10, 10, 10, 3},
		{"outlier max exact", []time.Duration{1, 2, 3, 90 * time.Minute}, 2, 90 * time.Minute, 90 * time.Minute, 90 * time.Minute, (90*time.Minute + 6) / 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := snap(tt.values...)
			require.Equal(t, uint64(len(tt.values)), s.N)
			require.Equal(t, tt.p50, s.Quantile(0.5), "p50")
			require.Equal(t, tt.p90, s.Quantile(0.9), "p90")
			require.Equal(t, tt.p99, s.Quantile(0.99), "p99")
			require.Equal(t, tt.max, s.Quantile(1), "max")
			require.Equal(t, tt.max, s.Max)
			require.Equal(t, tt.mean, s.Mean(), "mean")
		})
	}
}

// TestQuantileRelativeError compares the histogram with exact nearest-rank
// quantiles of realistic latencies: within 1/histSub.
func TestQuantileRelativeError(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	var values []time.Duration
	for range 20000 {
		// log-normal around 400µs, with a tail
		values = append(values, time.Duration(400e3*math.Exp(r.NormFloat64())))
	}
	s := snap(values...)
	slices.Sort(values)
	for _, q := range []float64{0.01, 0.1, 0.5, 0.9, 0.99, 0.999} {
		exact := values[int(math.Ceil(q*float64(len(values))))-1]
		got := s.Quantile(q)
		require.InEpsilon(t, float64(exact), float64(got), 1.0/histSub, "q=%v exact %s got %s", q, exact, got)
	}
	require.Equal(t, values[len(values)-1], s.Quantile(1))
}

// TestLatencyHistConcurrent: records from many goroutines at once all
// count.
func TestLatencyHistConcurrent(t *testing.T) {
	t.Parallel()
	h := NewHist()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				h.Record(time.Duration(g*1000 + i))
			}
		})
	}
	wg.Wait()
	s := h.Snapshot()
	require.Equal(t, uint64(8000), s.N)
	require.Equal(t, time.Duration(7999), s.Max)
	require.InEpsilon(t, 3999.5, float64(s.Sum)/8000, 1e-9)
}
