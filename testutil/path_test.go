package testutil_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/testutil"
)

func lookupFound(string) (string, error)   { return "/opt/redis/bin/redis-server", nil }
func lookupMissing(string) (string, error) { return "", errors.New("not found") }

func env(vals map[string]string) func(string) string {
	return func(k string) string { return vals[k] }
}

func TestFindRedisServerDecision(t *testing.T) {
	const want = "redis-server not found on PATH; install it (apt-get install redis-server) or set REDLOCK_REQUIRE_REDIS=1 to make this a failure"

	path, msg, fatal := testutil.FindRedisServer(lookupFound, env(map[string]string{"REDLOCK_REQUIRE_REDIS": "1"}))
	require.Equal(t, "/opt/redis/bin/redis-server", path)
	require.Empty(t, msg)
	require.False(t, fatal)

	path, msg, fatal = testutil.FindRedisServer(lookupMissing, env(nil))
	require.Empty(t, path)
	require.Equal(t, want, msg)
	require.False(t, fatal, "missing redis-server skips by default")

	for _, v := range []string{"0", "false", "", "yes-please"} {
		_, _, fatal = testutil.FindRedisServer(lookupMissing, env(map[string]string{"REDLOCK_REQUIRE_REDIS": v}))
		require.False(t, fatal, "REDLOCK_REQUIRE_REDIS=%q must not make it a failure", v)
	}

	path, msg, fatal = testutil.FindRedisServer(lookupMissing, env(map[string]string{"REDLOCK_REQUIRE_REDIS": "1"}))
	require.Empty(t, path)
	require.True(t, fatal)
	require.Contains(t, msg, want)
	require.Contains(t, msg, "REDLOCK_REQUIRE_REDIS is set")
}

// fakeTB records Skip and Fatal and ends the goroutine as the real ones do.
type fakeTB struct {
	testing.TB
	skipped, fatal string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Skip(args ...any) {
	f.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}

func (f *fakeTB) Fatal(args ...any) {
	f.fatal = fmt.Sprint(args...)
	runtime.Goexit()
}

// runTB calls fn with a fake TB on its own goroutine and returns the fake.
func runTB(fn func(testing.TB) string) (*fakeTB, string) {
	f := &fakeTB{}
	var got string
	done := make(chan struct{})
	go func() {
		defer close(done)
		got = fn(f)
	}()
	<-done
	return f, got
}

func TestRedisServerPathSkipsOrFails(t *testing.T) {
	f, got := runTB(func(tb testing.TB) string {
		return testutil.RedisServerPathWith(tb, lookupFound, env(nil))
	})
	require.Equal(t, "/opt/redis/bin/redis-server", got)
	require.Empty(t, f.skipped)
	require.Empty(t, f.fatal)

	f, _ = runTB(func(tb testing.TB) string {
		return testutil.RedisServerPathWith(tb, lookupMissing, env(nil))
	})
	require.Contains(t, f.skipped, "redis-server not found on PATH")
	require.Empty(t, f.fatal)

	f, _ = runTB(func(tb testing.TB) string {
		return testutil.RedisServerPathWith(tb, lookupMissing, env(map[string]string{"REDLOCK_REQUIRE_REDIS": "1"}))
	})
	require.Empty(t, f.skipped)
	require.Contains(t, f.fatal, "redis-server not found on PATH")
}
