package redlock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// The db's high-water (Safety v4.1, scripts/counter.lua C6; issue 30's
// gaps evictctr and clockback, docs/model.md): a fence counter has a TTL
// once its lease ended, so it can be evicted (volatile-*) or expire; a
// counter created again in its place started from the node's clock,
// rounded down to the second, and in the same second as the last token
// counted there it repeated that token. The marker now keeps the largest
// value counted in its db, and a new counter starts above it.

// toSecondStart steps the servers' clock (forward) to just after the
// start of a second of the node's clock, so that what a test does next
// falls in one second of it; it returns the node time it stepped to.
func toSecondStart(t *testing.T, clock *testutil.FakeClock, s *testutil.RedisServer) time.Time {
	t.Helper()
	now, err := s.Client().Time(testutil.Context(t)).Result()
	require.NoError(t, err)
	ahead := time.Second - time.Duration(now.Nanosecond()) + 20*time.Millisecond
	require.NoError(t, clock.Set(clock.Offset()+ahead))
	return now.Add(ahead)
}

// hiwaterEnv is three servers under one fake clock and a Locker A that
// the nodes trust (its first use's sit-out passed).
func hiwaterEnv(t *testing.T) (*testutil.FakeClock, *testutil.RedisCluster, *redlock.Locker) {
	t.Helper()
	clock := testutil.NewFakeClock(t)
	c := testutil.StartRedis(t, 3, clock.Option())
	a := newLocker(t, c.Nodes(), lossConfig)
	warm(t, a)
	return clock, c, a
}

// takeAndRelease takes resource with l and releases it at once.
func takeAndRelease(t *testing.T, l *redlock.Locker, resource string) *redlock.Lease {
	t.Helper()
	lease, err := tryAcquire(t, l, resource)
	require.NoError(t, err)
	require.NoError(t, lease.Release(testutil.Context(t)))
	return lease
}

// inOneSecond runs the scenario of the tests below on a fresh resource: A
// takes it and releases it (first), lose makes the nodes lose the
// resource's counter, and B takes it (second). A token repeated by a
// counter that started again from the clock shows only when B's counter
// is made in the second of the nodes' clock in which A's was, so the clock
// is stepped to a second's start first, and when the loss took it past
// that second (a loaded machine: the loss alone can take seconds), it is
// stepped back into it before B takes r. That step is under a second
// behind what the markers last saw (A's release, in that second), which
// the contract allows (docs/design.md §6.1: the seen check lets it pass;
// the high-water covers it). A run whose A or B did not fit in the
// second proves nothing and is run again, up to eight times.
func inOneSecond(t *testing.T, clock *testutil.FakeClock, c *testutil.RedisCluster, a, b *redlock.Locker, lose func(resource string)) (*redlock.Lease, *redlock.Lease) {
	t.Helper()
	nodeNow := func() time.Time {
		now, err := c.Server(0).Client().Time(testutil.Context(t)).Result()
		require.NoError(t, err)
		return now
	}
	for run := range 8 {
		r := fmt.Sprintf("r%d", run)
		start := toSecondStart(t, clock, c.Server(0))
		first := takeAndRelease(t, a, r)
		if took := nodeNow(); took.Unix() != start.Unix() {
			t.Logf("run %d: A's take and release took past its second of the nodes' clock (%s): again", run, took.Sub(start))
			continue
		}
		lose(r)
		if now := nodeNow(); now.Unix() != start.Unix() {
			require.NoError(t, clock.Set(clock.Offset()-now.Sub(start)))
		}
		second := takeAndRelease(t, b, r)
		if end := nodeNow(); end.Unix() == start.Unix() {
			return first, second
		}
		t.Logf("run %d: B's take and release took past its second of the nodes' clock: again", run)
	}
	t.Fatal("no run of the scenario fitted in one second of the nodes' clock")
	return nil, nil
}

// TestSafetyAnIdleCounterEvictedIsNotCountedAgain: A takes r and releases
// it; the counters (now with a TTL) are evicted under volatile-lru on
// every node; B takes r in the second of the nodes' clock in which A's
// counter was made. Before the high-water, B's counters started again
// from that second, and B's token was A's.
func TestSafetyAnIdleCounterEvictedIsNotCountedAgain(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test")
	}
	clock, c, a := hiwaterEnv(t)
	ctx := testutil.Context(t)
	b := newLocker(t, c.Nodes(), lossConfig)
	first, second := inOneSecond(t, clock, c, a, b, func(r string) {
		for _, s := range c.Servers() {
			_, err := testutil.EvictUntilGone(ctx, s, "volatile-lru", a.Key(r)+":fence")
			require.NoError(t, err)
			require.NoError(t, s.Do(ctx, "CONFIG", "SET", "maxmemory", "0").Err())
		}
	})
	require.Greater(t, second.Fence(), first.Fence(), "a counter evicted after its lease repeated a token")
}

// TestSafetyACounterExpiredThenAClockStepBackIsNotCountedAgain: A takes r
// and releases it; the nodes' clock steps forward past the counter's life
// (20 s), so the counters expire, then back to where it was (an NTP step
// corrected): within a second of the time the marker last saw, which the
// seen check lets pass. Before the high-water, B's counters started again
// from that second, and B's token was A's.
func TestSafetyACounterExpiredThenAClockStepBackIsNotCountedAgain(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test")
	}
	clock, c, a := hiwaterEnv(t)
	ctx := testutil.Context(t)
	b := newLocker(t, c.Nodes(), lossConfig)
	first, second := inOneSecond(t, clock, c, a, b, func(r string) {
		back := clock.Offset()
		require.NoError(t, clock.Set(back+21*time.Second))
		for _, s := range c.Servers() {
			n, err := s.Do(ctx, "EXISTS", a.Key(r)+":fence").Int() // expires it (Redis expires a key it reads)
			require.NoError(t, err)
			require.Zero(t, n, "the counter outlived its life")
		}
		require.NoError(t, clock.Set(back))
	})
	require.Greater(t, second.Fence(), first.Fence(), "a counter expired, then a clock step back, repeated a token")
}
