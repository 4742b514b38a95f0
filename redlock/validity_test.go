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

// hangingRenewNode is a node whose Renew never returns until released, and
// ignores its context: a client without context deadlines on a network
// black hole.
type hangingRenewNode struct {
	redlock.Node
	release <-chan struct{}
}

func (n hangingRenewNode) Eval(ctx context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	if s != scripts.Renew {
		return n.Node.Eval(ctx, s, keys, args...)
	}
	<-n.release
	return nil, context.Canceled
}

// TestLeaseNeverAppearsHeldPastValidity: with one node whose renewal call
// hangs past the lease and ignores its context, the lease's Context still
// ends, and is never seen alive from ValidUntil on (the renewal does not
// wait in the call: node calls are always asynchronous, bounded by
// NodeCallTimeout).
func TestLeaseNeverAppearsHeldPastValidity(t *testing.T) {
	c := testutil.NewMiniCluster(t, 1)
	unblock := make(chan struct{})
	node := hangingRenewNode{Node: c.Nodes()[0], release: unblock}
	l := newLocker(t, []redlock.Node{node}, redlock.Config{LeaseDuration: 300 * time.Millisecond})
	t.Cleanup(func() { close(unblock) }) // runs before the Locker's Close

	lease, err := l.Acquire(testutil.Context(t), "black-hole")
	require.NoError(t, err)
	requireNeverAlivePastValidity(t, lease, 5*time.Second)
	require.ErrorIs(t, context.Cause(lease.Context()), redlock.ErrLeaseLost)
	select {
	case <-lease.Context().Done():
	default:
		t.Fatal("Err reports the loss but Done is open")
	}
}

// TestOrphanHandsTheLockToItsTTL: an orphaned lease is no longer renewed
// nor released by this process (Close included); its lock stays on the
// nodes, where a release by token still deletes it.
func TestOrphanHandsTheLockToItsTTL(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l, err := redlock.New(c.Nodes(), redlock.Config{LeaseDuration: 5 * time.Second})
	require.NoError(t, err)
	ctx := testutil.Context(t)
	lease, err := l.TryAcquire(ctx, "handed-over")
	require.NoError(t, err)

	lease.Orphan()
	require.ErrorIs(t, context.Cause(lease.Context()), redlock.ErrLeaseOrphaned)
	require.ErrorIs(t, lease.Release(ctx), redlock.ErrLeaseOrphaned)
	lease.Orphan() // again: nothing happens
	require.NoError(t, l.Close())
	key := l.Key("handed-over")
	for i := range 3 {
		require.True(t, c.Server(i).Exists(key), "node %d lost the orphaned lock", i)
		ttl := c.Server(i).TTL(key)
		require.Positive(t, ttl)
		require.LessOrEqual(t, ttl, 5*time.Second)
	}

	other := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 5 * time.Second})
	require.NoError(t, other.Release(ctx, "handed-over", lease.Token()))
	for i := range 3 {
		require.False(t, c.Server(i).Exists(key))
	}
}
