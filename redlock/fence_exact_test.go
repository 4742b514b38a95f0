package redlock_test

import (
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// store is raw access to the keys of a set of nodes, miniredis or real
// redis-server, for tests that must hold on both: miniredis runs the
// scripts in gopher-lua, Redis in its own Lua 5.1, and the two convert
// numbers differently.
type store struct {
	nodes []redlock.Node
	set   func(t *testing.T, i int, key, value string)
	// get returns key's value on node i, "" and false when it is absent.
	get func(t *testing.T, i int, key string) (string, bool)
}

// onBoth runs body on three miniredis nodes and on three real
// redis-server nodes (skipped in -short mode or without redis-server).
func onBoth(t *testing.T, body func(t *testing.T, s store)) {
	t.Run("miniredis", func(t *testing.T) {
		c := testutil.NewMiniCluster(t, 3)
		body(t, store{
			nodes: c.Nodes(),
			set:   func(t *testing.T, i int, key, value string) { require.NoError(t, c.Set(i, key, value)) },
			get: func(t *testing.T, i int, key string) (string, bool) {
				if !c.Server(i).Exists(key) {
					return "", false
				}
				v, err := c.Get(i, key)
				require.NoError(t, err)
				return v, true
			},
		})
	})
	t.Run("redis-server", func(t *testing.T) {
		if testing.Short() {
			t.Skip("integration test")
		}
		c := testutil.StartRedis(t, 3)
		body(t, store{
			nodes: c.Nodes(),
			set: func(t *testing.T, i int, key, value string) {
				require.NoError(t, c.Server(i).Do(testutil.Context(t), "SET", key, value).Err())
			},
			get: func(t *testing.T, i int, key string) (string, bool) {
				v, err := c.Server(i).Do(testutil.Context(t), "GET", key).Result()
				if v == nil && err != nil && err.Error() == "redis: nil" {
					return "", false
				}
				require.NoError(t, err)
				return v.(string), true
			},
		})
	})
}

// TestFenceTokensAreExactAbove2To53: fence counters travel as exact
// decimals, never as Lua numbers (doubles, exact only up to 2^53). On one
// node, two successive holders get counters exactly one apart however
// large the counter, a repeated acquire call answers the same counter, and
// Fence and Inspect write and read it exactly. Through a Locker, each
// lease's token is the counter the nodes hold, and the next holder's is
// greater (exactly one more when neither acquisition needed a retry).
func TestFenceTokensAreExactAbove2To53(t *testing.T) {
	onBoth(t, func(t *testing.T, s store) {
		ctx := testutil.Context(t)
		// (9_999..98: the second holder's counter carries into a new digit;
		// all are above the nodes' clocks in µs, below which counters are
		// raised to the node's trust floor, docs/design.md §6.2.)
		starts := []uint64{9_999_999_999_999_998, 99_999_999_999_999_998, 999_999_999_999_999_998, 1<<53 + 1, 1<<53 + 2, 1<<53 + 4, math.MaxInt64 - 2}

		node := s.nodes[0]
		for _, start := range starts {
			key := "redlock:{node-" + strconv.FormatUint(start, 10) + "}"
			s.set(t, 0, key+":fence", strconv.FormatUint(start, 10))
			for range 2 { // the second call is a client-side retry
				g, err := redlock.NodeAcquire(ctx, node, key, tokenA, "a", time.Minute)
				require.NoError(t, err)
				require.True(t, g.OK)
				require.Equal(t, fencing.Token(start+1), g.Counter, "first holder after %d", start)
			}
			ok, err := redlock.NodeRelease(ctx, node, key, tokenA)
			require.NoError(t, err)
			require.True(t, ok)
			g, err := redlock.NodeAcquire(ctx, node, key, tokenB, "b", time.Minute)
			require.NoError(t, err)
			require.True(t, g.OK)
			require.Equal(t, fencing.Token(start+2), g.Counter, "second holder after %d", start)
			v, _ := s.get(t, 0, key+":fence")
			require.Equal(t, strconv.FormatUint(start+2, 10), counterValue(v))
			info, err := redlock.NodeInspect(ctx, node, key)
			require.NoError(t, err)
			require.Equal(t, fencing.Token(start+2), info.Fence)
		}
		const key = "redlock:{node-fence}"
		s.set(t, 0, key+":fence", "1")
		_, err := redlock.NodeAcquire(ctx, node, key, tokenA, "a", time.Minute)
		require.NoError(t, err)
		ok, err := redlock.NodeFence(ctx, node, key, tokenA, 1<<53+7)
		require.NoError(t, err)
		require.True(t, ok)
		v, _ := s.get(t, 0, key+":fence")
		require.Equal(t, strconv.FormatUint(1<<53+7, 10), counterValue(v))
		info, err := redlock.NodeInspect(ctx, node, key)
		require.NoError(t, err)
		require.Equal(t, fencing.Token(1<<53+7), info.Fence)

		var mu sync.Mutex
		attempts := map[string]int{}
		l := newLocker(t, s.nodes, redlock.Config{Observer: redlock.ObserverFunc(func(e redlock.Event) {
			if e.Kind == redlock.EventAttempt {
				mu.Lock()
				attempts[e.Resource]++
				mu.Unlock()
			}
		})})
		// holds requires the nodes that granted ls (a majority; the others
		// may still be answering) to hold exactly its token as the counter,
		// and Inspect to read their counters exactly.
		holds := func(t *testing.T, ls *redlock.Lease) {
			t.Helper()
			st, err := l.Inspect(ctx, ls.Resource())
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(ls.Granted()), len(st.Nodes)/2+1)
			for i, ns := range st.Nodes {
				if !slices.Contains(ls.Granted(), ns.Addr) {
					continue
				}
				v, _ := s.get(t, i, l.Key(ls.Resource())+":fence")
				require.Equal(t, ls.Fence().String(), counterValue(v), "node %d holds the token as its counter", i)
				require.NoError(t, ns.Err)
				require.Equal(t, ls.Fence(), ns.Info.Fence, "node %d: Inspect reads the counter exactly", i)
			}
		}
		for _, start := range starts {
			t.Run(strconv.FormatUint(start, 10), func(t *testing.T) {
				res := "exact-" + strconv.FormatUint(start, 10)
				for i := range s.nodes {
					s.set(t, i, l.Key(res)+":fence", strconv.FormatUint(start, 10))
				}
				a, err := tryAcquire(t, l, res)
				require.NoError(t, err)
				holds(t, a)
				require.NoError(t, a.Release(ctx))
				b, err := tryAcquire(t, l, res)
				require.NoError(t, err)
				holds(t, b)
				require.Greater(t, b.Fence(), a.Fence(), "the next holder's token is greater")
				require.NoError(t, b.Release(ctx))
				mu.Lock()
				n := attempts[res]
				mu.Unlock()
				if n == 2 { // no retry: nothing else counted
					require.Equal(t, fencing.Token(start+1), a.Fence())
					require.Equal(t, fencing.Token(start+2), b.Fence())
				} else {
					t.Logf("%d attempts (timeouts on a busy machine): tokens %d and %d", n, a.Fence(), b.Fence())
				}
			})
		}
	})
}

// TestFenceCounterAtMaxRefusesBeforeLocking: a counter at 2^63-1 cannot be
// incremented. The acquire fails with ErrFenceExhausted before anything is
// written (no lock key left behind, the counter unchanged), and Acquire
// returns at once instead of retrying what waiting cannot change. A
// counter beyond 2^63-1 is not a counter Redis can increment at all: a
// wrong-type error, again with nothing written.
func TestFenceCounterAtMaxRefusesBeforeLocking(t *testing.T) {
	onBoth(t, func(t *testing.T, s store) {
		ctx := testutil.Context(t)
		l := newLocker(t, s.nodes, fastRetry(redlock.Config{}))
		const maxCounter = "9223372036854775807"
		fenceKey := l.Key("full") + ":fence"
		for i := range s.nodes {
			s.set(t, i, fenceKey, maxCounter)
		}
		requireUntouched := func(t *testing.T) {
			t.Helper()
			for i := range s.nodes {
				_, held := s.get(t, i, l.Key("full"))
				require.False(t, held, "node %d: no lock key left behind", i)
				v, _ := s.get(t, i, fenceKey)
				require.Equal(t, maxCounter, v, "node %d: counter unchanged", i)
			}
		}

		_, err := redlock.NodeAcquire(ctx, s.nodes[0], l.Key("full"), tokenA, "a", time.Minute)
		requireUntouched(t)
		require.ErrorIs(t, err, redlock.ErrFenceExhausted)

		_, err = tryAcquire(t, l, "full")
		require.ErrorIs(t, err, redlock.ErrFenceExhausted)
		var ae *redlock.AcquireError
		require.ErrorAs(t, err, &ae)
		require.NotErrorIs(t, err, redlock.ErrNotAcquired)
		require.NotErrorIs(t, err, redlock.ErrNoQuorum)
		requireUntouched(t)

		start := time.Now()
		_, err = l.Acquire(ctx, "full")
		require.ErrorIs(t, err, redlock.ErrFenceExhausted)
		require.NoError(t, ctx.Err(), "Acquire gave up at once, not at its deadline")
		require.Less(t, time.Since(start), testutil.DefaultTestTimeout/2)
		requireUntouched(t)

		over := "9223372036854775808"
		s.set(t, 0, l.Key("over")+":fence", over)
		_, err = redlock.NodeAcquire(ctx, s.nodes[0], l.Key("over"), tokenA, "a", time.Minute)
		require.ErrorIs(t, err, redlock.ErrWrongType)
		_, held := s.get(t, 0, l.Key("over"))
		require.False(t, held, "no lock key left behind")
		v, _ := s.get(t, 0, l.Key("over")+":fence")
		require.Equal(t, over, v)
	})
}
