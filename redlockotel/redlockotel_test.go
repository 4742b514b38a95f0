package redlockotel_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/redlockotel"
	"github.com/e6344662/go-redlock/testutil"
)

// freshServers turns the rejoin rule off for servers the test just
// started.
const freshServers = -1

// telemetry is an in-memory span recorder and a manual metric reader.
type telemetry struct {
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newTelemetry(t *testing.T, opts ...sdktrace.TracerProviderOption) *telemetry {
	tel := &telemetry{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tel.tp = sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{sdktrace.WithSpanProcessor(tel.spans)}, opts...)...)
	tel.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	return tel
}

func (tel *telemetry) observer(opts ...redlockotel.Option) *redlockotel.Observer {
	return redlockotel.New(append([]redlockotel.Option{redlockotel.WithTracerProvider(tel.tp), redlockotel.WithMeterProvider(tel.mp)}, opts...)...)
}

func (tel *telemetry) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tel.spans.Ended() {
		if name == "" || s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// metrics collects the metrics by name.
func (tel *telemetry) metrics(t *testing.T) map[string]metricdata.Metrics {
	var rm metricdata.ResourceMetrics
	require.NoError(t, tel.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// histCount sums the counts of a histogram's points whose attributes
// include every one of with.
func histCount(m metricdata.Metrics, with ...attribute.KeyValue) uint64 {
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		return 0
	}
	var n uint64
	for _, p := range h.DataPoints {
		if hasAll(p.Attributes, with) {
			n += p.Count
		}
	}
	return n
}

func sum(m metricdata.Metrics) int64 {
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		return 0
	}
	var n int64
	for _, p := range s.DataPoints {
		n += p.Value
	}
	return n
}

func hasAll(set attribute.Set, with []attribute.KeyValue) bool {
	for _, kv := range with {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func newLocker(t *testing.T, nodes []redlock.Node, cfg redlock.Config) *redlock.Locker {
	t.Helper()
	l, err := redlock.New(nodes, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestContendedAcquireSpanTree: an Acquire that waits for a holder's
// release yields, under the caller's span, an acquire span with its
// attempts as children, each with a child per node call carrying the
// vote, and the hand-over; the metrics count it.
func TestContendedAcquireSpanTree(t *testing.T) {
	c := testutil.StartRedis(t, 3, testutil.WithConfig("appendonly no"))
	tel := newTelemetry(t)
	obs := tel.observer()
	cfg := redlock.Config{LeaseDuration: 10 * time.Second, RejoinDelay: freshServers, Observer: obs}
	holder := newLocker(t, c.Nodes(), cfg)
	waiter := newLocker(t, c.Nodes(), cfg)
	ctx := testutil.Context(t)

	held, err := holder.Acquire(ctx, "job")
	require.NoError(t, err)
	reqCtx, req := tel.tp.Tracer("test").Start(ctx, "request")
	got := make(chan *redlock.Lease, 1)
	go func() {
		lease, err := waiter.Acquire(reqCtx, "job")
		if !assert(t, err) {
			got <- nil
			return
		}
		got <- lease
	}()
	// The waiter's first attempt was refused: it waits.
	require.Eventually(t, func() bool {
		for _, s := range tel.ended(redlockotel.SpanAttempt) {
			if v, ok := attr(s, redlockotel.AttrErrorType); ok && v.AsString() == "not_acquired" {
				return true
			}
		}
		return false
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, held.Release(ctx))
	lease := <-got
	require.NotNil(t, lease)
	req.End()
	require.NoError(t, lease.Release(ctx))

	var acquire sdktrace.ReadOnlySpan
	for _, s := range tel.ended(redlockotel.SpanAcquire) {
		if s.Parent().SpanID() == req.SpanContext().SpanID() {
			acquire = s
		}
	}
	require.NotNil(t, acquire, "no acquire span under the caller's span")
	require.Equal(t, req.SpanContext().TraceID(), acquire.SpanContext().TraceID())
	v, _ := attr(acquire, redlockotel.AttrResource)
	require.Equal(t, "job", v.AsString())
	v, _ = attr(acquire, redlockotel.AttrLockKind)
	require.Equal(t, "mutex", v.AsString())
	v, _ = attr(acquire, redlockotel.AttrFence)
	require.Equal(t, int64(lease.Fence()), v.AsInt64())
	v, _ = attr(acquire, redlockotel.AttrWait)
	require.Positive(t, v.AsFloat64())
	handOver, _ := attr(acquire, redlockotel.AttrHandOver)
	attempts, _ := attr(acquire, redlockotel.AttrAttempts)
	require.True(t, handOver.AsBool() || attempts.AsInt64() >= 2, "neither a hand-over nor a second attempt")

	// Its attempts, and their node calls with votes. An attempt ends at its
	// majority; the call to the last node may end (and its span with it)
	// a little later, so wait for every node span before counting.
	require.Eventually(t, func() bool {
		for _, a := range tel.ended(redlockotel.SpanAttempt) {
			if a.Parent().SpanID() != acquire.SpanContext().SpanID() {
				continue
			}
			nodes := 0
			for _, n := range tel.ended(redlockotel.SpanNodePrefix + "acquire") {
				if n.Parent().SpanID() == a.SpanContext().SpanID() {
					nodes++
				}
			}
			if nodes < 3 {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "every node call of the acquisition ended")
	var refused, granted int
	children := 0
	for _, a := range tel.ended(redlockotel.SpanAttempt) {
		if a.Parent().SpanID() != acquire.SpanContext().SpanID() {
			continue
		}
		children++
		nodes := 0
		for _, n := range tel.ended(redlockotel.SpanNodePrefix + "acquire") {
			if n.Parent().SpanID() != a.SpanContext().SpanID() {
				continue
			}
			nodes++
			vote, _ := attr(n, redlockotel.AttrVote)
			switch vote.AsString() {
			case "refused":
				refused++
			case "granted":
				granted++
			}
			addr, _ := attr(n, redlockotel.AttrServerAddress)
			require.Equal(t, "127.0.0.1", addr.AsString())
			_, ok := attr(n, redlockotel.AttrServerPort)
			require.True(t, ok)
			sys, _ := attr(n, redlockotel.AttrDBSystemName)
			require.Equal(t, "redis", sys.AsString())
			_, ok = attr(n, redlockotel.AttrGranted)
			require.True(t, ok, "the attempt's tally")
		}
		require.Equal(t, 3, nodes, "a node span per node under each attempt")
	}
	require.GreaterOrEqual(t, children, 1)
	require.GreaterOrEqual(t, refused, 2, "the first attempt was refused by a majority")
	require.True(t, handOver.AsBool() || granted >= 2)

	// Release spans, and the metrics.
	require.Len(t, tel.ended(redlockotel.SpanRelease), 2)
	m := tel.metrics(t)
	require.EqualValues(t, 2, histCount(m[redlockotel.MetricAcquireDuration], redlockotel.AttrOutcome.String("acquired")))
	require.EqualValues(t, 2, histCount(m[redlockotel.MetricWaitDuration]))
	require.EqualValues(t, 1, histCount(m[redlockotel.MetricHandOffDuration]), "the hand-off from the holder to the waiter")
	require.Eventually(t, func() bool {
		m := tel.metrics(t)
		return histCount(m[redlockotel.MetricHoldDuration], redlockotel.AttrLeaseEndedBy.String("released")) == 2 &&
			sum(m[redlockotel.MetricHolders]) == 0 && sum(m[redlockotel.MetricWaiters]) == 0
	}, 5*time.Second, time.Millisecond, "holders and waiters back to 0, two hold times")
	require.Positive(t, histCount(m[redlockotel.MetricNodeDuration], redlockotel.AttrVote.String("refused")))
}

// assert reports err in a goroutine that must not call FailNow.
func assert(t *testing.T, err error) bool {
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

// pauser is a ContextObserver that pauses two of the nodes (CLIENT PAUSE)
// when the first renewal cycle starts, then hands every event on.
type pauser struct {
	*redlockotel.Observer
	servers []*testutil.RedisServer
	pause   time.Duration
	once    sync.Once
}

func (p *pauser) ObserveContext(ctx context.Context, e redlock.Event) context.Context {
	if e.Kind == redlock.EventRenewStart {
		p.once.Do(func() {
			for _, s := range p.servers {
				_ = s.Do(context.Background(), "CLIENT", "PAUSE", p.pause.Milliseconds(), "ALL").Err()
			}
		})
	}
	return p.Observer.ObserveContext(ctx, e)
}

// TestRenewalFailingWarnsBeforeTheLoss: with two of three nodes paused
// when a renewal starts, the renewal's rounds fail while the lease is
// still valid: the early warning (a span event, a metric) comes, then the
// renewal lands once the pause ends, with its slack recorded; the lease is
// not lost.
func TestRenewalFailingWarnsBeforeTheLoss(t *testing.T) {
	c := testutil.StartRedis(t, 3, testutil.WithConfig("appendonly no"))
	tel := newTelemetry(t)
	obs := &pauser{Observer: tel.observer(), servers: c.Servers()[:2], pause: 800 * time.Millisecond}
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 6 * time.Second, NodeCallTimeout: 200 * time.Millisecond, RejoinDelay: freshServers, Observer: obs})
	ctx := testutil.Context(t)
	lease, err := l.Acquire(ctx, "renewed")
	require.NoError(t, err)
	first := lease.ValidUntil()
	require.Eventually(t, func() bool { return lease.ValidUntil().After(first) }, 20*time.Second, 5*time.Millisecond, "not renewed")
	require.NoError(t, lease.Context().Err(), "the lease was lost")

	var warned bool
	require.Eventually(t, func() bool { return len(tel.ended(redlockotel.SpanRenew)) >= 1 }, 5*time.Second, time.Millisecond)
	renew := tel.ended(redlockotel.SpanRenew)[0]
	for _, ev := range renew.Events() {
		if ev.Name == redlockotel.EventRenewFailing {
			warned = true
			for _, kv := range ev.Attributes {
				if kv.Key == redlockotel.AttrValidFor {
					require.Positive(t, kv.Value.AsFloat64(), "the warning says how long the lease is still valid")
				}
			}
		}
	}
	require.True(t, warned, "no renewal-failing span event")
	slack, ok := attr(renew, redlockotel.AttrSlack)
	require.True(t, ok)
	require.Positive(t, slack.AsFloat64())
	require.Len(t, renew.Links(), 1, "the renewal links to its acquisition")

	m := tel.metrics(t)
	require.Positive(t, sum(m[redlockotel.MetricRenewFailing]))
	require.Positive(t, histCount(m[redlockotel.MetricRenewSlack]))
	require.Zero(t, sum(m[redlockotel.MetricLeasesLost]))
	require.Positive(t, sum(m[redlockotel.MetricNodeErrors]), "the paused nodes' calls failed")
	require.NoError(t, lease.Release(ctx))
}

// TestNoPasswordInAnyAttribute: with nodes behind a password, dialled by
// URL, no span attribute, span event attribute or metric attribute holds
// the password.
func TestNoPasswordInAnyAttribute(t *testing.T) {
	const pw = "s3cret-Pa55-otel"
	c := testutil.StartRedis(t, 3, testutil.WithPassword(pw), testutil.WithConfig("appendonly no"))
	ctx := testutil.Context(t)
	nodes, err := redisnode.Dial(ctx, c.URLs()...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = nodes.Close() })
	tel := newTelemetry(t)
	l := newLocker(t, nodes, redlock.Config{LeaseDuration: 2 * time.Second, RejoinDelay: freshServers, Observer: tel.observer(redlockotel.WithLockerName("pw"))})
	lease, err := l.Acquire(ctx, "secret")
	require.NoError(t, err)
	_, err = l.TryAcquire(ctx, "secret")
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.NoError(t, c.Server(2).Pause())
	_, err = l.TryAcquire(ctx, "other")
	require.NoError(t, c.Server(2).Resume())
	_ = err
	require.NoError(t, lease.Release(ctx))

	var all []string
	for _, s := range tel.spans.Ended() {
		for _, kv := range s.Attributes() {
			all = append(all, string(kv.Key)+"="+kv.Value.String())
		}
		for _, ev := range s.Events() {
			for _, kv := range ev.Attributes {
				all = append(all, string(kv.Key)+"="+kv.Value.String())
			}
		}
		all = append(all, s.Status().Description)
	}
	for _, m := range tel.metrics(t) {
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				all = append(all, p.Attributes.Encoded(attribute.DefaultEncoder()))
			}
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				all = append(all, p.Attributes.Encoded(attribute.DefaultEncoder()))
			}
		}
	}
	require.NotEmpty(t, all)
	joined := strings.Join(all, "\n")
	require.Contains(t, joined, "server.address=127.0.0.1")
	require.NotContains(t, joined, pw)
}

// FuzzServerAttributes: whatever a node's address holds (a URL with user
// and password, an address with an @), server.address and server.port
// never hold the password.
func FuzzServerAttributes(f *testing.F) {
	f.Add("default", "hunter2", "127.0.0.1", 6379)
	f.Add("", "p@ss:word", "redis.example", 6380)
	f.Add("u", "x", "::1", 1)
	f.Fuzz(func(t *testing.T, user, pw, host string, port int) {
		if len(pw) < 4 || strings.Contains(host, pw) || strings.Contains(user, pw) || strings.Contains(fmt.Sprint(port), pw) || strings.Contains("redis://:@[]", pw) {
			t.Skip()
		}
		for _, addr := range []string{
			"redis://" + user + ":" + pw + "@" + host + ":" + fmt.Sprint(port),
			user + ":" + pw + "@" + host + ":" + fmt.Sprint(port),
			":" + pw + "@" + host,
		} {
			for _, kv := range redlockotel.ServerAttributes(addr) {
				require.NotContains(t, kv.Value.String(), pw, "address %q", addr)
			}
		}
	})
}

// blockingProcessor is a span processor whose OnEnd blocks until release
// closes: an exporter stuck behind a synchronous processor.
type blockingProcessor struct {
	release <-chan struct{}
	blocked atomic.Int32
}

func (p *blockingProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (p *blockingProcessor) OnEnd(sdktrace.ReadOnlySpan) {
	p.blocked.Add(1)
	<-p.release
}
func (p *blockingProcessor) Shutdown(context.Context) error   { return nil }
func (p *blockingProcessor) ForceFlush(context.Context) error { return nil }

// TestStuckExporterDoesNotStallTheLock: a span processor that blocks
// forever at the first span's end (a synchronous exporter that hangs)
// does not stall lock operations: they go on, the guard dropping events
// while it is stuck (redlock.ObserverTimeout).
func TestStuckExporterDoesNotStallTheLock(t *testing.T) {
	c := testutil.StartRedis(t, 3, testutil.WithConfig("appendonly no"))
	release := make(chan struct{})
	defer close(release)
	bp := &blockingProcessor{release: release}
	tel := newTelemetry(t, sdktrace.WithSpanProcessor(bp))
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 5 * time.Second, RejoinDelay: freshServers, Observer: tel.observer()})
	ctx := testutil.Context(t)
	start := time.Now()
	for i := range 30 {
		lease, err := l.Acquire(ctx, fmt.Sprint("stuck-", i))
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
	}
	// Waiting ObserverTimeout at each of their ten events or more would
	// take 30 s. Generous for a loaded machine.
	require.Less(t, time.Since(start), 100*redlock.ObserverTimeout)
	require.Positive(t, bp.blocked.Load())
}

// TestEveryKindOfLockHasItsSpan: AcquireAll, TryAcquireAll, a read-write
// lock's reader and writer and a semaphore's slot each yield one
// acquisition span of their lock kind, with attempt children, and every
// span ends.
func TestEveryKindOfLockHasItsSpan(t *testing.T) {
	c := testutil.StartRedis(t, 3, testutil.WithConfig("appendonly no"))
	tel := newTelemetry(t)
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 5 * time.Second, RejoinDelay: freshServers, Observer: tel.observer()})
	ctx := testutil.Context(t)
	release := func(leases ...*redlock.Lease) {
		for _, ls := range leases {
			require.NoError(t, ls.Release(ctx))
		}
	}
	all, err := l.AcquireAll(ctx, "a", "b")
	require.NoError(t, err)
	release(all...)
	all, err = l.TryAcquireAll(ctx, "a", "b")
	require.NoError(t, err)
	release(all...)
	rw, err := l.NewRWLock("rw")
	require.NoError(t, err)
	r, err := rw.AcquireShared(ctx)
	require.NoError(t, err)
	release(r)
	w, err := rw.Acquire(ctx)
	require.NoError(t, err)
	release(w)
	sem, err := l.NewSemaphore("sem", 2)
	require.NoError(t, err)
	s, err := sem.Acquire(ctx)
	require.NoError(t, err)
	release(s)

	kinds := map[string]int{}
	for _, s := range append(tel.ended(redlockotel.SpanAcquire), tel.ended(redlockotel.SpanTryAcquire)...) {
		k, _ := attr(s, redlockotel.AttrLockKind)
		op, _ := attr(s, redlockotel.AttrOperation)
		kinds[k.AsString()+"/"+op.AsString()]++
		outcome, _ := attr(s, redlockotel.AttrOutcome)
		require.Equal(t, "acquired", outcome.AsString(), s.Name())
		children := 0
		for _, a := range tel.ended(redlockotel.SpanAttempt) {
			if a.Parent().SpanID() == s.SpanContext().SpanID() {
				children++
			}
		}
		require.GreaterOrEqual(t, children, 1, "%s %s has no attempt", s.Name(), k.AsString())
	}
	require.Equal(t, 1, kinds["all/acquire"])
	require.Equal(t, 1, kinds["all/try_acquire"])
	require.Equal(t, 1, kinds["read/acquire"])
	require.Equal(t, 1, kinds["write/acquire"])
	require.Equal(t, 1, kinds["semaphore/acquire"])
	require.Eventually(t, func() bool { return sum(tel.metrics(t)[redlockotel.MetricHolders]) == 0 }, 5*time.Second, time.Millisecond, "every lease ended")
}
