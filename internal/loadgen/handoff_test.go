package loadgen

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHandoff plays sequences of acquisitions and releases on one resource
// and checks what the tracker makes of each acquisition.
func TestHandoff(t *testing.T) {
	t.Parallel()
	at := func(ms int) time.Time { return time.Unix(1000, 0).Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		release    bool
		client     int
		asked, got int // ms; for a release, got is when it started
		kind       handoffKind
		latency    time.Duration
	}
	acq := func(c, asked, got int, k handoffKind, lat time.Duration) step {
		return step{client: c, asked: asked, got: got, kind: k, latency: lat}
	}
	rel := func(c, t int) step { return step{release: true, client: c, got: t} }
	tests := []struct {
		name    string
		clients int
		steps   []step
	}{
		{"first holder", 2, []step{acq(0, 0, 1, handoffNone, 0)}},
		{"to a waiting client", 2, []step{
			acq(0, 0, 1, handoffNone, 0), rel(0, 5),
			acq(1, 2, 7, handoffOther, 2*time.Millisecond)}},
		{"to a client that asked after the release began", 2, []step{
			acq(0, 0, 1, handoffNone, 0), rel(0, 5),
			acq(1, 6, 7, handoffNone, 0)}},
		{"retaken by the releaser", 2, []step{
			acq(0, 0, 1, handoffNone, 0), rel(0, 5),
			acq(0, 5, 6, handoffSame, 0)}},
		{"retaken by the only client", 1, []step{
			acq(0, 0, 1, handoffNone, 0), rel(0, 5),
			acq(0, 5, 6, handoffNone, 0)}},
		{"a chain", 3, []step{
			acq(0, 0, 1, handoffNone, 0), rel(0, 3),
			acq(1, 0, 4, handoffOther, time.Millisecond), rel(1, 6),
			acq(2, 0, 9, handoffOther, 3*time.Millisecond), rel(2, 10),
			acq(2, 10, 11, handoffSame, 0), rel(2, 12),
			acq(0, 4, 12, handoffOther, 0)}},
		{"each release counts once", 2, []step{
			acq(0, 0, 1, handoffNone, 0), rel(0, 5),
			acq(1, 2, 6, handoffOther, time.Millisecond),
			acq(0, 6, 30, handoffNone, 0)}}, // the lease of 1 expired unreleased
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHandoffTracker(tt.clients, 1)
			for i, s := range tt.steps {
				if s.release {
					h.releasing(0, s.client, at(s.got))
					continue
				}
				kind, lat := h.acquired(0, s.client, at(s.asked), at(s.got))
				require.Equal(t, s.kind, kind, "step %d", i)
				require.Equal(t, s.latency, lat, "step %d", i)
			}
		})
	}
}

// TestHandoffSharedResources: a resource is shared when more than one
// client uses it.
func TestHandoffSharedResources(t *testing.T) {
	t.Parallel()
	// 5 clients on 3 resources: resources 0 and 1 have two clients, 2 has one.
	h := newHandoffTracker(5, 3)
	require.True(t, h.res[0].shared)
	require.True(t, h.res[1].shared)
	require.False(t, h.res[2].shared)
}

// TestFairShares: each client's acquisitions against its fair share.
func TestFairShares(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		perClient []int64
		resources int
		lo, hi    float64
	}{
		{"none", []int64{0, 0}, 1, 0, 0},
		{"fair", []int64{10, 10, 10, 10}, 1, 1, 1},
		{"one client", []int64{7}, 1, 1, 1},
		{"unfair", []int64{30, 10}, 1, 0.5, 1.5},
		{"starved", []int64{20, 0}, 1, 0, 2},
		{"per resource", []int64{10, 100, 10, 100}, 2, 1, 1},       // 0,2 on r0; 1,3 on r1
		{"uneven split", []int64{10, 30, 20}, 2, 2.0 / 3, 4.0 / 3}, // r0: 10,20; r1: 30
		{"idle resource left out", []int64{5, 0, 5, 0}, 2, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lo, hi := fairShares(tt.perClient, tt.resources)
			require.InDelta(t, tt.lo, lo, 1e-9, "min")
			require.InDelta(t, tt.hi, hi, 1e-9, "max")
		})
	}
}
