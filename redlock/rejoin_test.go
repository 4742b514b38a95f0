package redlock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// noPersistence makes servers that come back empty from a restart (no AOF,
// no RDB snapshots): the Redis default without a save policy.
var noPersistence = testutil.WithConfig("appendonly no", `save ""`)

// rejoinDelay is the delay of the rejoin tests: short, but whole seconds
// (uptime is).
const rejoinDelay = 2 * time.Second

// startForgetful starts three servers without persistence and a Locker
// with the rejoin delay, and waits until the servers have been up long
// enough to grant.
func startForgetful(t *testing.T) (*testutil.RedisCluster, *redlock.Locker) {
	c := testutil.StartRedis(t, 3, noPersistence)
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: time.Second, RejoinDelay: rejoinDelay})
	eventuallyAcquire(t, l, "warm-up")
	return c, l
}

// eventuallyAcquire takes and releases resource once the nodes grant,
// within three rejoin delays, and returns the lease.
func eventuallyAcquire(t *testing.T, l *redlock.Locker, resource string) *redlock.Lease {
	t.Helper()
	var lease *redlock.Lease
	var err error
	require.Eventually(t, func() bool {
		lease, err = l.TryAcquire(testutil.Context(t), resource)
		return err == nil
	}, 3*rejoinDelay, 50*time.Millisecond, "never granted: %v", err)
	require.NoError(t, lease.Release(testutil.Context(t)))
	return lease
}

// TestRestartedEmptyNodesRejoinAfterTheDelay: a majority that restarted
// empty (the third node is down) refuses to grant, with its reason, until
// the rejoin delay has passed since the restart; then it grants again and
// the fencing token is above every token issued before, because the new
// counters start from the nodes' clocks. With counters starting from 0 the
// new token would be 1.
func TestRestartedEmptyNodesRejoinAfterTheDelay(t *testing.T) {
	t.Parallel() // bound by the wall clock (servers starting, failing over, delays passing)
	if testing.Short() {
		t.Skip("integration test")
	}
	c, l := startForgetful(t)
	for range 10 { // a history of holders
		before, err := tryAcquire(t, l, "r")
		require.NoError(t, err)
		require.NoError(t, before.Release(testutil.Context(t)))
	}
	before, err := tryAcquire(t, l, "r")
	require.NoError(t, err)
	require.NoError(t, before.Release(testutil.Context(t)))

	require.NoError(t, c.Server(1).Kill())
	for _, i := range []int{0, 2} {
		require.NoError(t, c.Server(i).Kill())
		require.NoError(t, c.Server(i).Restart())
	}
	restarted := time.Now()
	_, err = l.TryAcquire(testutil.Context(t), "r")
	require.ErrorContains(t, err, "rejoining")

	after := eventuallyAcquire(t, l, "r")
	require.GreaterOrEqual(t, time.Since(restarted), rejoinDelay-time.Second, "granted before the rejoin delay (uptime is in whole seconds)")
	require.Greater(t, after.Fence(), before.Fence(), "a restarted node's counter starts from its clock")
}

// TestDurableNodeRejoinsAtOnce (Safety v4: no more): a node with
// appendonly yes and appendfsync always (testutil's default) comes back
// with its data, but durability configured is not durability proven (AOF
// switched on at runtime is not complete until its rewrite ends): every
// restart takes a new replication id, and the node sits out the rejoin
// delay, saying so, before it grants again (docs/design.md §6.2).
func TestDurableNodeRejoinsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 3)
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: time.Second, RejoinDelay: rejoinDelay})
	before, err := tryAcquire(t, l, "r")
	require.NoError(t, err)
	require.NoError(t, before.Release(testutil.Context(t)))

	require.NoError(t, c.Server(1).Kill())
	require.NoError(t, c.Server(0).Kill())
	require.NoError(t, c.Server(0).Restart())
	restarted := time.Now()
	_, err = l.TryAcquire(testutil.Context(t), "r")
	require.ErrorIs(t, err, redlock.ErrRejoining)
	require.ErrorContains(t, err, "identity changed")
	after := eventuallyAcquire(t, l, "r")
	require.GreaterOrEqual(t, time.Since(restarted), rejoinDelay-50*time.Millisecond, "granted before the delay")
	require.Greater(t, after.Fence(), before.Fence())
}

// TestCountersThatLostIncrementsCountOnFromTheRestart: a node without
// appendfsync always can come back from a crash with a fence counter that
// lost its last increments (AOF everysec). Here two of three nodes restart
// and their counters are set back by hand, the third is down: after the
// rejoin delay, the counters below the nodes' start plus the delay are
// raised to it first, and the token is above every earlier one. Without
// the floor it would be 11.
func TestCountersThatLostIncrementsCountOnFromTheRestart(t *testing.T) {
	t.Parallel() // bound by the wall clock (servers starting, failing over, delays passing)
	if testing.Short() {
		t.Skip("integration test")
	}
	c, l := startForgetful(t)
	before := eventuallyAcquire(t, l, "r")

	require.NoError(t, c.Server(1).Kill())
	for _, i := range []int{0, 2} {
		s := c.Server(i)
		require.NoError(t, s.Kill())
		require.NoError(t, s.Restart())
		require.NoError(t, s.Do(testutil.Context(t), "SET", l.Key("r")+":fence", "10").Err())
	}
	after := eventuallyAcquire(t, l, "r")
	require.Greater(t, after.Fence(), before.Fence())
}
