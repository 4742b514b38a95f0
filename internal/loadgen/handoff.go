package loadgen

import (
	"sync"
	"time"
)

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

// handoffState is the tracker's record of one resource.
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
