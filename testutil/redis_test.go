package testutil_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

func configGet(t *testing.T, s *testutil.RedisServer, name string) string {
	t.Helper()
	v, err := s.Client().ConfigGet(ctxT(t), name).Result()
	require.NoError(t, err)
	return v[name]
}

func TestRedisClusterStartsIndependentServers(t *testing.T) {
	ctx := ctxT(t)
	c := testutil.StartRedis(t, 3)
	require.Equal(t, 3, c.Len())
	require.Len(t, c.Servers(), 3)
	seen := map[string]bool{}
	for i, s := range c.Servers() {
		require.True(t, s.Running())
		require.False(t, seen[s.Addr()], "addresses must be distinct")
		seen[s.Addr()] = true
		require.Equal(t, "127.0.0.1:"+strconv.Itoa(s.Port()), s.Addr())
		require.Equal(t, "redis://"+s.Addr(), s.URL())
		require.Equal(t, c.URLs()[i], s.URL())
		require.Equal(t, c.Addrs()[i], s.Addr())
		require.FileExists(t, filepath.Join(s.Dir(), "redis.conf"))
		require.FileExists(t, s.LogPath())

		cl := s.Client()
		require.NoError(t, cl.Set(ctx, "k", "v"+strconv.Itoa(i), 0).Err())
		got, err := cl.Get(ctx, "k").Result()
		require.NoError(t, err)
		require.Equal(t, "v"+strconv.Itoa(i), got)

		require.Equal(t, "yes", configGet(t, s, "appendonly"))
		require.Equal(t, "always", configGet(t, s, "appendfsync"))
		require.Equal(t, "", configGet(t, s, "save"))
		require.Equal(t, "noeviction", configGet(t, s, "maxmemory-policy"))
		require.Equal(t, s.Dir(), configGet(t, s, "dir"))
		require.NoError(t, s.Do(ctx, "DEBUG", "SLEEP", "0").Err(), "DEBUG is enabled for local clients")
	}
	// The servers are independent: each kept its own value.
	for i, s := range c.Servers() {
		got, err := s.Do(ctx, "GET", "k").Text()
		require.NoError(t, err)
		require.Equal(t, "v"+strconv.Itoa(i), got)
	}
	for i, n := range c.Nodes() {
		require.Equal(t, c.Addrs()[i], n.Addr())
	}
	require.Panics(t, func() { c.Server(3) })
}

func TestRedisKillRestartKeepsAcknowledgedWrites(t *testing.T) {
	ctx := ctxT(t)
	s := testutil.StartRedisServer(t)
	cl := s.Client()
	for i := range 50 {
		require.NoError(t, cl.Incr(ctx, "counter").Err(), "write %d", i)
	}
	require.NoError(t, cl.Set(ctx, "k", "v", 0).Err())
	port := s.Port()

	require.NoError(t, s.Kill())
	require.False(t, s.Running())
	require.NoError(t, s.Kill(), "killing a dead server does nothing")
	start := time.Now()
	err := cl.Ping(ctx).Err()
	require.Error(t, err)
	require.ErrorContains(t, err, "connection refused")
	require.Less(t, time.Since(start), time.Second, "a dead server must fail fast")
	_, err = net.DialTimeout("tcp", s.Addr(), time.Second)
	require.Error(t, err, "nothing listens on a killed server's port")

	require.NoError(t, s.Restart())
	require.True(t, s.Running())
	require.Equal(t, port, s.Port())
	n, err := cl.Get(ctx, "counter").Int()
	require.NoError(t, err)
	require.Equal(t, 50, n, "every acknowledged write survives SIGKILL (appendfsync always)")
	v, err := cl.Get(ctx, "k").Result()
	require.NoError(t, err)
	require.Equal(t, "v", v)

	// Restart of a running server crashes it first; data stays.
	require.NoError(t, cl.Set(ctx, "k2", "v2", 0).Err())
	require.NoError(t, s.Restart())
	v, err = s.Client().Get(ctx, "k2").Result()
	require.NoError(t, err)
	require.Equal(t, "v2", v)
}

func TestRedisStopIsGraceful(t *testing.T) {
	ctx := ctxT(t)
	s := testutil.StartRedisServer(t)
	require.NoError(t, s.Client().Set(ctx, "k", "v", 0).Err())
	require.NoError(t, s.Stop())
	require.False(t, s.Running())
	require.NoError(t, s.Stop(), "stopping a stopped server does nothing")
	log, err := os.ReadFile(s.LogPath())
	require.NoError(t, err)
	require.Contains(t, string(log), "ready to exit", "SIGTERM runs Redis's shutdown")

	require.NoError(t, s.Restart())
	v, err := s.Client().Get(ctx, "k").Result()
	require.NoError(t, err)
	require.Equal(t, "v", v)
}

func TestRedisPauseTimesOutAndResumeRecovers(t *testing.T) {
	ctx := ctxT(t)
	s := testutil.StartRedisServer(t)
	cl := s.Client()
	require.NoError(t, cl.Ping(ctx).Err())

	require.NoError(t, s.Pause())
	require.True(t, s.Paused())
	require.True(t, s.Running())
	require.NoError(t, s.Pause(), "pausing twice does nothing")
	start := time.Now()
	err := cl.Ping(ctx).Err()
	elapsed := time.Since(start)
	require.Error(t, err)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout(), "a paused server times out: %v", err)
	require.Less(t, elapsed, 2*time.Second, "the client timeout bounds the wait")

	// A caller's context bounds it as well.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	start = time.Now()
	_, err = s.Node().Eval(short, scripts.Renew, []string{"redlock:{res}"}, "tok", 1000)
	require.Error(t, err)
	cancel()
	require.Less(t, time.Since(start), 400*time.Millisecond)

	require.NoError(t, s.Resume())
	require.False(t, s.Paused())
	require.NoError(t, s.Resume(), "resuming a running server does nothing")
	require.NoError(t, cl.Ping(ctx).Err())
}

func TestRedisWithConfig(t *testing.T) {
	s := testutil.StartRedisServer(t, testutil.WithConfig("maxmemory-policy allkeys-lru", "appendonly no"))
	require.Equal(t, "allkeys-lru", configGet(t, s, "maxmemory-policy"))
	require.Equal(t, "no", configGet(t, s, "appendonly"))
	require.Equal(t, "always", configGet(t, s, "appendfsync"), "defaults not overridden stay")
}

func TestRedisWithPassword(t *testing.T) {
	ctx := ctxT(t)
	s := testutil.StartRedisServer(t, testutil.WithPassword("s3cret"))
	require.Equal(t, "redis://:s3cret@"+s.Addr(), s.URL())
	require.NoError(t, s.Client().Ping(ctx).Err())
	require.NoError(t, s.Do(ctx, "PING").Err())

	anon := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer func() { require.NoError(t, anon.Close()) }()
	require.ErrorContains(t, anon.Ping(ctx).Err(), "NOAUTH")

	nodes, err := redisnode.Dial(ctx, s.URL())
	require.NoError(t, err)
	require.NoError(t, nodes.Close())
}

func TestRedisBadConfigReportsTheLog(t *testing.T) {
	_, err := testutil.StartServerErr(t, testutil.WithConfig("no-such-directive yes"))
	require.Error(t, err)
	require.ErrorContains(t, err, "exited during start-up")
	require.ErrorContains(t, err, "no-such-directive", "the error carries the server's own complaint")
}

func TestRedisNodesRunTheLockScripts(t *testing.T) {
	ctx := ctxT(t)
	c := testutil.StartRedis(t, 3)
	const key = "redlock:{res}"
	// (Above the node's floor: since Safety v4 a counter below the time
	// the node's marker vouches from is raised to it first.)
	const high = 3_000_000_000_000_000
	require.NoError(t, c.Server(2).Do(ctx, "SET", key+":fence", high).Err())
	for i, n := range c.Nodes() {
		l := lockerOn(t, n, "me")
		lease, err := l.TryAcquire(ctx, "res")
		require.NoError(t, err)
		if i == 2 {
			require.EqualValues(t, high+1, lease.Fence())
		} else { // a new counter starts from the node's clock, in microseconds
			require.Greater(t, lease.Fence(), fencing.Token(time.Now().Add(-time.Hour).UnixMicro()))
		}
		_, err = lockerOn(t, n, "you").TryAcquire(ctx, "res")
		var ae *redlock.AcquireError
		require.ErrorAs(t, err, &ae)
		require.Greater(t, ae.HolderTTL, 900*time.Millisecond)
		st, err := l.Inspect(ctx, "res")
		require.NoError(t, err)
		require.True(t, st.Nodes[0].Info.Held)
		require.NoError(t, lease.Release(ctx))
	}
}

func TestRedisCleanupStopsEverything(t *testing.T) {
	testutil.RedisServerPath(t) // skip here, not only in the subtest
	var addrs []string
	t.Run("inner", func(t *testing.T) {
		c := testutil.StartRedis(t, 3)
		require.NoError(t, c.Server(0).Pause())
		require.NoError(t, c.Server(1).Kill())
		addrs = c.Addrs()
		_ = c.Nodes()
	})
	for _, a := range addrs {
		_, err := net.DialTimeout("tcp", a, time.Second)
		require.Error(t, err, "server %s outlived its test", a)
	}
}

func TestRedisFaultsAreConcurrencySafe(t *testing.T) {
	ctx := ctxT(t)
	s := testutil.StartRedisServer(t)
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			for j := range 4 {
				switch (g + j) % 4 {
				case 0:
					_ = s.Pause()
				case 1:
					_ = s.Resume()
				case 2:
					_ = s.Kill()
				case 3:
					_ = s.Restart()
				}
				_ = s.Running()
				_ = s.Paused()
			}
		})
	}
	wg.Wait()
	require.NoError(t, s.Resume())
	require.NoError(t, s.Restart())
	require.NoError(t, s.Client().Ping(ctx).Err())
}

func TestRedisRestartRetriesWhileItsPortIsTaken(t *testing.T) {
	ctx := ctxT(t)
	s := testutil.StartRedisServer(t)
	require.NoError(t, s.Client().Set(ctx, "k", "v", 0).Err())
	require.NoError(t, s.Kill())

	// Held for good: Restart gives up with the server's own complaint.
	l, err := net.Listen("tcp", s.Addr())
	require.NoError(t, err)
	err = s.Restart()
	require.ErrorContains(t, err, "port already in use")
	require.ErrorContains(t, err, "Address already in use")
	require.False(t, s.Running())

	// Held briefly: Restart waits it out on the same port.
	time.AfterFunc(300*time.Millisecond, func() { _ = l.Close() })
	require.NoError(t, s.Restart())
	v, err := s.Client().Get(ctx, "k").Result()
	require.NoError(t, err)
	require.Equal(t, "v", v)
}

func TestStartRedisSkipsWithoutRedisServer(t *testing.T) {
	var inner *testing.T
	t.Run("no redis-server", func(t *testing.T) {
		inner = t
		t.Setenv("PATH", t.TempDir())
		t.Setenv(testutil.RequireRedisEnv, "")
		testutil.StartRedis(t, 1)
		t.Error("StartRedis returned without redis-server")
	})
	require.True(t, inner.Skipped())
}
