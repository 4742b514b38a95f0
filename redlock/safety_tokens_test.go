package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// TestSafetyTokensUnderAMixOfConfigs is case 4 of issue 30: Lockers with
// different Configs take turns on one resource, and a counter outlived
// the last writer's setting of its life. A new counter's step and a
// counter's life are node-side constants now (scripts/counter.lua: 1 s
// and 20 s), so no mix of Configs makes tokens go back. Before, the
// counter expired after 4 of the last writer's seed steps and was created
// again from the clock rounded to the next writer's step: A's third token
// came out below B's.
func TestSafetyTokensUnderAMixOfConfigs(t *testing.T) {
	cases := []struct {
		name string
		a, b redlock.Config
		// pause is longer than the counter's life under B's Config before
		// Safety v4 (4 seed steps: 2 x RejoinDelay, or 2 x LeaseDuration
		// with the rule off).
		pause time.Duration
	}{
		{"rule on: RejoinDelay 8 s and 1 s, leases of 500 ms",
			redlock.Config{LeaseDuration: 500 * time.Millisecond, RejoinDelay: 8 * time.Second},
			redlock.Config{LeaseDuration: 500 * time.Millisecond, RejoinDelay: time.Second}, 2500 * time.Millisecond},
		{"rule off: leases of 8 s and 500 ms",
			redlock.Config{LeaseDuration: 8 * time.Second, RejoinDelay: -1},
			redlock.Config{LeaseDuration: 500 * time.Millisecond, RejoinDelay: -1}, 1500 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // bound by the wall clock
			if testing.Short() {
				t.Skip("integration test")
			}
			c := testutil.StartRedis(t, 3)
			a := newLocker(t, c.Nodes(), tc.a)
			b := newLocker(t, c.Nodes(), tc.b)
			take := func(l *redlock.Locker) *redlock.Lease {
				t.Helper()
				var lease *redlock.Lease
				var err error
				require.Eventually(t, func() bool {
					lease, err = l.TryAcquire(testutil.Context(t), "r")
					return err == nil
				}, 20*time.Second, 20*time.Millisecond, "never granted: %v", err)
				require.NoError(t, lease.Release(testutil.Context(t)))
				return lease
			}
			first := take(a)
			second := take(b)
			require.Greater(t, second.Fence(), first.Fence())
			time.Sleep(tc.pause) // the scenario: time passes, longer than B's counter life was
			third := take(a)
			require.Greater(t, third.Fence(), second.Fence(), "tokens went back under a mix of Configs")
		})
	}
}

// replicatedFirst is a node over a replica whose acquire calls arrive only
// once the primary's lock write reached the replica: the replica then
// finds the caller's own token in the lock key, the retried call's path.
type replicatedFirst struct {
	redlock.Node
	replica *testutil.RedisServer
}

func (n replicatedFirst) Eval(ctx context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	if s == scripts.Acquire {
		for range 200 {
			if v, err := n.replica.Do(ctx, "EXISTS", keys[0]).Int(); err != nil || v == 1 {
				break
			}
			time.Sleep(10 * time.Millisecond) // waits for replication, bounded
		}
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestSafetyAReplicaIsNeverAVote is case 6 of issue 30 (node side): the
// nodes list a primary and its replica as two nodes, and the third is
// down. Once the primary's lock write has replicated, the replica found
// the caller's token in the lock key and answered "granted" on the
// retried call's path, which writes nothing: one independent server held
// the lock. Now every script that can answer "granted" reads INFO
// replication and a replica answers an error (ErrReadOnly, "replica").
func TestSafetyAReplicaIsNeverAVote(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := testutil.Context(t)
	c := testutil.StartRedis(t, 2)
	primary, third := c.Server(0), c.Server(1)
	replica := testutil.StartRedisServer(t)
	require.NoError(t, testutil.ReplicaOf(ctx, replica, primary))

	cases := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"the retried call's path on the replica", func(t *testing.T) {
			const key = "redlock:{retried}"
			g, err := redlock.NodeAcquire(ctx, primary.Node(), key, tokenA, "a", time.Minute)
			require.NoError(t, err)
			require.True(t, g.OK)
			require.NoError(t, primary.Do(ctx, "WAIT", 1, 5000).Err())
			_, err = redlock.NodeAcquire(ctx, replica.Node(), key, tokenA, "a", time.Minute)
			require.ErrorIs(t, err, redlock.ErrReadOnly, "a replica answered a grant")
			require.ErrorContains(t, err, "replica")
		}},
		{"a Locker over a primary, its replica and a node down", func(t *testing.T) {
			require.NoError(t, third.Kill())
			nodes := []redlock.Node{primary.Node(), replicatedFirst{replica.Node(), replica}, third.Node()}
			l := newLocker(t, nodes, redlock.Config{LeaseDuration: 2 * time.Second, RejoinDelay: -1})
			for range 3 {
				lease, err := l.TryAcquire(ctx, "r")
				require.Error(t, err, "granted by a primary and its replica: %v", lease)
				require.ErrorIs(t, err, redlock.ErrReadOnly)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, tc.run)
	}
}

// TestSafetyNodeClocksSteppingBack is case 10 of issue 30, in the form the
// contract covers: every node clock steps back (an NTP step), the nodes
// keep their data (10 s back), and a counter expires meanwhile. The marker's seen
// time shows the step: the nodes refuse ("clock stepped back") until
// their clocks are past every time they had seen, plus the delay, so a
// counter created again from the clock still exceeds every earlier token.
// Before, a counter expired after 2 x RejoinDelay was created again from
// the stepped-back clock, below A's token. (A node whose clock steps back
// AND which loses its data in the same outage is the one case the
// contract excludes: docs/design.md §6.1.)
func TestSafetyNodeClocksSteppingBack(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test")
	}
	clock := testutil.NewFakeClock(t)
	c := testutil.StartRedis(t, 3, clock.Option())
	cfg := lossConfig
	a := newLocker(t, c.Nodes(), cfg)
	held, err := tryAcquire(t, a, "r")
	require.NoError(t, err)
	require.NoError(t, held.Release(testutil.Context(t)))

	require.NoError(t, clock.Set(-10*time.Second))
	time.Sleep(2*lossDelay + 500*time.Millisecond) // the scenario: the counter's life before Safety v4 passes
	b := newLocker(t, c.Nodes(), cfg)
	requireNoSecondHolder(t, b, time.Time{}, held, "clock stepped back", 30*time.Second)
}
