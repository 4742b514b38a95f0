package redlock_test

import (
	"context"
	"fmt"
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

func TestAcquireAllBadInput(t *testing.T) {
	l := newLocker(t, testutil.NewMiniCluster(t, 3).Nodes(), redlock.Config{})
	tooMany := make([]string, redlock.MaxAcquireAll+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprint("r", i)
	}
	for _, tc := range []struct {
		name      string
		resources []string
	}{
		{"none", nil},
		{"a resource named twice", []string{"a", "b", "a"}},
		{"an empty name", []string{"a", ""}},
		{"a name starting with }", []string{"}a"}},
		{"a name too long", []string{strings.Repeat("x", redlock.MaxResourceLen+1)}},
		{"too many", tooMany},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := l.AcquireAll(testutil.Context(t), tc.resources...)
			require.ErrorIs(t, err, redlock.ErrInvalidResource)
			_, err = l.TryAcquireAll(testutil.Context(t), tc.resources...)
			require.ErrorIs(t, err, redlock.ErrInvalidResource)
		})
	}
}

// TestAcquireAllGivesOneLeasePerResourceInOrder: the leases come back in
// the order asked, each an ordinary lease on its resource (held on the
// nodes under its own token, refused to others, released on its own), and
// each fencing token exceeds the resource's earlier leases'.
func TestAcquireAllGivesOneLeasePerResourceInOrder(t *testing.T) {
	l := newLocker(t, testutil.NewMiniCluster(t, 3).Nodes(), redlock.Config{})
	ctx := testutil.Context(t)
	before, err := l.TryAcquire(ctx, "b")
	require.NoError(t, err)
	require.NoError(t, before.Release(ctx))

	names := []string{"c", "a", "b"}
	leases, err := l.AcquireAll(ctx, names...)
	require.NoError(t, err)
	require.Len(t, leases, 3)
	tokens := map[string]bool{}
	for k, ls := range leases {
		require.Equal(t, names[k], ls.Resource())
		require.False(t, tokens[ls.Token()], "each lease has its own token")
		tokens[ls.Token()] = true
		st, err := l.Inspect(ctx, names[k])
		require.NoError(t, err)
		require.Equal(t, redlock.Held, st.State)
		require.Equal(t, ls.Token(), st.Holder.Token)
		_, err = l.TryAcquire(ctx, names[k])
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
	}
	require.Greater(t, leases[2].Fence(), before.Fence())

	require.NoError(t, leases[1].Release(ctx))
	again, err := l.TryAcquire(ctx, "a")
	require.NoError(t, err, "a released lease frees its resource alone")
	require.NoError(t, again.Release(ctx))
	for _, ls := range []*redlock.Lease{leases[0], leases[2]} {
		require.NoError(t, ls.Context().Err())
		require.NoError(t, ls.Release(ctx))
	}
}

// callCounter counts each node's script calls, by script.
type callCounter struct {
	redlock.Node
	mu    *sync.Mutex
	calls map[*scripts.Script]int
}

func (n callCounter) Eval(ctx context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	n.mu.Lock()
	n.calls[s]++
	n.mu.Unlock()
	return n.Node.Eval(ctx, s, keys, args...)
}

// countedNodes wraps nodes in callCounters sharing one count.
func countedNodes(nodes []redlock.Node) ([]redlock.Node, func() map[*scripts.Script]int) {
	var mu sync.Mutex
	calls := map[*scripts.Script]int{}
	out := make([]redlock.Node, len(nodes))
	for i, n := range nodes {
		out[i] = callCounter{Node: n, mu: &mu, calls: calls}
	}
	return out, func() map[*scripts.Script]int {
		mu.Lock()
		defer mu.Unlock()
		snap := map[*scripts.Script]int{}
		for s, c := range calls {
			snap[s] = c
		}
		return snap
	}
}

// TestAcquireAllOfFreeResourcesCostsOneCallPerNode: eight free resources
// are taken with one script call per node, not eight.
func TestAcquireAllOfFreeResourcesCostsOneCallPerNode(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	// One instant on every node: fresh counters start from the node's
	// clock (its second), so nodes whose scripts ran either side of a
	// second boundary would disagree and need the fence step.
	now := time.Now()
	for i := range c.Len() {
		c.Server(i).SetTime(now)
	}
	nodes, calls := countedNodes(c.Nodes())
	l := newLocker(t, nodes, redlock.Config{})
	names := make([]string, 8)
	for i := range names {
		names[i] = fmt.Sprint("job-", i)
	}
	leases, err := l.TryAcquireAll(testutil.Context(t), names...)
	require.NoError(t, err)
	require.Len(t, leases, 8)
	// TryAcquireAll returns at a majority: the third call may still be on
	// its way.
	require.Eventually(t, func() bool { return calls()[scripts.AcquireAll] >= 3 }, 5*time.Second, time.Millisecond)
	got := calls()
	require.Equal(t, 3, got[scripts.AcquireAll], "one acquire_all per node")
	require.Zero(t, got[scripts.Acquire])
	require.Zero(t, got[scripts.Fence], "fresh counters agree: no fence step")
}

// TestFailedTryAcquireAllLeavesNothingHeld: with one resource busy,
// TryAcquireAll is refused (ErrNotAcquired, naming the busy one) and, when
// it returns, none of the others is held on any node.
func TestFailedTryAcquireAllLeavesNothingHeld(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), redlock.Config{})
	ctx := testutil.Context(t)
	busy, err := l.TryAcquire(ctx, "b")
	require.NoError(t, err)
	_, err = l.TryAcquireAll(ctx, "a", "b", "c")
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.Contains(t, err.Error(), `"b" is held`)
	for _, name := range []string{"a", "c"} {
		for i := range c.Len() {
			_, err := c.Get(i, l.Key(name))
			require.Error(t, err, "%s is held on node %d", name, i)
		}
	}
	require.NoError(t, busy.Release(ctx))
	leases, err := l.TryAcquireAll(ctx, "a", "b", "c")
	require.NoError(t, err)
	require.Len(t, leases, 3)
}

// TestAMinorityGrantOfAllIsGivenBack: a node that granted every lock of a
// set whose attempt failed elsewhere gives them all back.
func TestAMinorityGrantOfAllIsGivenBack(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), redlock.Config{})
	ctx := testutil.Context(t)
	// "b" held on nodes 1 and 2 only, by someone else.
	for i := 1; i < 3; i++ {
		require.NoError(t, c.Set(i, l.Key("b"), "0123456789abcdef0123456789abcdef other"))
	}
	_, err := l.TryAcquireAll(ctx, "a", "b")
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	for _, name := range []string{"a", "b"} {
		_, err := c.Get(0, l.Key(name))
		require.Error(t, err, "node 0 still holds %s", name)
	}
}

// TestAcquireAllWaitsForTheBusyResource: AcquireAll of a set with one
// busy resource gets the whole set once it is released, woken by the
// release (its backoff is an hour).
func TestAcquireAllWaitsForTheBusyResource(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), slowPolling(redlock.Config{LeaseDuration: 5 * time.Second}))
	ctx := testutil.Context(t)
	busy, err := l.TryAcquire(ctx, "y")
	require.NoError(t, err)
	got := make(chan []*redlock.Lease, 1)
	go func() {
		leases, err := l.AcquireAll(ctx, "x", "y", "z")
		if err != nil {
			t.Errorf("AcquireAll: %v", err)
		}
		got <- leases
	}()
	subscribed(t, c, l.Key("y"), 1) // it waits for the release's announcement
	require.NoError(t, busy.Release(ctx))
	leases := <-got
	require.Len(t, leases, 3)
	require.Greater(t, leases[1].Fence(), busy.Fence())
}

// TestAcquireAllEndsWithItsContext: a context ending while AcquireAll
// waits is reported as such, never as ErrNotAcquired, and nothing is held.
func TestAcquireAllEndsWithItsContext(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), fastRetry(redlock.Config{}))
	busy, err := l.TryAcquire(testutil.Context(t), "q")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(testutil.Context(t), 100*time.Millisecond)
	defer cancel()
	_, err = l.AcquireAll(ctx, "p", "q")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, redlock.ErrNotAcquired)
	require.NoError(t, busy.Release(testutil.Context(t)))
}

// overlapping runs two callers taking overlapping sets in opposite orders
// rounds times each, checking that no resource ever has two holders and
// that both finish.
func overlapping(t *testing.T, l *redlock.Locker, rounds int) {
	t.Helper()
	sets := [][]string{{"r1", "r2", "r3"}, {"r3", "r2", "r1", "r4"}}
	var inside [5]atomic.Int32
	var fence fencing.Fence
	var wg sync.WaitGroup
	for _, set := range sets {
		wg.Go(func() {
			for range rounds {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				leases, err := l.AcquireAll(ctx, set...)
				cancel()
				if err != nil {
					t.Errorf("AcquireAll(%v): %v", set, err)
					return
				}
				for _, ls := range leases {
					if err := fence.Check(ls.Resource(), ls.Fence()); err != nil {
						t.Errorf("fence: %v", err)
					}
					k := ls.Resource()[1] - '0'
					if inside[k].Add(1) != 1 {
						t.Errorf("two holders of %s", ls.Resource())
					}
				}
				time.Sleep(time.Millisecond)
				for _, ls := range leases {
					inside[ls.Resource()[1]-'0'].Add(-1)
					if err := ls.Release(context.Background()); err != nil {
						t.Errorf("release: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
}

// TestAcquireAllInOppositeOrdersBothFinish: two callers asking for
// overlapping sets in opposite orders both finish, and never share a
// resource.
func TestAcquireAllInOppositeOrdersBothFinish(t *testing.T) {
	t.Parallel() // bound by the wall clock (leases, delays, hung nodes)
	l := newLocker(t, testutil.NewMiniCluster(t, 3).Nodes(), fastRetry(redlock.Config{}))
	overlapping(t, l, 30)
}

// TestAcquireAllOnRealServers: the same on three redis-server processes,
// with a held resource outside the sets refused to AcquireAll's callers.
func TestAcquireAllOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 3)
	l := newLocker(t, c.Nodes(), fastRetry(redlock.Config{LeaseDuration: 2 * time.Second}))
	overlapping(t, l, 30)
	busy, err := l.TryAcquire(testutil.Context(t), "r9")
	require.NoError(t, err)
	_, err = l.TryAcquireAll(testutil.Context(t), "r8", "r9")
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	st, err := l.Inspect(testutil.Context(t), "r8")
	require.NoError(t, err)
	require.Equal(t, redlock.Free, st.State)
	require.NoError(t, busy.Release(testutil.Context(t)))
}

// TestAcquireAllAcrossClusterSlots: on Redis Cluster nodes, resources in
// different hash slots (on different shards) are taken all or none: one
// call per slot group, a refused group giving the earlier ones back.
func TestAcquireAllAcrossClusterSlots(t *testing.T) {
	t.Parallel() // bound by the wall clock (servers starting, failing over, delays passing)
	if testing.Short() {
		t.Skip("integration test")
	}
	cs := startClusters(t, 3, 3)
	nodes := dialURLs(t, cs[0].URL(), cs[1].URL(), cs[2].URL())
	l := newLocker(t, nodes, redlock.Config{LeaseDuration: 5 * time.Second})
	ctx := testutil.Context(t)
	names := make([]string, 6)
	shards := map[int]bool{}
	for i := range names {
		names[i] = fmt.Sprint("job-", i)
		shards[cs[0].ShardForKey(l.Key(names[i]))] = true
	}
	require.Greater(t, len(shards), 1, "the names must span shards")
	leases, err := l.TryAcquireAll(ctx, names...)
	require.NoError(t, err)
	for k, ls := range leases {
		st, err := l.Inspect(ctx, names[k])
		require.NoError(t, err)
		require.Equal(t, ls.Token(), st.Holder.Token)
	}
	// One slot group busy: the groups granted before it are given back.
	last := names[len(names)-1]
	require.NoError(t, leases[len(leases)-1].Release(ctx))
	for _, ls := range leases[:len(leases)-1] {
		require.NoError(t, ls.Release(ctx))
	}
	busy, err := l.TryAcquire(ctx, last)
	require.NoError(t, err)
	_, err = l.TryAcquireAll(ctx, names...)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	for _, name := range names[:len(names)-1] {
		st, err := l.Inspect(ctx, name)
		require.NoError(t, err)
		require.Equal(t, redlock.Free, st.State, "%s left held", name)
	}
	require.NoError(t, busy.Release(ctx))
	leases, err = l.AcquireAll(ctx, names...)
	require.NoError(t, err)
	require.Len(t, leases, len(names))
}
