package testutil_test

import (
	"testing"

	"github.com/redis/go-redis/v9/logging"
	"go.uber.org/goleak"

	"github.com/e6344662/go-redlock/testutil"
)

// TestMain silences go-redis's log of refused dials, which these tests
// cause on purpose, and fails the package's tests if any goroutine (a client
// pool, a process waiter) is still running once they are done.
func TestMain(m *testing.M) {
	logging.Disable()
	goleak.VerifyTestMain(m, testutil.LeakOptions()...)
}
