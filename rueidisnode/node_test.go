package rueidisnode_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/rueidisnode"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// The tests run on real redis-server processes that testutil starts on free
// 127.0.0.1 ports and stops at the end; they skip without redis-server
// unless REDLOCK_REQUIRE_REDIS=1.

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testutil.LeakOptions()...)
}

// dial returns a Node over s, closed at the test's end.
func dial(t *testing.T, url string) *rueidisnode.Node {
	t.Helper()
	n, err := rueidisnode.Dial(url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// redisError is the Node contract's mark of a server's error reply.
type redisError interface {
	error
	RedisError()
}

// TestEvalRepliesMatchTheContract runs scripts returning every kind of
// reply on a real server, through the rueidis Node and through redlock's
// go-redis redisnode.Node (the contract's reference), and checks the rueidis
// Node's reply is the contract's type and value, and the same as go-redis's
// where the contract names it.
func TestEvalRepliesMatchTheContract(t *testing.T) {
	srv := testutil.StartRedisServer(t)
	n := dial(t, srv.URL())
	ref := srv.Node()
	ctx := context.Background()
	for _, tc := range []struct {
		name, src string
		args      []any
		want      any
		wantErr   string // the server's full text; "" for none
		sameAsRef bool   // redisnode.Node decodes it the same way
	}{
		{name: "integer", src: "return 42", want: int64(42), sameAsRef: true},
		{name: "negative integer", src: "return -7", want: int64(-7), sameAsRef: true},
		{name: "float is truncated by Lua", src: "return 3.99", want: int64(3), sameAsRef: true},
		{name: "bulk string", src: "return 'hello'", want: "hello", sameAsRef: true},
		{name: "empty string", src: "return ''", want: "", sameAsRef: true},
		{name: "status reply", src: "return redis.status_reply('OK')", want: "OK", sameAsRef: true},
		{name: "argument echo", src: "return {ARGV[1], ARGV[2], ARGV[3], KEYS[1]}", args: []any{"s", 12, int64(-1 << 40)},
			want: []any{"s", "12", strconv.FormatInt(-1<<40, 10), "k{x}"}, sameAsRef: true},
		{name: "array with a nil inside", src: "return {1, 'two', false, {3, 'four'}}",
			want: []any{int64(1), "two", nil, []any{int64(3), "four"}}, sameAsRef: true},
		{name: "empty array", src: "return {}", want: []any{}, sameAsRef: true},
		{name: "array cut at a nil (Lua's rule)", src: "return {1, nil, 3}", want: []any{int64(1)}, sameAsRef: true},
		{name: "top-level nil", src: "return nil", want: nil},
		{name: "false is nil", src: "return false", want: nil},
		{name: "true is 1", src: "return true", want: int64(1)},
		{name: "error reply", src: "return redis.error_reply('FENCEEXHAUSTED the counter is spent')", wantErr: "FENCEEXHAUSTED the counter is spent", sameAsRef: true},
		{name: "error reply keeps ERR", src: "return redis.error_reply('ERR something')", wantErr: "ERR something", sameAsRef: true},
		{name: "WRONGTYPE from a call", src: "redis.call('LPUSH', KEYS[1], 'x'); return redis.call('GET', KEYS[1])", wantErr: "WRONGTYPE Operation against a key holding the wrong kind of value", sameAsRef: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, srv.Do(ctx, "DEL", "k{x}").Err())
			s := scripts.New("test-"+tc.name, tc.src)
			got, err := n.Eval(ctx, s, []string{"k{x}"}, tc.args...)
			if tc.wantErr != "" {
				var rerr redisError
				require.ErrorAs(t, err, &rerr)
				require.Contains(t, err.Error(), tc.wantErr)
				require.Nil(t, got)
			} else {
				require.NoError(t, err)
				require.Equal(t, tc.want, got)
			}
			if !tc.sameAsRef {
				return
			}
			require.NoError(t, srv.Do(ctx, "DEL", "k{x}").Err())
			want, werr := ref.Eval(ctx, s, []string{"k{x}"}, tc.args...)
			require.Equal(t, want, got)
			if werr != nil {
				require.Error(t, err)
				require.Equal(t, werr.Error(), err.Error())
			}
		})
	}
}

// TestEvalNestedErrorIsAnElement: an error inside an array is the
// element's value, an error with RedisError, not the call's error.
func TestEvalNestedErrorIsAnElement(t *testing.T) {
	srv := testutil.StartRedisServer(t)
	n := dial(t, srv.URL())
	got, err := n.Eval(context.Background(), scripts.New("nested", "return {1, redis.error_reply('NOPE inner')}"), nil)
	require.NoError(t, err)
	vals, ok := got.([]any)
	require.True(t, ok)
	require.Len(t, vals, 2)
	require.Equal(t, int64(1), vals[0])
	var rerr redisError
	require.ErrorAs(t, vals[1].(error), &rerr)
	require.Equal(t, "NOPE inner", rerr.Error())
}

// TestEvalLoadsTheScriptOnNoScript: after SCRIPT FLUSH the server lacks the
// script; Eval answers anyway (EVAL after NOSCRIPT) and the script is then
// cached.
func TestEvalLoadsTheScriptOnNoScript(t *testing.T) {
	srv := testutil.StartRedisServer(t)
	n := dial(t, srv.URL())
	ctx := context.Background()
	s := scripts.New("incr", "return redis.call('INCR', KEYS[1])")
	for want := int64(1); want <= 3; want++ {
		require.NoError(t, srv.Do(ctx, "SCRIPT", "FLUSH").Err())
		got, err := n.Eval(ctx, s, []string{"counter"})
		require.NoError(t, err)
		require.Equal(t, want, got, "the script ran exactly once per call")
	}
	exists, err := srv.Do(ctx, "SCRIPT", "EXISTS", s.Hash()).Slice()
	require.NoError(t, err)
	require.Equal(t, []any{int64(1)}, exists)
}

// TestEvalNeverSendsAfterTheDeadline: a call whose context has ended
// returns the context's error and never reaches the server.
func TestEvalNeverSendsAfterTheDeadline(t *testing.T) {
	srv := testutil.StartRedisServer(t)
	n := dial(t, srv.URL())
	s := scripts.New("incr", "return redis.call('INCR', KEYS[1])")
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, context.Canceled},
		{"deadline passed", func() (context.Context, context.CancelFunc) {
			return context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
		}, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			_, err := n.Eval(ctx, s, []string{"sent"})
			require.ErrorIs(t, err, tc.want)
			var rerr redisError
			require.False(t, errors.As(err, &rerr), "a context's end is not a server's reply")
		})
	}
	n0, err := srv.Do(context.Background(), "EXISTS", "sent").Int()
	require.NoError(t, err)
	require.Zero(t, n0, "no call reached the server")
}

// TestEvalOnAPausedServerReturnsByTheDeadline: the call is bounded by its
// context, and its error is not a server's reply (outcome unknown).
func TestEvalOnAPausedServerReturnsByTheDeadline(t *testing.T) {
	srv := testutil.StartRedisServer(t)
	n := dial(t, srv.URL())
	s := scripts.New("one", "return 1")
	_, err := n.Eval(context.Background(), s, nil) // connected and cached
	require.NoError(t, err)
	require.NoError(t, srv.Pause())
	defer func() { _ = srv.Resume() }()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = n.Eval(ctx, s, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  string
	}{
		{"not a URL scheme", "http://127.0.0.1:6379"},
		{"two addresses", "redis://127.0.0.1:6379?addr=127.0.0.1:6380"},
		{"bad db", "redis://127.0.0.1:6379/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rueidisnode.Dial(tc.url)
			require.ErrorIs(t, err, rueidisnode.ErrInvalidURL)
		})
	}
	t.Run("argument of an unsupported type", func(t *testing.T) {
		srv := testutil.StartRedisServer(t)
		n := dial(t, srv.URL())
		_, err := n.Eval(context.Background(), scripts.New("one", "return 1"), nil, struct{}{})
		require.ErrorIs(t, err, rueidisnode.ErrArgument)
	})
}

// TestUptimeAndDB: Uptime reports the server's start, run_id and
// configuration; DB the database of the URL.
func TestUptimeAndDB(t *testing.T) {
	srv := testutil.StartRedisServer(t)
	n := dial(t, srv.URL()+"/3")
	require.Equal(t, 3, n.DB())
	require.Equal(t, srv.Addr(), n.Addr())
	u, err := n.Uptime(context.Background())
	require.NoError(t, err)
	require.False(t, u.Since.IsZero())
	require.WithinDuration(t, time.Now(), u.Since, time.Minute)
	require.NotZero(t, u.BootMicros)
	runID, err := srv.Do(context.Background(), "INFO", "server").Text()
	require.NoError(t, err)
	require.Contains(t, runID, "run_id:"+u.Servers)
	require.Len(t, u.Servers, 40)
	require.NotZero(t, u.Conns)
	// The db reaches the server: a key written through the node is in db 3.
	_, err = n.Eval(context.Background(), scripts.New("set", "return redis.call('SET', KEYS[1], '1')"), []string{"indb3"})
	require.NoError(t, err)
	c := srv.Client()
	require.NoError(t, c.Do(context.Background(), "SELECT", "3").Err())
	require.Equal(t, int64(1), c.Exists(context.Background(), "indb3").Val())
}

// TestUptimeRefusesAllKeysEviction: a server that may evict any key is an
// error (Safety v4: no key of ours is safe there).
func TestUptimeRefusesAllKeysEviction(t *testing.T) {
	srv := testutil.StartRedisServer(t, testutil.WithConfig("maxmemory 100mb", "maxmemory-policy allkeys-lru"))
	n := dial(t, srv.URL())
	_, err := n.Uptime(context.Background())
	require.ErrorIs(t, err, redlock.ErrEvictsLocks, "the core refuses it as it refuses redisnode's")
	require.Contains(t, err.Error(), "allkeys-lru")
}

// TestErrEvictsLocksIsRedlocks: the deprecated rueidisnode.ErrEvictsLocks
// and redlock.ErrEvictsLocks match the same errors.
func TestErrEvictsLocksIsRedlocks(t *testing.T) {
	err := fmt.Errorf("rueidisnode: %w: maxmemory-policy allkeys-lru", redlock.ErrEvictsLocks)
	require.True(t, errors.Is(err, redlock.ErrEvictsLocks) && errors.Is(err, rueidisnode.ErrEvictsLocks))
}

// TestSubscribeDeliversReleases: a watched key's announcements reach
// onMessage; after the server restarts, the key is reported with an empty
// message and announcements flow again.
func TestSubscribeDeliversReleases(t *testing.T) {
	srv := testutil.StartRedisServer(t)
	n := dial(t, srv.URL())
	got := make(chan [2]string, 16)
	sub := n.Subscribe(func(key, msg string) { got <- [2]string{key, msg} })
	defer func() { require.NoError(t, sub.Close()) }()
	ctx := context.Background()
	require.NoError(t, sub.Watch(ctx, "lock{a}"))
	publish := func(msg string) {
		require.Eventually(t, func() bool {
			n, err := srv.Do(ctx, "PUBLISH", "lock{a}:released", msg).Int()
			return err == nil && n == 1
		}, 10*time.Second, 10*time.Millisecond)
	}
	publish("tok1")
	require.Equal(t, [2]string{"lock{a}", "tok1"}, <-got)
	require.NoError(t, srv.Restart())
	require.Equal(t, [2]string{"lock{a}", ""}, <-got, "announcements may have been missed")
	publish("tok2")
	require.Equal(t, [2]string{"lock{a}", "tok2"}, <-got)
	require.NoError(t, sub.Unwatch(ctx, "lock{a}"))
	require.Eventually(t, func() bool {
		n, err := srv.Do(ctx, "PUBLISH", "lock{a}:released", "tok3").Int()
		return err == nil && n == 0
	}, 10*time.Second, 10*time.Millisecond)
}

// nodes dials a rueidis Node on each of c's servers.
func nodes(t *testing.T, c *testutil.RedisCluster) []redlock.Node {
	var out []redlock.Node
	for _, u := range c.URLs() {
		out = append(out, dial(t, u))
	}
	return out
}
