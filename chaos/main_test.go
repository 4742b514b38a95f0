package chaos_test

import (
	"testing"

	"github.com/redis/go-redis/v9/logging"
	"go.uber.org/goleak"

	"github.com/e6344662/go-redlock/testutil"
)

// TestMain silences go-redis's log of refused dials (the nemesis kills
// nodes on purpose) and fails the package if any goroutine outlives the
// tests: Lockers, leases, clients and servers must all stop.
func TestMain(m *testing.M) {
	logging.Disable()
	goleak.VerifyTestMain(m, testutil.LeakOptions()...)
}
