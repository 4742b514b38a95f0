package redlock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// TestSafetyADbSwappedBackDoesNotVouchForItself is issue 30's gap
// swapback (Safety v4.1, scripts/trust.lua T4): A holds r in db 0;
// SWAPDB 0 1 on two of three servers; B, after the nodes sat out the
// missing marker, is granted r on the data swapped in; SWAPDB 0 1 again
// brings db 0's old data back, with its own marker. Before, that marker
// still vouched (same replid, same db): C was granted r at once, while
// B's lease was valid, with a token below B's. Now the marker B's grant
// created deleted the one swapped away, so the old data comes back
// without a marker: the nodes sit out again (and a renewal of a lock on
// them fails), and C's token exceeds B's.
func TestSafetyADbSwappedBackDoesNotVouchForItself(t *testing.T) {
	t.Parallel() // bound by the wall clock (servers starting, delays passing)
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 3)
	ctx := testutil.Context(t)
	swap := func() {
		for _, i := range []int{0, 1} {
			require.NoError(t, c.Server(i).Do(ctx, "SWAPDB", 0, 1).Err())
		}
	}
	a := newLocker(t, c.Nodes(), lossConfig)
	warm(t, a)
	heldA, err := tryAcquire(t, a, "r")
	require.NoError(t, err)
	heldA.Orphan()

	swap()
	b := newLocker(t, c.Nodes(), lossConfig)
	var heldB *redlock.Lease
	require.Eventually(t, func() bool {
		heldB, err = b.TryAcquire(ctx, "r")
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "B was never granted: %v", err)
	require.False(t, time.Now().Before(heldA.ValidUntil()), "B granted while A's lease was valid")
	require.Greater(t, heldB.Fence(), heldA.Fence())
	heldB.Orphan() // B's lock stands until its TTL; its lease is valid until ValidUntil

	swap() // db 0's old data comes back, with its old marker
	cl := newLocker(t, c.Nodes(), lossConfig)
	requireNoSecondHolder(t, cl, heldB.ValidUntil(), heldB, "marker key is missing", 30*time.Second)
}
