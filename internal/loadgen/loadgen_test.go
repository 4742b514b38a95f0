package loadgen

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// TestRun runs three clients on one shared Locker and one resource over
// in-process nodes: they hand the lock to each other, and every
// acquisition of the window is counted once. On a loaded machine a short
// window may see one client take the lock again and again, with no
// hand-off between clients: the run is repeated (each one checked in
// full) until one has shown a hand-off, at most ten times.
func TestRun(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3, testutil.WithWallClock())
	l, err := redlock.New(c.Nodes(), redlock.Config{LeaseDuration: 2 * time.Second})
	require.NoError(t, err)
	defer func() { _ = l.Close() }()

	for range 10 {
		if handoffs := runThree(t, l); handoffs > 0 {
			return
		}
	}
	t.Fatal("ten runs of three clients on one resource saw no hand-off between clients")
}

// runThree runs one measured window of TestRun, checks its counts, and
// returns how many hand-offs between clients it saw.
func runThree(t *testing.T, l *redlock.Locker) uint64 {
	t.Helper()
	r := Start(context.Background(), Config{
		Lockers:        []*redlock.Locker{l},
		Clients:        3,
		Resources:      []string{"loadgen:test"},
		Hold:           time.Millisecond,
		Wait:           5 * time.Second,
		ReleaseTimeout: time.Second,
		// A warm-up long enough for the Locker's subscriptions to be up
		// on a loaded machine under -race: before they are, a waiter
		// wakes on its backoff (100 ms), and a short window could then
		// see no hand-off at all.
		Warmup:    300 * time.Millisecond,
		Duration:  600 * time.Millisecond,
		ErrorKind: func(op Op, err error) string { return fmt.Sprint(op, ": ", err) },
	})
	p := r.Progress(time.Now())
	require.Positive(t, p.WarmupLeft)
	require.Zero(t, p.Acquire.N)
	res := r.Wait()

	require.Empty(t, res.Errors)
	require.Zero(t, res.ErrorsTotal)
	require.InDelta(t, 600*time.Millisecond, res.Window, float64(50*time.Millisecond))
	require.Positive(t, res.Acquire.N)
	require.Len(t, res.PerClient, 3)
	var sum int64
	for _, n := range res.PerClient {
		sum += n
	}
	require.Equal(t, int64(res.Acquire.N), sum)
	require.LessOrEqual(t, int64(res.Handoff.N)+res.SameClient, sum)
	require.LessOrEqual(t, res.FairShareMin, 1.0)
	require.GreaterOrEqual(t, res.FairShareMax, 1.0)

	p = r.Progress(time.Now())
	require.Zero(t, p.WarmupLeft)
	require.GreaterOrEqual(t, p.Total, sum)
	require.Equal(t, res.Acquire.N, p.Acquire.N)
	return res.Handoff.N
}
