// Package testutil provides Redis nodes with fault controls for testing
// code built on redlock: this project's own tests and yours.
//
// Two kinds of cluster are offered, both made of independent servers on
// 127.0.0.1 and both torn down by the test's cleanup (nothing outlives the
// test):
//
//   - NewMiniCluster runs miniredis servers inside the test process. They
//     start in microseconds and need nothing installed. Kill, Restart, Wipe,
//     Fail and Heal inject faults; FastForward moves key TTLs, which by
//     default do not follow the wall clock (see WithWallClock).
//   - StartRedis runs real redis-server processes, each in its own temporary
//     directory with AOF persistence and appendfsync always (the settings
//     the Redlock safety argument assumes). Kill (SIGKILL), Pause (SIGSTOP),
//     Resume, Stop and Restart (same port, AOF reloaded) inject faults. If
//     redis-server is not on PATH the test is skipped, or failed when
//     REDLOCK_REQUIRE_REDIS=1 is set. Under go test -short every helper
//     that starts a real server (StartRedis, StartRedisServer, StartCluster,
//     StartSentinel) skips the test, whatever REDLOCK_REQUIRE_REDIS says.
//
// Both hand out redlock nodes (and go-redis clients) with short timeouts
// and no retries, so a dead, paused or failing node costs one fast error
// rather than a stalled test.
//
// A test that a lock is still granted with a minority of nodes down:
//
//	func TestLockWithOneNodeDown(t *testing.T) {
//		c := testutil.NewMiniCluster(t, 3)
//		c.Kill(0)
//		locker, err := redlock.New(c.Nodes(), redlock.Config{})
//		require.NoError(t, err)
//		t.Cleanup(func() { _ = locker.Close() })
//		lease, err := locker.Acquire(context.Background(), "orders")
//		require.NoError(t, err)
//		require.NoError(t, c.Restart(0)) // the node comes back with its data
//		require.NoError(t, lease.Release(context.Background()))
//	}
//
// The same test against real servers starts with
//
//	c := testutil.StartRedis(t, 3)
//	require.NoError(t, c.Server(0).Kill())
//
// Servers are pinned to 127.0.0.1 and choose free ports, so tests using
// this package may run in parallel.
package testutil
