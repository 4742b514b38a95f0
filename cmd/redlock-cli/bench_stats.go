package main

import (
	"math"
	"math/bits"
	"sync"
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

// latencyHist is a histogram of durations that many goroutines record into
// at once, without locks.
type latencyHist struct {
	counts []atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Int64 // nanoseconds
	max    atomic.Int64
}

func newLatencyHist() *latencyHist {
	return &latencyHist{counts: make([]atomic.Uint64, histBuckets)}
}

// record adds one duration; a negative one counts as zero.
func (h *latencyHist) record(d time.Duration) {
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

// snapshot copies the histogram. Taken while others record, it may be
// slightly inconsistent (a count without its bucket), never wrong by more
// than the records in flight.
func (h *latencyHist) snapshot() histSnapshot {
	s := histSnapshot{counts: make([]uint64, len(h.counts)), max: time.Duration(h.max.Load()), sum: time.Duration(h.sum.Load())}
	for i := range h.counts {
		c := h.counts[i].Load()
		s.counts[i] = c
		s.n += c
	}
	return s
}

// histSnapshot is a copy of a latencyHist, for computing its statistics.
type histSnapshot struct {
	counts []uint64
	n      uint64
	sum    time.Duration
	max    time.Duration
}

// quantile returns the q-quantile (0 < q <= 1) by nearest rank: the
// smallest recorded value with at least q of the values at or below it,
// as the middle of its bucket (exact below 256ns, else within 0.8%; the
// maximum in the overflow bucket), and never above the maximum. It is 0 with no values; q = 1 is the maximum.
func (s histSnapshot) quantile(q float64) time.Duration {
	if s.n == 0 {
		return 0
	}
	if q >= 1 {
		return s.max
	}
	rank := uint64(math.Ceil(q * float64(s.n)))
	rank = min(max(rank, 1), s.n)
	var seen uint64
	for i, c := range s.counts {
		if seen += c; seen >= rank {
			if i == len(s.counts)-1 {
				return s.max // the overflow bucket: the maximum is the best guess
			}
			low, width := histBounds(i)
			return min(time.Duration(low+(width-1)/2), s.max)
		}
	}
	return s.max
}

// mean is the average value, 0 with none.
func (s histSnapshot) mean() time.Duration {
	if s.n == 0 {
		return 0
	}
	return s.sum / time.Duration(s.n)
}

// handoffKind says how a resource came to its new holder.
type handoffKind int

const (
	// handoffNone: the resource was free when the client asked (or this is
	// its first holder, or its last holder's release was not seen).
	handoffNone handoffKind = iota
	// handoffOther: another client released it while this one waited.
	handoffOther
	// handoffSame: the client that released it last took it again, while
	// other clients share the resource.
	handoffSame
)

// handoffTracker follows, per resource, who released it last and when, to
// measure hand-offs: the time from one holder's Release call to the next
// holder's Acquire returning, when the next holder is a different client
// that was already waiting. Only the holder of a resource touches its
// state, so its lock is uncontended.
type handoffTracker struct {
	res []handoffState
}

type handoffState struct {
	mu         sync.Mutex
	shared     bool // more than one client uses the resource
	pending    bool // released, and not taken since
	releaser   int
	releasedAt time.Time
}

// newHandoffTracker tracks resources resources, used by clients clients in
// turn (client c uses resource c % resources).
func newHandoffTracker(clients, resources int) *handoffTracker {
	h := &handoffTracker{res: make([]handoffState, resources)}
	for r := range h.res {
		h.res[r].shared = clients/resources+boolInt(r < clients%resources) > 1
	}
	return h
}

// boolInt is 1 for true.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// releasing records that client starts releasing resource r at t.
func (h *handoffTracker) releasing(r, client int, t time.Time) {
	s := &h.res[r]
	s.mu.Lock()
	s.pending, s.releaser, s.releasedAt = true, client, t
	s.mu.Unlock()
}

// acquired records that client, which called Acquire at asked, got resource
// r at got. It returns how the resource came to it and, for handoffOther,
// the hand-off latency.
func (h *handoffTracker) acquired(r, client int, asked, got time.Time) (handoffKind, time.Duration) {
	s := &h.res[r]
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.pending {
		return handoffNone, 0
	}
	s.pending = false
	switch {
	case s.releaser == client:
		if s.shared {
			return handoffSame, 0
		}
		return handoffNone, 0
	case asked.Before(s.releasedAt):
		return handoffOther, got.Sub(s.releasedAt)
	}
	return handoffNone, 0
}

// fairShares returns the lowest and highest ratio of a client's
// acquisitions to its fair share, when client c uses resource c %
// resources: the acquisitions of its resource divided among the clients
// that use it. 1 is fair; both are 0 when there were no acquisitions.
// Resources no client acquired are left out.
func fairShares(perClient []int64, resources int) (lo, hi float64) {
	total := make([]int64, resources)
	users := make([]int64, resources)
	for c, n := range perClient {
		total[c%resources] += n
		users[c%resources]++
	}
	first := true
	for c, n := range perClient {
		r := c % resources
		if total[r] == 0 {
			continue
		}
		share := float64(n) * float64(users[r]) / float64(total[r])
		if first {
			lo, hi, first = share, share, false
			continue
		}
		lo, hi = min(lo, share), max(hi, share)
	}
	return lo, hi
}
