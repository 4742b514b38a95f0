package redlockotel_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlockotel"
)

// sharedNames reads the one set of Prometheus names (testdata).
func sharedNames(t *testing.T) []string {
	b, err := os.ReadFile("testdata/prometheus-names.txt")
	require.NoError(t, err)
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			names = append(names, line)
		}
	}
	return names
}

// TestPrometheusNames: through OpenTelemetry's Prometheus exporter, the
// Observer's metrics take exactly the names redlock-cli --metrics-addr
// exports (testdata/prometheus-names.txt, checked on the CLI's side too).
func TestPrometheusNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	require.NoError(t, err)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	o := redlockotel.New(redlockotel.WithMeterProvider(mp))
	ctx := context.Background()
	// One event of each kind that records a metric.
	for _, e := range []redlock.Event{
		{Kind: redlock.EventAcquireStart, Op: "acquire", Lock: redlock.LockMutex},
		{Kind: redlock.EventAttempt, Granted: 2, Total: 3},
		{Kind: redlock.EventNodeCall, Node: "127.0.0.1:6379", Op: "acquire", Vote: redlock.VoteFailed, Err: context.DeadlineExceeded},
		{Kind: redlock.EventReleaseEnd, Resource: "r"},
		{Kind: redlock.EventAcquireEnd, Op: "acquire", Lock: redlock.LockMutex, Resource: "r", Count: 1, Waited: time.Millisecond, Latency: time.Second},
		{Kind: redlock.EventRenewed},
		{Kind: redlock.EventRenewEnd, Left: time.Second},
		{Kind: redlock.EventRenewFailing, Left: time.Second},
		{Kind: redlock.EventLost, Latency: time.Millisecond},
		{Kind: redlock.EventReleased},
		{Kind: redlock.EventLeaseEnd, Err: redlock.ErrLeaseReleased},
	} {
		o.ObserveContext(ctx, e)
	}
	families, err := reg.Gather()
	require.NoError(t, err)
	var got []string
	for _, f := range families {
		got = append(got, f.GetName())
	}
	slices.Sort(got)
	require.Equal(t, sharedNames(t), got)
}
