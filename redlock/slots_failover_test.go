package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// TestALossCostsOneDelayNotOnePerSlot is issue 30's case 11 (Safety v4,
// rule 6): AcquireAll's names sit on several hash slots of one Redis
// Cluster shard, and the shard fails over to its replica. Each slot has
// its own marker, which the promoted replica's scripts judge a loss; an
// AcquireAll that stopped at the first slot that sat out would meet the
// next slot's loss only after that delay, and wait about one RejoinDelay
// per slot. Every slot is asked in the first round instead, so the names
// are granted again about one delay after the failover, not k of them.
func TestALossCostsOneDelayNotOnePerSlot(t *testing.T) {
	t.Parallel() // bound by the wall clock (a cluster starting, failing over, a delay passing)
	if testing.Short() {
		t.Skip("integration test")
	}
	const (
		delay = 3 * time.Second
		slots = 5
	)
	cl := testutil.StartCluster(t, 1, testutil.WithReplicas(1))
	ctx := testutil.Context(t)
	nodes := dialURLs(t, cl.URL())
	l := newLocker(t, nodes, fastRetry(redlock.Config{LeaseDuration: delay, RejoinDelay: delay}))

	var names []string
	seen := map[int]bool{}
	for i := 0; len(names) < slots; i++ {
		r := fmt.Sprintf("n%d", i)
		if s := testutil.KeySlot(l.Key(r)); !seen[s] {
			seen[s] = true
			names = append(names, r)
		}
	}
	// Every slot's marker is written (a first use may sit out the delay)
	// and has reached the replica.
	leases, err := l.AcquireAll(ctx, names...)
	require.NoError(t, err)
	for _, ls := range leases {
		require.NoError(t, ls.Release(ctx))
	}
	require.NoError(t, cl.Shard(0).Do(ctx, "WAIT", 1, 5000).Err())

	require.NoError(t, cl.Failover(ctx, 0))
	settled := time.Now()
	_, err = l.TryAcquireAll(ctx, names...)
	require.ErrorIs(t, err, redlock.ErrRejoining, "the promoted replica sits out")

	wctx, cancel := context.WithTimeout(ctx, time.Duration(slots+2)*delay)
	defer cancel()
	leases, err = l.AcquireAll(wctx, names...)
	took := time.Since(settled)
	require.NoError(t, err, "the names are granted again (after %v)", took)
	t.Logf("%d slots granted again %v after the failover settled (RejoinDelay %v)", slots, took.Round(time.Millisecond), delay)
	require.Less(t, took, 2*delay, "one delay, not one per slot")
	for _, ls := range leases {
		require.NoError(t, ls.Release(ctx))
	}
}
