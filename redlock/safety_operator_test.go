package redlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/testutil"
)

// The operator scenarios of issue 30 (Safety v4, docs/design.md §6.2), on
// real redis-server 7.0: an operator acts on two of three nodes while
// Locker A holds r; a Locker B started afterwards tries r until it is
// granted. Each asserts that no second holder is granted while A's lease
// is valid and that B's token exceeds A's, and that the nodes refused
// with the scenario's reason meanwhile (or, for a replica, that it never
// counts as a vote). Before Safety v4 each one granted B while A's lease
// was valid, or gave B a token below A's (issue 30's measurements).

// opEnv is one scenario's deployment.
type opEnv struct {
	t   *testing.T
	c   *testutil.RedisCluster
	cfg redlock.Config
	a   *redlock.Locker
	// replicas are the lagging replicas of servers 0 and 1 (failback).
	replicas []*testutil.RedisServer
}

// ctx is a context bound to the test.
func (e *opEnv) ctx() context.Context { return testutil.Context(e.t) }

// onTwo runs f on servers 0 and 1.
func (e *opEnv) onTwo(f func(s *testutil.RedisServer) error) {
	e.t.Helper()
	for _, i := range []int{0, 1} {
		require.NoError(e.t, f(e.c.Server(i)), "server %d", i)
	}
}

// opScenario is an operator's action while A holds r, and the reason the
// nodes must give for refusing B.
type opScenario struct {
	name  string
	opts  []testutil.Option
	cfg   *redlock.Config // nil: lossConfig
	setup func(e *opEnv)  // after the nodes first granted, before A takes r
	act   func(e *opEnv)
	// probe, when set, runs right after act (B's first attempt, which
	// records the loss on the nodes), and act2 after it.
	act2   func(e *opEnv)
	reason string
	// bNodes are B's nodes (default: one per server, db 0).
	bNodes func(e *opEnv) []redlock.Node
}

// warm waits until the nodes first grant (the first use of a node sits
// out the delay: its marker is missing) and releases.
func warm(t *testing.T, l *redlock.Locker) {
	t.Helper()
	var lease *redlock.Lease
	var err error
	require.Eventually(t, func() bool {
		lease, err = l.TryAcquire(testutil.Context(t), "warm-up")
		return err == nil
	}, 20*time.Second, 50*time.Millisecond, "the nodes never granted: %v", err)
	require.NoError(t, lease.Release(testutil.Context(t)))
}

// requireNoSecondHolder tries r with b until granted, within limit: never
// while A's lease (valid until until, token before) is valid; the token
// exceeds before; some refusal meanwhile contains reason.
func requireNoSecondHolder(t *testing.T, b *redlock.Locker, until time.Time, before *redlock.Lease, reason string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var reasons []string
	for {
		lease, err := b.TryAcquire(testutil.Context(t), "r")
		if err == nil {
			require.False(t, time.Now().Before(until), "a second holder while A's lease was valid for %s more (refusals: %q)", time.Until(until), reasons)
			require.Greater(t, lease.Fence(), before.Fence(), "a token after the operator's action exceeds A's")
			require.NoError(t, lease.Release(testutil.Context(t)))
			break
		}
		reasons = append(reasons, err.Error())
		require.True(t, time.Now().Before(deadline), "never granted again: %v", err)
		time.Sleep(50 * time.Millisecond) // polls the nodes' state, as a waiter's backoff would
	}
	if reason == "" {
		return
	}
	for _, r := range reasons {
		if strings.Contains(r, reason) {
			return
		}
	}
	require.Failf(t, "no refusal gave the reason", "want %q in one of %q", reason, reasons)
}

// run plays the scenario.
func (sc opScenario) run(t *testing.T) {
	t.Parallel() // bound by the wall clock (servers starting, delays passing)
	if testing.Short() {
		t.Skip("integration test")
	}
	cfg := lossConfig
	if sc.cfg != nil {
		cfg = *sc.cfg
	}
	e := &opEnv{t: t, c: testutil.StartRedis(t, 3, sc.opts...), cfg: cfg}
	e.a = newLocker(t, e.c.Nodes(), cfg)
	warm(t, e.a)
	if sc.setup != nil {
		sc.setup(e)
		// Attaching a node's first replica creates its replication
		// backlog and a new replication id: the node sits out once.
		warm(t, e.a)
	}
	held, err := tryAcquire(t, e.a, "r")
	require.NoError(t, err)
	until := held.ValidUntil()
	held.Orphan() // A's lock stands until its TTL; A's lease is valid until until
	sc.act(e)
	nodes := e.c.Nodes()
	if sc.bNodes != nil {
		nodes = sc.bNodes(e)
	}
	b := newLocker(t, nodes, cfg)
	if sc.act2 != nil {
		_, err := b.TryAcquire(e.ctx(), "r")
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
		sc.act2(e)
	}
	requireNoSecondHolder(t, b, until, held, sc.reason, 30*time.Second)
}

// noSyncDelay makes a primary start a full sync at once (Redis 7 waits 5 s
// for more replicas before a diskless one).
var noSyncDelay = testutil.WithConfig("repl-diskless-sync-delay 0")

// dbNodes are one node per server of e in db.
func dbNodes(e *opEnv, db int) []redlock.Node {
	var nodes []redlock.Node
	for _, s := range e.c.Servers() {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), DB: db, ContextTimeoutEnabled: true, MaxRetries: -1})
		e.t.Cleanup(func() { _ = c.Close() })
		nodes = append(nodes, redisnode.New(c))
	}
	return nodes
}

// TestSafetyOperatorScenarios: the cases 1, 2, 3, 7, 8 and 9 of issue 30.
func TestSafetyOperatorScenarios(t *testing.T) {
	longer := redlock.Config{LeaseDuration: 4 * time.Second, RejoinDelay: 4 * time.Second}
	long := redlock.Config{LeaseDuration: 10 * time.Second, RejoinDelay: 10 * time.Second}
	evict := func(e *opEnv) {
		e.onTwo(func(s *testutil.RedisServer) error {
			_, err := testutil.EvictUntilGone(e.ctx(), s, "volatile-lru", e.a.Key("r"))
			return err
		})
	}
	cases := []opScenario{
		{
			// Case 1: the eviction check ran only while the Locker's
			// configuration read said the server evicts.
			name: "eviction, then the policy back to noeviction",
			act: func(e *opEnv) {
				evict(e)
				e.onTwo(func(s *testutil.RedisServer) error { return testutil.NoEviction(e.ctx(), s) })
			},
			reason: "lock key is missing while its fence counter records a live lease",
		},
		{
			// Case 2: evicted_keys dropped back to the marker's count.
			name: "eviction, then CONFIG RESETSTAT, still evicting",
			act: func(e *opEnv) {
				evict(e)
				e.onTwo(func(s *testutil.RedisServer) error { return s.Do(e.ctx(), "CONFIG", "RESETSTAT").Err() })
			},
			reason: "lock key is missing while its fence counter records a live lease",
		},
		{
			// Case 3: another user of the library in db 1; the marker
			// SWAPDB brought into db 0 named the same server.
			name: "SWAPDB 0 1",
			setup: func(e *opEnv) {
				other := newLocker(e.t, dbNodes(e, 1), e.cfg)
				warm(e.t, other)
				lease, err := tryAcquire(e.t, other, "r")
				require.NoError(e.t, err)
				lease.Orphan()
			},
			act: func(e *opEnv) {
				e.onTwo(func(s *testutil.RedisServer) error { return s.Do(e.ctx(), "SWAPDB", 0, 1).Err() })
			},
			reason: "marker key is missing",
		},
		{
			// Case 7: the restart of durable servers dropped the sit-out
			// the marker had recorded after a FLUSHALL.
			name: "FLUSHALL noticed, then a durable restart",
			cfg:  &longer,
			act: func(e *opEnv) {
				e.onTwo(func(s *testutil.RedisServer) error { return s.Do(e.ctx(), "FLUSHALL").Err() })
			},
			act2: func(e *opEnv) {
				e.onTwo(func(s *testutil.RedisServer) error { return s.Restart() })
			},
			reason: "identity changed",
		},
		{
			// Case 8: a failover to a lagging replica and a failback, in
			// place: REPLICAOF does not change the run_id.
			name: "failback in place from a lagging replica",
			cfg:  &long, // the failback (two full syncs) must end within A's lease
			opts: []testutil.Option{noSyncDelay},
			setup: func(e *opEnv) {
				for _, i := range []int{0, 1} {
					r := testutil.StartRedisServer(e.t, noSyncDelay)
					require.NoError(e.t, testutil.ReplicaOf(e.ctx(), r, e.c.Server(i)))
					require.NoError(e.t, testutil.Promote(e.ctx(), r)) // it lags from here on
					e.replicas = append(e.replicas, r)
				}
			},
			act: func(e *opEnv) {
				for _, i := range []int{0, 1} {
					require.NoError(e.t, testutil.FailbackInPlace(e.ctx(), e.c.Server(i), e.replicas[i]))
				}
			},
			reason: "identity changed",
		},
		{
			// Case 9: persistence switched on at runtime (and written to the
			// configuration) counted at once; the servers crash before the
			// AOF rewrite and come back empty.
			name: "appendonly switched on at runtime, then a restart without data",
			opts: []testutil.Option{noPersistence},
			setup: func(e *opEnv) {
				for _, s := range e.c.Servers() {
					require.NoError(e.t, s.Do(e.ctx(), "CONFIG", "SET", "appendfsync", "always").Err())
					require.NoError(e.t, s.Do(e.ctx(), "CONFIG", "SET", "appendonly", "yes").Err())
					require.NoError(e.t, s.Do(e.ctx(), "CONFIG", "REWRITE").Err())
				}
			},
			act: func(e *opEnv) {
				e.onTwo(func(s *testutil.RedisServer) error { return s.RestartEmpty() })
			},
			reason: "marker key is missing",
		},
	}
	for _, sc := range cases {
		t.Run(sc.name, sc.run)
	}
}
