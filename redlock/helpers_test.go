package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// newLocker builds a Locker that is closed when the test ends.
func newLocker(t testing.TB, nodes []redlock.Node, cfg redlock.Config) *redlock.Locker {
	t.Helper()
	l, err := redlock.New(nodes, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// fastRetry makes Acquire retry quickly, for tests.
func fastRetry(cfg redlock.Config) redlock.Config {
	cfg.NewBackOff = func() backoff.BackOff { return backoff.NewConstantBackOff(5 * time.Millisecond) }
	return cfg
}

// waitDone waits for ctx to end, failing the test after limit.
func waitDone(t testing.TB, ctx context.Context, limit time.Duration) time.Time {
	t.Helper()
	select {
	case <-ctx.Done():
		return time.Now()
	case <-time.After(limit):
		t.Fatalf("context did not end within %s", limit)
	}
	return time.Time{}
}

// miniredisGoroutines ignores the in-process servers' own goroutines (one
// per connection and per listener), which come and go with the clients'
// connection pools and restarts.
func miniredisGoroutines() []goleak.Option {
	const pkg = "github.com/alicebob/miniredis/v2/server."
	return []goleak.Option{
		goleak.IgnoreAnyFunction(pkg + "(*Server).servePeer"),
		goleak.IgnoreAnyFunction(pkg + "(*Server).servePeer.func2"),
		goleak.IgnoreAnyFunction(pkg + "newServer.func1"),
	}
}

// requireNeverAlivePastValidity watches lease until its Context ends,
// failing if the Context is ever seen alive at or after ValidUntil, or does
// not end within limit.
func requireNeverAlivePastValidity(t testing.TB, lease *redlock.Lease, limit time.Duration) {
	t.Helper()
	give := time.Now().Add(limit)
	for {
		now := time.Now()
		if lease.Context().Err() != nil {
			return
		}
		vu := lease.ValidUntil() // read after: a renewal only moves it later
		require.True(t, now.Before(vu), "lease context alive %s after ValidUntil", now.Sub(vu))
		require.True(t, now.Before(give), "lease context did not end within %s", limit)
		time.Sleep(time.Millisecond)
	}
}

// slowAttempt is testutil.SlowAttempt.
func slowAttempt(err error) bool { return testutil.SlowAttempt(err) }

// tryAcquire is testutil.TryAcquire.
func tryAcquire(t testing.TB, l *redlock.Locker, resource string) (*redlock.Lease, error) {
	t.Helper()
	return testutil.TryAcquire(t, l, resource)
}
