package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// quickDelay is the rejoin delay (and the lease) of the quick data-loss
// scenarios, on the nodes' clocks, which the tests move (SetTime).
const quickDelay = 2 * time.Second

// quickNodes are three miniredis nodes that answer INFO replication as
// Redis primaries (testutil.MiniCluster.SetReplID), so that the data-loss
// rule checks them as real servers, with their TIME at start.
func quickNodes(t *testing.T, start time.Time) *testutil.MiniCluster {
	c := testutil.NewMiniCluster(t, 3)
	for i := range 3 {
		c.SetReplID(i, "0000000000000000000000000000000000000"+string(rune('a'+i))+"00")
		c.Server(i).SetTime(start)
	}
	return c
}

// setTime moves every node's TIME to at.
func setTime(c *testutil.MiniCluster, at time.Time) {
	for i := range 3 {
		c.Server(i).SetTime(at)
	}
}

// advance moves every node's TIME, and its keys' TTLs with it, d on from
// *now, as a real server's clock runs.
func advance(c *testutil.MiniCluster, now *time.Time, d time.Duration) {
	*now = now.Add(d)
	setTime(c, *now)
	c.FastForward(d)
}

// TestSafetyQuickDataLossRule runs the data-loss rule (scripts/trust.lua,
// scripts/counter.lua) on miniredis, so that `make quick` checks it
// without a redis-server: each named operator action on two of three
// nodes makes them refuse with its reason until their clocks passed the
// loss plus the rejoin delay (or, for a lost lock key, the lease's end),
// and the token granted after exceeds every token before. On today's code
// (before Safety v4) miniredis was a stand-in the rule did not check, and
// these nodes granted at once.
func TestSafetyQuickDataLossRule(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// act is the operator's action on nodes 0 and 1 while A holds r.
		act func(t *testing.T, c *testutil.MiniCluster, key string)
		// probe is the resource B first tries: r, or a free one where A's
		// lock still stands on every node.
		probe  string
		reason string
		// wait is how long the nodes' clocks must move before they grant.
		wait time.Duration
	}{
		{"FLUSHALL", func(t *testing.T, c *testutil.MiniCluster, _ string) {
			for _, i := range []int{0, 1} {
				c.Server(i).FlushAll()
			}
		}, "r", "marker key is missing", quickDelay},
		{"restart with the data kept (a new replication id)", func(t *testing.T, c *testutil.MiniCluster, _ string) {
			for _, i := range []int{0, 1} {
				c.SetReplID(i, "1111111111111111111111111111111111111111")
			}
		}, "s", "identity changed", quickDelay},
		{"clock stepped back", func(t *testing.T, c *testutil.MiniCluster, _ string) {
			// (moved back below by step)
		}, "s", "clock stepped back", 0},
		{"lock key deleted while its counter records the lease", func(t *testing.T, c *testutil.MiniCluster, key string) {
			for _, i := range []int{0, 1} {
				c.Server(i).Del(key)
			}
		}, "r", "lock key is missing while its fence counter records a live lease", quickDelay},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testutil.Context(t)
			now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
			c := quickNodes(t, now)
			// Calls may take up to 1.5 s (not the default third of the
			// lease, 666 ms, which a loaded -race run once exceeded).
			cfg := redlock.Config{LeaseDuration: quickDelay, RejoinDelay: quickDelay, NodeCallTimeout: 1500 * time.Millisecond}
			a := newLocker(t, c.Nodes(), cfg)

			// First use: no marker yet, the nodes sit out the delay.
			_, err := a.TryAcquire(ctx, "r")
			require.ErrorIs(t, err, redlock.ErrRejoining)
			require.ErrorContains(t, err, "marker key is missing")
			advance(c, &now, quickDelay+time.Millisecond)
			held, err := a.TryAcquire(ctx, "r")
			require.NoError(t, err)
			held.Orphan() // A stops renewing: its lock stands until its TTL

			tc.act(t, c, a.Key("r"))
			if tc.name == "clock stepped back" {
				// Seen at now; the clocks step back 5 s.
				now = now.Add(-5 * time.Second)
				setTime(c, now)
				tc.wait = 5*time.Second + quickDelay
			}
			b := newLocker(t, c.Nodes(), cfg)
			_, err = b.TryAcquire(ctx, tc.probe)
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			require.ErrorIs(t, err, redlock.ErrRejoining, "the nodes refuse because they may have lost data: %v", err)
			require.ErrorContains(t, err, tc.reason)

			// A moment before the wait ends, still refused; then granted
			// (a loss's end is rounded up to a whole second; A's lock has
			// expired by then, its lease was 2 s).
			advance(c, &now, tc.wait-100*time.Millisecond)
			_, err = b.TryAcquire(ctx, tc.probe)
			require.ErrorIs(t, err, redlock.ErrRejoining, "granted before the wait ended: %v", err)
			advance(c, &now, 1200*time.Millisecond)
			lease, err := b.TryAcquire(ctx, "r")
			require.NoError(t, err)
			require.Greater(t, lease.Fence(), held.Fence(), "a token after the loss exceeds every token before it")
			require.NoError(t, lease.Release(context.WithoutCancel(ctx)))
		})
	}
}
