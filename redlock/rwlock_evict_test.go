package redlock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// The readers index has a TTL (it reaches its latest reader's end), so a
// volatile-* policy may evict it while a reader is live. The shared fence
// counter, which has no TTL while a lease runs, records the readers'
// latest end (scripts/counter.lua, C5): these tests take the index away on
// real servers, where the nodes' lost-key check runs, and require that no
// writer, and no reader whose new index would not hold the lost one, is
// granted before that end.

// evictLease is the readers' lease in these tests: long enough that a
// loaded machine still refuses inside it, short enough to wait out.
const evictLease = 5 * time.Second

// requireKeyLost requires err to be the refusal of nodes whose counter
// records a live lease that neither W's key nor the readers index
// accounts for.
func requireKeyLost(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, redlock.ErrRejoining, "the nodes sit out: %v", err)
	require.ErrorContains(t, err, "records a live lease")
}

// rwOnRealServers returns a Locker of evictLease leases on three real
// servers with cfg's policy, and its read-write lock "doc".
func rwOnRealServers(t *testing.T, conf ...string) (*testutil.RedisCluster, *redlock.Locker, *redlock.RWLock) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 3, testutil.WithConfig(conf...))
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: evictLease})
	return c, l, newRW(t, l)
}

// TestAnEvictedReadersIndexStillExcludesWritersAndReaders: a reader that
// died holds "doc"; the servers (maxmemory, volatile-lru) evict every key
// with a TTL, the reader's key and the readers index among them. A writer
// and a new reader sit out until the dead reader's lease has ended; then
// the writer is granted, with a greater token.
func TestAnEvictedReadersIndexStillExcludesWritersAndReaders(t *testing.T) {
	t.Parallel() // bound by the wall clock (a lease passing)
	c, l, rw := rwOnRealServers(t, "maxmemory 64mb", "maxmemory-policy volatile-lru")
	ctx := testutil.Context(t)
	granted := time.Now()
	r, err := testutil.Retried(t, rw.TryAcquireShared)
	require.NoError(t, err)
	r.Orphan()
	for i := range c.Len() {
		s := c.Server(i)
		require.NoError(t, s.Do(ctx, "CONFIG", "SET", "maxmemory", "1").Err())
		_ = s.Do(ctx, "SET", "filler", "x").Err() // evicts every key with a TTL first; then refused
		require.NoError(t, s.Do(ctx, "CONFIG", "SET", "maxmemory", "64mb").Err())
		n, err := s.Do(ctx, "EXISTS", readersIndex(l)).Int()
		require.NoError(t, err)
		require.Zero(t, n, "node %d: the readers index was evicted", i)
	}
	_, err = testutil.Retried(t, rw.TryAcquire)
	requireKeyLost(t, err)
	_, err = testutil.Retried(t, rw.TryAcquireShared)
	requireKeyLost(t, err)
	var w *redlock.Lease
	require.Eventually(t, func() bool {
		w, err = rw.TryAcquire(ctx)
		return err == nil
	}, evictLease+10*time.Second, 20*time.Millisecond, "never granted: %v", err)
	require.GreaterOrEqual(t, time.Since(granted), evictLease-50*time.Millisecond, "a writer granted inside the reader's lease")
	require.Greater(t, w.Fence(), r.Fence())
	require.NoError(t, w.Release(ctx))
}

// TestAReaderReleasedAfterItsIndexWasEvictedKeepsTheOthersEnd: two
// readers, one of them dead; the index deleted on every node, as an
// eviction would; the live one releases. Its entry was gone, so no node
// can tell which readers are left: the counter keeps the readers' end, and
// a writer sits out until the dead reader's lease has ended.
func TestAReaderReleasedAfterItsIndexWasEvictedKeepsTheOthersEnd(t *testing.T) {
	t.Parallel() // bound by the wall clock (a lease passing)
	c, l, rw := rwOnRealServers(t)
	ctx := testutil.Context(t)
	granted := time.Now()
	dead, err := testutil.Retried(t, rw.TryAcquireShared)
	require.NoError(t, err)
	dead.Orphan()
	r, err := testutil.Retried(t, rw.TryAcquireShared)
	require.NoError(t, err)
	for i := range c.Len() {
		require.NoError(t, c.Server(i).Do(ctx, "DEL", readersIndex(l)).Err())
	}
	require.NoError(t, r.Release(ctx))
	_, err = testutil.Retried(t, rw.TryAcquire)
	requireKeyLost(t, err)
	require.Eventually(t, func() bool {
		w, err := rw.TryAcquire(ctx)
		if err == nil {
			require.NoError(t, w.Release(ctx))
		}
		return err == nil
	}, evictLease+10*time.Second, 20*time.Millisecond, "never granted: %v", err)
	require.GreaterOrEqual(t, time.Since(granted), evictLease-50*time.Millisecond, "a writer granted inside the dead reader's lease")
}

// TestTheLastReadersReleaseLetsAWriterInAtOnce: each reader's release
// lowers the counter's record to the latest end of the readers the index
// still holds, and the last one's removes it, so a writer is granted as
// soon as the last reader has released, not when the longest reader's
// lease would have ended.
func TestTheLastReadersReleaseLetsAWriterInAtOnce(t *testing.T) {
	t.Parallel()
	c, l, rw := rwOnRealServers(t)
	ctx := testutil.Context(t)
	r1, err := testutil.Retried(t, rw.TryAcquireShared)
	require.NoError(t, err)
	r2, err := testutil.Retried(t, rw.TryAcquireShared)
	require.NoError(t, err)
	require.NoError(t, r1.Release(ctx))
	_, err = testutil.Retried(t, rw.TryAcquire)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorContains(t, err, "1 readers hold it")
	require.NoError(t, r2.Release(ctx))
	// Release returns at a majority: the third node may still hold r2.
	for i := range c.Len() {
		require.Eventually(t, func() bool {
			n, err := c.Server(i).Do(ctx, "EXISTS", readersIndex(l)).Int()
			return err == nil && n == 0
		}, 10*time.Second, 10*time.Millisecond, "node %d: the last reader's release takes the index", i)
	}
	w, err := testutil.Retried(t, rw.TryAcquire)
	require.NoError(t, err, "granted at once: the counter records no reader's end")
	require.NoError(t, w.Release(ctx))
}
