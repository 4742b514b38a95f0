package redlock_test

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// slowNode delays acquire and fence calls, ignoring the context while it
// waits, like a client that does not honour deadlines on a slow network.
type slowNode struct {
	redlock.Node
	acquire, fence time.Duration
}

func (n slowNode) Eval(ctx context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	switch s {
	case scripts.Acquire:
		time.Sleep(n.acquire)
	case scripts.Fence:
		time.Sleep(n.fence)
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

func TestValidityIsMeasuredFromTheStartOfTheAttempt(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	const ttl = 10 * time.Second
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: ttl, ClockDriftFactor: 0.01})
	drift := time.Duration(math.Ceil(float64(ttl)*0.01)) + 2*time.Millisecond
	before := time.Now()
	lease, err := l.TryAcquire(testutil.Context(t), "validity")
	after := time.Now()
	require.NoError(t, err)
	defer lease.Release(context.Background())
	require.False(t, lease.ValidUntil().Before(before.Add(ttl-drift)))
	require.False(t, lease.ValidUntil().After(after.Add(ttl-drift)))
	require.Len(t, lease.Token(), 32)
}

func TestRenewalExtendsValidityFromTheRenewal(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 300 * time.Millisecond})
	lease, err := l.TryAcquire(testutil.Context(t), "renewal")
	require.NoError(t, err)
	first := lease.ValidUntil()
	validity := 300*time.Millisecond - 5*time.Millisecond
	require.Eventually(t, func() bool { return lease.ValidUntil().After(first) }, time.Second, 5*time.Millisecond)
	// Renewal starts with a third of the validity left, so the new validity
	// ends about two thirds of a validity later.
	gain := lease.ValidUntil().Sub(first)
	require.Greater(t, gain, validity/2)
	require.Less(t, gain, validity)
	require.NoError(t, lease.Release(context.Background()))
}

// TestAttemptThatOutlivesItsValidityFailsAndIsCleanedUp: the nodes answer,
// but so slowly that acquire plus the fence step take longer than the
// lease's validity. The attempt must fail and leave nothing on any node.
func TestAttemptThatOutlivesItsValidityFailsAndIsCleanedUp(t *testing.T) {
	t.Parallel() // bound by the wall clock (leases, delays, hung nodes)
	c := testutil.NewMiniCluster(t, 3)
	var nodes []redlock.Node
	for _, n := range c.Nodes() {
		nodes = append(nodes, slowNode{Node: n, acquire: 500 * time.Millisecond, fence: 500 * time.Millisecond})
	}
	// Each phase fits in NodeCallTimeout with room to spare on a loaded
	// machine; together they outlast the validity (988ms).
	l := newLocker(t, nodes, redlock.Config{LeaseDuration: time.Second, NodeCallTimeout: 800 * time.Millisecond})
	// Disagreeing counters force the fence round trip.
	for i, v := range []int64{10, 20, 30} {
		require.NoError(t, c.SetCounter(i, l.Key("slow")+":fence", v))
	}
	start := time.Now()
	_, err := l.TryAcquire(testutil.Context(t), "slow")
	if !slowAttempt(err) || errors.Is(err, redlock.ErrNotAcquired) {
		// The usual outcome: the fence step ran out of validity. (On a busy
		// machine the acquire step itself can time out first.)
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
		require.Contains(t, err.Error(), "fencing token")
	}
	require.Less(t, time.Since(start), 3*time.Second)
	// The clean-up runs in the background, bounded by NodeCallTimeout.
	for i := range 3 {
		require.Eventually(t, func() bool { return !c.Server(i).Exists(l.Key("slow")) }, 5*time.Second, 5*time.Millisecond,
			"node %d keeps the failed attempt's lock", i)
	}
}

// TestAcquireWaitsForTheHolder: a waiter gets the lock once the holder
// releases it, never before.
func TestAcquireWaitsForTheHolder(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	refused := make(chan struct{}, 1)
	l := newLocker(t, c.Nodes(), fastRetry(redlock.Config{LeaseDuration: 2 * time.Second, Observer: redlock.ObserverFunc(func(e redlock.Event) {
		if e.Kind == redlock.EventAttempt && e.Err != nil {
			select {
			case refused <- struct{}{}:
			default:
			}
		}
	})}))
	holder, err := l.TryAcquire(testutil.Context(t), "queue")
	require.NoError(t, err)

	var released atomic.Bool
	got := make(chan *redlock.Lease)
	go func() {
		lease, err := l.Acquire(testutil.Context(t), "queue")
		if err == nil && !released.Load() {
			t.Error("waiter acquired while the holder held the lock")
		}
		got <- lease
	}()
	select {
	case <-refused: // the waiter tried while the holder held the lock
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter made no attempt")
	}
	released.Store(true)
	require.NoError(t, holder.Release(context.Background()))
	select {
	case lease := <-got:
		require.NotNil(t, lease)
		require.Greater(t, lease.Fence(), holder.Fence())
		require.NoError(t, lease.Release(context.Background()))
	case <-time.After(2 * time.Second):
		t.Fatal("waiter never acquired")
	}
}

// TestCancelledAcquireReturnsPromptlyAndCleansUp: cancelling the context
// while nodes are slow returns at once with the context's error; the
// attempt's grants are removed in the background.
func TestCancelledAcquireReturnsPromptlyAndCleansUp(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	var nodes []redlock.Node
	for _, n := range c.Nodes() {
		nodes = append(nodes, slowNode{Node: n, acquire: 400 * time.Millisecond})
	}
	l, err := redlock.New(nodes, redlock.Config{LeaseDuration: time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = l.Acquire(ctx, "cancelled")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, redlock.ErrNotAcquired)
	require.Less(t, time.Since(start), 250*time.Millisecond, "Acquire did not return when its context ended")
	require.NoError(t, l.Close()) // waits for the background clean-up
	for i := range 3 {
		require.False(t, c.Server(i).Exists(l.Key("cancelled")), "node %d keeps the cancelled attempt's lock", i)
	}
}

func TestCloseReleasesLeasesAndRefusesNewOnes(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l, err := redlock.New(c.Nodes(), redlock.Config{})
	require.NoError(t, err)
	a, err := l.TryAcquire(testutil.Context(t), "a")
	require.NoError(t, err)
	b, err := l.TryAcquire(testutil.Context(t), "b")
	require.NoError(t, err)
	require.NoError(t, l.Close())
	for _, lease := range []*redlock.Lease{a, b} {
		require.ErrorIs(t, context.Cause(lease.Context()), redlock.ErrLeaseReleased)
		for i := range 3 {
			require.False(t, c.Server(i).Exists(l.Key(lease.Resource())))
		}
	}
	_, err = l.TryAcquire(testutil.Context(t), "c")
	require.ErrorIs(t, err, redlock.ErrClosed)
	_, err = l.Acquire(testutil.Context(t), "c")
	require.ErrorIs(t, err, redlock.ErrClosed)
	require.ErrorIs(t, a.Release(context.Background()), redlock.ErrLeaseReleased)
}

// TestNoGoroutineOutlivesItsLease: after Release returns, and after a lease
// is lost, nothing the lease started is still running (the Locker's idle
// node-call workers are the Locker's, and stop with it); after Close,
// nothing the Locker started is.
func TestNoGoroutineOutlivesItsLease(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	base := append(miniredisGoroutines(), goleak.IgnoreCurrent())
	l, err := redlock.New(c.Nodes(), redlock.Config{LeaseDuration: 300 * time.Millisecond})
	require.NoError(t, err)
	idleWorkers := goleak.IgnoreTopFunction("github.com/e6344662/go-redlock/redlock.(*workers).work")
	ignore := append(base, idleWorkers)

	lease, err := l.TryAcquire(testutil.Context(t), "leak")
	require.NoError(t, err)
	first := lease.ValidUntil()
	require.Eventually(t, func() bool { // at least one renewal (or the lease lost on a busy machine)
		return lease.ValidUntil().After(first) || lease.Context().Err() != nil
	}, 10*time.Second, time.Millisecond)
	if err := lease.Release(context.Background()); err != nil {
		// A renewal that missed its deadline on a busy machine loses the
		// lease: that is allowed; leaking a goroutine is not.
		require.ErrorIs(t, err, redlock.ErrLeaseLost)
	}
	goleak.VerifyNone(t, ignore...)

	lost, err := l.TryAcquire(testutil.Context(t), "leak")
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, c.Wipe(i))
	}
	waitDone(t, lost.Context(), 5*time.Second)
	require.ErrorIs(t, lost.Release(context.Background()), redlock.ErrLeaseLost)
	goleak.VerifyNone(t, ignore...)

	// A waiter opens the Locker's subscriptions; Close ends them too.
	held, err := l.TryAcquire(testutil.Context(t), "sub")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = l.Acquire(ctx, "sub")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, held.Release(context.Background()))
	require.NoError(t, l.Close())
	goleak.VerifyNone(t, base...)
}
