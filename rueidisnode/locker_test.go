package rueidisnode_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/redlock"
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
	for _, s := range c.Servers() {
		keys, err := s.Do(ctx, "KEYS", "*orders*").StringSlice()
		require.NoError(t, err)
		for _, k := range keys {
			require.NotEqual(t, "redlock:{orders}", k, "the lock key is released on %s", s.Addr())
		}
	}
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
