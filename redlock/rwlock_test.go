package redlock_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

func TestNewRWLockBadInput(t *testing.T) {
	l := newLocker(t, testutil.NewMiniCluster(t, 3).Nodes(), redlock.Config{})
	for _, tc := range []struct {
		name     string
		resource string
	}{
		{"empty", ""},
		{"starting with }", "}x"},
		{"too long", strings.Repeat("x", redlock.MaxResourceLen+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := l.NewRWLock(tc.resource)
			require.ErrorIs(t, err, redlock.ErrInvalidResource)
		})
	}
}

// newRW returns the read-write lock on "doc" of a Locker over c.
func newRW(t *testing.T, l *redlock.Locker) *redlock.RWLock {
	t.Helper()
	rw, err := l.NewRWLock("doc")
	require.NoError(t, err)
	return rw
}

// TestReadersShareAndExcludeWriters: two readers hold the lock at once,
// each with its own token; a writer is refused (ErrNotAcquired) until
// both have released, then granted; while it holds the lock, readers and
// other writers are refused.
func TestReadersShareAndExcludeWriters(t *testing.T) {
	l := newLocker(t, testutil.NewMiniCluster(t, 3).Nodes(), redlock.Config{})
	rw := newRW(t, l)
	ctx := testutil.Context(t)
	r1, err := rw.TryAcquireShared(ctx)
	require.NoError(t, err)
	r2, err := rw.TryAcquireShared(ctx)
	require.NoError(t, err)
	require.NotEqual(t, r1.Token(), r2.Token())
	require.NotEqual(t, r1.Fence(), r2.Fence())
	require.Equal(t, "doc", r1.Resource())

	_, err = rw.TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.Contains(t, err.Error(), "readers hold it")

	st, err := rw.Inspect(ctx)
	require.NoError(t, err)
	require.Nil(t, st.Writer)
	require.Len(t, st.Readers, 2)
	for _, r := range st.Readers {
		require.Equal(t, l.Config().Owner, r.Owner, "the owner, from the reader's key")
		require.Positive(t, r.TTL)
	}

	require.NoError(t, r1.Release(ctx))
	_, err = rw.TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "one reader still holds it")
	require.NoError(t, r2.Release(ctx))

	w, err := rw.TryAcquire(ctx)
	require.NoError(t, err)
	require.Greater(t, w.Fence(), max(r1.Fence(), r2.Fence()), "a writer's token exceeds every earlier token")
	_, err = rw.TryAcquireShared(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	_, err = rw.TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	st, err = rw.Inspect(ctx)
	require.NoError(t, err)
	require.NotNil(t, st.Writer)
	require.Equal(t, w.Token(), st.Writer.Token)
	require.Empty(t, st.Readers)

	require.NoError(t, w.Release(ctx))
	r3, err := rw.TryAcquireShared(ctx)
	require.NoError(t, err)
	require.Greater(t, r3.Fence(), w.Fence(), "a reader's token exceeds every earlier writer's")
	require.NoError(t, r3.Release(ctx))
}

// TestRWLockIsNotTheMutex: the mutex on the same name is another lock.
func TestRWLockIsNotTheMutex(t *testing.T) {
	l := newLocker(t, testutil.NewMiniCluster(t, 3).Nodes(), redlock.Config{})
	rw := newRW(t, l)
	ctx := testutil.Context(t)
	m, err := l.TryAcquire(ctx, "doc")
	require.NoError(t, err)
	w, err := rw.TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, w.Release(ctx))
	require.NoError(t, m.Release(ctx))
}

// deadReader returns a reader of a 2 s lease on three miniredis nodes
// whose renewal has stopped (Orphan), with its cluster, Locker and RWLock.
func deadReader(t *testing.T) (*testutil.MiniCluster, *redlock.Locker, *redlock.RWLock, *redlock.Lease) {
	t.Helper()
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 2 * time.Second})
	rw := newRW(t, l)
	r, err := rw.TryAcquireShared(testutil.Context(t))
	require.NoError(t, err)
	r.Orphan()
	return c, l, rw, r
}

// TestADeadReaderFreesTheLockOnItsTTL: a reader that never releases (its
// renewal stopped: Orphan) holds writers off only until its TTL expires.
func TestADeadReaderFreesTheLockOnItsTTL(t *testing.T) {
	c, _, rw, _ := deadReader(t)
	ctx := testutil.Context(t)
	_, err := rw.TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	forward(c, 2*time.Second+5*time.Millisecond) // past the end the index records (rounded up to the ms)
	w, err := rw.TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, w.Release(ctx))
}

// forward moves every node of c forward by d: its keys' TTLs
// (FastForward) and its TIME, by which the readers index decides which
// readers are live (miniredis's TIME does not move with FastForward; it is
// frozen from here on).
func forward(c *testutil.MiniCluster, d time.Duration) {
	c.FastForward(d)
	at := time.Now().Add(d)
	for i := range c.Len() {
		c.Server(i).SetTime(at)
	}
}

// TestADeadWriterFreesTheLockOnItsTTL: likewise for a writer.
func TestADeadWriterFreesTheLockOnItsTTL(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 2 * time.Second})
	rw := newRW(t, l)
	ctx := testutil.Context(t)
	w, err := rw.TryAcquire(ctx)
	require.NoError(t, err)
	w.Orphan()
	_, err = rw.TryAcquireShared(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	c.FastForward(2 * time.Second)
	r, err := rw.TryAcquireShared(ctx)
	require.NoError(t, err)
	require.Greater(t, r.Fence(), w.Fence())
	require.NoError(t, r.Release(ctx))
}

// TestAWaitingWriterHoldsNewReadersBack: once a writer waits, new readers
// are refused (a writer waits for it) even though only readers hold the
// lock; when the old readers leave the writer gets it, and readers
// after it. A writer that gives up takes its intent back.
func TestAWaitingWriterHoldsNewReadersBack(t *testing.T) {
	l := newLocker(t, testutil.NewMiniCluster(t, 3).Nodes(), fastRetry(redlock.Config{}))
	rw := newRW(t, l)
	ctx := testutil.Context(t)
	r1, err := rw.TryAcquireShared(ctx)
	require.NoError(t, err)

	got := make(chan *redlock.Lease, 1)
	go func() {
		w, err := rw.Acquire(ctx)
		if err != nil {
			t.Errorf("writer: %v", err)
		}
		got <- w
	}()
	// The writer's intent stands on a majority: a reader can no longer find
	// a majority without it (one node is not enough to keep readers out).
	require.Eventually(t, func() bool {
		st, err := rw.Inspect(ctx)
		if err != nil {
			return false
		}
		waiting := 0
		for _, n := range st.Nodes {
			if n.WritersWaiting > 0 {
				waiting++
			}
		}
		return waiting >= 2 // a majority of the 3 nodes
	}, 10*time.Second, 5*time.Millisecond)
	_, err = rw.TryAcquireShared(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.Contains(t, err.Error(), "a writer waits for it")

	require.NoError(t, r1.Release(ctx))
	w := <-got
	require.NotNil(t, w)
	require.Greater(t, w.Fence(), r1.Fence())
	require.NoError(t, w.Release(ctx))
	require.Eventually(t, func() bool {
		st, err := rw.Inspect(ctx)
		return err == nil && st.WritersWaiting == 0
	}, 10*time.Second, 5*time.Millisecond, "the writer took its intent back")
	r2, err := rw.TryAcquireShared(ctx)
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = rw.Acquire(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, redlock.ErrNotAcquired)
	require.Eventually(t, func() bool {
		st, err := rw.Inspect(ctx)
		return err == nil && st.WritersWaiting == 0
	}, 10*time.Second, 5*time.Millisecond, "a writer that gave up took its intent back")
	require.NoError(t, r2.Release(ctx))
}

// TestAReaderWaitsForTheWritersRelease: AcquireShared waits while a writer
// holds the lock and is woken by its release (its backoff is an hour).
func TestAReaderWaitsForTheWritersRelease(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), slowPolling(redlock.Config{LeaseDuration: 5 * time.Second}))
	rw := newRW(t, l)
	ctx := testutil.Context(t)
	w, err := rw.TryAcquire(ctx)
	require.NoError(t, err)
	got := make(chan *redlock.Lease, 1)
	go func() {
		r, err := rw.AcquireShared(ctx)
		if err != nil {
			t.Errorf("reader: %v", err)
		}
		got <- r
	}()
	subscribed(t, c, l.Key("doc")+":rw", 1) // the reader waits for the announcement
	require.NoError(t, w.Release(ctx))
	r := <-got
	require.NotNil(t, r)
	require.Greater(t, r.Fence(), w.Fence())
}

// TestAWriterWaitsForTheReadersRelease: Acquire (a writer, in another
// Locker, as another process) waits while a reader holds the lock and is
// woken by the reader's release, which is announced on the read-write
// lock's channel: not by its backoff (an hour), the reader's TTL (30 s),
// nor its intent's renewal (every QueueTTL/3, 10 s).
func TestAWriterWaitsForTheReadersRelease(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	cfg := slowPolling(redlock.Config{LeaseDuration: 30 * time.Second})
	rl := newLocker(t, c.Nodes(), cfg)
	readers, writers := newRW(t, rl), newRW(t, newLocker(t, c.Nodes(), cfg))
	ctx := testutil.Context(t)
	r, err := readers.TryAcquireShared(ctx)
	require.NoError(t, err)
	got := make(chan *redlock.Lease, 1)
	go func() {
		w, err := writers.Acquire(ctx)
		if err != nil {
			t.Errorf("writer: %v", err)
		}
		got <- w
	}()
	require.Eventually(t, func() bool {
		st, err := readers.Inspect(ctx)
		return err == nil && st.WritersWaiting > 0
	}, 10*time.Second, 5*time.Millisecond, "the writer never waited")
	subscribed(t, c, rl.Key("doc")+":rw", 1) // the writer hears the release
	require.NoError(t, r.Release(ctx))
	select {
	case w := <-got:
		require.NotNil(t, w)
		require.Greater(t, w.Fence(), r.Fence())
		require.NoError(t, w.Release(ctx))
	case <-time.After(5 * time.Second):
		t.Fatal("the writer was not woken by the reader's release")
	}
}

// TestRWLeasesRenewAndFenceLikeMutexLeases: a reader's and a writer's
// lease renew (the lock outlives several lease durations), and a fence
// step settles a reader's token where the counters disagree.
func TestRWLeasesRenewAndFenceLikeMutexLeases(t *testing.T) {
	t.Parallel() // bound by the wall clock (leases, delays, hung nodes)
	c := testutil.NewMiniCluster(t, 3)
	// A 3 s lease, renewed with a third of its validity left: a second for
	// a renewal to land on a loaded machine (600 ms lapsed once in the KEYS
	// check's run beside two busy loops). Each lease is seen renewed (its
	// ValidUntil moves on) and still held.
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 3 * time.Second})
	renewed := func(ls *redlock.Lease) {
		t.Helper()
		first := ls.ValidUntil()
		require.Eventually(t, func() bool { return ls.ValidUntil().After(first) }, 10*time.Second, 10*time.Millisecond, "renewed")
		require.NoError(t, ls.Context().Err(), "held")
	}
	rw := newRW(t, l)
	ctx := testutil.Context(t)
	require.NoError(t, c.SetCounter(0, l.Key("doc")+":rw:fence", 1_000_000_000_000))
	r, err := rw.TryAcquireShared(ctx)
	require.NoError(t, err)
	require.Greater(t, r.Fence(), fencing.Token(1_000_000_000_000), "the highest counter, confirmed")
	renewed(r)
	require.NoError(t, r.Release(ctx))
	w, err := rw.TryAcquire(ctx)
	require.NoError(t, err)
	require.Greater(t, w.Fence(), r.Fence())
	renewed(w)
	require.NoError(t, w.Release(ctx))
}

// TestARWGrantCostsOneCallPerNode: a reader's and a writer's acquisition
// are one script call per node, like a mutex's.
func TestARWGrantCostsOneCallPerNode(t *testing.T) {
	nodes, calls := countedNodes(testutil.NewMiniCluster(t, 3).Nodes())
	l := newLocker(t, nodes, redlock.Config{})
	rw := newRW(t, l)
	ctx := testutil.Context(t)
	r, err := rw.TryAcquireShared(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Release(ctx))
	w, err := rw.TryAcquire(ctx)
	require.NoError(t, err)
	// TryAcquire returns at a majority: the third call may still be on
	// its way (the reader's were awaited by its release).
	require.Eventually(t, func() bool { return calls()[scripts.RWWrite] >= 3 }, 5*time.Second, time.Millisecond)
	got := calls()
	require.Equal(t, 3, got[scripts.RWRead])
	require.Equal(t, 3, got[scripts.RWWrite])
	require.NoError(t, w.Release(ctx))
}

// rwContention runs writers and readers on rw, checking that no writer
// ever overlaps another holder, that every writer's token exceeds every
// token accepted before, and readers' every writer's (fencing.RWFence).
func rwContention(t *testing.T, rw *redlock.RWLock, writers, readers, rounds int) {
	t.Helper()
	var wIn, rIn atomic.Int32
	var fence fencing.RWFence
	var wg sync.WaitGroup
	run := func(write bool) {
		for range rounds {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			var ls *redlock.Lease
			var err error
			if write {
				ls, err = rw.Acquire(ctx)
			} else {
				ls, err = rw.AcquireShared(ctx)
			}
			cancel()
			if err != nil {
				t.Errorf("acquire (writer %v): %v", write, err)
				return
			}
			if write {
				if wIn.Add(1) != 1 || rIn.Load() != 0 {
					t.Errorf("a writer overlaps another holder")
				}
				if err := fence.CheckWrite("doc", ls.Fence()); err != nil {
					t.Errorf("writer's token: %v", err)
				}
			} else {
				rIn.Add(1)
				if wIn.Load() != 0 {
					t.Errorf("a reader overlaps a writer")
				}
				if err := fence.CheckRead("doc", ls.Fence()); err != nil {
					t.Errorf("reader's token: %v", err)
				}
			}
			time.Sleep(time.Millisecond)
			if write {
				wIn.Add(-1)
			} else {
				rIn.Add(-1)
			}
			if err := ls.Release(context.Background()); err != nil {
				t.Errorf("release: %v", err)
			}
		}
	}
	for range writers {
		wg.Go(func() { run(true) })
	}
	for range readers {
		wg.Go(func() { run(false) })
	}
	wg.Wait()
}

// TestReadersAndWritersUnderContention: two writers and four readers on
// miniredis all finish, and never overlap wrongly.
func TestReadersAndWritersUnderContention(t *testing.T) {
	l := newLocker(t, testutil.NewMiniCluster(t, 3).Nodes(), fastRetry(redlock.Config{}))
	rwContention(t, newRW(t, l), 2, 4, 10)
}

// TestReadersAndWritersOnRealServers: the same on three redis-servers.
func TestReadersAndWritersOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 3)
	l := newLocker(t, c.Nodes(), fastRetry(redlock.Config{LeaseDuration: 2 * time.Second}))
	rwContention(t, newRW(t, l), 2, 4, 10)
}

// TestRWLockOnClusters: a read-write lock over three Redis Clusters (its
// keys share one slot).
func TestRWLockOnClusters(t *testing.T) {
	t.Parallel() // bound by the wall clock (servers starting, failing over, delays passing)
	if testing.Short() {
		t.Skip("integration test")
	}
	cs := startClusters(t, 3, 3)
	nodes := dialURLs(t, cs[0].URL(), cs[1].URL(), cs[2].URL())
	l := newLocker(t, nodes, redlock.Config{LeaseDuration: 5 * time.Second})
	rw := newRW(t, l)
	ctx := testutil.Context(t)
	r, err := rw.TryAcquireShared(ctx)
	require.NoError(t, err)
	_, err = rw.TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	st, err := rw.Inspect(ctx)
	require.NoError(t, err)
	require.Len(t, st.Readers, 1)
	require.NoError(t, r.Release(ctx))
	w, err := rw.TryAcquire(ctx)
	require.NoError(t, err)
	require.Greater(t, w.Fence(), r.Fence())
	require.NoError(t, w.Release(ctx))
}

// TestAnEvictedReaderKeyStillExcludesWriters: a reader's own key evicted
// (deleted on every node, as a volatile-* policy may, since it has a TTL)
// does not free the lock: the readers index still records the reader
// until the end of its lease, so a writer is refused ("readers hold it")
// until then, and Inspect still shows the reader (its owner unknown
// without its key).
func TestAnEvictedReaderKeyStillExcludesWriters(t *testing.T) {
	c, l, rw, r := deadReader(t)
	ctx := testutil.Context(t)
	for i := range c.Len() {
		c.Server(i).Del(l.Key("doc") + ":rw:reader:" + r.Token())
	}
	_, err := rw.TryAcquire(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.Contains(t, err.Error(), "1 readers hold it")
	st, err := rw.Inspect(ctx)
	require.NoError(t, err)
	require.Len(t, st.Readers, 1)
	require.Equal(t, r.Token(), st.Readers[0].Token)
	require.Empty(t, st.Readers[0].Owner)
	require.Positive(t, st.Readers[0].TTL)
	forward(c, 2*time.Second+5*time.Millisecond) // past the end the index records (rounded up to the ms)
	w, err := rw.TryAcquire(ctx)
	require.NoError(t, err, "free once the reader's lease ended")
	require.NoError(t, w.Release(ctx))
}

// readersIndex is the readers index key of l's read-write lock "doc".
func readersIndex(l *redlock.Locker) string { return l.Key("doc") + ":rw:readers" }

// TestADeadReadersIndexGoesWithItsLease: the readers index has a TTL that
// reaches its latest reader's end, so readers that die leave no index.
func TestADeadReadersIndexGoesWithItsLease(t *testing.T) {
	c, l, _, _ := deadReader(t)
	for i := range c.Len() {
		ttl := c.Server(i).TTL(readersIndex(l))
		require.Positive(t, ttl, "node %d: the index has a TTL", i)
		// its lease, counted from a TIME read a little later in the script
		// (slow under -race on a busy machine)
		require.LessOrEqual(t, ttl, 2*time.Second+100*time.Millisecond, "node %d: no longer than its reader's lease", i)
	}
	forward(c, 2*time.Second+100*time.Millisecond)
	for i := range c.Len() {
		require.False(t, c.Server(i).Exists(readersIndex(l)), "node %d: the index is gone with its reader's lease", i)
	}
}
