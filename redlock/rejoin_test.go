package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// noPersistence makes servers that come back empty from a restart (no AOF,
// no RDB snapshots): the Redis default without a save policy.
var noPersistence = testutil.WithConfig("appendonly no", `save ""`)

// TestRestartedEmptyNodesRejoinAfterTheDelay: a majority that restarted
// empty (the third node is down) refuses to grant, with its reason, until
// the rejoin delay has passed since the restart; then it grants again and
// the fencing token is above every token issued before, because the new
// counters start from the nodes' clocks. With counters starting from 0 the
// new token would be 1.
func TestRestartedEmptyNodesRejoinAfterTheDelay(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 3, noPersistence)
	const delay = 2 * time.Second
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: time.Second, RejoinDelay: delay})
	// Let the servers' uptimes pass the delay, so that they grant.
	var before *redlock.Lease
	require.Eventually(t, func() bool {
		var err error
		before, err = l.TryAcquire(testutil.Context(t), "r")
		return err == nil
	}, 3*delay, 50*time.Millisecond)
	require.NoError(t, before.Release(testutil.Context(t)))
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

	var after *redlock.Lease
	require.Eventually(t, func() bool {
		after, err = l.TryAcquire(testutil.Context(t), "r")
		return err == nil
	}, 3*delay, 50*time.Millisecond, "the restarted nodes never rejoined: %v", err)
	require.GreaterOrEqual(t, time.Since(restarted), delay-time.Second, "granted before the rejoin delay (uptime is in whole seconds)")
	require.Greater(t, after.Fence(), before.Fence(), "a restarted node's counter starts from its clock")
	require.NoError(t, after.Release(testutil.Context(t)))
}

// TestDurableNodeRejoinsAtOnce: a node with appendonly yes and appendfsync
// always (testutil's default) comes back with its data, so it grants as
// soon as it answers after a restart.
func TestDurableNodeRejoinsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 3)
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: time.Second, RejoinDelay: time.Hour})
	before, err := tryAcquire(t, l, "r")
	require.NoError(t, err)
	require.NoError(t, before.Release(testutil.Context(t)))

	require.NoError(t, c.Server(1).Kill())
	require.NoError(t, c.Server(0).Kill())
	require.NoError(t, c.Server(0).Restart())
	after, err := tryAcquire(t, l, "r")
	require.NoError(t, err)
	require.Greater(t, after.Fence(), before.Fence())
	require.NoError(t, after.Release(context.Background()))
}

// TestCountersThatLostIncrementsCountOnFromTheRestart: a node without
// appendfsync always can come back from a crash with a fence counter that
// lost its last increments (AOF everysec). Here two of three nodes restart
// and their counters are set back by hand, the third is down: after the
// rejoin delay, the counters below the nodes' start plus the delay are
// raised to it first, and the token is above every earlier one. Without
// the floor it would be 11.
func TestCountersThatLostIncrementsCountOnFromTheRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 3, noPersistence)
	const delay = 2 * time.Second
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: time.Second, RejoinDelay: delay})
	var before *redlock.Lease
	require.Eventually(t, func() bool {
		var err error
		before, err = l.TryAcquire(testutil.Context(t), "r")
		return err == nil
	}, 3*delay, 50*time.Millisecond)
	require.NoError(t, before.Release(testutil.Context(t)))

	require.NoError(t, c.Server(1).Kill())
	for _, i := range []int{0, 2} {
		s := c.Server(i)
		require.NoError(t, s.Kill())
		require.NoError(t, s.Restart())
		require.NoError(t, s.Do(testutil.Context(t), "SET", l.Key("r")+":fence", "10").Err())
	}
	var after *redlock.Lease
	require.Eventually(t, func() bool {
		var err error
		after, err = l.TryAcquire(testutil.Context(t), "r")
		return err == nil
	}, 3*delay, 50*time.Millisecond)
	require.Greater(t, after.Fence(), before.Fence())
	require.NoError(t, after.Release(testutil.Context(t)))
}
