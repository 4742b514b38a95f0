package redlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// Nodes that answer but cannot grant, on real redis-server processes: a
// read-only replica and a node out of memory. Each is its own failure, not
// a busy lock and not an unreachable node, and since waiting changes
// neither, Acquire returns it at once.

// requireGivesUpAtOnce runs Acquire on resource with a long deadline and
// requires it to fail with want well before the deadline.
func requireGivesUpAtOnce(t *testing.T, l *redlock.Locker, resource string, want error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testutil.Context(t), testutil.DefaultTestTimeout/2)
	defer cancel()
	_, err := l.Acquire(ctx, resource)
	require.ErrorIs(t, err, want)
	require.NotErrorIs(t, err, redlock.ErrNotAcquired)
	require.NoError(t, ctx.Err(), "Acquire retried to its deadline")
}

// TestReadOnlyReplicasCannotGrant: a read-only replica (of a server outside
// the node set) fails the acquire with ErrReadOnly. A majority of primaries
// still grants; a majority of replicas makes the lock unavailable with
// ErrReadOnly, which is neither ErrNotAcquired (nobody holds the lock) nor
// ErrNoQuorum (every node answered), and Acquire does not retry it.
func TestReadOnlyReplicasCannotGrant(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := testutil.Context(t)
	c := testutil.StartRedis(t, 4)
	primary := c.Server(3) // not a lock node
	require.NoError(t, primary.Do(ctx, "CONFIG", "SET", "repl-diskless-sync-delay", "0").Err())
	makeReplica := func(s *testutil.RedisServer) {
		t.Helper()
		require.NoError(t, s.Do(ctx, "REPLICAOF", "127.0.0.1", primary.Port()).Err())
		require.Eventually(t, func() bool {
			info, err := s.Do(ctx, "INFO", "replication").Text()
			return err == nil && strings.Contains(info, "master_link_status:up")
		}, 8*time.Second, 10*time.Millisecond, "replica log:\n%s\nprimary log:\n%s", readFile(s.LogPath()), readFile(primary.LogPath()))
	}
	nodes := c.Nodes()[:3]
	makeReplica(c.Server(2))

	l := newLocker(t, nodes, redlock.Config{})
	lease, err := tryAcquire(t, l, "r")
	require.NoError(t, err, "two primaries of three still grant")
	require.NotContains(t, lease.Granted(), c.Server(2).Addr())
	require.NoError(t, lease.Release(ctx))

	makeReplica(c.Server(1))
	_, err = tryAcquire(t, l, "r")
	require.ErrorIs(t, err, redlock.ErrReadOnly)
	require.NotErrorIs(t, err, redlock.ErrNotAcquired, "nobody holds the lock")
	require.NotErrorIs(t, err, redlock.ErrNoQuorum, "every node answered")
	var ae *redlock.AcquireError
	require.ErrorAs(t, err, &ae)
	require.Empty(t, ae.Refused, "a replica is not a holder")
	require.Contains(t, err.Error(), "read-only replica")
	require.Contains(t, err.Error(), c.Server(1).Addr())
	require.Contains(t, err.Error(), c.Server(2).Addr())

	requireGivesUpAtOnce(t, l, "r", redlock.ErrReadOnly)

	// The primary's grant, if it came before the replicas' errors decided
	// the attempt, is cleaned up.
	require.Eventually(t, func() bool {
		n, err := c.Server(0).Do(ctx, "EXISTS", l.Key("r")).Int()
		return err == nil && n == 0
	}, 5*time.Second, 5*time.Millisecond, "the primary's partial grant was cleaned up")
}

// TestFullNodesCannotGrant: a node out of memory (used memory above
// maxmemory, noeviction) fails the acquire with ErrNodeFull. One of three
// does not stop a lock; a majority makes it unavailable with ErrNodeFull,
// not ErrNoQuorum (every node answered), and Acquire does not retry it.
// A lease taken before the nodes filled up is still renewed and released:
// neither needs memory.
func TestFullNodesCannotGrant(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := testutil.Context(t)
	c := testutil.StartRedis(t, 3)
	fill := func(s *testutil.RedisServer) {
		t.Helper()
		// About 3 MB of data, then a 1 MB limit: every write that needs
		// memory is refused with OOM.
		require.NoError(t, s.Do(ctx, "DEBUG", "POPULATE", 20000, "filler", 100).Err())
		require.NoError(t, s.Do(ctx, "CONFIG", "SET", "maxmemory", "1mb").Err())
		err := s.Do(ctx, "SET", "probe", "x").Err()
		require.Error(t, err)
		require.True(t, strings.HasPrefix(err.Error(), "OOM"), err.Error())
	}
	l := newLocker(t, c.Nodes(), redlock.Config{})
	held, err := tryAcquire(t, l, "held")
	require.NoError(t, err)

	fill(c.Server(1))
	lease, err := tryAcquire(t, l, "f")
	require.NoError(t, err, "two nodes of three still grant")
	require.NotContains(t, lease.Granted(), c.Server(1).Addr())
	require.NoError(t, lease.Release(ctx))

	fill(c.Server(2))
	_, err = tryAcquire(t, l, "f")
	require.ErrorIs(t, err, redlock.ErrNodeFull)
	require.NotErrorIs(t, err, redlock.ErrNoQuorum, "every node answered")
	require.NotErrorIs(t, err, redlock.ErrNotAcquired, "nobody holds the lock")
	require.Contains(t, err.Error(), "out of memory")
	for i := range 3 {
		n, err := c.Server(i).Do(ctx, "EXISTS", l.Key("f")).Int()
		require.NoError(t, err)
		require.Zero(t, n, "node %d: no lock key left behind", i)
	}

	requireGivesUpAtOnce(t, l, "f", redlock.ErrNodeFull)

	_, err = l.Renew(ctx, "held", held.Token())
	require.NoError(t, err, "renewing needs no memory")
	require.NoError(t, held.Release(ctx), "releasing needs no memory")
}
