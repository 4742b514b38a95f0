package redlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// slowPolling makes the backoff fallback so slow that only a release
// announcement can wake a waiter within a test's patience.
func slowPolling(cfg redlock.Config) redlock.Config {
	cfg.NewBackOff = func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }
	return cfg
}

// subscribed waits until every node has n subscribers on key's release
// channel.
func subscribed(t *testing.T, c *testutil.MiniCluster, key string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		for i := range c.Len() {
			if c.Server(i).PubSubNumSub(key + ":released")[key+":released"] != n {
				return false
			}
		}
		return true
	}, 2*time.Second, time.Millisecond)
}

// TestWaiterWakesOnRelease: a waiter whose backoff would sleep for an hour
// acquires as soon as the holder releases, because the release is announced.
func TestWaiterWakesOnRelease(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), slowPolling(redlock.Config{LeaseDuration: 5 * time.Second}))
	holder, err := l.TryAcquire(testutil.Context(t), "handoff")
	require.NoError(t, err)

	got := make(chan *redlock.Lease, 1)
	go func() {
		lease, err := l.Acquire(testutil.Context(t), "handoff")
		require.NoError(t, err)
		got <- lease
	}()
	subscribed(t, c, l.Key("handoff"), 1)
	require.NoError(t, holder.Release(context.Background()))
	select {
	case lease := <-got:
		require.Greater(t, lease.Fence(), holder.Fence())
		require.NoError(t, lease.Release(context.Background()))
	case <-time.After(2 * time.Second):
		t.Fatal("waiter was not woken by the release")
	}
	// The last waiter gone, the key is no longer watched.
	subscribed(t, c, l.Key("handoff"), 0)
}

// TestWaitersTakeTurnsInArrivalOrder: waiters of one Locker queue in
// arrival order, and one is woken per release.
func TestWaitersTakeTurnsInArrivalOrder(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), slowPolling(redlock.Config{LeaseDuration: 5 * time.Second}))
	holder, err := l.TryAcquire(testutil.Context(t), "turns")
	require.NoError(t, err)

	var mu sync.Mutex
	var order []int
	next := make(chan *redlock.Lease)
	for i := range 4 {
		go func() {
			lease, err := l.Acquire(testutil.Context(t), "turns")
			require.NoError(t, err)
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			next <- lease
		}()
		// Let waiter i queue (its first attempt fails) before the next starts.
		require.Eventually(t, func() bool {
			st, err := l.Inspect(context.Background(), "turns")
			return err == nil && st.State == redlock.Held && redlock.Waiting(l, "turns") == i+1
		}, 2*time.Second, time.Millisecond)
	}
	current := holder
	for range 4 {
		require.NoError(t, current.Release(context.Background()))
		select {
		case current = <-next:
		case <-time.After(2 * time.Second):
			t.Fatal("no waiter woke")
		}
	}
	require.NoError(t, current.Release(context.Background()))
	require.Equal(t, []int{0, 1, 2, 3}, order)
}

// TestWaitingSurvivesAMinorityWithoutPubSub: with one of three nodes down,
// the other two still announce the release to a quorum.
func TestWaitingSurvivesAMinorityWithoutPubSub(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), slowPolling(redlock.Config{LeaseDuration: 5 * time.Second}))
	c.Kill(2)
	holder, err := l.TryAcquire(testutil.Context(t), "degraded")
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		lease, err := l.Acquire(testutil.Context(t), "degraded")
		if err == nil {
			err = lease.Release(context.Background())
		}
		got <- err
	}()
	require.Eventually(t, func() bool {
		return c.Server(0).PubSubNumSub(l.Key("degraded") + ":released")[l.Key("degraded")+":released"] == 1 &&
			c.Server(1).PubSubNumSub(l.Key("degraded") + ":released")[l.Key("degraded")+":released"] == 1
	}, 2*time.Second, time.Millisecond)
	require.NoError(t, holder.Release(context.Background()))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(2 * time.Second):
		t.Fatal("waiter was not woken with a minority down")
	}
}
