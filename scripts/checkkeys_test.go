package scripts_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// TestCheckKeysCatchesUndeclaredKeys: the KEYS check's prelude (built
// into every script under the tag redlock_checkkeys) lets a script touch
// its declared keys and run keyless commands, and fails a call, or a pcall
// (even inside the script's own pcall), of a key not in KEYS, and a
// command it has no entry for; on miniredis and on a real redis-server.
func TestCheckKeysCatchesUndeclaredKeys(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		m := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		checkKeys(t, c)
	})
	t.Run("redis-server", func(t *testing.T) {
		srv := testutil.StartRedisServer(t)
		checkKeys(t, srv.Client())
	})
}

func checkKeys(t *testing.T, c *redis.Client) {
	ctx := testutil.Context(t)
	run := func(body string, keys []string, args ...any) (any, error) {
		s := scripts.CheckKeys(scripts.New("check", body))
		return c.Eval(ctx, s.Source(), keys, args...).Result()
	}
	// declared keys, keyless commands, error replies and redis.* helpers pass
	v, err := run(`redis.call('SET', KEYS[1], ARGV[1])
redis.call('TIME')
redis.call('PUBLISH', 'chan', 'm')
redis.call('DEL', KEYS[2], KEYS[1])
redis.call('zadd', KEYS[2], 1, 'm')
local ok = redis.pcall('GET', KEYS[2])
if not ok.err then return 'pcall did not fail' end
local fine, e = pcall(function() return redis.call('GET', KEYS[2]) end)
if fine then return 'pcall did not fail' end
return redis.call('ZSCORE', KEYS[2], 'm')`, []string{"ck{a}", "ck{a}:z"}, "v")
	require.NoError(t, err)
	require.Equal(t, "1", v)
	_, err = run(`return redis.error_reply('NOPE custom')`, nil)
	require.ErrorContains(t, err, "NOPE custom")

	for _, tc := range []struct{ body, want string }{
		{`return redis.call('GET', 'ck{a}:other')`, "redlock: undeclared key ck{a}:other in GET"},
		{`return redis.pcall('zrem', 'ck{a}:other', 'x')`, "redlock: undeclared key ck{a}:other in ZREM"},
		{`return redis.call('DEL', KEYS[1], 'ck{a}:other')`, "redlock: undeclared key ck{a}:other in DEL"},
		{`local ok = pcall(function() return redis.call('PTTL', KEYS[1] .. ':x') end) return 1`, "redlock: undeclared key ck{a}:x in PTTL"},
		{`return redis.call('APPEND', KEYS[1], 'x')`, "redlock: command APPEND not in the KEYS check's table"},
	} {
		_, err := run(tc.body, []string{"ck{a}"})
		require.ErrorContains(t, err, tc.want, tc.body)
	}
	// every script of the package compiles with the prelude in front
	for _, s := range scripts.All {
		require.NoError(t, c.ScriptLoad(ctx, scripts.CheckKeys(s).Source()).Err(), s.Name())
	}
}

// TestRWScriptsTouchOnlyTheirKeys runs the read-write lock's scripts with
// the KEYS check through readers granted, a writer refused by them (with
// and without an intent), a reader refused by the intent, its withdrawal,
// both kinds of inspection, and a writer granted once the readers' ends
// passed: each touches only the keys it declares.
func TestRWScriptsTouchOnlyTheirKeys(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		m := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		rwKeys(t, c, func() { m.SetTime(time.Now().Add(time.Hour)); m.FastForward(time.Hour) })
	})
	t.Run("redis-server", func(t *testing.T) {
		srv := testutil.StartRedisServer(t)
		rwKeys(t, srv.Client(), func() {}) // the readers' 2 s pass on the server's clock
	})
}

func rwKeys(t *testing.T, c *redis.Client, lapse func()) {
	ctx := testutil.Context(t)
	const w = "ck{doc}:rw"
	base := []string{w, w + ":fence", w + ":readers", w + ":intent"}
	marker := "ck~trust:db0"
	eval := func(s *scripts.Script, keys []string, args ...any) any {
		t.Helper()
		v, err := c.Eval(ctx, scripts.CheckKeys(s).Source(), keys, args...).Result()
		require.NoError(t, err, s.Name())
		return v
	}
	read := func(tok string) any {
		return eval(scripts.RWRead, append(base[:4:4], w+":reader:"+tok, marker), tok, "me", 2000, "none", "", -1)
	}
	write := func(tok, mode, id string) any {
		return eval(scripts.RWWrite, append(base[:4:4], marker), tok, "me", 2000, "none", "", mode, id, 5000, -1)
	}
	require.Equal(t, "granted", read("aa01").([]any)[0])
	require.Equal(t, "granted", read("aa01").([]any)[0], "a retried call")
	require.Equal(t, "granted", read("bb02").([]any)[0])
	require.Equal(t, []any{"readers", int64(2)}, pick(write("cc03", "try", ""), 0, 4), "two readers hold it")
	require.Equal(t, []any{"readers", int64(2)}, pick(write("cc03", "wait", "wr1"), 0, 4))
	require.Equal(t, "intent", read("dd04").([]any)[0], "a writer waits")
	require.Len(t, eval(scripts.RWInspect, base), 4+2*3)
	in := eval(scripts.RWInspect, append(base[:4:4], w+":reader:aa01", w+":reader:bb02")).([]any)
	require.Equal(t, "aa01 me", in[6])
	require.Equal(t, int64(1), eval(scripts.RWWithdraw, base[3:4], "wr1"))
	lapse()
	require.Eventually(t, func() bool { return write("cc03", "try", "").([]any)[0] == "granted" },
		10*time.Second, 10*time.Millisecond, "granted once the readers' ends passed")
	n, err := c.Exists(ctx, w+":readers").Result()
	require.NoError(t, err)
	require.Zero(t, n, "the grant swept the lapsed readers and the index with them")
}

// pick returns the elements at the given places of array reply r.
func pick(r any, at ...int) []any {
	vals := r.([]any)
	out := make([]any, len(at))
	for i, k := range at {
		out[i] = vals[k]
	}
	return out
}
