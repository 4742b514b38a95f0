package redlock_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// silentNode is a user's Node over a real server that reports no uptime
// (redlock.Uptime{}), as the minimal Node of docs/library.md may.
type silentNode struct{ redlock.Node }

func (silentNode) Uptime(context.Context) (redlock.Uptime, error) { return redlock.Uptime{}, nil }

// TestAHandOverThroughASilentNodeKeepsTheRejoinRule: a release that hands
// the lock over to a queued waiter, through Nodes that report no uptime,
// on servers that lost their markers (a loss), sits the nodes out for the
// Locker's rejoin delay like any other grant: the new markers do not vouch
// at once, and the waiter is not handed the lock. (The hand-over once sent
// "the rule off" to a node without an uptime, and each node vouched for
// itself in the release.)
func TestAHandOverThroughASilentNodeKeepsTheRejoinRule(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := ctxFor(t)
	c := testutil.StartRedis(t, 3)
	nodes := make([]redlock.Node, 3)
	for i, n := range c.Nodes() {
		nodes[i] = silentNode{n}
	}
	const delay = 20 * time.Second
	l := newLocker(t, nodes, redlock.Config{LeaseDuration: 5 * time.Second, RejoinDelay: delay})
	a, err := l.TryAcquire(ctx, "r")
	require.NoError(t, err)

	waiter := make(chan error, 1)
	wctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() {
		b, err := l.Acquire(wctx, "r")
		if err == nil {
			err = b.Release(context.Background())
		}
		waiter <- err
	}()
	key := l.Key("r")
	require.Eventually(t, func() bool {
		for _, s := range c.Servers() {
			if s.Client().ZCard(ctx, key+":queue").Val() != 1 {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "the waiter is queued on every node")

	for _, s := range c.Servers() {
		require.NoError(t, s.Client().Del(ctx, testutil.DefaultMarker).Err())
	}
	require.NoError(t, a.Release(ctx))
	for _, s := range c.Servers() {
		var marker string
		require.Eventually(t, func() bool {
			marker = s.Client().Get(ctx, testutil.DefaultMarker).Val()
			return marker != ""
		}, 10*time.Second, 5*time.Millisecond, "the release wrote a new marker on %s", s.Addr())
		fields := strings.Fields(marker)
		require.GreaterOrEqual(t, len(fields), 5, marker)
		from, err := strconv.ParseInt(fields[2], 10, 64)
		require.NoError(t, err, marker)
		now, err := s.Client().Time(ctx).Result()
		require.NoError(t, err)
		require.Greater(t, from, now.Add(delay/2).UnixMicro(), "%s sits out the rejoin delay: %s", s.Addr(), marker)
		require.NotEqual(t, "-", fields[4], "the marker says why it waits")
		got, _ := s.Client().Get(ctx, key).Result()
		require.Empty(t, got, "%s did not hand the lock over", s.Addr())
	}
	select {
	case err := <-waiter:
		t.Fatalf("the waiter ended during the sit-out: %v", err)
	default:
	}
	cancel()
	require.ErrorIs(t, <-waiter, context.Canceled)
}
