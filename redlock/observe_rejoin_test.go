package redlock_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/testutil"
)

// TestFirstAcquireOnFreshServersSaysWhyItWaits (issue 35 item 7): a
// library user's first Acquire on servers just started sits out their
// rejoin delay; with a Logger (any level down to info) it says so at the
// start of the wait, once, with the reason and how long, long before the
// lock is granted.
func TestFirstAcquireOnFreshServersSaysWhyItWaits(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	t.Parallel()
	c := testutil.StartRedis(t, 3, testutil.WithConfig("appendonly no"))
	ctx := testutil.Context(t)
	// testutil vouches for the servers it starts; this test is about their
	// first use, with no marker yet (Safety v4, design §6.2).
	for _, s := range c.Servers() {
		require.NoError(t, s.Do(ctx, "DEL", testutil.DefaultMarker).Err())
	}
	nodes, err := redisnode.Dial(ctx, c.URLs()...)
	require.NoError(t, err)
	defer nodes.Close()

	const delay = 3 * time.Second
	var mu sync.Mutex
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logs, &mu}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	logged := func() string {
		mu.Lock()
		defer mu.Unlock()
		return logs.String()
	}
	l := newLocker(t, nodes, redlock.Config{LeaseDuration: delay, RejoinDelay: delay, Logger: logger})
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		lease, err := l.Acquire(ctx, "fresh")
		if err == nil {
			err = lease.Release(ctx)
		}
		done <- err
	}()
	require.Eventually(t, func() bool { return strings.Contains(logged(), "waiting up to") }, delay, time.Millisecond)
	require.Less(t, time.Since(start), delay/2, "said at the start of the wait, not after it")
	line := logged()
	require.Contains(t, line, "level=INFO")
	require.Contains(t, line, "resource=fresh")
	require.Contains(t, line, "rejoining")
	require.Contains(t, line, "Config.RejoinDelay")
	require.NoError(t, <-done)
	require.Equal(t, 1, strings.Count(logged(), "waiting up to"), "said once per Acquire")
}
