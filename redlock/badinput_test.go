package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/testutil"
)

// Bad input and hostile conditions, on real redis-server processes where
// the server's own behaviour matters (key types, replicas). They skip
// without redis-server unless REDLOCK_REQUIRE_REDIS=1.

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestConfigRejectsEveryInvalidValue covers each Config field's invalid
// values; config_test.go covers the common ones, this the edges.
func TestConfigRejectsEveryInvalidValue(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	cases := []struct {
		name  string
		cfg   redlock.Config
		field string
	}{
		{"lease most negative", redlock.Config{LeaseDuration: math.MinInt64}, "LeaseDuration"},
		{"lease one below minimum", redlock.Config{LeaseDuration: redlock.MinLeaseDuration - 1}, "LeaseDuration"},
		{"drift +Inf", redlock.Config{ClockDriftFactor: math.Inf(1)}, "ClockDriftFactor"},
		{"drift -Inf", redlock.Config{ClockDriftFactor: math.Inf(-1)}, "ClockDriftFactor"},
		{"drift just above one", redlock.Config{ClockDriftFactor: math.Nextafter(1, 2)}, "ClockDriftFactor"},
		{"drift tiny negative", redlock.Config{ClockDriftFactor: -math.SmallestNonzeroFloat64}, "ClockDriftFactor"},
		{"call timeout most negative", redlock.Config{NodeCallTimeout: math.MinInt64}, "NodeCallTimeout"},
		{"call timeout equals validity", redlock.Config{LeaseDuration: time.Second, NodeCallTimeout: time.Second - 12*time.Millisecond}, "NodeCallTimeout"},
		{"owner one byte too long", redlock.Config{Owner: strings.Repeat("é", redlock.MaxOwnerLen/2) + "x"}, "Owner"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := redlock.New(c.Nodes(), tc.cfg)
			require.Nil(t, l)
			require.ErrorIs(t, err, redlock.ErrInvalidConfig)
			require.Contains(t, err.Error(), tc.field)
		})
	}
}

// TestConfigEdgeValuesWork: the extremes New accepts really work, and
// owner labels and key prefixes are stored byte for byte.
func TestConfigEdgeValuesWork(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := ctxFor(t)
	c := testutil.StartRedis(t, 3)
	cases := []struct {
		name string
		cfg  redlock.Config
	}{
		{"shortest lease", redlock.Config{LeaseDuration: 50 * time.Millisecond}},
		{"owner at the limit", redlock.Config{Owner: strings.Repeat("o", redlock.MaxOwnerLen)}},
		{"owner with spaces, newline and binary", redlock.Config{Owner: "a b\nc\x00\xff"}},
		{"binary key prefix", redlock.Config{KeyPrefix: "\x00*?[]\n "}},
		{"smallest drift factor", redlock.Config{ClockDriftFactor: math.SmallestNonzeroFloat64}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cfg.KeyPrefix != "" { // testutil vouched for the default prefix only
				for _, s := range c.Servers() {
					require.NoError(t, s.VouchFor(ctx, tc.cfg.KeyPrefix))
				}
			}
			l := newLocker(t, c.Nodes(), tc.cfg)
			// The shortest lease gives each node call ~16ms: on a busy
			// machine one round can miss it, which is the lease's contract
			// (fail, never overstay), not a bug. What must hold is that
			// the configuration works: a round succeeds within a few tries.
			var last error
			for try := 0; try < 20; try++ {
				if last = edgeRound(ctx, c, l); last == nil {
					return
				}
				require.NoError(t, ctx.Err(), "last round: %v", last)
			}
			require.NoError(t, last, "20 rounds failed in a row")
		})
	}
}

// edgeRound acquires "edge", checks what the nodes hold and releases it.
func edgeRound(ctx context.Context, c *testutil.RedisCluster, l *redlock.Locker) error {
	lease, err := l.Acquire(ctx, "edge")
	if err != nil {
		return err
	}
	defer func() { _ = lease.Release(ctx) }()
	st, err := l.Inspect(ctx, "edge")
	if err != nil {
		return err
	}
	if lease.Context().Err() != nil {
		return fmt.Errorf("lease ended before the check: %w", context.Cause(lease.Context()))
	}
	if st.State != redlock.Held || st.Holder.Owner != l.Config().Owner {
		return fmt.Errorf("inspect: state %v, owner %q; want held by %q (owner label read back as written)", st.State, st.Holder.Owner, l.Config().Owner)
	}
	n, err := c.Server(0).Do(ctx, "EXISTS", l.Key("edge"), l.Key("edge")+":fence").Int()
	if err != nil {
		return err
	}
	if n != 2 {
		return fmt.Errorf("%d of the lock and fence keys exist verbatim under the prefix, want 2", n)
	}
	return nil
}

// TestDuplicateNodesAreRejected: one server must not count twice toward a
// quorum, whether given as the same Node, as two clients of one address, or
// as the same URL written differently.
func TestDuplicateNodesAreRejected(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	nodes := c.Nodes()
	again := c.Nodes() // new clients, same addresses
	for name, list := range map[string][]redlock.Node{
		"same node value":        {nodes[0], nodes[1], nodes[0]},
		"two clients, same addr": {nodes[0], nodes[1], again[0]},
		"all the same server":    {nodes[2], again[2]},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := redlock.New(list, redlock.Config{})
			require.ErrorIs(t, err, redlock.ErrInvalidConfig)
			require.Contains(t, err.Error(), "twice")
		})
	}
	u := c.URLs()[0]
	for name, urls := range map[string][]string{
		"same URL":              {u, u},
		"surrounding spaces":    {u, "  " + u + "\n"},
		"explicit database 0":   {u, u + "/0"},
		"among others":          {c.URLs()[1], u, c.URLs()[2], u},
		"different option only": {u + "?dial_timeout=1s", u + "?dial_timeout=2s"},
	} {
		t.Run("Dial/"+name, func(t *testing.T) {
			ns, err := redisnode.Dial(context.Background(), urls...)
			require.Nil(t, ns)
			require.ErrorIs(t, err, redlock.ErrInvalidConfig)
			require.Contains(t, err.Error(), "twice")
		})
	}
}

// TestHostileResourceNamesOnRealServers: every name within the limit is an
// opaque, separate lock, whose two keys are exactly Key(name) and
// Key(name)+":fence" on every node; none can reach another name's keys.
func TestHostileResourceNamesOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := ctxFor(t)
	c := testutil.StartRedis(t, 3)
	l := newLocker(t, c.Nodes(), redlock.Config{})

	// A leading "}" would give the keys an empty Redis Cluster hash tag.
	for _, bad := range []string{"", "}", "}{", strings.Repeat("r", redlock.MaxResourceLen+1), strings.Repeat("é", redlock.MaxResourceLen/2+1)} {
		_, err := l.TryAcquire(ctx, bad)
		require.ErrorIs(t, err, redlock.ErrInvalidResource)
		require.LessOrEqual(t, len(err.Error()), 200, "the error does not echo a long name")
	}

	// "x" is locked once so that it has a fence counter; then every hostile
	// name is locked and released, and "x" must be untouched.
	base, err := l.TryAcquire(ctx, "x")
	require.NoError(t, err)
	require.NoError(t, base.Release(ctx))
	// Each node's counter for x, once every node has answered (a late
	// grant keeps its own clock-started counter).
	fences := make([]string, c.Len())
	for i, s := range c.Servers() {
		require.Eventually(t, func() bool {
			v, err := s.Do(ctx, "GET", l.Key("x")+":fence").Text()
			fences[i] = v
			return err == nil
		}, time.Second, time.Millisecond)
	}
	names := []string{
		"x}:fence", "x}", "{x", "{x}", "{", "{}", "x}:released", "x}:fence{",
		"\x00", "\x00\xff\xfe binary", "\r\n*1\r\n$4\r\nPING\r\n", "ключ-🔒", "a b\tc",
		"*", "?", "[a-z]", strings.Repeat("r", redlock.MaxResourceLen), strings.Repeat("é", redlock.MaxResourceLen/2),
	}
	for _, name := range names {
		lease, err := l.TryAcquire(ctx, name)
		require.NoError(t, err, "resource %q", name)
		for _, s := range c.Servers() {
			// TryAcquire returns at a quorum; the last grant may still be
			// on its way.
			require.Eventually(t, func() bool {
				v, err := s.Do(ctx, "GET", l.Key(name)).Text()
				return err == nil && strings.HasPrefix(v, lease.Token()+" ")
			}, time.Second, time.Millisecond, "resource %q", name)
		}
		require.NoError(t, lease.Release(ctx), "resource %q", name)
	}
	for i, s := range c.Servers() {
		fence, err := s.Do(ctx, "GET", l.Key("x")+":fence").Text()
		require.NoError(t, err)
		require.Equal(t, fences[i], fence, "no other name touched x's fence counter")
		keys, err := s.Do(ctx, "DBSIZE").Int()
		require.NoError(t, err)
		require.Equal(t, 2+len(names), keys, "only one fence key per name remains, beside x's and the node's marker")
	}
}

// TestForeignDataUnderALockKey: someone else's data under a lock or fence
// key gives a clear error naming the node, and is left exactly as it was.
func TestForeignDataUnderALockKey(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := ctxFor(t)
	c := testutil.StartRedis(t, 3)
	l := newLocker(t, c.Nodes(), redlock.Config{})
	s0 := c.Server(0)

	// A hash under the lock key on every node.
	for _, s := range c.Servers() {
		require.NoError(t, s.Do(ctx, "HSET", l.Key("hash"), "owner", "someone else").Err())
	}
	_, err := l.TryAcquire(ctx, "hash")
	require.ErrorIs(t, err, redlock.ErrWrongType)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.Contains(t, err.Error(), "not a lock")
	var ne *redlock.NodeError
	require.ErrorAs(t, err, &ne)
	require.Contains(t, c.Addrs(), ne.Addr)
	require.Contains(t, err.Error(), ne.Addr)
	for _, s := range c.Servers() {
		v, err := s.Do(ctx, "HGET", l.Key("hash"), "owner").Text()
		require.NoError(t, err)
		require.Equal(t, "someone else", v)
		n, err := s.Do(ctx, "EXISTS", l.Key("hash")+":fence").Int()
		require.NoError(t, err)
		require.Zero(t, n, "no fence counter was created")
	}
	st, err := l.Inspect(ctx, "hash")
	require.NoError(t, err)
	require.Equal(t, redlock.Unknown, st.State)
	for _, ns := range st.Nodes {
		require.ErrorIs(t, ns.Err, redlock.ErrWrongType)
	}

	// A list under the fence key of one node only: the other two grant.
	require.NoError(t, s0.Do(ctx, "RPUSH", l.Key("list")+":fence", "item").Err())
	lease, err := l.TryAcquire(ctx, "list")
	require.NoError(t, err, "a minority of nodes with foreign data does not stop the lock")
	require.NotContains(t, lease.Granted(), s0.Addr())
	require.NoError(t, lease.Release(ctx))
	items, err := s0.Do(ctx, "LRANGE", l.Key("list")+":fence", 0, -1).StringSlice()
	require.NoError(t, err)
	require.Equal(t, []string{"item"}, items)
	n, err := s0.Do(ctx, "EXISTS", l.Key("list")).Int()
	require.NoError(t, err)
	require.Zero(t, n, "no half-done acquisition on the node that refused")

	// A plain string without expiry under the lock key looks like a lock
	// held forever: a refusal that says so, and Release by token cannot
	// remove it.
	for _, s := range c.Servers() {
		require.NoError(t, s.Do(ctx, "SET", l.Key("str"), "not a redlock value").Err())
	}
	_, err = l.TryAcquire(ctx, "str")
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.Contains(t, err.Error(), "with no expiry")
	var ae *redlock.AcquireError
	require.ErrorAs(t, err, &ae)
	require.Negative(t, ae.HolderTTL)
	require.ErrorIs(t, l.Release(ctx, "str", strings.Repeat("ab", 16)), redlock.ErrNotHeld)
	v, err := s0.Do(ctx, "GET", l.Key("str")).Text()
	require.NoError(t, err)
	require.Equal(t, "not a redlock value", v)
}

// TestNodeThatIsNotRedis: a node address where something else answers
// (here a listener that answers like an HTTP server and hangs up) is a node
// error naming the address, and a majority of them is ErrNoQuorum, fast.
func TestNodeThatIsNotRedis(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	nodes := c.Nodes()[:1]
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = conn.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
				_ = conn.Close()
			}
		}()
		t.Cleanup(func() { _ = ln.Close(); <-done })
		cl := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
		t.Cleanup(func() { _ = cl.Close() })
		nodes = append(nodes, redisnode.New(cl))
	}
	l := newLocker(t, nodes, redlock.Config{LeaseDuration: time.Second})
	start := time.Now()
	_, err := l.TryAcquire(testutil.Context(t), "r")
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.Less(t, time.Since(start), time.Second)
	var ne *redlock.NodeError
	require.True(t, errors.As(err, &ne))
	require.Contains(t, []string{nodes[1].Addr(), nodes[2].Addr()}, ne.Addr)
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
