package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/e6344662/go-redlock/testutil"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m, testutil.LeakOptions()...)
}

// smallWorkload runs in about half a second per mode.
func smallWorkload() Workload {
	return Workload{
		Orders: 24, Batch: 4, Every: 50 * time.Millisecond, Workers: 3,
		Lease: 100 * time.Millisecond, Poll: 15 * time.Millisecond, Send: 2 * time.Millisecond,
		StallAt: 4, CrashAt: 16, Stall: 300 * time.Millisecond, Restart: 200 * time.Millisecond,
	}
}

// TestLeaderModeHasNoDuplicates: with the same stall and crash, the leader
// mode dispatches every order exactly once, fences off the stalled leader's
// late write, and fails over twice (after the stall and after the crash).
// The naive modes dispatch the stalled worker's order twice: that much is
// deterministic (the stall outlasts the lease, and the others keep
// working); how many more duplicates scan has depends on timing.
func TestLeaderModeHasNoDuplicates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := smallWorkload()
	stats, err := Compare(ctx, w)
	require.NoError(t, err)
	require.Len(t, stats, 3)
	var table bytes.Buffer
	PrintTable(&table, stats)
	t.Logf("\n%s", table.String())

	for _, s := range stats {
		require.Equal(t, w.Orders, s.Orders, s.Mode)
		require.Zero(t, s.Undispatched, "%s left orders undispatched", s.Mode)
		require.Equal(t, w.Orders, s.Effects-s.Duplicates, "%s: every order dispatched", s.Mode)
	}
	scan, claim, leader := stats[0], stats[1], stats[2]
	require.Equal(t, Leader, leader.Mode)
	require.Zero(t, leader.Duplicates, "leader mode must not duplicate")
	require.Equal(t, w.Orders, leader.Effects)
	require.GreaterOrEqual(t, leader.Fenced, 1, "the stalled leader's write must be fenced off")
	require.GreaterOrEqual(t, leader.Failovers, 2, "a failover after the stall, another after the crash")

	require.GreaterOrEqual(t, scan.Duplicates, 1, "scan: the stalled worker repeats an order")
	require.GreaterOrEqual(t, claim.Duplicates, 1, "claim: the stalled worker's claim expired and was retaken")
	require.Zero(t, scan.Fenced+claim.Fenced, "nothing fences the naive modes")
}

func TestSimulateRejectsABadWorkload(t *testing.T) {
	w := smallWorkload()
	w.Workers = 2
	_, err := Simulate(context.Background(), Leader, w)
	require.Error(t, err)
}
