package redlock_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

const (
	tokenA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	tokenB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// TestNodeScriptsTouchOnlyTheirOwnLock runs the scripts directly on one node.
func TestNodeScriptsTouchOnlyTheirOwnLock(t *testing.T) {
	ctx := testutil.Context(t)
	c := testutil.NewMiniCluster(t, 1)
	node := c.Nodes()[0]
	m := c.Server(0)
	const key = "redlock:{res}"

	g, err := redlock.NodeAcquire(ctx, node, key, tokenA, "owner-a", time.Second)
	require.NoError(t, err)
	require.True(t, g.OK)
	first := g.Counter

	// A retried acquire with the same token is answered again, not counted.
	g, err = redlock.NodeAcquire(ctx, node, key, tokenA, "owner-a", time.Second)
	require.NoError(t, err)
	require.True(t, g.OK)
	require.Equal(t, first, g.Counter)

	g, err = redlock.NodeAcquire(ctx, node, key, tokenB, "owner-b", time.Second)
	require.NoError(t, err)
	require.False(t, g.OK)
	require.Equal(t, time.Second, g.HolderTTL)

	cases := []struct {
		name string
		op   func() (bool, error)
	}{
		{"renew with another token", func() (bool, error) { return redlock.NodeRenew(ctx, node, key, tokenB, time.Hour) }},
		{"release with another token", func() (bool, error) { return redlock.NodeRelease(ctx, node, key, tokenB) }},
		{"fence with another token", func() (bool, error) { return redlock.NodeFence(ctx, node, key, tokenB, 1000) }},
		{"token prefix is not the token", func() (bool, error) { return redlock.NodeRelease(ctx, node, key, tokenA[:31]) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := tc.op()
			require.NoError(t, err)
			require.False(t, ok)
			require.Equal(t, tokenA+" owner-a", mustGet(t, c, key))
			require.Equal(t, time.Second, m.TTL(key))
			require.Equal(t, first.String(), counterValue(mustGet(t, c, key+":fence")))
		})
	}

	info, err := redlock.NodeInspect(ctx, node, key)
	require.NoError(t, err)
	require.Equal(t, redlock.LockInfo{Held: true, Token: tokenA, Owner: "owner-a", TTL: time.Second, Fence: first}, info)

	raised := first + 40
	ok, err := redlock.NodeFence(ctx, node, key, tokenA, raised)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, raised.String(), counterValue(mustGet(t, c, key+":fence")))
	ok, err = redlock.NodeFence(ctx, node, key, tokenA, 7) // never lowers the counter
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, raised.String(), counterValue(mustGet(t, c, key+":fence")))

	ok, err = redlock.NodeRenew(ctx, node, key, tokenA, 5*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 5*time.Second, m.TTL(key))

	ok, err = redlock.NodeRelease(ctx, node, key, tokenA)
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, m.Exists(key))
	require.Equal(t, raised.String(), counterValue(mustGet(t, c, key+":fence")), "the fence counter outlives the lock")

	info, err = redlock.NodeInspect(ctx, node, key)
	require.NoError(t, err)
	require.Equal(t, redlock.LockInfo{Fence: raised}, info)
}

// TestRenewNeverRecreatesAnExpiredLock: once the TTL has passed, renew
// answers "not held" and leaves the key absent.
func TestRenewNeverRecreatesAnExpiredLock(t *testing.T) {
	ctx := testutil.Context(t)
	c := testutil.NewMiniCluster(t, 1)
	node := c.Nodes()[0]
	const key = "redlock:{exp}"
	_, err := redlock.NodeAcquire(ctx, node, key, tokenA, "a", 100*time.Millisecond)
	require.NoError(t, err)
	c.FastForward(200 * time.Millisecond)
	ok, err := redlock.NodeRenew(ctx, node, key, tokenA, time.Hour)
	require.NoError(t, err)
	require.False(t, ok)
	require.False(t, c.Server(0).Exists(key))

	// A Locker renewing by token says so too.
	l := newLocker(t, c.Nodes(), redlock.Config{})
	_, err = l.Renew(ctx, "exp", tokenA)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	require.False(t, c.Server(0).Exists(key))
}

// TestWrongTypeKeysGiveAClearErrorAndStayUntouched: someone else's data
// under a lock key or fence key is reported, never changed.
func TestWrongTypeKeysGiveAClearErrorAndStayUntouched(t *testing.T) {
	ctx := testutil.Context(t)
	c := testutil.NewMiniCluster(t, 1)
	node := c.Nodes()[0]
	m := c.Server(0)
	l := newLocker(t, c.Nodes(), redlock.Config{})

	m.HSet("redlock:{hash}", "field", "value")
	_, err := redlock.NodeAcquire(ctx, node, "redlock:{hash}", tokenA, "a", time.Second)
	require.ErrorIs(t, err, redlock.ErrWrongType)
	require.Contains(t, err.Error(), "not a lock")
	for _, op := range []func() (bool, error){
		func() (bool, error) { return redlock.NodeRenew(ctx, node, "redlock:{hash}", tokenA, time.Second) },
		func() (bool, error) { return redlock.NodeRelease(ctx, node, "redlock:{hash}", tokenA) },
		func() (bool, error) { return redlock.NodeFence(ctx, node, "redlock:{hash}", tokenA, 3) },
	} {
		_, err := op()
		require.ErrorIs(t, err, redlock.ErrWrongType)
	}
	_, err = redlock.NodeInspect(ctx, node, "redlock:{hash}")
	require.ErrorIs(t, err, redlock.ErrWrongType)
	require.Equal(t, "value", m.HGet("redlock:{hash}", "field"))

	_, err = l.TryAcquire(ctx, "hash")
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.ErrorIs(t, err, redlock.ErrWrongType)

	// A fence key holding text, or a list, is not a counter.
	require.NoError(t, m.Set("redlock:{text}:fence", "not-a-number"))
	_, err = redlock.NodeAcquire(ctx, node, "redlock:{text}", tokenA, "a", time.Second)
	require.ErrorIs(t, err, redlock.ErrWrongType)
	require.False(t, m.Exists("redlock:{text}"), "no half-done acquisition")
	_, err = m.Push("redlock:{list}:fence", "x")
	require.NoError(t, err)
	_, err = redlock.NodeAcquire(ctx, node, "redlock:{list}", tokenA, "a", time.Second)
	require.ErrorIs(t, err, redlock.ErrWrongType)
	require.False(t, m.Exists("redlock:{list}"))
}

// TestScriptFlushIsTransparent: after SCRIPT FLUSH (or a restart with an
// empty script cache) the scripts are loaded again on the next call.
func TestScriptFlushIsTransparent(t *testing.T) {
	ctx := testutil.Context(t)
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), redlock.Config{})
	lease, err := l.TryAcquire(ctx, "flush")
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, c.Client(i).ScriptFlush(ctx).Err())
	}
	_, err = l.Renew(ctx, "flush", lease.Token())
	require.NoError(t, err)
	require.NoError(t, lease.Release(ctx))
	for i := range 3 {
		require.NoError(t, c.Client(i).ScriptFlush(ctx).Err())
	}
	lease, err = l.TryAcquire(ctx, "flush")
	require.NoError(t, err)
	require.NoError(t, lease.Release(ctx))
}

func mustGet(t *testing.T, c *testutil.MiniCluster, key string) string {
	t.Helper()
	v, err := c.Server(0).Get(key)
	require.NoError(t, err)
	return v
}

// TestNodeTTLIsRoundedUp: the TTL sent to a node is the lease duration in
// whole milliseconds rounded up, never down, so the key never expires on
// the node before the validity computed from the lease duration assumes.
func TestNodeTTLIsRoundedUp(t *testing.T) {
	ctx := testutil.Context(t)
	c := testutil.NewMiniCluster(t, 3)
	m := c.Server(0)
	const lease = 1500500 * time.Microsecond // 1500.5ms

	node := c.Nodes()[0]
	const key = "redlock:{round}"
	g, err := redlock.NodeAcquire(ctx, node, key, tokenA, "a", lease)
	require.NoError(t, err)
	require.True(t, g.OK)
	require.Equal(t, 1501*time.Millisecond, m.TTL(key))
	ok, err := redlock.NodeRenew(ctx, node, key, tokenA, lease+time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 2501*time.Millisecond, m.TTL(key))
	ok, err = redlock.NodeRenew(ctx, node, key, tokenA, time.Nanosecond)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, time.Millisecond, m.TTL(key), "a nanosecond is a whole millisecond, not zero")

	// The Locker sends its LeaseDuration the same way.
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: lease})
	ls, err := tryAcquire(t, l, "round-lease")
	require.NoError(t, err)
	requireTTL := func() {
		t.Helper()
		for i, addr := range c.Addrs() {
			if slices.Contains(ls.Granted(), addr) {
				require.Equal(t, 1501*time.Millisecond, c.Server(i).TTL(l.Key("round-lease")), "node %d", i)
			}
		}
	}
	requireTTL()
	_, err = l.Renew(ctx, "round-lease", ls.Token())
	require.NoError(t, err)
	requireTTL()
	require.NoError(t, ls.Release(ctx))
}
