package scripts_test

import (
	"testing"

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
		s := scripts.New("check", scripts.CheckKeysLua+body)
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
		src := s.Source()
		if !scripts.KeyCheckBuilt() {
			src = scripts.CheckKeysLua + src
		}
		require.NoError(t, c.ScriptLoad(ctx, src).Err(), s.Name())
	}
}
