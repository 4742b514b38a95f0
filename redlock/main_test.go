package redlock_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/testutil"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// TestMain fails the package if any goroutine outlives the tests: leases,
// Lockers and node clients must all stop what they start. go-redis's own
// logging of refused connections (nodes killed on purpose) is silenced.
// The internal tests get their nodes from redisnode (NewTestNode).
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	redlock.NewTestNode = func(addr string) redlock.Node {
		return redisnode.New(redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}))
	}
	goleak.VerifyTestMain(m, testutil.LeakOptions()...)
}
