package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// TestSafetyARenewalNeedsTheMarker: the Locker passes each node's marker
// to the renewal (scripts/renew.lua, trust.lua T4), so a lock is extended
// only where its db's marker stands. With the markers of two of three
// servers gone (a loss those nodes have not noticed yet: FLUSHALL would
// take the lock too, a SWAPDB takes the marker away with the db), an
// explicit Renew fails with ErrNotHeld, and a Lease's own renewal ends its
// context with ErrLeaseLost instead of extending it.
func TestSafetyARenewalNeedsTheMarker(t *testing.T) {
	t.Parallel() // bound by the wall clock (renewals)
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 3)
	ctx := testutil.Context(t)
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 3 * time.Second})
	lease, err := l.TryAcquire(ctx, "r")
	require.NoError(t, err)
	_, err = l.Renew(ctx, "r", lease.Token())
	require.NoError(t, err, "renewed where the markers stand")

	for _, i := range []int{0, 1} {
		require.NoError(t, c.Server(i).Do(ctx, "DEL", testutil.DefaultMarker).Err())
	}
	_, err = l.Renew(ctx, "r", lease.Token())
	require.ErrorIs(t, err, redlock.ErrNotHeld, "extended on one node of three")
	select {
	case <-lease.Context().Done():
		require.ErrorIs(t, context.Cause(lease.Context()), redlock.ErrLeaseLost)
	case <-time.After(30 * time.Second):
		t.Fatal("the lease's renewal went on without the markers")
	}
}
