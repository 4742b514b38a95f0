package redlock_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// metricsNode is what a user writes to count a node's calls: a struct that
// embeds the Node and overrides one method.
type metricsNode struct {
	redlock.Node
	evals *atomic.Int64
}

func (n metricsNode) Eval(ctx context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	n.evals.Add(1)
	return n.Node.Eval(ctx, s, keys, args...)
}

// wrap wraps every node in a metricsNode counting into evals.
func wrap(nodes []redlock.Node, evals *atomic.Int64) []redlock.Node {
	out := make([]redlock.Node, len(nodes))
	for i, n := range nodes {
		out[i] = metricsNode{Node: n, evals: evals}
	}
	return out
}

// TestAWrappedNodeKeepsEveryRule: a Locker over nodes wrapped the ordinary
// Go way runs the same algorithm as over the nodes themselves: waiters
// queue on the nodes and are handed the lock, and a server that restarted
// without its data is kept out of the quorum. Every call goes through the
// wrapper.
func TestAWrappedNodeKeepsEveryRule(t *testing.T) {
	t.Run("the fair queue and its hand-over", func(t *testing.T) {
		c := testutil.NewMiniCluster(t, 3)
		var evals atomic.Int64
		holder := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 30 * time.Second})
		waiter := newLocker(t, wrap(c.Nodes(), &evals), redlock.Config{LeaseDuration: 30 * time.Second})
		lease, err := holder.Acquire(testutil.Context(t), "wrapped")
		require.NoError(t, err)

		got := acquireAsync(t, testutil.Context(t), waiter, "wrapped")
		require.Eventually(t, func() bool {
			st, err := holder.Inspect(testutil.Context(t), "wrapped")
			if err != nil {
				return false
			}
			for _, n := range st.Nodes {
				if n.Info.Waiters != 1 {
					return false
				}
			}
			return true
		}, 15*time.Second, 5*time.Millisecond, "the waiter holds no place in the nodes' queues")
		require.NoError(t, lease.Release(testutil.Context(t)))
		select {
		case next := <-got:
			require.NotNil(t, next)
			require.Greater(t, next.Fence(), lease.Fence())
			require.NoError(t, next.Release(testutil.Context(t)))
		case <-time.After(15 * time.Second):
			t.Fatal("the waiter was not handed the lock")
		}
		require.Positive(t, evals.Load(), "the calls went around the wrapper")
	})

	t.Run("the rejoin rule", func(t *testing.T) {
		if testing.Short() {
			t.Skip("integration test: needs redis-server")
		}
		c := testutil.StartRedis(t, 3, noPersistence)
		for _, s := range c.Servers() { // restarted without data: no marker
			require.NoError(t, s.Restart())
		}
		var evals atomic.Int64
		l := newLocker(t, wrap(c.Nodes(), &evals), redlock.Config{LeaseDuration: 10 * time.Second})
		_, err := l.TryAcquire(testutil.Context(t), "fresh")
		require.ErrorIs(t, err, redlock.ErrNotAcquired, "servers that may have lost their data granted the lock")
		require.ErrorIs(t, err, redlock.ErrRejoining)
		require.True(t, strings.Contains(err.Error(), "marker key is missing"), "the refusal says why: %v", err)
		require.Positive(t, evals.Load(), "the rule runs in the scripts, through the wrapper")
	})
}
