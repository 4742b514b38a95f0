package redlock_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/testutil"
)

// lossDelay is the rejoin delay of the data-loss tests: the longest lease.
const lossDelay = 2 * time.Second

// lossConfig is the configuration of the data-loss tests' Lockers.
var lossConfig = redlock.Config{LeaseDuration: lossDelay, RejoinDelay: lossDelay}

// requireSitsOut checks that l is refused resource because nodes may have
// lost data, with the reason given, and returns when it is granted again,
// after the delay counted from since: the new lease's token exceeds
// before's.
func requireSitsOut(t *testing.T, l *redlock.Locker, resource, reason string, since time.Time, before *redlock.Lease) *redlock.Lease {
	t.Helper()
	_, err := l.TryAcquire(testutil.Context(t), resource)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, redlock.ErrRejoining, "the refusal says the nodes sit out: %v", err)
	require.ErrorContains(t, err, reason)
	var lease *redlock.Lease
	require.Eventually(t, func() bool {
		lease, err = l.TryAcquire(testutil.Context(t), resource)
		return err == nil
	}, 3*lossDelay+5*time.Second, 20*time.Millisecond, "never granted again: %v", err)
	// The nodes count the delay on their clock from when they noticed the
	// loss, after since.
	require.GreaterOrEqual(t, time.Since(since), lossDelay-50*time.Millisecond, "granted before the delay had passed")
	require.Greater(t, lease.Fence(), before.Fence(), "a token after a loss exceeds every token before it")
	require.NoError(t, lease.Release(testutil.Context(t)))
	return lease
}

// TestFlushedNodesSitOutUntilNoForgottenLeaseCanBeValid is the reported
// case: Locker A holds r; FLUSHALL on two of three servers. Without the
// rule Locker B was granted r at once, with A's fencing token. Now the
// flushed nodes notice the loss (their marker key is gone and INFO shows
// a FLUSHALL) and grant nothing for the rejoin delay; then B's token
// exceeds A's.
func TestFlushedNodesSitOutUntilNoForgottenLeaseCanBeValid(t *testing.T) {
	t.Parallel() // bound by the wall clock (servers starting, failing over, delays passing)
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 3)
	a := newLocker(t, c.Nodes(), lossConfig)
	b := newLocker(t, c.Nodes(), lossConfig)
	held, err := tryAcquire(t, a, "r")
	require.NoError(t, err)

	for _, i := range []int{0, 1} {
		require.NoError(t, c.Server(i).Do(testutil.Context(t), "FLUSHALL").Err())
	}
	flushed := time.Now()
	requireSitsOut(t, b, "r", "marker key is missing", flushed, held)
}

// TestALockerThatStartsAfterTheLossStillSeesIt: the loss is recorded on
// the nodes (the marker), not in the Locker that noticed it, so a Locker
// created after the first one was refused is refused too.
func TestALockerThatStartsAfterTheLossStillSeesIt(t *testing.T) {
	t.Parallel() // bound by the wall clock (servers starting, failing over, delays passing)
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 3)
	a := newLocker(t, c.Nodes(), lossConfig)
	held, err := tryAcquire(t, a, "r")
	require.NoError(t, err)
	for _, i := range []int{1, 2} {
		require.NoError(t, c.Server(i).Do(testutil.Context(t), "FLUSHDB").Err())
	}
	flushed := time.Now()
	_, err = a.TryAcquire(testutil.Context(t), "other")
	require.ErrorIs(t, err, redlock.ErrRejoining)
	late := newLocker(t, c.Nodes(), lossConfig)
	requireSitsOut(t, late, "r", "marker key is missing", flushed, held)
}

// TestEvictingNodesSitOut: servers with maxmemory and volatile-lru evict
// keys with a TTL, which a lock key always has. After two of three
// servers evicted keys (ours among them, here: the lock of A), they grant
// nothing for the rejoin delay.
func TestEvictingNodesSitOut(t *testing.T) {
	t.Parallel() // bound by the wall clock (servers starting, failing over, delays passing)
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 3, testutil.WithConfig("maxmemory 64mb", "maxmemory-policy volatile-lru"))
	a := newLocker(t, c.Nodes(), lossConfig)
	b := newLocker(t, c.Nodes(), lossConfig)
	granted := time.Now()
	held, err := tryAcquire(t, a, "r")
	require.NoError(t, err)

	for _, i := range []int{0, 2} {
		s := c.Server(i)
		ctx := testutil.Context(t)
		require.NoError(t, s.Do(ctx, "CONFIG", "SET", "maxmemory", "1").Err())
		_ = s.Do(ctx, "SET", "filler", "x").Err() // evicts every key with a TTL first; then refused
		require.NoError(t, s.Do(ctx, "CONFIG", "SET", "maxmemory", "64mb").Err())
		n, err := s.Do(ctx, "EXISTS", a.Key("r")).Int()
		require.NoError(t, err)
		require.Zero(t, n, "the lock was evicted")
	}
	// The lock key went, its counter (no TTL while the lease runs) stayed:
	// the nodes refuse until the lease's end, counted from its grant.
	requireSitsOut(t, b, "r", "lock key is missing while its fence counter records a live lease", granted, held)
}

// TestAFailoverToAReplicaThatMissedTheLockSitsOut: a Sentinel group whose
// replica was stopped while A took the lock fails over to that replica,
// which never saw the lock. The promoted server's data came from another
// server (the marker names the old primary, and INFO shows a promotion):
// it grants nothing for the rejoin delay.
func TestAFailoverToAReplicaThatMissedTheLockSitsOut(t *testing.T) {
	t.Parallel() // bound by the wall clock (servers starting, failing over, delays passing)
	if testing.Short() {
		t.Skip("integration test")
	}
	g := testutil.StartSentinel(t, "locks")
	nodes := dialURLs(t, g.URL())
	a := newLocker(t, nodes, lossConfig)
	b := newLocker(t, nodes, lossConfig)
	warm, err := tryAcquire(t, a, "warm-up") // the marker reaches the replica
	require.NoError(t, err)
	require.NoError(t, warm.Release(testutil.Context(t)))

	old := g.Primary()
	require.NotNil(t, old)
	replica := g.Servers()[0]
	if replica == old {
		replica = g.Servers()[1]
	}
	require.NoError(t, replica.Pause()) // replication stalls
	held, err := tryAcquire(t, a, "r")
	require.NoError(t, err)
	require.NoError(t, old.Kill())
	require.NoError(t, replica.Resume())
	require.Eventually(t, func() bool { return g.Primary() == replica }, 30*time.Second, 10*time.Millisecond, "the sentinels did not promote the replica")
	promoted := time.Now()
	n, err := replica.Do(testutil.Context(t), "EXISTS", a.Key("r")).Int()
	require.NoError(t, err)
	require.Zero(t, n, "the replica had the lock: nothing was lost")

	// The group's client follows the switch by itself.
	var lease *redlock.Lease
	require.Eventually(t, func() bool {
		lease, err = b.TryAcquire(testutil.Context(t), "r")
		return err == nil || strings.Contains(err.Error(), "identity changed")
	}, 15*time.Second, 20*time.Millisecond, "the client never reached the new primary: %v", err)
	require.Nil(t, lease, "granted at once by a replica that missed the lock")
	requireSitsOut(t, b, "r", "identity changed", promoted, held)
}

// TestAMarkerKeyHoldingForeignDataIsNeverOverwritten: a key under the
// prefix that holds something else (another program's hash) makes the
// node answer with a WRONGTYPE error; the key is left as it was.
func TestAMarkerKeyHoldingForeignDataIsNeverOverwritten(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := testutil.StartRedisServer(t)
	l := newLocker(t, []redlock.Node{s.Node()}, lossConfig)
	ctx := testutil.Context(t)
	marker := testutil.DefaultMarker
	for _, foreign := range [][]any{{"HSET", marker, "f", "v"}, {"SET", marker, "not a marker"}} {
		require.NoError(t, s.Do(ctx, "DEL", marker).Err())
		require.NoError(t, s.Do(ctx, foreign...).Err())
		_, err := l.TryAcquire(ctx, "r")
		require.ErrorIs(t, err, redlock.ErrWrongType)
		typ, err := s.Do(ctx, "TYPE", marker).Text()
		require.NoError(t, err)
		require.Equal(t, map[bool]string{true: "hash", false: "string"}[foreign[0] == "HSET"], typ)
	}
}

// TestTheMarkerOfAClusterSlotLivesInThatSlot: on a Redis Cluster node the
// marker is kept per hash slot, beside the lock's keys (one script reads
// both); a flushed shard sits out, the others grant.
func TestTheMarkerOfAClusterSlotLivesInThatSlot(t *testing.T) {
	t.Parallel() // bound by the wall clock (servers starting, failing over, delays passing)
	if testing.Short() {
		t.Skip("integration test")
	}
	cl := testutil.StartCluster(t, 2)
	nodes := dialURLs(t, cl.URL())
	l := newLocker(t, nodes, lossConfig)
	names := map[int]string{}
	for i := 0; len(names) < 2; i++ {
		r := "r" + string(rune('a'+i))
		names[cl.ShardForKey(l.Key(r))] = r
	}
	for _, r := range names {
		lease, err := tryAcquire(t, l, r)
		require.NoError(t, err, "a resource on each shard")
		require.NoError(t, lease.Release(testutil.Context(t)))
	}
	// (testutil vouched for every slot: the first use grants at once.)
	require.NoError(t, cl.Shard(0).Do(context.Background(), "FLUSHALL").Err())
	_, err := l.TryAcquire(testutil.Context(t), names[0])
	require.ErrorIs(t, err, redlock.ErrRejoining)
	lease, err := tryAcquire(t, l, names[1])
	require.NoError(t, err, "the shard that lost nothing grants")
	require.NoError(t, lease.Release(testutil.Context(t)))
}

// TestAResourceLockedOnceLeavesNoKeyWithoutATTL: per-resource keys are
// bounded in time. After a lock with a waiter, a hand-over and a release,
// every key the resource left on a node expires (the fence counter 20 s
// after its lease ended: scripts/counter.lua); only the node's marker,
// one per db, stays.
func TestAResourceLockedOnceLeavesNoKeyWithoutATTL(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 3)
	l := newLocker(t, c.Nodes(), lossConfig)
	ctx := testutil.Context(t)
	held, err := tryAcquire(t, l, "once")
	require.NoError(t, err)
	waiter := make(chan error, 1)
	go func() {
		lease, err := l.Acquire(ctx, "once")
		if err == nil {
			err = lease.Release(ctx)
		}
		waiter <- err
	}()
	require.Eventually(t, func() bool {
		n, err := c.Server(0).Do(ctx, "EXISTS", l.Key("once")+":queue").Int()
		return err == nil && n == 1
	}, 5*time.Second, 5*time.Millisecond, "the waiter never queued")
	require.NoError(t, held.Release(ctx))
	require.NoError(t, <-waiter)

	// Release returns at a majority: the third node's release (which
	// gives its counter a TTL) may still be on its way, so each server is
	// read until no key but the marker lacks a TTL.
	marker := testutil.DefaultMarker
	for _, s := range c.Servers() {
		why := noTTLExceptMarker(ctx, s, marker)
		for deadline := time.Now().Add(10 * time.Second); why != "" && time.Now().Before(deadline); why = noTTLExceptMarker(ctx, s, marker) {
			time.Sleep(10 * time.Millisecond) // polling the server, as Eventually would
		}
		require.Empty(t, why, s.Addr())
	}
}

// noTTLExceptMarker says what is wrong with s's keys ("" for nothing):
// the marker must be there without a TTL, every other key must expire
// within a counter's life after its lease (20 s).
func noTTLExceptMarker(ctx context.Context, s *testutil.RedisServer, marker string) string {
	keys, err := s.Do(ctx, "KEYS", "*").StringSlice()
	if err != nil {
		return err.Error()
	}
	if !slices.Contains(keys, marker) {
		return "no marker"
	}
	for _, k := range keys {
		ttl, err := s.Do(ctx, "PTTL", k).Int64()
		switch {
		case err != nil:
			return err.Error()
		case ttl == -2:
			continue // gone since KEYS: a queue's last place removed by a late call
		case k == marker && ttl != -1:
			return "the marker has a TTL"
		case k == marker:
			continue
		case ttl <= 0:
			return k + " has no TTL"
		case ttl > (20 * time.Second).Milliseconds():
			return k + " lives longer than a counter's life after its lease (20 s)"
		}
	}
	return ""
}

// TestANodeThatMayNotReadINFOIsNotTrusted: without INFO a node's data
// state cannot be judged (a loss could not be seen), so a user whose ACL
// forbids it is never granted a lock: the error says why.
func TestANodeThatMayNotReadINFOIsNotTrusted(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := testutil.Context(t)
	s := testutil.StartRedisServer(t)
	rules := append(testutil.LockerACL(redlock.DefaultKeyPrefix), "-info")
	require.NoError(t, s.SetACLUser(ctx, "locker", "pw-5e1d", rules...))
	nodes, err := redisnode.Dial(ctx, s.UserURL("locker", "pw-5e1d"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = nodes.Close() })
	l := newLocker(t, nodes, lossConfig)
	_, err = l.TryAcquire(ctx, "r")
	require.Error(t, err)
	require.ErrorContains(t, err, "NOPERM")
	n, err := s.Do(ctx, "EXISTS", l.Key("r")).Int()
	require.NoError(t, err)
	require.Zero(t, n, "nothing granted")
}

// TestEveryGrantingCallSeesTheLoss: AcquireAll and the read-write lock's
// writers and readers grant through the same rule as Acquire: after a
// FLUSHALL on a majority, each is refused as rejoining until the delay
// has passed, and then granted with tokens above the earlier ones.
func TestEveryGrantingCallSeesTheLoss(t *testing.T) {
	t.Parallel() // bound by the wall clock (servers starting, failing over, delays passing)
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 3)
	l := newLocker(t, c.Nodes(), lossConfig)
	ctx := testutil.Context(t)
	before, err := l.TryAcquireAll(ctx, "a", "b")
	require.NoError(t, err)
	for _, ls := range before {
		require.NoError(t, ls.Release(ctx))
	}
	rw, err := l.NewRWLock("rw")
	require.NoError(t, err)
	w, err := rw.TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, w.Release(ctx))

	for _, i := range []int{0, 2} {
		require.NoError(t, c.Server(i).Do(ctx, "FLUSHALL").Err())
	}
	flushed := time.Now()
	_, err = l.TryAcquireAll(ctx, "a", "b")
	require.ErrorIs(t, err, redlock.ErrRejoining)
	_, err = rw.TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrRejoining)
	_, err = rw.TryAcquireShared(ctx)
	require.ErrorIs(t, err, redlock.ErrRejoining)

	var after []*redlock.Lease
	require.Eventually(t, func() bool {
		after, err = l.TryAcquireAll(ctx, "a", "b")
		return err == nil
	}, 3*lossDelay+5*time.Second, 20*time.Millisecond, "never granted again: %v", err)
	require.GreaterOrEqual(t, time.Since(flushed), lossDelay-50*time.Millisecond)
	for k, ls := range after {
		require.Greater(t, ls.Fence(), before[k].Fence())
		require.NoError(t, ls.Release(ctx))
	}
	r, err := rw.TryAcquireShared(ctx)
	require.NoError(t, err)
	require.Greater(t, r.Fence(), w.Fence(), "a reader after the loss is above the writer before it")
	require.NoError(t, r.Release(ctx))
}

// TestALockOutlivesItsCounterSafely: fence counters expire (twice the
// rejoin delay after their last change), but a lock can stand longer:
// renewals keep its counter alive, and a counter that is gone anyway (here
// deleted) while the lock stands is counted again from the node's clock
// when the holder's call is retried: the reply carries a counter, never
// nothing. (From the clock rounded to the seed step: after a real expiry,
// at least twice the rejoin delay later, it is above the one before,
// docs/design.md §6.1; here, deleted at once, it may equal it.)
func TestALockOutlivesItsCounterSafely(t *testing.T) {
	s := testutil.StartRedisServer(t)
	ctx := testutil.Context(t)
	node := s.Node()
	const key = "redlock:{outlive}"
	g, err := redlock.NodeAcquire(ctx, node, key, tokenA, "a", time.Minute)
	require.NoError(t, err)
	require.True(t, g.OK)
	require.NoError(t, s.Do(ctx, "PEXPIRE", key+":fence", 100).Err())
	ok, err := redlock.NodeRenew(ctx, node, key, tokenA, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	ttl, err := s.Do(ctx, "PTTL", key+":fence").Int64()
	require.NoError(t, err)
	require.EqualValues(t, -1, ttl, "the renewal recorded the lease's end in the counter, which has no TTL while the lease runs")

	require.NoError(t, s.Do(ctx, "DEL", key+":fence").Err())
	again, err := redlock.NodeAcquire(ctx, node, key, tokenA, "a", time.Minute) // a retry: the token holds the lock
	require.NoError(t, err)
	require.True(t, again.OK)
	require.GreaterOrEqual(t, again.Counter, g.Counter)
}
