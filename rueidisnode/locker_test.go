package rueidisnode_test

import (
	"context"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/rueidisnode"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// testConfig is the default Config with the rejoin rule's wait off: the
// servers are fresh (the rule's checks still run in the scripts).
func testConfig() redlock.Config {
	return redlock.Config{RejoinDelay: -1}
}

func newLocker(t *testing.T, nodes []redlock.Node, cfg redlock.Config) *redlock.Locker {
	t.Helper()
	l, err := redlock.New(nodes, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestLockerOverRueidisNodes: a Locker over three rueidis nodes acquires,
// fences (the token grows from one lease to the next), refuses a second
// holder, and releases; the lock keys are gone from every server.
func TestLockerOverRueidisNodes(t *testing.T) {
	c := testutil.StartRedis(t, 3)
	l := newLocker(t, nodes(t, c), testConfig())
	other := newLocker(t, nodes(t, c), testConfig())
	ctx := context.Background()

	first, err := l.TryAcquire(ctx, "orders")
	require.NoError(t, err)
	require.NotZero(t, first.Fence())
	require.True(t, first.ValidUntil().After(time.Now()))

	// TryAcquire returns at a majority: its third call is awaited before
	// the other Locker tries (a try that reached that node first would hold
	// it for a moment, and its give-back could land after the release).
	require.Eventually(t, func() bool {
		st, err := other.Inspect(ctx, "orders")
		return err == nil && !slices.ContainsFunc(st.Nodes, func(ns redlock.NodeStatus) bool { return ns.Info.Token != first.Token() })
	}, 10*time.Second, 5*time.Millisecond, "every node holds the lock")
	_, err = other.TryAcquire(ctx, "orders")
	require.ErrorIs(t, err, redlock.ErrNotAcquired)

	require.NoError(t, first.Release(ctx))
	second, err := other.TryAcquire(ctx, "orders")
	require.NoError(t, err)
	require.Greater(t, second.Fence(), first.Fence(), "the fence grows from one lease to the next")

	var fence fencing.Fence
	require.NoError(t, fence.Check("orders", second.Fence()))
	require.Error(t, fence.Check("orders", first.Fence()), "the old holder's token is stale")

	require.NoError(t, second.Release(ctx))
	// Release returns at a majority: the third node's call may still be
	// on its way.
	for _, s := range c.Servers() {
		require.Eventually(t, func() bool {
			n, err := s.Do(ctx, "EXISTS", "redlock:{orders}").Int()
			return err == nil && n == 0
		}, 10*time.Second, 5*time.Millisecond, "the lock key is released on %s", s.Addr())
	}
}

// TestTheNodeNeedsNoGoRedis: package rueidisnode, and every package it
// depends on (redlock, scripts, fencing included), imports no go-redis: a
// rueidis user's build has no second Redis client. (Its tests import
// testutil, which starts the servers with go-redis.)
func TestTheNodeNeedsNoGoRedis(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/redis/rueidis")
	require.Contains(t, deps, "github.com/e6344662/go-redlock/redlock")
	for _, d := range deps {
		require.False(t, strings.HasPrefix(d, "github.com/redis/go-redis"), "rueidisnode depends on %s", d)
	}
}

// goroutine returns the calling goroutine's number, from its stack's
// first line ("goroutine N [running]:").
func goroutine() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	return strings.Fields(string(buf))[1]
}

// callerNode records the goroutines that call its Eval; it forwards
// BoundedByContext, as its embedded Node's.
type callerNode struct {
	*rueidisnode.Node
	mu      sync.Mutex
	callers map[string]bool
}

func (n *callerNode) Eval(ctx context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	n.mu.Lock()
	n.callers[goroutine()] = true
	n.mu.Unlock()
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestALoneNodeIsCalledInline: a Locker over one rueidis node takes,
// fences and releases a lock, calling the node in the caller's goroutine:
// the node says its calls are bounded by their contexts (NodeBounded).
func TestALoneNodeIsCalledInline(t *testing.T) {
	c := testutil.StartRedis(t, 1)
	n := &callerNode{Node: dial(t, c.URLs()[0]), callers: map[string]bool{}}
	l := newLocker(t, []redlock.Node{n}, testConfig())
	ctx := context.Background()
	first, err := l.TryAcquire(ctx, "solo")
	require.NoError(t, err)
	require.NoError(t, first.Release(ctx))
	second, err := l.TryAcquire(ctx, "solo")
	require.NoError(t, err)
	require.Greater(t, second.Fence(), first.Fence())
	require.NoError(t, second.Release(ctx))
	n.mu.Lock()
	defer n.mu.Unlock()
	require.Equal(t, map[string]bool{goroutine(): true}, n.callers, "every call in the test's goroutine")
}

// TestContendedHandOverOverRueidisNodes: workers on separate Lockers (as
// separate processes) contend for one resource with Acquire over three
// rueidis nodes; the lock passes from one to the next, never to two at
// once, with strictly increasing fencing tokens.
func TestContendedHandOverOverRueidisNodes(t *testing.T) {
	c := testutil.StartRedis(t, 3)
	const workers, rounds = 4, 10
	var (
		mu     sync.Mutex
		inside int
		fence  fencing.Fence
		tokens []fencing.Token
		wg     sync.WaitGroup
	)
	for range workers {
		l := newLocker(t, nodes(t, c), testConfig())
		wg.Go(func() {
			for range rounds {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				lease, err := l.Acquire(ctx, "contended")
				cancel()
				if err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				mu.Lock()
				inside++
				if inside != 1 {
					t.Errorf("%d holders at once", inside)
				}
				if err := fence.Check("contended", lease.Fence()); err != nil {
					t.Errorf("a new holder's token was refused: %v", err)
				}
				tokens = append(tokens, lease.Fence())
				inside--
				mu.Unlock()
				if err := lease.Release(context.Background()); err != nil {
					t.Errorf("release: %v", err)
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, tokens, workers*rounds)
	for i := 1; i < len(tokens); i++ {
		require.Greater(t, tokens[i], tokens[i-1])
	}
}
