package redlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// TestFenceSurvivesDisagreeingCounters is the scenario that breaks "take the
// maximum of the INCR results": node 0's counter is far ahead, node 1's is
// behind. A acquires on nodes 0 and 1 (node 2 down) and releases; then node 0
// is down and node 2 is back, and B acquires on nodes 1 and 2. With the plain
// maximum, B would get 7 after A's 101. The fence step raises node 1 to 101
// while A holds it, so B's token must exceed A's.
func TestFenceSurvivesDisagreeingCounters(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 2 * time.Second})
	fenceKey := l.Key("contested") + ":fence"
	require.NoError(t, c.SetCounter(0, fenceKey, 100))
	require.NoError(t, c.SetCounter(1, fenceKey, 5))
	ctx := testutil.Context(t)

	c.Kill(2)
	a, err := l.TryAcquire(ctx, "contested")
	require.NoError(t, err)
	require.Equal(t, fencing.Token(101), a.Fence())
	require.NoError(t, a.Release(ctx))

	c.Kill(0)
	require.NoError(t, c.Restart(2))
	b, err := l.TryAcquire(ctx, "contested")
	require.NoError(t, err)
	require.Greater(t, b.Fence(), a.Fence(), "B's token must exceed A's")
	require.NoError(t, b.Release(ctx))
}

// TestFenceFastPathWhenCountersAgree: a resource's first holder gets a
// token from the nodes' clocks (each new counter starts at its node's TIME
// in microseconds; the fence step settles them on the largest); once the
// counters agree, successive holders count up by one.
func TestFenceFastPathWhenCountersAgree(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), redlock.Config{})
	before := fencing.Token(time.Now().Add(-time.Minute).UnixMicro())
	var fences []fencing.Token
	for range 8 {
		lease, err := l.TryAcquire(testutil.Context(t), "steady")
		require.NoError(t, err)
		fences = append(fences, lease.Fence())
		require.NoError(t, lease.Release(context.Background()))
	}
	require.Greater(t, fences[0], before, "a new counter starts from the node's clock")
	for i := 1; i < len(fences); i++ {
		require.Greater(t, fences[i], fences[i-1])
	}
	require.Equal(t, fences[5]+1, fences[6])
	require.Equal(t, fences[6]+1, fences[7])
}

// TestFenceMonotonicUnderRandomFaults is a property test: over many rounds,
// with a random minority or majority of nodes down in each round (killed with
// data kept, or failing), every lease that is granted has a strictly greater
// fencing token than every lease granted before it.
func TestFenceMonotonicUnderRandomFaults(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, seed*7919))
			n := []int{3, 5}[seed%2]
			c := testutil.NewMiniCluster(t, n)
			l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 2 * time.Second})
			fenceKey := l.Key("prop") + ":fence"
			for i := range n {
				require.NoError(t, c.SetCounter(i, fenceKey, r.Int64N(50)))
			}
			var last fencing.Token
			granted := 0
			for range 60 {
				for i := range n {
					if r.IntN(3) == 0 {
						c.Fail(i, "ERR injected fault")
					} else {
						c.Heal(i)
					}
				}
				lease, err := l.TryAcquire(testutil.Context(t), "prop")
				if err != nil {
					continue
				}
				granted++
				require.Greater(t, lease.Fence(), last, "token went backwards")
				last = lease.Fence()
				// Leave some leases to expire instead of releasing them.
				if r.IntN(4) == 0 {
					require.NoError(t, lease.Context().Err())
					c.FastForward(3 * time.Second)
				}
				_ = lease.Release(context.Background())
			}
			require.Greater(t, granted, 10, "too few grants to mean anything")
		})
	}
}
