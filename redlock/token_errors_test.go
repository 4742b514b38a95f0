package redlock_test

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/internal/redact"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// quotedHex matches a quoted argument that starts with more hex digits
// than redact lets through: a whole lock token, or a part of one long
// enough to matter.
var quotedHex = regexp.MustCompile(`'[0-9a-fA-F]{9,}`)

// requireNoToken fails if msg holds token, or any part of it longer than
// the prefix redact shows.
func requireNoToken(t *testing.T, msg, token string) {
	t.Helper()
	require.NotContains(t, msg, token[:redact.TokenPrefixLen+1], "a token (or part of one) in %q", msg)
}

// TestNodeErrorsNeverHoldTheToken: a server that does not know EVALSHA (a
// renamed command here; a Sentinel port given as a node answers alike)
// replies "unknown command 'EVALSHA', with args beginning with: ..." and
// quotes the lock token among the arguments, whole or cut short at 128
// bytes. Every error a node returns, and every error a Locker returns or
// reports to its Observer, is cleaned of it.
func TestNodeErrorsNeverHoldTheToken(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := testutil.Context(t)
	// FCALL too: redisnode runs the scripts as functions where it can.
	c := testutil.StartRedis(t, 3, testutil.WithConfig(`rename-command EVALSHA ""`, `rename-command EVAL ""`, `rename-command FCALL ""`))
	const token = "0123456789abcdef0123456789abcdef"

	// Redis quotes 128 bytes of arguments: a short key leaves room for the
	// whole token, a medium one cuts the list short inside the token (in
	// acquire), a long one inside the token in renew and release.
	for _, resource := range []string{"r", "medium-name", "a-name-long-enough-to-push-the-token-out"} {
		key := "redlock:{" + resource + "}"
		node := c.Server(0).Node()
		_, err := redlock.NodeAcquire(ctx, node, key, token, "owner", time.Second)
		require.Error(t, err)
		require.Contains(t, err.Error(), "unknown command")
		requireNoToken(t, err.Error(), token)
		_, err = redlock.NodeRenew(ctx, node, key, token, time.Second)
		require.Error(t, err)
		requireNoToken(t, err.Error(), token)
		_, err = redlock.NodeRelease(ctx, node, key, token)
		require.Error(t, err)
		requireNoToken(t, err.Error(), token)
		_, err = redlock.NodeFence(ctx, node, key, token, 12345)
		require.Error(t, err)
		requireNoToken(t, err.Error(), token)
	}

	var mu sync.Mutex
	var events []string
	l := newLocker(t, c.Nodes(), redlock.Config{Observer: redlock.ObserverFunc(func(e redlock.Event) {
		if e.Err != nil {
			mu.Lock()
			events = append(events, e.Err.Error())
			mu.Unlock()
		}
	})})
	var errs []string
	for _, resource := range []string{"r", "medium-name"} {
		_, err := l.TryAcquire(ctx, resource)
		require.ErrorIs(t, err, redlock.ErrNoQuorum)
		errs = append(errs, err.Error())
		_, err = l.Renew(ctx, resource, token)
		require.Error(t, err)
		requireNoToken(t, err.Error(), token)
		errs = append(errs, err.Error())
		err = l.Release(ctx, resource, token)
		require.Error(t, err)
		requireNoToken(t, err.Error(), token)
		errs = append(errs, err.Error())
	}
	require.NoError(t, l.Close())
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, events)
	all := append(errs, events...)
	require.Contains(t, strings.Join(all, "\n"), "unknown command")
	for _, msg := range all {
		require.False(t, quotedHex.MatchString(msg), "a token (or part of one) in %q", msg)
		requireNoToken(t, msg, token)
	}
	require.True(t, strings.Contains(strings.Join(errs, "\n"), "'"+token[:redact.TokenPrefixLen]+"..."),
		"the token's prefix is kept, to tell tokens apart: %q", errs)
}

// TestAcquireStopsAtOnceWhenTheScriptsCannotRun: EVALSHA and EVAL renamed
// on a majority is not a passing failure: Acquire returns at once, saying
// why, instead of retrying until its context ends.
func TestAcquireStopsAtOnceWhenTheScriptsCannotRun(t *testing.T) {
	// FCALL too: redisnode runs the scripts as functions where it can.
	c := testutil.StartRedis(t, 3, testutil.WithConfig(`rename-command EVALSHA ""`, `rename-command EVAL ""`, `rename-command FCALL ""`))
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 3 * time.Second, RejoinDelay: -1})
	ctx, cancel := context.WithTimeout(testutil.Context(t), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err := l.Acquire(ctx, "no-scripts")
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "Acquire waited for its context")
	require.Contains(t, err.Error(), "EVAL or EVALSHA is renamed or disabled on a majority of nodes")
	require.Less(t, time.Since(start), 2*time.Second)
}
