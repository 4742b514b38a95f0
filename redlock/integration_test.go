package redlock_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// Integration tests: real redis-server processes started by testutil on
// free 127.0.0.1 ports. They skip without redis-server, unless
// REDLOCK_REQUIRE_REDIS=1.

type term struct {
	fence      fencing.Token
	start, end time.Time
}

// TestMutualExclusionUnderContention: 8 goroutines each acquire one resource
// many times on 3 real nodes and do a fenced write while holding it. The
// writes the fence accepted carry strictly increasing tokens, and no two
// leases' validity windows overlap.
func TestMutualExclusionUnderContention(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 3)
	l := newLocker(t, c.Nodes(), fastRetry(redlock.Config{LeaseDuration: time.Second}))
	var (
		fence    fencing.Fence
		mu       sync.Mutex
		terms    []term
		accepted []fencing.Token
		inside   int
	)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				lease, err := l.Acquire(ctx, "contended")
				cancel()
				if err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				start := time.Now()
				mu.Lock()
				inside++
				if inside != 1 {
					t.Errorf("%d holders at once", inside)
				}
				if err := fence.Check("contended", lease.Fence()); err == nil {
					accepted = append(accepted, lease.Fence())
				} else {
					t.Errorf("fresh holder's write rejected: %v", err)
				}
				inside--
				mu.Unlock()
				end := time.Now()
				if vu := lease.ValidUntil(); vu.Before(end) {
					end = vu
				}
				mu.Lock()
				terms = append(terms, term{lease.Fence(), start, end})
				mu.Unlock()
				if err := lease.Release(context.Background()); err != nil {
					t.Errorf("release: %v", err)
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, accepted, 160)
	for i := 1; i < len(accepted); i++ {
		require.Greater(t, accepted[i], accepted[i-1], "accepted tokens must strictly increase")
	}
	slices.SortFunc(terms, func(a, b term) int { return a.start.Compare(b.start) })
	for i := 1; i < len(terms); i++ {
		require.False(t, terms[i].start.Before(terms[i-1].end), "leases %d and %d overlap", terms[i-1].fence, terms[i].fence)
		require.Greater(t, terms[i].fence, terms[i-1].fence)
	}
}

// TestPausedMinorityDoesNotStopTheLock: two of five real servers are
// stopped with SIGSTOP; acquisition, renewal and release still work.
func TestPausedMinorityDoesNotStopTheLock(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 5)
	// Each call to a paused node waits NodeCallTimeout (a third of the
	// lease); a lease of a second leaves room for a loaded machine.
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: time.Second})
	require.NoError(t, c.Server(1).Pause())
	require.NoError(t, c.Server(4).Pause())
	lease, err := l.Acquire(testutil.Context(t), "paused-minority")
	require.NoError(t, err)
	first := lease.ValidUntil()
	// A renewal moves ValidUntil on by about two thirds of the validity.
	require.Eventually(t, func() bool { return lease.ValidUntil().After(first.Add(time.Second)) },
		4*time.Second, 10*time.Millisecond, "lease not renewed twice")
	require.NoError(t, lease.Context().Err())
	require.NoError(t, lease.Release(context.Background()))
	require.NoError(t, c.Server(1).Resume())
	require.NoError(t, c.Server(4).Resume())
}

// TestPausedMajorityEndsTheLeaseBeforeValidity: three of five real servers
// freeze; the lease's Context ends with ErrLeaseLost before ValidUntil, and
// Acquire fails within its context.
func TestPausedMajorityEndsTheLeaseBeforeValidity(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 5)
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: time.Second})
	lease, err := l.Acquire(testutil.Context(t), "paused-majority")
	require.NoError(t, err)
	for _, i := range []int{0, 2, 3} {
		require.NoError(t, c.Server(i).Pause())
	}
	ended := waitDone(t, lease.Context(), 3*time.Second)
	require.ErrorIs(t, context.Cause(lease.Context()), redlock.ErrLeaseLost)
	require.True(t, ended.Before(lease.ValidUntil()), "context ended %s after ValidUntil", ended.Sub(lease.ValidUntil()))

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = l.Acquire(ctx, "paused-majority-2")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 1500*time.Millisecond)
	require.ErrorIs(t, lease.Release(context.Background()), redlock.ErrLeaseLost)
}

// TestTokensStayMonotonicAcrossRestarts: servers killed with SIGKILL and
// restarted reload their fence counters from the AOF (appendfsync always),
// so tokens keep increasing, even when every node restarts.
func TestTokensStayMonotonicAcrossRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 3)
	l := newLocker(t, c.Nodes(), fastRetry(redlock.Config{LeaseDuration: time.Second}))
	var last fencing.Token
	take := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		lease, err := l.Acquire(ctx, "restarts")
		require.NoError(t, err)
		require.Greater(t, lease.Fence(), last)
		last = lease.Fence()
		require.NoError(t, lease.Release(context.Background()))
	}
	take()
	for round := range 3 {
		victim := c.Server(round % 3)
		require.NoError(t, victim.Kill())
		take() // a majority is still up
		require.NoError(t, victim.Restart())
		take()
	}
	for i := range 3 {
		require.NoError(t, c.Server(i).Kill())
	}
	for i := range 3 {
		require.NoError(t, c.Server(i).Restart())
	}
	take()
}

// TestScriptFlushOnRealServers: SCRIPT FLUSH on every server between calls
// is invisible to the caller.
func TestScriptFlushOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := testutil.Context(t)
	c := testutil.StartRedis(t, 3)
	l := newLocker(t, c.Nodes(), redlock.Config{})
	flush := func() {
		for i := range 3 {
			require.NoError(t, c.Server(i).Do(ctx, "SCRIPT", "FLUSH").Err())
		}
	}
	flush()
	lease, err := l.TryAcquire(ctx, "flush")
	require.NoError(t, err)
	flush()
	_, err = l.Renew(ctx, "flush", lease.Token())
	require.NoError(t, err)
	flush()
	st, err := l.Inspect(ctx, "flush")
	require.NoError(t, err)
	require.Equal(t, redlock.Held, st.State)
	flush()
	require.NoError(t, lease.Release(ctx))
}
