package redlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// lossyReleaseNode is a node whose first `lost` release calls get no
// answer back: with ran, the call reaches the node and only its reply is
// lost; without, the call never reaches it.
type lossyReleaseNode struct {
	redlock.Node
	lost  int32
	ran   bool
	calls *atomic.Int32
}

func (n lossyReleaseNode) Eval(ctx context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	if s != scripts.Release || n.calls.Add(1) > n.lost {
		return n.Node.Eval(ctx, s, keys, args...)
	}
	if n.ran {
		_, _ = n.Node.Eval(ctx, s, keys, args...)
	}
	return nil, context.DeadlineExceeded
}

// TestReleaseCallsTheSilentNodesAgain: when fewer than a majority answer
// a lease's release, the nodes that did not are called again, at most
// twice; a node that then says the lock is gone counts as released, since
// the lease was valid and the lost call deleted it.
func TestReleaseCallsTheSilentNodesAgain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lost    int32 // first release calls without an answer, per node
		ran     []bool
		wantErr error
		calls   int32 // release calls per node
	}{
		{name: "replies lost once on every node", lost: 1, ran: []bool{true, true, false}, calls: 2},
		{name: "replies lost twice on a majority", lost: 2, ran: []bool{true, false, true}, calls: 3},
		{name: "no answer three times", lost: 3, ran: []bool{false, false, false}, wantErr: redlock.ErrNoQuorum, calls: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testutil.NewMiniCluster(t, 3)
			calls := make([]*atomic.Int32, 3)
			var nodes []redlock.Node
			for i, n := range c.Nodes() {
				calls[i] = new(atomic.Int32)
				nodes = append(nodes, lossyReleaseNode{Node: n, lost: tc.lost, ran: tc.ran[i], calls: calls[i]})
			}
			l := newLocker(t, nodes, fastRetry(redlock.Config{LeaseDuration: 3 * time.Second}))
			lease, err := l.Acquire(testutil.Context(t), "retry")
			require.NoError(t, err)
			err = lease.Release(context.Background())
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
				for i := range 3 {
					_, err := c.Get(i, l.Key("retry"))
					require.Error(t, err, "node %d still holds the lock", i)
				}
			}
			for i := range 3 {
				require.Equal(t, tc.calls, calls[i].Load(), "release calls on node %d", i)
			}
		})
	}
}

// TestReleaseDoesNotRetryPastItsContext: a Release whose context ends
// while it waits to call silent nodes again returns at once.
func TestReleaseDoesNotRetryPastItsContext(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	var nodes []redlock.Node
	var calls atomic.Int32
	for _, n := range c.Nodes() {
		nodes = append(nodes, lossyReleaseNode{Node: n, lost: 100, calls: &calls})
	}
	l := newLocker(t, nodes, redlock.Config{LeaseDuration: 3 * time.Second})
	lease, err := l.Acquire(testutil.Context(t), "retry")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, lease.Release(ctx), redlock.ErrNoQuorum)
	require.Equal(t, int32(3), calls.Load(), "one call per node, no retry")
}
