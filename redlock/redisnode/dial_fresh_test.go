package redisnode_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/testutil"
)

// TestDialToFreshServersSaysWhyItWaits: a newcomer's first run, Dial on
// servers just started without AOF. A waiting Acquire sits out their
// rejoin delay, and says so at once rather than after the wait: the first
// attempt's Observer event carries ErrRejoining with each node's reason,
// long before the lock is granted.
func TestDialToFreshServersSaysWhyItWaits(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3, testutil.WithConfig("appendonly no"))
	ctx := testutil.Context(t)
	for _, s := range c.Servers() { // fresh: no marker (testutil vouches for its servers)
		require.NoError(t, s.Do(ctx, "DEL", testutil.DefaultMarker).Err())
	}
	nodes, err := redisnode.Dial(ctx, c.URLs()...)
	require.NoError(t, err)
	defer nodes.Close()

	const delay = 4 * time.Second
	first := make(chan error, 1)
	l := newLocker(t, nodes, redlock.Config{LeaseDuration: delay, RejoinDelay: delay, Observer: redlock.ObserverFunc(func(e redlock.Event) {
		if e.Kind == redlock.EventAttempt {
			select {
			case first <- e.Err:
			default:
			}
		}
	})})
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		lease, err := l.Acquire(ctx, "fresh")
		if err == nil {
			err = lease.Release(ctx)
		}
		done <- err
	}()

	select {
	case err := <-first:
		said := time.Since(start)
		require.ErrorIs(t, err, redlock.ErrRejoining)
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
		require.ErrorContains(t, err, "marker key is missing")
		var ae *redlock.AcquireError
		require.True(t, errors.As(err, &ae))
		require.Less(t, said, delay/2, "said at the first attempt, not after the delay")
	case <-ctx.Done():
		t.Fatal("no attempt reported")
	}
	require.NoError(t, <-done)
	require.Greater(t, time.Since(start), delay/2, "the delay was sat out")
}
