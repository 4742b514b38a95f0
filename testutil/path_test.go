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
	const missing = "redis-server not found on PATH; install it (apt-get install redis-server) or set REDLOCK_REQUIRE_REDIS=1 to make this a failure"
	const short = "real redis-server test skipped under -short (make quick); make test runs it"
	tests := []struct {
		name     string
		short    bool
		lookup   func(string) (string, error)
		require  string
		path     string
		msg      string
		fatal    bool
		contains string // msg must contain this instead of equalling msg
	}{
		{name: "found", lookup: lookupFound, path: "/opt/redis/bin/redis-server"},
		{name: "found, required", lookup: lookupFound, require: "1", path: "/opt/redis/bin/redis-server"},
		{name: "missing skips", lookup: lookupMissing, msg: missing},
		{name: "missing, required=0", lookup: lookupMissing, require: "0", msg: missing},
		{name: "missing, required=false", lookup: lookupMissing, require: "false", msg: missing},
		{name: "missing, required=yes-please", lookup: lookupMissing, require: "yes-please", msg: missing},
		{name: "missing, required fails", lookup: lookupMissing, require: "1", fatal: true,
			contains: "REDLOCK_REQUIRE_REDIS is set"},
		{name: "short skips though found", short: true, lookup: lookupFound, msg: short},
		{name: "short skips though required", short: true, lookup: lookupMissing, require: "1", msg: short},
		{name: "short skips though found and required", short: true, lookup: lookupFound, require: "1", msg: short},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, msg, fatal := testutil.FindRedisServer(tt.short, tt.lookup, env(map[string]string{"REDLOCK_REQUIRE_REDIS": tt.require}))
			require.Equal(t, tt.path, path)
			require.Equal(t, tt.fatal, fatal)
			if tt.contains != "" {
				require.Contains(t, msg, missing)
				require.Contains(t, msg, tt.contains)
				return
			}
			require.Equal(t, tt.msg, msg)
		})
	}
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
		return testutil.RedisServerPathWith(tb, false, lookupFound, env(nil))
	})
	require.Equal(t, "/opt/redis/bin/redis-server", got)
	require.Empty(t, f.skipped)
	require.Empty(t, f.fatal)

	f, _ = runTB(func(tb testing.TB) string {
		return testutil.RedisServerPathWith(tb, false, lookupMissing, env(nil))
	})
	require.Contains(t, f.skipped, "redis-server not found on PATH")
	require.Empty(t, f.fatal)

	f, _ = runTB(func(tb testing.TB) string {
		return testutil.RedisServerPathWith(tb, false, lookupMissing, env(map[string]string{"REDLOCK_REQUIRE_REDIS": "1"}))
	})
	require.Empty(t, f.skipped)
	require.Contains(t, f.fatal, "redis-server not found on PATH")

	// -short: skipped even with redis-server found and required.
	f, got = runTB(func(tb testing.TB) string {
		return testutil.RedisServerPathWith(tb, true, lookupFound, env(map[string]string{"REDLOCK_REQUIRE_REDIS": "1"}))
	})
	require.Empty(t, got)
	require.Contains(t, f.skipped, "skipped under -short")
	require.Empty(t, f.fatal)
}
