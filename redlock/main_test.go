package redlock_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/e6344662/go-redlock/testutil"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// TestMain fails the package if any goroutine outlives the tests: leases,
// Lockers and node clients must all stop what they start. go-redis's own
// logging of refused connections (nodes killed on purpose) is silenced.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	goleak.VerifyTestMain(m, testutil.LeakOptions()...)
}
