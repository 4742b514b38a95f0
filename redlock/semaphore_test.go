package redlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

func TestSemaphoreBadInput(t *testing.T) {
	l := newLocker(t, testutil.NewMiniCluster(t, 3).Nodes(), redlock.Config{})
	for _, tc := range []struct {
		name     string
		resource string
		k        int
		want     error
	}{
		{"zero slots", "pool", 0, redlock.ErrInvalidConfig},
		{"negative slots", "pool", -1, redlock.ErrInvalidConfig},
		{"too many slots", "pool", redlock.MaxSlots + 1, redlock.ErrInvalidConfig},
		{"empty resource", "", 2, redlock.ErrInvalidResource},
		{"slot name too long", string(make([]byte, redlock.MaxResourceLen)), 2, redlock.ErrInvalidResource},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := l.NewSemaphore(tc.resource, tc.k)
			require.ErrorIs(t, err, tc.want)
		})
	}
}

// TestSemaphoreLimitsHolders: K slots give K leases, the next TryAcquire is
// refused (ErrNotAcquired), and a released slot is taken again. Each slot's
// lease has its own fencing token.
func TestSemaphoreLimitsHolders(t *testing.T) {
	l := newLocker(t, testutil.NewMiniCluster(t, 3).Nodes(), redlock.Config{})
	sem, err := l.NewSemaphore("pool", 3)
	require.NoError(t, err)
	ctx := testutil.Context(t)
	held := map[string]*redlock.Lease{}
	for range 3 {
		lease, err := sem.TryAcquire(ctx)
		require.NoError(t, err)
		held[lease.Resource()] = lease
	}
	require.Len(t, held, 3, "three different slots")
	_, err = sem.TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)

	statuses, err := sem.Inspect(ctx)
	require.NoError(t, err)
	for i, st := range statuses {
		require.Equal(t, redlock.Held, st.State, "slot %d", i)
		require.Equal(t, held[sem.Slots()[i]].Token(), st.Holder.Token)
	}

	freed := held[sem.Slots()[1]]
	require.NoError(t, freed.Release(ctx))
	again, err := sem.TryAcquire(ctx)
	require.NoError(t, err)
	require.Equal(t, freed.Resource(), again.Resource())
	require.Greater(t, again.Fence(), freed.Fence())
}

// TestSemaphoreWaiterWakesOnAnySlotRelease: with every slot taken, a waiter
// whose backoff would sleep for an hour gets the slot released first.
func TestSemaphoreWaiterWakesOnAnySlotRelease(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), slowPolling(redlock.Config{LeaseDuration: 5 * time.Second}))
	sem, err := l.NewSemaphore("pool", 2)
	require.NoError(t, err)
	a, err := sem.TryAcquire(testutil.Context(t))
	require.NoError(t, err)
	b, err := sem.TryAcquire(testutil.Context(t))
	require.NoError(t, err)

	got := make(chan *redlock.Lease, 1)
	go func() {
		lease, err := sem.Acquire(testutil.Context(t))
		require.NoError(t, err)
		got <- lease
	}()
	subscribed(t, c, l.Key(b.Resource()), 1)
	require.NoError(t, b.Release(context.Background()))
	select {
	case lease := <-got:
		require.Equal(t, b.Resource(), lease.Resource())
		require.NoError(t, lease.Release(context.Background()))
	case <-time.After(3 * time.Second):
		t.Fatal("the waiter was not woken by the slot's release")
	}
	require.NoError(t, a.Release(context.Background()))
	subscribed(t, c, l.Key(a.Resource()), 0)
}

// TestSemaphoreNeverExceedsItsLimit: 8 goroutines with their own Lockers
// (as separate processes) share a semaphore of 3 on 3 nodes; the number of
// leases valid at once, counted while each is held, never exceeds 3; and
// three holders can hold it at once.
func TestSemaphoreNeverExceedsItsLimit(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	const limit = 3
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		l := newLocker(t, c.Nodes(), fastRetry(redlock.Config{LeaseDuration: 2 * time.Second}))
		sem, err := l.NewSemaphore("pool", limit)
		require.NoError(t, err)
		wg.Go(func() {
			for range 5 {
				lease, err := sem.Acquire(testutil.Context(t))
				if !assertNoError(t, err) {
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(5 * time.Millisecond)
				inside.Add(-1)
				_ = lease.Release(context.Background())
			}
		})
	}
	wg.Wait()
	require.LessOrEqual(t, most.Load(), int32(limit))

	// All the slots can be held at once, by holders waiting in Acquire
	// (whether the loop above got there depends on its timing).
	held := make([]*redlock.Lease, limit)
	for i := range held {
		l := newLocker(t, c.Nodes(), fastRetry(redlock.Config{LeaseDuration: 2 * time.Second}))
		sem, err := l.NewSemaphore("pool", limit)
		require.NoError(t, err)
		held[i], err = sem.Acquire(testutil.Context(t))
		require.NoError(t, err)
		if i == limit-1 {
			_, err = sem.TryAcquire(testutil.Context(t))
			require.ErrorIs(t, err, redlock.ErrNotAcquired, "a fourth holder")
		}
	}
	for _, ls := range held {
		require.NoError(t, ls.Release(context.Background()))
	}
}

// TestSemaphoreSlotOfADeadHolderExpires: a holder that stops renewing (a
// crashed process) frees its slot when the TTL runs out.
func TestSemaphoreSlotOfADeadHolderExpires(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: time.Second})
	sem, err := l.NewSemaphore("pool", 1)
	require.NoError(t, err)
	dead, err := sem.TryAcquire(testutil.Context(t))
	require.NoError(t, err)
	dead.Orphan()
	_, err = sem.TryAcquire(testutil.Context(t))
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	c.FastForward(time.Second) // the TTL runs out on every node
	next, err := sem.TryAcquire(testutil.Context(t))
	require.NoError(t, err)
	require.Greater(t, next.Fence(), dead.Fence())
	require.NoError(t, next.Release(context.Background()))
}

// assertNoError reports err to t without stopping the goroutine's caller.
func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}
