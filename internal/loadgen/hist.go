package loadgen

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// Latency histogram layout: values in nanoseconds; below 2*histSub each
// value has its own bucket, above that every power of two is split in
// histSub buckets, so a quantile is within 1/histSub (0.8%) of the exact
// value. Values from 2^histMaxBits ns (18 minutes) on share the last bucket
// (the maximum is kept exactly). Memory is fixed: about 35 KB.
const (
	histSubBits = 7
	histSub     = 1 << histSubBits
	histMaxBits = 40
)

// histBuckets is the number of buckets.
var histBuckets = histIndex(1<<histMaxBits-1) + 1

// histIndex is the bucket of a value of v nanoseconds.
func histIndex(v uint64) int {
	if v >= 1<<histMaxBits {
		v = 1<<histMaxBits - 1
	}
	if v < 2*histSub {
		return int(v)
	}
	k := bits.Len64(v) - 1 // v is in [2^k, 2^(k+1)), k > histSubBits
	group := k - histSubBits + 1
	mantissa := v >> (k - histSubBits) // in [histSub, 2*histSub)
	return group<<histSubBits + int(mantissa) - histSub
}

// histBounds returns the smallest value of bucket i and the bucket's width.
func histBounds(i int) (low, width uint64) {
	if i < 2*histSub {
		return uint64(i), 1
	}
	group := i >> histSubBits
	mantissa := uint64(i&(histSub-1) + histSub)
	return mantissa << (group - 1), 1 << (group - 1)
}

// Hist is a histogram of durations that many goroutines record into at
// once, without locks. Make one with NewHist.
type Hist struct {
	counts []atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Int64 // nanoseconds
	max    atomic.Int64
}

// NewHist returns an empty histogram.
func NewHist() *Hist {
	return &Hist{counts: make([]atomic.Uint64, histBuckets)}
}

// Record adds one duration; a negative one counts as zero.
func (h *Hist) Record(d time.Duration) {
	d = max(d, 0)
	h.counts[histIndex(uint64(d))].Add(1)
	h.n.Add(1)
	h.sum.Add(int64(d))
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			break
		}
	}
}

// Snapshot copies the histogram. Taken while others record, it may be
// slightly inconsistent (a count without its bucket), never wrong by more
// than the records in flight.
func (h *Hist) Snapshot() Snapshot {
	s := Snapshot{counts: make([]uint64, len(h.counts)), Max: time.Duration(h.max.Load()), Sum: time.Duration(h.sum.Load())}
	for i := range h.counts {
		c := h.counts[i].Load()
		s.counts[i] = c
		s.N += c
	}
	return s
}

// Snapshot is a copy of a Hist, for computing its statistics.
type Snapshot struct {
	counts []uint64
	// N is the number of recorded values.
	N uint64
	// Sum is their total.
	Sum time.Duration
	// Max is the largest, exactly.
	Max time.Duration
}

// Quantile returns the q-quantile (0 < q <= 1) by nearest rank: the
// smallest recorded value with at least q of the values at or below it,
// as the middle of its bucket (exact below 256ns, else within 0.8%; the
// maximum in the overflow bucket), and never above the maximum. It is 0
// with no values; q = 1 is the maximum.
func (s Snapshot) Quantile(q float64) time.Duration {
	if s.N == 0 {
		return 0
	}
	if q >= 1 {
		return s.Max
	}
	rank := uint64(math.Ceil(q * float64(s.N)))
	rank = min(max(rank, 1), s.N)
	var seen uint64
	for i, c := range s.counts {
		if seen += c; seen >= rank {
			if i == len(s.counts)-1 {
				return s.Max // the overflow bucket: the maximum is the best guess
			}
			low, width := histBounds(i)
			return min(time.Duration(low+(width-1)/2), s.Max)
		}
	}
	return s.Max
}

// Mean is the average value, 0 with none.
func (s Snapshot) Mean() time.Duration {
	if s.N == 0 {
		return 0
	}
	return s.Sum / time.Duration(s.N)
}
