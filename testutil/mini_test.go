package testutil_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestMiniClusterBasics(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	require.Equal(t, 3, c.Len())
	addrs := c.Addrs()
	require.Len(t, addrs, 3)
	seen := map[string]bool{}
	for i, a := range addrs {
		require.False(t, seen[a], "addresses must be distinct")
		seen[a] = true
		require.Equal(t, a, c.Server(i).Addr())
		require.Equal(t, "redis://"+a, c.URLs()[i])
	}
	nodes := c.Nodes()
	require.Len(t, nodes, 3)
	for i, n := range nodes {
		require.Equal(t, addrs[i], n.Addr())
	}
	require.Panics(t, func() { c.Kill(3) })
}

func TestMiniKillRestartPreservesData(t *testing.T) {
	ctx := ctxT(t)
	c := testutil.NewMiniCluster(t, 3)
	cl := c.Client(0)
	require.NoError(t, cl.Set(ctx, "k", "v", 0).Err())
	addr := c.Addrs()[0]

	c.Kill(0)
	require.False(t, c.Up(0))
	start := time.Now()
	require.Error(t, cl.Ping(ctx).Err(), "a killed node refuses connections")
	require.Error(t, cl.Ping(ctx).Err())
	require.Less(t, time.Since(start), time.Second, "a dead node must fail fast")
	require.NoError(t, c.Client(1).Ping(ctx).Err(), "other nodes are unaffected")

	require.NoError(t, c.Restart(0))
	require.True(t, c.Up(0))
	require.Equal(t, addr, c.Addrs()[0])
	got, err := cl.Get(ctx, "k").Result()
	require.NoError(t, err)
	require.Equal(t, "v", got, "Restart keeps the data")

	// Restarting a running node is a crash and a restart: data stays too.
	require.NoError(t, c.Restart(0))
	got, err = c.Client(0).Get(ctx, "k").Result()
	require.NoError(t, err)
	require.Equal(t, "v", got)
}

func TestMiniRestartEmptiesScriptCache(t *testing.T) {
	ctx := ctxT(t)
	c := testutil.NewMiniCluster(t, 1)
	cl := c.Client(0)
	script := redis.NewScript("return 7")
	require.NoError(t, script.Load(ctx, cl).Err())
	exists, err := script.Exists(ctx, cl).Result()
	require.NoError(t, err)
	require.Equal(t, []bool{true}, exists)

	require.NoError(t, c.Restart(0))
	exists, err = script.Exists(ctx, cl).Result()
	require.NoError(t, err)
	require.Equal(t, []bool{false}, exists, "a restarted node has no cached scripts")
	v, err := script.Run(ctx, cl, nil).Int()
	require.NoError(t, err, "EVALSHA falls back to EVAL")
	require.Equal(t, 7, v)
}

func TestMiniWipeDropsData(t *testing.T) {
	ctx := ctxT(t)
	c := testutil.NewMiniCluster(t, 2)
	for i := range 2 {
		require.NoError(t, c.SetCounter(i, "redlock:{res}:fence", 100))
	}
	c.Kill(0)
	require.NoError(t, c.Wipe(0))
	require.True(t, c.Up(0), "Wipe leaves the node running")
	_, err := c.Client(0).Get(ctx, "redlock:{res}:fence").Result()
	require.ErrorIs(t, err, redis.Nil, "a wiped node has no data")
	_, err = c.Get(0, "redlock:{res}:fence")
	require.ErrorIs(t, err, miniredis.ErrKeyNotFound)

	got, err := c.Client(1).Get(ctx, "redlock:{res}:fence").Int64()
	require.NoError(t, err)
	require.EqualValues(t, 100, got, "other nodes keep their data")
}

func TestMiniFailAndHeal(t *testing.T) {
	ctx := ctxT(t)
	c := testutil.NewMiniCluster(t, 3)
	cl := c.Client(1)
	c.Fail(1, "LOADING Redis is loading the dataset in memory")
	err := cl.Ping(ctx).Err()
	require.ErrorContains(t, err, "LOADING")
	require.ErrorContains(t, cl.Set(ctx, "k", "v", 0).Err(), "LOADING")
	require.NoError(t, c.Client(0).Ping(ctx).Err())

	_, err = c.Nodes()[1].Eval(ctx, scripts.Inspect, []string{"redlock:{res}", "redlock:{res}:fence"})
	require.ErrorContains(t, err, "LOADING", "scripts fail too")

	// The failure outlasts a restart, until Heal.
	require.NoError(t, c.Restart(1))
	require.ErrorContains(t, cl.Ping(ctx).Err(), "LOADING")

	c.Heal(1)
	require.NoError(t, cl.Ping(ctx).Err())
	require.NoError(t, cl.Set(ctx, "k", "v", 0).Err())

	c.Fail(2, "")
	require.ErrorContains(t, c.Client(2).Ping(ctx).Err(), testutil.DefaultFailMessage)
}

func TestMiniFastForwardExpiresKeys(t *testing.T) {
	ctx := ctxT(t)
	c := testutil.NewMiniCluster(t, 2)
	for i := range 2 {
		require.NoError(t, c.Client(i).Set(ctx, "lock", "x", time.Second).Err())
	}
	time.Sleep(20 * time.Millisecond)
	ttl, err := c.Client(0).PTTL(ctx, "lock").Result()
	require.NoError(t, err)
	require.Equal(t, time.Second, ttl, "miniredis TTLs do not follow the wall clock")

	c.Kill(1)
	c.FastForward(600 * time.Millisecond)
	ttl, err = c.Client(0).PTTL(ctx, "lock").Result()
	require.NoError(t, err)
	require.Equal(t, 400*time.Millisecond, ttl)

	c.FastForward(400 * time.Millisecond)
	require.ErrorIs(t, c.Client(0).Get(ctx, "lock").Err(), redis.Nil)

	require.NoError(t, c.Restart(1))
	require.ErrorIs(t, c.Client(1).Get(ctx, "lock").Err(), redis.Nil,
		"time moves on killed nodes too")
}

func TestMiniWithWallClock(t *testing.T) {
	ctx := ctxT(t)
	c := testutil.NewMiniCluster(t, 1, testutil.WithWallClock())
	cl := c.Client(0)
	require.NoError(t, cl.Set(ctx, "lock", "x", 30*time.Millisecond).Err())
	require.Eventually(t, func() bool {
		return cl.Get(ctx, "lock").Err() == redis.Nil
	}, 2*time.Second, 5*time.Millisecond)
}

func TestMiniNodesRunTheLockScripts(t *testing.T) {
	ctx := ctxT(t)
	c := testutil.NewMiniCluster(t, 3)
	require.NoError(t, c.SetCounter(2, "redlock:{res}:fence", 100))
	nodes := c.Nodes()
	const key = "redlock:{res}"

	sub := c.Client(0).Subscribe(ctx, key+":released")
	defer func() { require.NoError(t, sub.Close()) }()
	_, err := sub.Receive(ctx) // the subscription confirmation
	require.NoError(t, err)

	var first *redlock.Lease
	for i, n := range nodes {
		l := lockerOn(t, n, "me")
		lease, err := l.TryAcquire(ctx, "res")
		require.NoError(t, err)
		// A new counter starts from the node's clock (in microseconds);
		// an existing one counts on.
		if i == 2 {
			require.Equal(t, fencing.Token(101), lease.Fence())
		} else {
			require.Greater(t, lease.Fence(), fencing.Token(time.Now().Add(-time.Hour).UnixMicro()))
		}
		if i == 0 {
			first = lease
		} else {
			lease.Orphan()
		}

		// TYPE and PTTL inside Lua: the refusal reports the holder's TTL.
		_, err = lockerOn(t, n, "you").TryAcquire(ctx, "res")
		var ae *redlock.AcquireError
		require.ErrorAs(t, err, &ae)
		require.InDelta(t, float64(time.Second), float64(ae.HolderTTL), float64(100*time.Millisecond))

		st, err := l.Inspect(ctx, "res")
		require.NoError(t, err)
		info := st.Nodes[0].Info
		require.True(t, info.Held)
		require.Equal(t, lease.Token(), info.Token)
		require.Equal(t, "me", info.Owner)
		require.Equal(t, lease.Fence(), info.Fence)
	}

	require.NoError(t, first.Release(ctx))
	msg, err := sub.ReceiveMessage(ctx) // PUBLISH inside Lua reaches subscribers
	require.NoError(t, err)
	require.Equal(t, key+":released", msg.Channel)

	c.Kill(1)
	start := time.Now()
	_, err = lockerOn(t, nodes[1], "me").TryAcquire(ctx, "res")
	require.Error(t, err)
	require.Less(t, time.Since(start), time.Second, "a dead node must fail fast")
}

func TestMiniFaultsAreConcurrencySafe(t *testing.T) {
	ctx := ctxT(t)
	c := testutil.NewMiniCluster(t, 3)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for j := range 20 {
				i := (g + j) % 3
				switch j % 5 {
				case 0:
					c.Kill(i)
				case 1:
					_ = c.Restart(i)
				case 2:
					c.Fail(i, "")
				case 3:
					c.Heal(i)
				case 4:
					_ = c.Wipe(i)
				}
				c.FastForward(time.Millisecond)
				_ = c.Client(i).Ping(ctx).Err()
			}
		})
	}
	wg.Wait()
	for i := range 3 {
		c.Heal(i)
		require.NoError(t, c.Restart(i))
		require.NoError(t, c.Client(i).Ping(ctx).Err())
	}
}

// lockerOn returns a Locker over node alone, with the owner label owner and
// a one-second lease.
func lockerOn(t *testing.T, node redlock.Node, owner string) *redlock.Locker {
	t.Helper()
	l, err := redlock.New([]redlock.Node{node}, redlock.Config{LeaseDuration: time.Second, Owner: owner, RejoinDelay: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}
