package redlock_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// processLocker is a Locker with connections of its own, as in another
// process: its waiters share nothing with other Lockers but the nodes.
func processLocker(t *testing.T, c *testutil.RedisCluster, cfg redlock.Config) *redlock.Locker {
	t.Helper()
	nodes, err := redisnode.Dial(testutil.Context(t), c.URLs()...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = nodes.Close() })
	return newLocker(t, nodes, cfg)
}

// validWithinTheLock checks that lease is valid no longer than its lock
// stands on a majority of the nodes (as their PTTL says, read after
// time.Now: each lock lasts at least that long from then).
func validWithinTheLock(t *testing.T, c *testutil.RedisCluster, key string, lease *redlock.Lease) {
	t.Helper()
	covered := 0
	for _, s := range c.Servers() {
		now := time.Now()
		v, _ := s.Client().Get(context.Background(), key).Result()
		ms, err := s.Client().PTTL(context.Background(), key).Result()
		if err == nil && strings.HasPrefix(v, lease.Token()+" ") && !lease.ValidUntil().After(now.Add(ms)) {
			covered++
		}
	}
	assert.GreaterOrEqual(t, covered, c.Len()/2+1, "the lease's validity outlasts its lock on a majority")
}

// heldEverywhere waits until lease's lock stands on every node: an
// Acquire returns once a majority granted, and a waiter that reached the
// last node before the holder's call would be granted there (a minority)
// instead of queued, which these tests do not want to depend on.
func heldEverywhere(t *testing.T, l *redlock.Locker, lease *redlock.Lease) {
	t.Helper()
	require.Eventually(t, func() bool {
		st, err := l.Inspect(testutil.Context(t), lease.Resource())
		if err != nil {
			return false
		}
		for _, n := range st.Nodes {
			if n.Err != nil || !n.Info.Held || n.Info.Token != lease.Token() {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond, "the lock never stood on every node")
}

// placesOn counts the places in key's wait queue on every node.
func placesOn(t *testing.T, c *testutil.RedisCluster, key string) []int64 {
	t.Helper()
	n := make([]int64, c.Len())
	for i, s := range c.Servers() {
		v, err := s.Client().ZCard(testutil.Context(t), key+":queue").Result()
		require.NoError(t, err)
		n[i] = v
	}
	return n
}

// TestFairAcquireServesWaitersInArrivalOrder: five Lockers with their own
// connections (five processes, for the nodes) wait for a held lock, each
// arriving once the one before has its place on every node. After the
// release they get the lock in arrival order, each with one attempt (the
// one that queued it), however long the backoff: each release hands the
// lock over to the head of the queue on the nodes, which tell the head
// alone. Each lease is valid no longer than the lock stands on a majority.
func TestFairAcquireServesWaitersInArrivalOrder(t *testing.T) {
	c := testutil.StartRedis(t, 3)
	const resource = "fifo"
	cfg := redlock.Config{
		LeaseDuration: 30 * time.Second, // places renewed every 10 s: not within the test
		NewBackOff:    func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) },
	}
	holder := processLocker(t, c, cfg)
	lease, err := holder.Acquire(testutil.Context(t), resource)
	require.NoError(t, err)
	heldEverywhere(t, holder, lease)
	key := holder.Key(resource)

	const waiters = 5
	var mu sync.Mutex
	var order []int
	attempts := make([]atomic.Int64, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		wcfg := cfg
		wcfg.Observer = redlock.ObserverFunc(func(e redlock.Event) {
			if e.Kind == redlock.EventAttempt {
				attempts[i].Add(1)
			}
		})
		l := processLocker(t, c, wcfg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ls, err := l.Acquire(testutil.Context(t), resource)
			if !assertNoError(t, err) {
				return
			}
			validWithinTheLock(t, c, key, ls)
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond) // hold it a moment
			assertNoError(t, ls.Release(context.Background()))
		}()
		want := make([]int64, c.Len())
		for j := range want {
			want[j] = int64(i + 1)
		}
		require.Eventually(t, func() bool { return slices.Equal(placesOn(t, c, key), want) },
			10*time.Second, 5*time.Millisecond, "waiter %d never queued on every node", i)
	}
	// Every waiter's Locker listens on its inbox on every node.
	for _, s := range c.Servers() {
		require.Eventually(t, func() bool {
			chans, err := s.Client().PubSubChannels(testutil.Context(t), "redlock:{~*").Result()
			return err == nil && len(chans) == waiters
		}, 10*time.Second, 5*time.Millisecond, "the waiters' inboxes on %s", s.Addr())
	}
	require.NoError(t, lease.Release(testutil.Context(t)))
	wg.Wait()
	require.Equal(t, []int{0, 1, 2, 3, 4}, order)
	// Each waiter was woken, never retried on its backoff (an hour): one
	// attempt to queue and, at most, one more when a wake-up reached it
	// before the hand-over stood on a majority (seen at load average 12).
	for i := range attempts {
		require.LessOrEqual(t, attempts[i].Load(), int64(2), "waiter %d", i)
	}
	require.Equal(t, []int64{0, 0, 0}, placesOn(t, c, key), "no place is left behind")
}

// TestADeadWaiterHoldsTheLockUpAtMostItsQueueTTL: a waiter that took its
// place and died (it never renews it, never leaves) is the head when the
// lock is released. The next waiter gets the lock once the dead waiter's
// place has lapsed: not before (the nodes keep the free lock for the
// head, or hand it over to the head for no longer than its place had
// left), and soon after (it is told how long the head's place, or the
// lock handed over to it, has left).
func TestADeadWaiterHoldsTheLockUpAtMostItsQueueTTL(t *testing.T) {
	// Each place is its fields as the acquire script takes them: the id,
	// then the hand-over mode, ttl, channel, token and owner.
	for name, place := range map[string][]any{
		"named only":      {"00000000deadbeef", "none", "", "", "", ""},
		"handed the lock": {"00000000deadbeef", "handover", 30000, "-", "deaddeaddeaddeaddeaddeaddeaddead", "dead"},
	} {
		t.Run(name, func(t *testing.T) { testDeadWaiter(t, place) })
	}
}

func testDeadWaiter(t *testing.T, place []any) {
	c := testutil.StartRedis(t, 3)
	const resource = "dead-waiter"
	const queueTTL = time.Second
	cfg := redlock.Config{
		LeaseDuration:   30 * time.Second,
		NodeCallTimeout: 200 * time.Millisecond,
		QueueTTL:        queueTTL,
		NewBackOff:      func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) },
	}
	holder := processLocker(t, c, cfg)
	lease, err := holder.Acquire(testutil.Context(t), resource)
	require.NoError(t, err)
	heldEverywhere(t, holder, lease)
	key := holder.Key(resource)

	// The dead waiter: a place taken by the acquire script, as a waiting
	// Acquire takes it, on every node; then nothing.
	ctx := testutil.Context(t)
	placed := time.Now()
	for _, s := range c.Servers() {
		reply, err := s.Client().Eval(ctx, scripts.Acquire.Source(), []string{key, key + ":fence", key + ":queue", key + ":queue:exp"},
			"deaddeaddeaddeaddeaddeaddeaddead", "dead", 10000, "none", "", "queue", place[0], "propose", 0, queueTTL.Milliseconds(),
			place[1], place[2], place[3], place[4], place[5]).Slice()
		require.NoError(t, err)
		require.Equal(t, "held", reply[0], "the lock is held: the dead waiter queues")
		require.Positive(t, reply[3], "with a ticket")
	}

	live := processLocker(t, c, cfg)
	got := make(chan time.Time, 1)
	go func() {
		ls, err := live.Acquire(testutil.Context(t), resource)
		if assertNoError(t, err) {
			got <- time.Now()
			assertNoError(t, ls.Release(context.Background()))
		}
	}()
	require.Eventually(t, func() bool { return slices.Equal(placesOn(t, c, key), []int64{2, 2, 2}) },
		5*time.Second, 5*time.Millisecond, "the live waiter never queued")
	require.NoError(t, lease.Release(ctx))

	select {
	case at := <-got:
		waited := at.Sub(placed)
		t.Logf("lock taken %s after the dead waiter's place was taken (QueueTTL %s)", waited.Round(time.Millisecond), queueTTL)
		require.GreaterOrEqual(t, waited, queueTTL-50*time.Millisecond, "the lock went past the head while its place was alive")
		// The margin is for a loaded machine; the lease (30 s) and the
		// backoff (1 h) are far longer.
		require.Less(t, waited, queueTTL+3*time.Second, "the dead waiter held the lock up past its QueueTTL")
	case <-time.After(10 * time.Second):
		t.Fatal("the live waiter never got the lock")
	}
}

// TestTryAcquireDoesNotJumpTheQueue: a free lock with a live waiter queued
// is refused to TryAcquire, with the nodes' reason; with the queue off,
// waiters do not queue on the nodes.
func TestTryAcquireDoesNotJumpTheQueue(t *testing.T) {
	c := testutil.StartRedis(t, 3)
	const resource = "no-jumping"
	cfg := redlock.Config{
		LeaseDuration: 10 * time.Second,
		NewBackOff:    func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) },
	}
	a, b := processLocker(t, c, cfg), processLocker(t, c, cfg)
	first, err := a.Acquire(testutil.Context(t), resource) // deleted by hand below
	require.NoError(t, err)
	heldEverywhere(t, a, first)
	key := a.Key(resource)
	ctx, cancel := context.WithCancel(testutil.Context(t))
	done := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, resource) // the lease is Closed with b
		done <- err
	}()
	var seen []int64
	require.Eventually(t, func() bool { seen = placesOn(t, c, key); return slices.Equal(seen, []int64{1, 1, 1}) },
		5*time.Second, 5*time.Millisecond, "places %v", &seen)

	// Freed by hand, without an announcement: b is not woken, and keeps its
	// place. (The counter's record of the lease ends too, as a release's
	// does: a lock key missing while its counter records a live lease is
	// a lost key, which the nodes refuse until the lease's end.)
	for _, s := range c.Servers() {
		require.NoError(t, s.Client().Del(ctx, key).Err())
		v, err := s.Client().Get(ctx, key+":fence").Result()
		require.NoError(t, err)
		require.NoError(t, s.Client().Set(ctx, key+":fence", counterValue(v), time.Minute).Err())
	}
	_, err = a.TryAcquire(testutil.Context(t), resource)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorContains(t, err, "queued: another waiter is next")

	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Eventually(t, func() bool { return slices.Equal(placesOn(t, c, key), []int64{0, 0, 0}) },
		5*time.Second, 5*time.Millisecond, "a waiter whose Acquire ended leaves the queue")
	l2, err := a.TryAcquire(testutil.Context(t), resource)
	require.NoError(t, err)
	require.NoError(t, l2.Release(testutil.Context(t)))
	// Release returns at a majority: the third node's release is awaited,
	// or the Acquire below could find l2's lock there and keep a place on
	// it until its own release (seen beside two busy loops).
	require.Eventually(t, func() bool {
		for _, s := range c.Servers() {
			if s.Client().Exists(ctx, key).Val() != 0 {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond, "l2's release reached every node")

	off := processLocker(t, c, redlock.Config{LeaseDuration: 10 * time.Second, QueueTTL: -1,
		NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(50 * time.Millisecond) }})
	held, err := a.Acquire(testutil.Context(t), resource)
	require.NoError(t, err)
	wctx, wcancel := context.WithTimeout(testutil.Context(t), 300*time.Millisecond)
	defer wcancel()
	_, err = off.Acquire(wctx, resource)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, []int64{0, 0, 0}, placesOn(t, c, key), "QueueTTL < 0: no places")
	require.NoError(t, held.Release(testutil.Context(t)))
}

// TestSemaphoreWaitersPassTheGateInArrivalOrder: with both slots of a
// semaphore of 2 held, four Lockers with their own connections wait in
// turn, each arriving once the one before is at the gate (holding it, or
// queued for it on every node). As the slots are freed they get them in
// arrival order.
func TestSemaphoreWaitersPassTheGateInArrivalOrder(t *testing.T) {
	c := testutil.StartRedis(t, 3)
	cfg := redlock.Config{
		LeaseDuration: 10 * time.Second,
		NewBackOff:    func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) },
	}
	holder := processLocker(t, c, cfg)
	sem, err := holder.NewSemaphore("fair-pool", 2)
	require.NoError(t, err)
	held := make([]*redlock.Lease, 2)
	for i := range held {
		held[i], err = sem.TryAcquire(testutil.Context(t))
		require.NoError(t, err)
		heldEverywhere(t, holder, held[i])
	}
	gate := holder.Key("fair-pool#gate")

	const waiters = 4
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range waiters {
		l := processLocker(t, c, cfg)
		s, err := l.NewSemaphore("fair-pool", 2)
		require.NoError(t, err)
		wg.Go(func() {
			ls, err := s.Acquire(testutil.Context(t))
			if !assertNoError(t, err) {
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			assertNoError(t, ls.Release(context.Background()))
		})
		// The first waiter holds the gate; the others queue for it.
		want := []int64{int64(i), int64(i), int64(i)}
		require.Eventually(t, func() bool {
			st, err := holder.Inspect(testutil.Context(t), "fair-pool#gate")
			return err == nil && st.State == redlock.Held && slices.Equal(placesOn(t, c, gate), want)
		}, 10*time.Second, 5*time.Millisecond, "waiter %d never reached the gate", i)
	}
	for _, ls := range held {
		require.NoError(t, ls.Release(testutil.Context(t)))
	}
	wg.Wait()
	require.Equal(t, []int{0, 1, 2, 3}, order)
}

// TestSemaphoreTryAcquireChecksTheGate: concurrent TryAcquire calls take
// free slots without refusing each other (within three passes each);
// while a caller holds the gate,
// TryAcquire is refused even with a slot free.
func TestSemaphoreTryAcquireChecksTheGate(t *testing.T) {
	c := testutil.StartRedis(t, 3)
	cfg := redlock.Config{LeaseDuration: 30 * time.Second,
		NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }}
	const k = 4
	sems := make([]*redlock.Semaphore, k)
	for i := range sems {
		var err error
		sems[i], err = processLocker(t, c, cfg).NewSemaphore("try-pool", k)
		require.NoError(t, err)
	}
	leases := make([]*redlock.Lease, k)
	var wg sync.WaitGroup
	for i, s := range sems {
		wg.Go(func() {
			// A pass can find every other slot taken and lose the last
			// to a split vote with another caller (both cleaned up): a
			// second pass then finds it free. Refusals by the gate would
			// not go away.
			var err error
			for range 3 {
				if leases[i], err = s.TryAcquire(testutil.Context(t)); err == nil {
					return
				}
			}
			assertNoError(t, err)
		})
	}
	wg.Wait()
	for _, ls := range leases {
		require.NotNil(t, ls, "free slots were refused to concurrent TryAcquire calls")
	}

	// A slot is free, but a caller holds the gate (as one waiting for a
	// slot does): TryAcquire does not pass it.
	require.NoError(t, leases[0].Release(testutil.Context(t)))
	gate, err := processLocker(t, c, cfg).Acquire(testutil.Context(t), "try-pool#gate")
	require.NoError(t, err)
	_, err = sems[0].TryAcquire(testutil.Context(t))
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorContains(t, err, "wait for a slot")
	require.NoError(t, gate.Release(testutil.Context(t)))
	leases[0], err = sems[0].TryAcquire(testutil.Context(t))
	require.NoError(t, err, "the gate is clear again")
	for _, ls := range leases {
		require.NoError(t, ls.Release(testutil.Context(t)))
	}
}

// TestClosingALockerLeavesNoPlaceBehind: a waiter whose Locker is closed
// returns, and its places are gone from every node.
func TestClosingALockerLeavesNoPlaceBehind(t *testing.T) {
	c := testutil.StartRedis(t, 3)
	cfg := redlock.Config{LeaseDuration: 30 * time.Second,
		NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }}
	holder := processLocker(t, c, cfg)
	lease, err := holder.Acquire(testutil.Context(t), "closing")
	require.NoError(t, err)
	heldEverywhere(t, holder, lease)
	key := holder.Key("closing")

	nodes, err := redisnode.Dial(testutil.Context(t), c.URLs()...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = nodes.Close() })
	waiter, err := redlock.New(nodes, cfg)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(testutil.Context(t), "closing")
		done <- err
	}()
	require.Eventually(t, func() bool { return slices.Equal(placesOn(t, c, key), []int64{1, 1, 1}) },
		5*time.Second, 5*time.Millisecond)
	require.NoError(t, waiter.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, redlock.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not return when its Locker was closed")
	}
	require.Equal(t, []int64{0, 0, 0}, placesOn(t, c, key))
	require.NoError(t, lease.Release(testutil.Context(t)))
}

// TestWaitersThatArriveTogetherAllGetTheLock: eight Lockers (eight
// processes, for the nodes) ask for a free lock at the same instant, in
// rounds; each holds it a moment. Their first attempts split the nodes'
// votes and queue them in different orders on different nodes; the
// clean-up of a split vote must not hand each node's lock to its own head
// (each would hold a minority), so that every round ends with every
// waiter served. Found by redlock-cli bench on a loaded machine: no
// acquisition at all in 1 s.
func TestWaitersThatArriveTogetherAllGetTheLock(t *testing.T) {
	c := testutil.StartRedis(t, 3)
	cfg := redlock.Config{LeaseDuration: 3 * time.Second}
	const lockers, rounds = 8, 10
	ls := make([]*redlock.Locker, lockers)
	for i := range ls {
		ls[i] = processLocker(t, c, cfg)
	}
	ctx := testutil.Context(t)
	for round := range rounds {
		start := make(chan struct{})
		var wg sync.WaitGroup
		var inside atomic.Int32
		began := time.Now()
		for _, l := range ls {
			wg.Go(func() {
				<-start
				lease, err := l.Acquire(ctx, "together")
				if !assertNoError(t, err) {
					return
				}
				if inside.Add(1) != 1 {
					t.Error("two holders at once")
				}
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				assertNoError(t, lease.Release(context.Background()))
			})
		}
		close(start)
		wg.Wait()
		// Eight holds of 1 ms: anything near a second is a stall (the
		// places' renewal, or locks held by places nobody waits in).
		took := time.Since(began)
		t.Logf("round %d: %v", round, took.Round(time.Millisecond))
		require.Less(t, took, 2*time.Second, "round %d: eight waiters served in %v", round, took)
	}
}

// TestAnOrphanedLeaseLeavesTheQueue (from a review): a lease granted by
// nodes 0 and 1 leaves its Acquire's place queued on node 2, which
// refused. Orphan keeps the lock until its TTL but takes the place out of
// the queue, so node 2's next release does not hand its lock to a place
// nobody waits in, which the lease's token could not release.
func TestAnOrphanedLeaseLeavesTheQueue(t *testing.T) {
	c := testutil.StartRedis(t, 3)
	ctx := testutil.Context(t)
	cfg := fastRetry(redlock.Config{LeaseDuration: 6 * time.Second, RejoinDelay: -1})
	w := processLocker(t, c, cfg)
	x := processLocker(t, c, cfg)
	key := w.Key("r")
	require.NoError(t, c.Server(2).Client().Set(ctx, key, foreignLock, 30*time.Second).Err())
	ls, err := w.Acquire(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int64{0, 0, 1}, placesOn(t, c, key), "queued on node 2 only")
	ls.Orphan()
	require.Eventually(t, func() bool { return slices.Equal(placesOn(t, c, key), []int64{0, 0, 0}) },
		5*time.Second, time.Millisecond, "the orphaned lease's place is still queued")
	foreign, _, _ := strings.Cut(foreignLock, " ")
	// Node 2's holder releases (ErrNotHeld: no other node holds it).
	require.ErrorIs(t, x.Release(ctx, "r", foreign), redlock.ErrNotHeld)
	require.NoError(t, x.Release(ctx, "r", ls.Token()))
	require.Empty(t, c.Server(2).Client().Get(ctx, key).Val(), "node 2 is held by the orphaned Acquire's place")
}

// TestClosingALockerBeforeItsNodesLeavesNoPlaceBehind: the usual shutdown,
// defer nodes.Close() then defer locker.Close(), while several Acquire
// calls wait. Close returns only once they have left the nodes' wait
// queues, so closing the nodes right after cuts no leaving short: a
// graceful shutdown holds no lock up for QueueTTL, as a crash would.
func TestClosingALockerBeforeItsNodesLeavesNoPlaceBehind(t *testing.T) {
	c := testutil.StartRedis(t, 3)
	cfg := redlock.Config{LeaseDuration: 30 * time.Second}
	holder := processLocker(t, c, cfg)
	lease, err := holder.Acquire(testutil.Context(t), "shutdown")
	require.NoError(t, err)
	key := holder.Key("shutdown")

	nodes, err := redisnode.Dial(testutil.Context(t), c.URLs()...)
	require.NoError(t, err)
	waiter, err := redlock.New(nodes, cfg)
	require.NoError(t, err)
	const waiters = 10
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() {
			_, err := waiter.Acquire(testutil.Context(t), "shutdown")
			assert.ErrorIs(t, err, redlock.ErrClosed)
		})
	}
	require.Eventually(t, func() bool { return slices.Equal(placesOn(t, c, key), []int64{waiters, waiters, waiters}) },
		10*time.Second, 5*time.Millisecond)
	require.NoError(t, waiter.Close())
	require.NoError(t, nodes.Close())
	wg.Wait()
	require.Equal(t, []int64{0, 0, 0}, placesOn(t, c, key), "places left behind")
	require.NoError(t, lease.Release(testutil.Context(t)))
}
