package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/testutil"
)

// Integration tests on the deployments users run: Redis Clusters and
// Sentinel groups of real redis-server processes, each one node of the
// quorum.

// startClusters starts n clusters of shards primaries each, in parallel.
func startClusters(t *testing.T, n, shards int) []*testutil.Cluster {
	cs := make([]*testutil.Cluster, n)
	var wg sync.WaitGroup
	for i := range cs {
		wg.Go(func() { cs[i] = testutil.StartCluster(t, shards) })
	}
	wg.Wait()
	for _, c := range cs {
		if c == nil {
			t.FailNow() // StartCluster reported why
		}
	}
	return cs
}

// dialURLs dials the node URLs and closes the nodes at cleanup.
func dialURLs(t *testing.T, urls ...string) redisnode.Nodes {
	t.Helper()
	nodes, err := redisnode.Dial(testutil.Context(t), urls...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = nodes.Close() })
	return nodes
}

// TestLocksOverThreeClusters: three 3-shard Redis Clusters form a node set
// like three servers: resources on every shard are acquired, renewed,
// inspected and released, and their fencing tokens grow.
func TestLocksOverThreeClusters(t *testing.T) {
	t.Parallel() // bound by the wall clock (servers starting, failing over, delays passing)
	if testing.Short() {
		t.Skip("integration test")
	}
	cs := startClusters(t, 3, 3)
	nodes := dialURLs(t, cs[0].URL(), cs[1].URL(), cs[2].URL())
	l := newLocker(t, nodes, redlock.Config{LeaseDuration: 5 * time.Second})

	shards := map[int]bool{}
	last := map[string]fencing.Token{}
	for round := range 2 {
		for i := range 12 {
			name := fmt.Sprintf("job-%d", i)
			shards[cs[0].ShardForKey(l.Key(name))] = true
			lease, err := tryAcquire(t, l, name)
			require.NoError(t, err, "round %d, %s", round, name)
			require.Greater(t, lease.Fence(), last[name])
			last[name] = lease.Fence()
			st, err := l.Inspect(testutil.Context(t), name)
			require.NoError(t, err)
			require.Equal(t, redlock.Held, st.State)
			_, err = l.Renew(testutil.Context(t), name, lease.Token())
			require.NoError(t, err)
			require.NoError(t, lease.Release(testutil.Context(t)))
		}
	}
	require.Len(t, shards, 3, "the names must land on every shard")
}

// TestClusterWaitersWithAShardDown: with one shard down in two of three
// clusters, waiters for keys on the other shards are still woken by the
// release announcements (each cluster's subscription is on a primary that
// answers), not by their hour-long backoff.
func TestClusterWaitersWithAShardDown(t *testing.T) {
	t.Parallel() // bound by the wall clock (servers starting, failing over, delays passing)
	if testing.Short() {
		t.Skip("integration test")
	}
	cs := startClusters(t, 3, 3)
	for _, c := range cs[:2] {
		require.NoError(t, c.KillShard(0))
	}
	nodes := dialURLs(t, cs[0].URL(), cs[1].URL(), cs[2].URL())
	// The holder's TTL (which also bounds a waiter's sleep) and the backoff
	// are far beyond the test's patience.
	l := newLocker(t, nodes, slowPolling(redlock.Config{LeaseDuration: time.Minute}))
	var names []string
	stuck := ""
	for i := 0; len(names) < 5 || stuck == ""; i++ {
		switch name := fmt.Sprintf("w%d", i); {
		case cs[0].ShardForKey(l.Key(name)) != 0:
			names = append(names, name)
		case stuck == "":
			stuck = name
		}
	}
	// A waiter for a key on the dead shards, which cannot be served, keeps
	// its key watched throughout: a subscription routed by that key's slot
	// would sit on a dead server and hear nothing.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = l.Acquire(ctx, stuck) }()
	require.Eventually(t, func() bool { return subscribers(cs[2:], l.Key(stuck)) == 1 }, 10*time.Second, 5*time.Millisecond)
	for _, name := range names {
		holder, err := tryAcquire(t, l, name)
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() {
			lease, err := l.Acquire(testutil.Context(t), name)
			if err == nil {
				err = lease.Release(context.Background())
			}
			got <- err
		}()
		// Let the waiter make its attempt and subscribe.
		require.Eventually(t, func() bool { return subscribers(cs, l.Key(name)) == len(cs) }, 10*time.Second, 5*time.Millisecond)
		require.NoError(t, holder.Release(testutil.Context(t)))
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("the waiter for %s was not woken by the release", name)
		}
	}
}

// subscribers counts the subscriptions to key's release channel on every
// running server of the clusters.
func subscribers(cs []*testutil.Cluster, key string) int {
	n := 0
	for _, c := range cs {
		for _, s := range c.Servers() {
			if s.Running() {
				got, err := s.Client().PubSubNumSub(context.Background(), key+":released").Result()
				if err == nil {
					n += int(got[key+":released"])
				}
			}
		}
	}
	return n
}

// TestLocksOverSentinelGroupsThroughAFailover: two Sentinel groups (with
// the same master name, as is common) and a standalone server form a node
// set of three. With the standalone server down, one group fails over while
// a lease is held and another Acquire waits: the waiter's subscription
// moves to the new primary as soon as the sentinels switch (the old primary
// is demoted only ~10 s later), so when the holder releases, the waiter is
// woken by the announcements of both groups, not by its backoff (an hour)
// or its place's renewal (every QueueTTL/3, 10 s). The promoted replica may
// have missed writes, so its group sits out the rejoin delay after the
// switch (6 s here: the lease, which it must cover, kept short for the
// test's sake, with room for the holder to outlast the switch unrenewed);
// the waiter tries again when the group says it grants again. Its fencing
// token is above the holder's, and it renews and releases on the new
// primary.
func TestLocksOverSentinelGroupsThroughAFailover(t *testing.T) {
	t.Parallel() // bound by the wall clock (servers starting, failing over, delays passing)
	if testing.Short() {
		t.Skip("integration test")
	}
	groups := make([]*testutil.SentinelGroup, 2)
	var wg sync.WaitGroup
	for i := range groups {
		wg.Go(func() { groups[i] = testutil.StartSentinel(t, "locks") })
	}
	wg.Wait()
	if groups[0] == nil || groups[1] == nil {
		t.FailNow()
	}
	solo := testutil.StartRedisServer(t)
	nodes := dialURLs(t, groups[0].URL(), groups[1].URL(), solo.URL())
	const delay = 6 * time.Second
	// The Locker's events, told if the waiter is not woken.
	var (
		mu     sync.Mutex
		events []string
		began  = time.Now()
	)
	observe := redlock.ObserverFunc(func(e redlock.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, fmt.Sprintf("%7.3fs %s %s %s %d/%d %v", time.Since(began).Seconds(), e.Kind, e.Op, e.Node, e.Granted, e.Total, e.Err))
	})
	l := newLocker(t, nodes, slowPolling(redlock.Config{LeaseDuration: delay, RejoinDelay: delay, QueueTTL: 30 * time.Second, Observer: observe}))
	key := l.Key("orders")

	holder, err := tryAcquire(t, l, "orders")
	require.NoError(t, err)
	type acquired struct {
		lease *redlock.Lease
		at    time.Time
		err   error
	}
	got := make(chan acquired, 1)
	go func() {
		lease, err := l.Acquire(testutil.Context(t), "orders")
		got <- acquired{lease, time.Now(), err}
	}()
	old := groups[0].Primary()
	testutil.WaitSubscribed(t, []*testutil.RedisServer{old, groups[1].Primary(), solo}, key+":released", 1)
	require.NoError(t, solo.Kill()) // now both groups' announcements are needed

	failed := make(chan error, 1)
	go func() { failed <- groups[0].Failover(context.Background()) }()
	var primary *testutil.RedisServer
	require.Eventually(t, func() bool {
		primary = groups[0].Primary()
		return primary != nil && primary != old
	}, 30*time.Second, 5*time.Millisecond, "the sentinels did not switch")
	switched := time.Now()
	// The waiter's subscription follows the switch, long before the old
	// primary is demoted; and the group's client (go-redis) switches too.
	require.Eventually(t, func() bool {
		n, err := primary.Client().PubSubNumSub(context.Background(), key+":released").Result()
		return err == nil && n[key+":released"] == 1
	}, 5*time.Second, 5*time.Millisecond, "the subscription stayed on the old primary")
	t.Logf("subscribed on the new primary %v after the switch was seen", time.Since(switched))
	client := nodes[0].(*redisnode.Node).Client()
	newID := runID(primary.Client())
	require.Eventually(t, func() bool { return runID(client) == newID }, 10*time.Second, 5*time.Millisecond)
	require.True(t, old.Running(), "the old primary is still up, not yet demoted")

	released := time.Now()
	require.NoError(t, holder.Release(testutil.Context(t)))
	var a acquired
	select {
	case a = <-got:
		require.NoError(t, a.err)
	case <-time.After(25 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the waiter was not woken after the failover; the Locker's events:\n%s", strings.Join(events, "\n"))
	}
	handoff := a.at.Sub(released)
	t.Logf("hand-off %v after the release, %v after the switch", handoff, a.at.Sub(switched))
	require.GreaterOrEqual(t, a.at.Sub(switched), delay-50*time.Millisecond, "the promoted replica granted within the rejoin delay")
	// Usually within milliseconds of the delay's end; but a node still
	// silent when an attempt is decided (the promoted group, busy with the
	// switch) can leave the waiter on its place's renewal period,
	// QueueTTL/3 (10 s here), as a loaded CI run showed.
	require.Less(t, handoff, delay+10*time.Second+5*time.Second)
	require.Greater(t, a.lease.Fence(), holder.Fence())
	require.NoError(t, <-failed)

	// Once the old primary is demoted, the lease renews and releases on
	// the new primary.
	_, err = l.Renew(testutil.Context(t), "orders", a.lease.Token())
	require.NoError(t, err)
	require.NoError(t, a.lease.Release(testutil.Context(t)))
}

// runID returns the run_id of the server c reaches.
func runID(c interface {
	Info(context.Context, ...string) *redis.StringCmd
}) string {
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		return ""
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return v
		}
	}
	return ""
}
