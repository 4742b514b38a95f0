package redlock_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

type recorder struct {
	mu     sync.Mutex
	events []redlock.Event
}

func (r *recorder) Observe(e redlock.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) kinds() map[redlock.EventKind]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[redlock.EventKind]int{}
	for _, e := range r.events {
		m[e.Kind]++
	}
	return m
}

func (r *recorder) first(k redlock.EventKind) redlock.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.Kind == k {
			return e
		}
	}
	return redlock.Event{}
}

// TestObserverAndLoggerSeeTheLeaseLifecycle: acquisition, renewal, node
// errors, release and loss are reported with counts and latencies, and the
// log never contains a token.
func TestObserverAndLoggerSeeTheLeaseLifecycle(t *testing.T) {
	t.Parallel() // bound by the wall clock (leases, delays, hung nodes)
	c := testutil.NewMiniCluster(t, 3, testutil.WithWallClock())
	rec := &recorder{}
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logs, &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 600 * time.Millisecond, Observer: rec, Logger: logger})

	c.Fail(2, "ERR injected fault")
	lease, err := l.Acquire(testutil.Context(t), "observed")
	require.NoError(t, err)
	first := lease.ValidUntil()
	require.Eventually(t, func() bool { return lease.ValidUntil().After(first) }, 5*time.Second, 5*time.Millisecond, "the lease was not renewed")
	require.NoError(t, lease.Release(context.Background()))

	lost, err := l.Acquire(testutil.Context(t), "observed")
	require.NoError(t, err)
	require.NoError(t, c.Wipe(0))
	require.NoError(t, c.Wipe(1))
	waitDone(t, lost.Context(), 5*time.Second)
	// The context ends first; the event and the log line follow it (the
	// Observer is called before the Logger).
	logged := func() string {
		logMu.Lock()
		defer logMu.Unlock()
		return logs.String()
	}
	require.Eventually(t, func() bool {
		return rec.kinds()[redlock.EventLost] == 1 && strings.Contains(logged(), "redlock: lost")
	}, 5*time.Second, time.Millisecond, "the loss was neither observed nor logged")

	k := rec.kinds()
	require.GreaterOrEqual(t, k[redlock.EventAttempt], 2)
	require.Equal(t, 2, k[redlock.EventAcquired])
	require.GreaterOrEqual(t, k[redlock.EventRenewed], 1)
	require.Equal(t, 1, k[redlock.EventReleased])
	require.Equal(t, 1, k[redlock.EventLost])
	require.Positive(t, k[redlock.EventNodeError])

	acq := rec.first(redlock.EventAcquired)
	require.Equal(t, "observed", acq.Resource)
	require.Equal(t, 2, acq.Granted)
	require.Equal(t, 3, acq.Total)
	require.GreaterOrEqual(t, acq.Attempts, 1) // more when a node call timed out on a busy machine
	require.Positive(t, acq.Latency)
	nodeErr := rec.first(redlock.EventNodeError)
	require.Equal(t, c.Addrs()[2], nodeErr.Node)
	require.NotEmpty(t, nodeErr.Op)
	require.ErrorContains(t, nodeErr.Err, "injected fault")

	out := logged()
	require.Contains(t, out, "redlock: acquired")
	require.Contains(t, out, "redlock: released")
	require.Contains(t, out, "redlock: lost")
	require.Contains(t, out, "resource=observed")
	require.NotContains(t, out, lease.Token())
	require.NotContains(t, out, lost.Token())
	require.NotContains(t, out, lease.Token()[:8])
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
