package redisnode_test

import (
	"context"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// TestMain fails the package if any goroutine outlives the tests: nodes,
// their subscriptions and Lockers must stop what they start. go-redis's own
// logging of refused connections (servers killed on purpose) is silenced.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	goleak.VerifyTestMain(m, testutil.LeakOptions()...)
}

// newLocker returns a Locker on nodes, closed when t ends.
func newLocker(t testing.TB, nodes []redlock.Node, cfg redlock.Config) *redlock.Locker {
	t.Helper()
	l, err := redlock.New(nodes, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// slowPolling makes a waiting Acquire retry only when woken by a release
// announcement (or after an hour).
func slowPolling(cfg redlock.Config) redlock.Config {
	cfg.NewBackOff = func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }
	return cfg
}
