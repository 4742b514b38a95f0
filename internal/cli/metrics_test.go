package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/e6344662/go-redlock/internal/lockresult"
	"github.com/e6344662/go-redlock/redlock"
)

// feedEvents gives m one of each kind of event, and some more.
func feedEvents(m *metrics) {
	busy := fmt.Errorf("redlock: acquire %q: %w", "r", redlock.ErrNotAcquired)
	noQuorum := fmt.Errorf("redlock: acquire %q: %w", "r", redlock.ErrNoQuorum)
	for _, e := range []redlock.Event{
		{Kind: redlock.EventAttempt, Resource: "r", Granted: 3, Total: 3},
		{Kind: redlock.EventAttempt, Resource: "r", Granted: 2, Total: 3},
		{Kind: redlock.EventAttempt, Resource: "r", Granted: 1, Total: 3, Err: busy},
		{Kind: redlock.EventAttempt, Resource: "r", Granted: 0, Total: 3, Err: noQuorum},
		{Kind: redlock.EventAttempt, Resource: "r", Granted: 1, Total: 3, Err: context.Canceled},
		{Kind: redlock.EventAcquired, Resource: "r", Attempts: 1, Latency: 250 * time.Millisecond},
		{Kind: redlock.EventAcquired, Resource: "r", Attempts: 3, Latency: 2 * time.Second},
		{Kind: redlock.EventRenewed, Resource: "r", Granted: 3, Total: 3},
		{Kind: redlock.EventRenewed, Resource: "r", Granted: 2, Total: 3},
		{Kind: redlock.EventLost, Resource: "r", Err: redlock.ErrLeaseLost},
		{Kind: redlock.EventReleased, Resource: "r", Granted: 3, Total: 3},
		{Kind: redlock.EventReleased, Resource: "r", Granted: 1, Total: 3, Err: noQuorum},
		{Kind: redlock.EventNodeError, Node: "127.0.0.1:6381", Op: "acquire", Err: errors.New("connection refused")},
		{Kind: redlock.EventNodeError, Node: "127.0.0.1:6381", Op: "acquire", Err: errors.New("connection refused")},
		{Kind: redlock.EventNodeError, Node: "127.0.0.1:6382", Op: "renew", Err: context.DeadlineExceeded},
		{Kind: redlock.EventKind(99)}, // unknown kinds are ignored
	} {
		m.Observe(e)
	}
}

// wantExposition is what feedEvents leads to, in the text format.
const wantExposition = `# HELP redlock_acquire_attempts_total Acquisition attempts, by result: acquired, busy (held by another token), no_quorum (too many nodes failed), error (cut short or failed otherwise).
# TYPE redlock_acquire_attempts_total counter
redlock_acquire_attempts_total{result="acquired"} 2
redlock_acquire_attempts_total{result="busy"} 1
redlock_acquire_attempts_total{result="error"} 1
redlock_acquire_attempts_total{result="no_quorum"} 1
# HELP redlock_acquire_duration_seconds Time Acquire or TryAcquire took to return a lease, waiting for a busy lock included.
# TYPE redlock_acquire_duration_seconds histogram
redlock_acquire_duration_seconds_bucket{le="0.0001"} 0
redlock_acquire_duration_seconds_bucket{le="0.00025"} 0
redlock_acquire_duration_seconds_bucket{le="0.0005"} 0
redlock_acquire_duration_seconds_bucket{le="0.001"} 0
redlock_acquire_duration_seconds_bucket{le="0.0025"} 0
redlock_acquire_duration_seconds_bucket{le="0.005"} 0
redlock_acquire_duration_seconds_bucket{le="0.01"} 0
redlock_acquire_duration_seconds_bucket{le="0.025"} 0
redlock_acquire_duration_seconds_bucket{le="0.05"} 0
redlock_acquire_duration_seconds_bucket{le="0.1"} 0
redlock_acquire_duration_seconds_bucket{le="0.25"} 1
redlock_acquire_duration_seconds_bucket{le="0.5"} 1
redlock_acquire_duration_seconds_bucket{le="1"} 1
redlock_acquire_duration_seconds_bucket{le="2.5"} 2
redlock_acquire_duration_seconds_bucket{le="5"} 2
redlock_acquire_duration_seconds_bucket{le="10"} 2
redlock_acquire_duration_seconds_bucket{le="30"} 2
redlock_acquire_duration_seconds_bucket{le="60"} 2
redlock_acquire_duration_seconds_bucket{le="+Inf"} 2
redlock_acquire_duration_seconds_sum 2.25
redlock_acquire_duration_seconds_count 2
# HELP redlock_attempt_grants Nodes that granted the lock, per acquisition attempt.
# TYPE redlock_attempt_grants histogram
redlock_attempt_grants_bucket{le="0"} 1
redlock_attempt_grants_bucket{le="1"} 3
redlock_attempt_grants_bucket{le="2"} 4
redlock_attempt_grants_bucket{le="3"} 5
redlock_attempt_grants_bucket{le="+Inf"} 5
redlock_attempt_grants_sum 7
redlock_attempt_grants_count 5
# HELP redlock_leases_lost_total Leases lost: no majority renewed them in time.
# TYPE redlock_leases_lost_total counter
redlock_leases_lost_total 1
# HELP redlock_node_errors_total Failed calls to one node, by node address and operation.
# TYPE redlock_node_errors_total counter
redlock_node_errors_total{node="127.0.0.1:6381",op="acquire"} 2
redlock_node_errors_total{node="127.0.0.1:6382",op="renew"} 1
# HELP redlock_releases_total Leases released, by result: released (by a majority), no_quorum, error.
# TYPE redlock_releases_total counter
redlock_releases_total{result="error"} 0
redlock_releases_total{result="no_quorum"} 1
redlock_releases_total{result="released"} 1
# HELP redlock_renewals_total Renewal cycles that extended a lease.
# TYPE redlock_renewals_total counter
redlock_renewals_total 2
`

// TestMetricsObserver: the Locker's events feed the metrics.
func TestMetricsObserver(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, 3)
	require.NoError(t, err)
	feedEvents(m)
	require.NoError(t, promtest.GatherAndCompare(reg, strings.NewReader(wantExposition),
		"redlock_acquire_duration_seconds", "redlock_acquire_attempts_total", "redlock_attempt_grants", "redlock_renewals_total",
		"redlock_leases_lost_total", "redlock_releases_total", "redlock_node_errors_total"))
}

// TestMetricsSharedWithRedlockotel: the metrics redlockotel exports too
// (docs/observability.md), under the same Prometheus names, fed by a
// Locker's events with context.
func TestMetricsSharedWithRedlockotel(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, 3)
	require.NoError(t, err)
	ctx := context.Background()
	for _, e := range []redlock.Event{
		{Kind: redlock.EventAcquireStart, Op: "acquire"},
		{Kind: redlock.EventAcquireStart, Op: "acquire"},
		{Kind: redlock.EventAcquireEnd, Op: "acquire", Count: 1, Waited: 20 * time.Millisecond},
		{Kind: redlock.EventRenewFailing, Left: time.Second},
		{Kind: redlock.EventRenewEnd, Left: 800 * time.Millisecond},
		{Kind: redlock.EventLeaseEnd, Held: 2 * time.Second, Err: redlock.ErrLeaseReleased},
		{Kind: redlock.EventLost},
	} {
		require.Equal(t, ctx, m.ObserveContext(ctx, e))
	}
	require.Equal(t, 1.0, promtest.ToFloat64(m.waiters), "one Acquire still waits")
	require.Equal(t, 0.0, promtest.ToFloat64(m.holders))
	require.Equal(t, 1.0, promtest.ToFloat64(m.failing))
	require.Equal(t, 1.0, promtest.ToFloat64(m.leasesLost), "the six old kinds still count")
	n, err := promtest.GatherAndCount(reg, "redlock_acquire_wait_duration_seconds", "redlock_lease_hold_duration_seconds", "redlock_renew_slack_seconds")
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.NoError(t, promtest.GatherAndCompare(reg, strings.NewReader(`# HELP redlock_renew_slack_seconds Validity a lease still had when its renewal landed.
# TYPE redlock_renew_slack_seconds histogram
redlock_renew_slack_seconds_bucket{le="0.0001"} 0
redlock_renew_slack_seconds_bucket{le="0.00025"} 0
redlock_renew_slack_seconds_bucket{le="0.0005"} 0
redlock_renew_slack_seconds_bucket{le="0.001"} 0
redlock_renew_slack_seconds_bucket{le="0.0025"} 0
redlock_renew_slack_seconds_bucket{le="0.005"} 0
redlock_renew_slack_seconds_bucket{le="0.01"} 0
redlock_renew_slack_seconds_bucket{le="0.025"} 0
redlock_renew_slack_seconds_bucket{le="0.05"} 0
redlock_renew_slack_seconds_bucket{le="0.1"} 0
redlock_renew_slack_seconds_bucket{le="0.25"} 0
redlock_renew_slack_seconds_bucket{le="0.5"} 0
redlock_renew_slack_seconds_bucket{le="1"} 1
redlock_renew_slack_seconds_bucket{le="2.5"} 1
redlock_renew_slack_seconds_bucket{le="5"} 1
redlock_renew_slack_seconds_bucket{le="10"} 1
redlock_renew_slack_seconds_bucket{le="30"} 1
redlock_renew_slack_seconds_bucket{le="60"} 1
redlock_renew_slack_seconds_bucket{le="+Inf"} 1
redlock_renew_slack_seconds_sum 0.8
redlock_renew_slack_seconds_count 1
`), "redlock_renew_slack_seconds"))
}

// TestMetricsZero: every counter with a fixed label set is exported from
// the start, at 0, and node errors appear only once a node failed.
func TestMetricsZero(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	_, err := newMetrics(reg, 5)
	require.NoError(t, err)
	n, err := promtest.GatherAndCount(reg, "redlock_acquire_attempts_total", "redlock_releases_total", "redlock_node_errors_total")
	require.NoError(t, err)
	require.Equal(t, 4+3, n)
	require.NoError(t, promtest.GatherAndCompare(reg, strings.NewReader(`# HELP redlock_acquire_attempts_total Acquisition attempts, by result: acquired, busy (held by another token), no_quorum (too many nodes failed), error (cut short or failed otherwise).
# TYPE redlock_acquire_attempts_total counter
redlock_acquire_attempts_total{result="acquired"} 0
redlock_acquire_attempts_total{result="busy"} 0
redlock_acquire_attempts_total{result="error"} 0
redlock_acquire_attempts_total{result="no_quorum"} 0
# HELP redlock_attempt_grants Nodes that granted the lock, per acquisition attempt.
# TYPE redlock_attempt_grants histogram
redlock_attempt_grants_bucket{le="0"} 0
redlock_attempt_grants_bucket{le="1"} 0
redlock_attempt_grants_bucket{le="2"} 0
redlock_attempt_grants_bucket{le="3"} 0
redlock_attempt_grants_bucket{le="4"} 0
redlock_attempt_grants_bucket{le="5"} 0
redlock_attempt_grants_bucket{le="+Inf"} 0
redlock_attempt_grants_sum 0
redlock_attempt_grants_count 0
`), "redlock_acquire_attempts_total", "redlock_attempt_grants"))
}

// TestMetricsRegisterTwice: a second set of metrics on one registry is an
// error.
func TestMetricsRegisterTwice(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	_, err := newMetrics(reg, 3)
	require.NoError(t, err)
	_, err = newMetrics(reg, 3)
	require.Error(t, err, "a registry takes one set of metrics")
}

// TestAttemptResult: the result label of an acquisition attempt.
func TestAttemptResult(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want string
	}{
		{nil, "acquired"},
		{fmt.Errorf("x: %w", redlock.ErrNotAcquired), "busy"},
		{fmt.Errorf("x: %w", redlock.ErrNoQuorum), "no_quorum"},
		{context.DeadlineExceeded, "error"},
		{redlock.ErrClosed, "error"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, lockresult.Attempt(tt.err), "%v", tt.err)
	}
}

// TestCheckMetricsAddr: --metrics-addr is HOST:PORT with a port in range.
func TestCheckMetricsAddr(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"127.0.0.1:9464", ":9464", ":0", "localhost:1", "[::1]:65535", "0.0.0.0:80"} {
		require.NoError(t, checkMetricsAddr(ok), ok)
	}
	for _, bad := range []string{"", "9464", "localhost", ":", "host:", ":65536", ":-1", "h:p", "[::1:80", "a b:80", "http://h:1", "1:2:3"} {
		err := checkMetricsAddr(bad)
		require.Error(t, err, bad)
		require.Equal(t, exitUsage, err.(*cliError).code, bad)
		require.Contains(t, err.Error(), "malformed --metrics-addr", bad)
	}
}

// TestMetricsServer serves a registry, scrapes it over HTTP, and checks
// that stopping leaves no goroutine and nothing listening. Not parallel,
// for goleak.
func TestMetricsServer(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, 3)
	require.NoError(t, err)
	feedEvents(m)
	ms, err := listenMetrics("127.0.0.1:0", reg)
	require.NoError(t, err)
	require.Regexp(t, `^http://127\.0\.0\.1:\d+/metrics$`, ms.URL())

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(ms.URL())
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/plain")
	for _, line := range strings.Split(wantExposition, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			require.Contains(t, string(body), line+"\n")
		}
	}
	resp, err = client.Get(strings.TrimSuffix(ms.URL(), "/metrics") + "/other")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	addr := ms.ln.Addr().String()
	ms.stop()
	client.CloseIdleConnections()
	_, err = net.DialTimeout("tcp", addr, time.Second)
	require.Error(t, err, "still listening after stop")
}

// TestMetricsPortInUse: a port taken by another listener is a clear
// error, exit 1, before any lock is taken.
func TestMetricsPortInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()
	addr := ln.Addr().String()

	_, err = listenMetrics(addr, prometheus.NewRegistry())
	require.Error(t, err)
	ce := err.(*cliError)
	require.Equal(t, exitFailure, ce.code)
	require.Equal(t, "--metrics-addr "+addr+": address already in use (another process listens on that port)", ce.msg)

	code, stdout, stderr := runInProcess(t, nil, "bench", "--embedded", "1", "--duration", "10s", "--metrics-addr", addr)
	require.Equal(t, exitFailure, code)
	require.Empty(t, stdout)
	requireOneLine(t, stderr, "address already in use")

	code, _, stderr = runInProcess(t, map[string]string{envNodes: "redis://127.0.0.1:1"}, "run", "r", "--metrics-addr", addr, "--", "true")
	require.Equal(t, exitFailure, code)
	requireOneLine(t, stderr, "address already in use")
}

// TestMetricsUnknownHost: a host name that does not resolve is a usage
// error.
func TestMetricsUnknownHost(t *testing.T) {
	t.Parallel()
	_, err := listenMetrics("no-such-host.invalid:0", prometheus.NewRegistry())
	require.Error(t, err)
	require.Equal(t, exitUsage, err.(*cliError).code)
	require.Contains(t, err.Error(), "unknown host")
}

// TestMetricsNamesShared: --metrics-addr exports exactly the Prometheus
// names redlockotel's metrics take through an OpenTelemetry Prometheus
// exporter: one set, listed in redlockotel/testdata/prometheus-names.txt
// (checked on redlockotel's side too).
func TestMetricsNamesShared(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "redlockotel", "testdata", "prometheus-names.txt"))
	require.NoError(t, err)
	var want []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			want = append(want, line)
		}
	}
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, 3)
	require.NoError(t, err)
	ctx := context.Background()
	feedEvents(m)
	for _, e := range []redlock.Event{
		{Kind: redlock.EventReleaseEnd, Resource: "r"},
		{Kind: redlock.EventAcquireEnd, Op: "acquire", Resource: "r", Count: 1, Waited: time.Millisecond, Latency: time.Second},
		{Kind: redlock.EventNodeCall, Node: "127.0.0.1:6379", Op: "acquire", Vote: redlock.VoteGranted},
		{Kind: redlock.EventLeaseEnd, Err: redlock.ErrLeaseReleased},
	} {
		m.ObserveContext(ctx, e)
	}
	families, err := reg.Gather()
	require.NoError(t, err)
	var got []string
	for _, f := range families {
		got = append(got, f.GetName())
	}
	slices.Sort(got)
	require.Equal(t, want, got)
}
