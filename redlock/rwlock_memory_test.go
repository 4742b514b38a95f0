package redlock_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// TestRWDeadReadersLeaveNoKeysOnRealServer: 300 readers of 300 resources
// die without releasing (Orphan). Once their leases end, their own keys
// and their readers indexes (whose TTL reaches their latest end) are gone,
// and each resource keeps only its fence counter, which records the
// readers' end without a TTL (the evidence an eviction cannot take while a
// reader may be live, design §6.2), as a mutex lease that ended by expiry
// does; one call on the resource (here a writer's TryAcquire and Release)
// gives the counter its TTL again, after which no key without a TTL is
// left but the node's marker, and once the counters' life (20 s) passes
// the database and its memory are back where they started. The numbers
// are logged.
func TestRWDeadReadersLeaveNoKeysOnRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	const n = 300
	c := testutil.StartRedis(t, 1)
	cl := c.Server(0).Client()
	ctx := testutil.Context(t)
	for _, s := range scripts.All { // the script cache is not the readers' memory
		require.NoError(t, cl.ScriptLoad(ctx, s.Source()).Err())
	}
	base, baseKeys, baseUse := usedMemory(t, cl), dbSize(t, cl), keysMemory(t, cl)
	baseNames := scanKeys(t, cl, "*") // the node's marker
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: time.Second})
	locks := make([]*redlock.RWLock, n)
	for i := range locks {
		rw, err := l.NewRWLock(fmt.Sprintf("mem%d", i))
		require.NoError(t, err)
		locks[i] = rw
		r, err := rw.TryAcquireShared(ctx)
		require.NoError(t, err)
		r.Orphan() // dies: no renewal, no release
	}
	live, liveKeys, liveUse := usedMemory(t, cl), dbSize(t, cl), keysMemory(t, cl)
	require.Eventually(t, func() bool { return len(scanKeys(t, cl, "*:reader*")) == 0 }, 20*time.Second, 50*time.Millisecond,
		"the dead readers' keys and their indexes expire with their leases")
	lapsed, lapsedNoTTL := usedMemory(t, cl), noTTL(t, cl)
	lapsedUse := keysMemory(t, cl, lapsedNoTTL...)
	require.Len(t, lapsedNoTTL, n+1, "each resource keeps its counter without a TTL until a call on it (and the marker)")
	for _, k := range lapsedNoTTL {
		require.True(t, strings.HasSuffix(k, ":rw:fence") || strings.Contains(k, "~trust:"), k)
	}
	for _, rw := range locks { // one call on each resource
		w, err := rw.TryAcquire(ctx)
		require.NoError(t, err)
		require.NoError(t, w.Release(ctx))
	}
	swept := noTTL(t, cl)
	require.Len(t, swept, 1, "after one call per resource only the marker has no TTL: %v", swept)
	require.Eventually(t, func() bool { return dbSize(t, cl) == baseKeys }, 60*time.Second, 200*time.Millisecond,
		"every other key expires (the counters 20 s after their last lease)")
	after, afterUse := usedMemory(t, cl), keysMemory(t, cl)
	t.Logf("%d dead readers: keys (MEMORY USAGE summed) / used_memory: before %d keys %d B / %d B; live %d keys %d B / %d B; leases ended: %d keys without a TTL (the counters and the marker), %d B / %d B; after one call per resource and the counters' life: %d keys %d B / %d B",
		n, baseKeys, baseUse, base, liveKeys, liveUse, live, len(lapsedNoTTL), lapsedUse, lapsed, dbSize(t, cl), afterUse, after)
	// The marker may have grown (it keeps the db's high-water: design
	// §6.1), so the keys, not their bytes, are compared.
	require.ElementsMatch(t, baseNames, scanKeys(t, cl, "*"), "the keys left are the ones before")
	require.Less(t, after, lapsed, "used_memory went down")
}

// keysMemory sums MEMORY USAGE over keys (none given: every key).
func keysMemory(t *testing.T, cl *redis.Client, keys ...string) int64 {
	t.Helper()
	if len(keys) == 0 {
		keys = scanKeys(t, cl, "*")
	}
	var sum int64
	for _, k := range keys {
		if n, err := cl.MemoryUsage(context.Background(), k).Result(); err == nil {
			sum += n
		}
	}
	return sum
}

func usedMemory(t *testing.T, cl *redis.Client) int64 {
	t.Helper()
	info, err := cl.Info(context.Background(), "memory").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}

func dbSize(t *testing.T, cl *redis.Client) int64 {
	t.Helper()
	n, err := cl.DBSize(context.Background()).Result()
	require.NoError(t, err)
	return n
}

func scanKeys(t *testing.T, cl *redis.Client, match string) []string {
	t.Helper()
	var out []string
	iter := cl.Scan(context.Background(), 0, match, 1000).Iterator()
	for iter.Next(context.Background()) {
		out = append(out, iter.Val())
	}
	require.NoError(t, iter.Err())
	return out
}

// noTTL lists the keys without a TTL.
func noTTL(t *testing.T, cl *redis.Client) []string {
	t.Helper()
	var out []string
	for _, k := range scanKeys(t, cl, "*") {
		if d, err := cl.PTTL(context.Background(), k).Result(); err == nil && d == -1 {
			out = append(out, k)
		}
	}
	return out
}
