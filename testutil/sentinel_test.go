package testutil_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/testutil"
)

// roleOf returns the role a data node reports: master or slave.
func roleOf(t *testing.T, s *testutil.RedisServer) string {
	t.Helper()
	role, err := s.Do(ctxT(t), "ROLE").Slice()
	require.NoError(t, err)
	return role[0].(string)
}

func TestSentinelFailoverMovesThePrimary(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	g := testutil.StartSentinel(t, "mymaster", testutil.WithPassword("s3cret"))
	require.Equal(t, "mymaster", g.MasterName())
	addrs := g.SentinelAddrs()
	require.Len(t, addrs, 3)
	require.Len(t, g.Sentinels(), 3)
	require.Equal(t, "redis+sentinel://"+addrs[0]+"?master_name=mymaster&addr="+addrs[1]+"&addr="+addrs[2]+"&password=s3cret", g.URL())
	opts, err := redis.ParseFailoverURL(strings.Replace(g.URL(), "redis+sentinel://", "redis://", 1))
	require.NoError(t, err)
	require.Equal(t, "mymaster", opts.MasterName)
	require.Equal(t, addrs, opts.SentinelAddrs)
	require.Equal(t, "s3cret", opts.Password)

	servers := g.Servers()
	require.Len(t, servers, 2)
	first, second := servers[0], servers[1]
	require.Equal(t, first, g.Primary())
	require.Equal(t, "master", roleOf(t, first))
	require.Equal(t, "slave", roleOf(t, second))

	cl := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    g.MasterName(),
		SentinelAddrs: addrs,
		Password:      "s3cret",
		DialTimeout:   500 * time.Millisecond,
		ReadTimeout:   500 * time.Millisecond,
		WriteTimeout:  500 * time.Millisecond,
		MaxRetries:    -1,
	})
	t.Cleanup(func() { _ = cl.Close() })
	require.NoError(t, cl.Set(ctx, "k", "v1", 0).Err())
	v, err := first.Do(ctx, "GET", "k").Text()
	require.NoError(t, err)
	require.Equal(t, "v1", v, "the client writes to the first primary")

	start := time.Now()
	require.NoError(t, g.Failover(ctx))
	t.Logf("Failover took %v", time.Since(start))
	require.Equal(t, second, g.Primary())
	require.Equal(t, "master", roleOf(t, second))
	require.Equal(t, "slave", roleOf(t, first), "the old primary is now a replica")
	eventually(t, "write after the failover", 10*time.Second, func() error { return cl.Set(ctx, "k", "v2", 0).Err() })
	v, err = second.Do(ctx, "GET", "k").Text()
	require.NoError(t, err)
	require.Equal(t, "v2", v, "the client follows the primary")

	// Killed, the primary is replaced by the sentinels themselves.
	require.NoError(t, g.KillPrimary())
	require.False(t, second.Running())
	eventually(t, "automatic failover back to the first server", 20*time.Second, func() error {
		if p := g.Primary(); p != first {
			return errors.New("the sentinels have not failed over yet")
		}
		return cl.Set(ctx, "k", "v3", 0).Err()
	})
	require.Equal(t, "master", roleOf(t, first))
}

func TestSentinelCleanupStopsEverything(t *testing.T) {
	testutil.RedisServerPath(t) // skip here, not only in the subtest
	t.Parallel()
	var pids []int
	t.Run("inner", func(t *testing.T) {
		g := testutil.StartSentinel(t, "cleanup")
		for _, s := range append(g.Servers(), g.Sentinels()...) {
			pids = append(pids, pidOf(t, s))
		}
		require.NoError(t, g.Servers()[1].Pause())
	})
	require.Len(t, pids, 5)
	requireGone(t, pids)
}
