// Package redlockotel reports a redlock.Locker's operations to
// OpenTelemetry: a span per acquisition, per attempt, per node call, per
// release and per renewal cycle, and the lock's metrics. It is its own Go
// module, so that the redlock module does not depend on OpenTelemetry.
//
// One line sets it up:
//
//	l, err := redlock.New(nodes, redlock.Config{Observer: redlockotel.New()})
//
// It uses the global TracerProvider and MeterProvider unless given others
// (WithTracerProvider, WithMeterProvider). Every span, attribute and
// metric name is listed in docs/observability.md.
package redlockotel

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/e6344662/go-redlock/internal/lockresult"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/e6344662/go-redlock/redlock"
)

// ScopeName is the instrumentation scope of the spans and metrics.
const ScopeName = "github.com/e6344662/go-redlock/redlockotel"

// Span names.
const (
	SpanAcquire    = "redlock.acquire"     // Acquire and its kin (Op acquire)
	SpanTryAcquire = "redlock.try_acquire" // TryAcquire and its kin
	SpanAttempt    = "redlock.attempt"
	SpanNodePrefix = "redlock.node." // + the node operation: redlock.node.acquire, ...
	SpanRelease    = "redlock.release"
	SpanRenew      = "redlock.renew"
)

// Span event names.
const (
	EventRenewFailing = "redlock.renew.failing"
	EventLeaseLost    = "redlock.lease.lost"
	EventRejoinWait   = "redlock.rejoin_wait"
)

// Attribute keys. The OpenTelemetry semantic conventions' keys are used
// where they apply: db.system.name (and the older db.system), server.address,
// server.port, error.type.
const (
	AttrDBSystemName  = attribute.Key("db.system.name")
	AttrDBSystem      = attribute.Key("db.system")
	AttrServerAddress = attribute.Key("server.address")
	AttrServerPort    = attribute.Key("server.port")
	AttrErrorType     = attribute.Key("error.type")

	AttrResource     = attribute.Key("redlock.resource")
	AttrLockKind     = attribute.Key("redlock.lock.kind")
	AttrOperation    = attribute.Key("redlock.operation") // acquire, try_acquire
	AttrLocker       = attribute.Key("redlock.locker")
	AttrFence        = attribute.Key("redlock.fence")
	AttrAttempts     = attribute.Key("redlock.attempts")
	AttrAttempt      = attribute.Key("redlock.attempt")
	AttrWait         = attribute.Key("redlock.wait.duration") // seconds
	AttrHandOver     = attribute.Key("redlock.hand_over")
	AttrLeases       = attribute.Key("redlock.leases")
	AttrNodes        = attribute.Key("redlock.nodes")
	AttrGranted      = attribute.Key("redlock.votes.granted")
	AttrRefused      = attribute.Key("redlock.votes.refused")
	AttrFailed       = attribute.Key("redlock.votes.failed")
	AttrNodeOp       = attribute.Key("redlock.node.operation")
	AttrVote         = attribute.Key("redlock.vote")
	AttrVoteReason   = attribute.Key("redlock.vote.reason")
	AttrHeld         = attribute.Key("redlock.hold.duration")   // seconds
	AttrValidFor     = attribute.Key("redlock.lease.valid_for") // seconds
	AttrSlack        = attribute.Key("redlock.renew.slack")     // seconds
	AttrOutcome      = attribute.Key("redlock.outcome")
	AttrReason       = attribute.Key("redlock.reason")
	AttrLeaseEndedBy = attribute.Key("redlock.lease.end")
)

// Metric names (OpenTelemetry style; a Prometheus exporter writes them
// with _ for . and the unit as a suffix, e.g.
// redlock_acquire_duration_seconds).
const (
	MetricAcquireDuration = "redlock.acquire.duration"
	MetricWaitDuration    = "redlock.acquire.wait.duration"
	MetricHoldDuration    = "redlock.lease.hold.duration"
	MetricHandOffDuration = "redlock.handoff.duration"
	MetricRenewSlack      = "redlock.renew.slack"
	MetricRenewFailing    = "redlock.renew.failing"
	MetricLeasesLost      = "redlock.leases.lost"
	MetricNodeDuration    = "redlock.node.duration"
	MetricNodeErrors      = "redlock.node.errors"
	MetricWaiters         = "redlock.waiters"
	MetricHolders         = "redlock.holders"
	// The metrics redlock-cli had before this package, kept under their
	// names so that the CLI and the library export one set.
	MetricAttempts = "redlock.acquire.attempts" // by result
	MetricGrants   = "redlock.attempt.grants"   // nodes that granted, per attempt
	MetricRenewals = "redlock.renewals"
	MetricReleases = "redlock.releases" // by result
)

// AttrResult is the result of an attempt (acquired, busy, no_quorum,
// error) or of a release (released, no_quorum, error), as redlock-cli
// labels them.
const AttrResult = attribute.Key("result")

// Outcomes of an acquisition (redlock.outcome): acquired, or the error
// type.
const OutcomeAcquired = "acquired"

// durationBuckets are the histogram bounds, in seconds: from a fast local
// round trip to a long wait for a busy lock.
var durationBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
}

// Option configures New.
type Option func(*config)

type config struct {
	tp     trace.TracerProvider
	mp     metric.MeterProvider
	locker string
}

// WithTracerProvider sets the TracerProvider (default: otel's global one).
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithMeterProvider sets the MeterProvider (default: otel's global one).
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithLockerName names the Locker in the metrics (attribute
// redlock.locker), to tell the waiters and holders of several Lockers
// apart. Default: no such attribute.
func WithLockerName(name string) Option { return func(c *config) { c.locker = name } }

// Observer is a redlock.ContextObserver that reports to OpenTelemetry.
// Give it to one Locker (redlock.Config.Observer); several Lockers may
// share one, their metrics then add up unless named (WithLockerName).
type Observer struct {
	tracer trace.Tracer
	common []attribute.KeyValue // redlock.locker, when named

	acquire, wait, hold, handOff, slack, node metric.Float64Histogram
	failing, lost, nodeErrors                 metric.Int64Counter
	waiters, holders                          metric.Int64UpDownCounter
	attempts, renewals, releases              metric.Int64Counter
	grants                                    metric.Int64Histogram

	// released holds when each resource was last released by a Lease of
	// this Observer's Lockers, for the hand-off time (bounded).
	mu       sync.Mutex
	released map[string]time.Time
}

var _ redlock.ContextObserver = (*Observer)(nil)

// maxReleased bounds the release times kept for hand-off times.
const maxReleased = 4096

// New returns an Observer. Instruments the MeterProvider cannot make are
// reported to otel.Handle and replaced by no-ops.
func New(opts ...Option) *Observer {
	c := config{}
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	m := c.mp.Meter(ScopeName)
	o := &Observer{tracer: c.tp.Tracer(ScopeName), released: map[string]time.Time{}}
	if c.locker != "" {
		o.common = []attribute.KeyValue{AttrLocker.String(c.locker)}
	}
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(durationBuckets...))
		if err != nil {
			otel.Handle(err)
		}
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		n, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if err != nil {
			otel.Handle(err)
		}
		return n
	}
	gauge := func(name, unit, desc string) metric.Int64UpDownCounter {
		n, err := m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if err != nil {
			otel.Handle(err)
		}
		return n
	}
	o.acquire = hist(MetricAcquireDuration, "Time an acquisition took to return, waiting included, by outcome.")
	o.wait = hist(MetricWaitDuration, "Time an acquisition waited before the lock was its (to the attempt that won, or the hand-over), by outcome.")
	o.hold = hist(MetricHoldDuration, "Time a lease was held, from its acquisition to its end, by how it ended.")
	o.handOff = hist(MetricHandOffDuration, "Time from a release to the next holder's acquisition of the same resource, within one process.")
	o.slack = hist(MetricRenewSlack, "Validity a lease still had when its renewal landed.")
	o.node = hist(MetricNodeDuration, "Duration of one call to one node, by node, operation and vote.")
	o.failing = counter(MetricRenewFailing, "{round}", "Renewal rounds that failed while the lease was still valid (the early warning).")
	o.lost = counter(MetricLeasesLost, "{lease}", "Leases lost, by cause.")
	o.nodeErrors = counter(MetricNodeErrors, "{call}", "Node calls that failed or answered late, by node, operation and kind.")
	o.waiters = gauge(MetricWaiters, "{call}", "Acquire calls waiting for a lock.")
	o.holders = gauge(MetricHolders, "{lease}", "Leases held.")
	o.attempts = counter(MetricAttempts, "{attempt}", "Acquisition attempts, by result: acquired, busy (held by another token), no_quorum (too many nodes failed), error (cut short or failed otherwise).")
	o.renewals = counter(MetricRenewals, "{renewal}", "Renewal cycles that extended a lease.")
	o.releases = counter(MetricReleases, "{release}", "Leases released, by result: released (by a majority), no_quorum, error.")
	g, err := m.Int64Histogram(MetricGrants, metric.WithDescription("Nodes that granted the lock, per acquisition attempt."), metric.WithExplicitBucketBoundaries(0, 1, 2, 3, 4, 5, 6, 7, 8, 9))
	if err != nil {
		otel.Handle(err)
	}
	o.grants = g
	return o
}

// Observe is not called: the Locker calls ObserveContext.
func (o *Observer) Observe(redlock.Event) {}

// op is the state of one operation (span) in its context.
type op struct {
	kind redlock.EventKind // the start event
	span trace.Span
	// attempts counts an acquisition's attempts; the votes tally an
	// attempt's node calls.
	attempts                atomic.Int32
	granted, refused, fails atomic.Int32
	parent                  *op
	ended                   atomic.Bool
}

type opKey struct{}

// opFrom returns the operation of ctx whose start was kind, or nil.
func opFrom(ctx context.Context, kind redlock.EventKind) *op {
	s, _ := ctx.Value(opKey{}).(*op)
	if s == nil || s.kind != kind {
		return nil
	}
	return s
}

// ending returns the operation of ctx begun by kind, once.
func ending(ctx context.Context, kind redlock.EventKind) *op {
	s := opFrom(ctx, kind)
	if s == nil || !s.ended.CompareAndSwap(false, true) {
		return nil
	}
	return s
}

// ObserveContext turns one event into spans and metrics.
func (o *Observer) ObserveContext(ctx context.Context, e redlock.Event) context.Context {
	switch e.Kind {
	case redlock.EventAcquireStart:
		return o.acquireStart(ctx, e)
	case redlock.EventAcquireEnd:
		o.acquireEnd(ctx, e)
	case redlock.EventAttemptStart:
		parent := opFrom(ctx, redlock.EventAcquireStart)
		attrs := []attribute.KeyValue{AttrResource.String(e.Resource), AttrNodes.Int(e.Total)}
		if parent != nil {
			attrs = append(attrs, AttrAttempt.Int(int(parent.attempts.Add(1))))
		}
		return o.start(ctx, e.Kind, SpanAttempt, trace.SpanKindInternal, attrs, parent)
	case redlock.EventAttempt:
		o.attempts.Add(ctx, 1, metric.WithAttributes(o.attrs(AttrResult.String(lockresult.Attempt(e.Err)))...))
		o.grants.Record(ctx, int64(e.Granted), metric.WithAttributes(o.common...))
		if s := ending(ctx, redlock.EventAttemptStart); s != nil {
			s.span.SetAttributes(AttrGranted.Int(int(s.granted.Load())), AttrRefused.Int(int(s.refused.Load())), AttrFailed.Int(int(s.fails.Load())))
			o.finish(s.span, e.Err)
		}
	case redlock.EventNodeCallStart:
		attrs := append(ServerAttributes(e.Node), AttrDBSystemName.String("redis"), AttrDBSystem.String("redis"), AttrNodeOp.String(e.Op))
		return o.start(ctx, e.Kind, SpanNodePrefix+e.Op, trace.SpanKindClient, attrs, opFrom(ctx, redlock.EventAttemptStart))
	case redlock.EventNodeCall:
		o.nodeCall(ctx, e)
	case redlock.EventReleaseStart:
		// The hand-off counts from the release's start: a waiter handed the
		// lock by the release script can report its acquisition before the
		// releasing call has its own reply (and its end event).
		o.markReleased(e.Resource, releaseBegins)
		return o.start(ctx, e.Kind, SpanRelease, trace.SpanKindInternal, []attribute.KeyValue{AttrResource.String(e.Resource)}, nil)
	case redlock.EventReleaseEnd:
		if e.Err != nil {
			o.markReleased(e.Resource, releaseFailed)
		} else {
			o.markReleased(e.Resource, releaseEnded)
		}
		if s := ending(ctx, redlock.EventReleaseStart); s != nil {
			s.span.SetAttributes(AttrFence.Int64(int64(e.Fence)), AttrHeld.Float64(e.Held.Seconds()))
			o.finish(s.span, e.Err)
		}
	case redlock.EventRenewStart:
		return o.renewStart(ctx, e)
	case redlock.EventRenewed:
		o.renewals.Add(ctx, 1, metric.WithAttributes(o.common...))
	case redlock.EventReleased:
		o.releases.Add(ctx, 1, metric.WithAttributes(o.attrs(AttrResult.String(lockresult.Release(e.Err)))...))
	case redlock.EventRenewEnd:
		if e.Err == nil {
			o.slack.Record(ctx, e.Left.Seconds(), metric.WithAttributes(o.attrs(AttrResource.String(e.Resource))...))
		}
		if s := ending(ctx, redlock.EventRenewStart); s != nil {
			if e.Err == nil {
				s.span.SetAttributes(AttrSlack.Float64(e.Left.Seconds()))
			}
			o.finish(s.span, e.Err)
		}
	case redlock.EventRenewFailing:
		o.failing.Add(ctx, 1, metric.WithAttributes(o.attrs(AttrResource.String(e.Resource))...))
		if s := opFrom(ctx, redlock.EventRenewStart); s != nil {
			s.span.AddEvent(EventRenewFailing, trace.WithAttributes(AttrValidFor.Float64(e.Left.Seconds()), AttrGranted.Int(e.Granted), AttrNodes.Int(e.Total),
				AttrErrorType.String(ErrorType(e.Err))))
		}
	case redlock.EventLost:
		cause := "renewal_failed"
		if e.Latency == 0 {
			cause = "expired" // found past its validity, not by a renewal
		}
		o.lost.Add(ctx, 1, metric.WithAttributes(o.attrs(AttrReason.String(cause))...))
		if s := opFrom(ctx, redlock.EventRenewStart); s != nil {
			s.span.AddEvent(EventLeaseLost, trace.WithAttributes(AttrReason.String(cause)))
		}
	case redlock.EventLeaseEnd:
		end := lockresult.LeaseEnd(e.Err)
		o.hold.Record(ctx, e.Held.Seconds(), metric.WithAttributes(o.attrs(AttrLeaseEndedBy.String(end))...))
		o.holders.Add(ctx, -1, metric.WithAttributes(o.common...))
	case redlock.EventRejoinWait:
		if s := opFrom(ctx, redlock.EventAcquireStart); s != nil {
			s.span.AddEvent(EventRejoinWait, trace.WithAttributes(AttrReason.String(e.Reason), AttrWait.Float64(e.Left.Seconds())))
		}
	}
	return ctx
}

// Ways markReleased records a release, for the next holder's hand-off time.
const (
	releaseBegins = iota // a release starts: its time replaces any earlier one
	releaseEnded         // a release succeeded: its time if none is recorded
	releaseFailed        // a release failed: forget it
)

// markReleased records resource's release as how says.
func (o *Observer) markReleased(resource string, how int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.released[resource]
	switch {
	case how == releaseFailed:
		delete(o.released, resource)
		return
	case how == releaseEnded && ok:
		return
	}
	if len(o.released) >= maxReleased {
		clear(o.released)
	}
	o.released[resource] = time.Now()
}

// start begins a span for an operation and returns its context.
func (o *Observer) start(ctx context.Context, kind redlock.EventKind, name string, sk trace.SpanKind, attrs []attribute.KeyValue, parent *op) context.Context {
	ctx, span := o.tracer.Start(ctx, name, trace.WithSpanKind(sk), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, opKey{}, &op{kind: kind, span: span, parent: parent})
}

func (o *Observer) acquireStart(ctx context.Context, e redlock.Event) context.Context {
	name := SpanAcquire
	if e.Op == "try_acquire" {
		name = SpanTryAcquire
	}
	ctx = o.start(ctx, e.Kind, name, trace.SpanKindInternal, []attribute.KeyValue{
		AttrResource.String(e.Resource), AttrLockKind.String(string(e.Lock)), AttrOperation.String(e.Op),
		AttrDBSystemName.String("redis"), AttrDBSystem.String("redis"), AttrNodes.Int(e.Total),
	}, nil)
	if e.Op == "acquire" {
		o.waiters.Add(ctx, 1, metric.WithAttributes(o.attrs(AttrLockKind.String(string(e.Lock)))...))
	}
	return ctx
}

func (o *Observer) acquireEnd(ctx context.Context, e redlock.Event) {
	outcome := OutcomeAcquired
	if e.Err != nil {
		outcome = ErrorType(e.Err)
	}
	attrs := metric.WithAttributes(o.attrs(AttrLockKind.String(string(e.Lock)), AttrOperation.String(e.Op), AttrOutcome.String(outcome))...)
	o.acquire.Record(ctx, e.Latency.Seconds(), attrs)
	if e.Err == nil {
		o.wait.Record(ctx, e.Waited.Seconds(), attrs)
		o.holders.Add(ctx, int64(e.Count), metric.WithAttributes(o.common...))
		o.mu.Lock()
		at, ok := o.released[e.Resource]
		if ok && time.Since(at) <= e.Latency {
			delete(o.released, e.Resource)
		} else {
			ok = false
		}
		o.mu.Unlock()
		if ok && (e.Waited > 0 || e.HandOver) {
			o.handOff.Record(ctx, time.Since(at).Seconds(), metric.WithAttributes(o.attrs(AttrLockKind.String(string(e.Lock)), AttrHandOver.Bool(e.HandOver))...))
		}
	}
	if e.Op == "acquire" {
		o.waiters.Add(ctx, -1, metric.WithAttributes(o.attrs(AttrLockKind.String(string(e.Lock)))...))
	}
	s := ending(ctx, redlock.EventAcquireStart)
	if s == nil {
		return
	}
	s.span.SetAttributes(AttrAttempts.Int(e.Attempts), AttrOutcome.String(outcome))
	if e.Err == nil {
		s.span.SetAttributes(AttrFence.Int64(int64(e.Fence)), AttrWait.Float64(e.Waited.Seconds()), AttrHandOver.Bool(e.HandOver), AttrLeases.Int(e.Count))
	}
	o.finish(s.span, e.Err)
}

func (o *Observer) nodeCall(ctx context.Context, e redlock.Event) {
	server := ServerAttributes(e.Node)
	o.node.Record(ctx, e.Latency.Seconds(), metric.WithAttributes(o.attrs(append(server, AttrNodeOp.String(e.Op), AttrVote.String(string(e.Vote)))...)...))
	if e.Vote == redlock.VoteFailed || e.Vote == redlock.VoteLate {
		kind := string(e.Vote)
		if e.Err != nil {
			kind = ErrorType(e.Err)
		}
		o.nodeErrors.Add(ctx, 1, metric.WithAttributes(o.attrs(append(server, AttrNodeOp.String(e.Op), AttrErrorType.String(kind))...)...))
	}
	s := ending(ctx, redlock.EventNodeCallStart)
	if s == nil {
		return
	}
	attrs := []attribute.KeyValue{AttrVote.String(string(e.Vote))}
	if e.Reason != "" {
		attrs = append(attrs, AttrVoteReason.String(e.Reason))
	}
	if e.HandOver {
		attrs = append(attrs, AttrHandOver.Bool(true))
	}
	if a := s.parent; a != nil {
		// The attempt's tally as this vote made it.
		var g, r, f int32
		switch e.Vote {
		case redlock.VoteGranted:
			g = a.granted.Add(1)
			r, f = a.refused.Load(), a.fails.Load()
		case redlock.VoteRefused:
			r = a.refused.Add(1)
			g, f = a.granted.Load(), a.fails.Load()
		default:
			f = a.fails.Add(1)
			g, r = a.granted.Load(), a.refused.Load()
		}
		attrs = append(attrs, AttrGranted.Int(int(g)), AttrRefused.Int(int(r)), AttrFailed.Int(int(f)), AttrNodes.Int(e.Total))
	}
	s.span.SetAttributes(attrs...)
	if e.Err != nil {
		s.span.RecordError(e.Err)
		s.span.SetStatus(codes.Error, ErrorType(e.Err))
		s.span.SetAttributes(AttrErrorType.String(ErrorType(e.Err)))
	}
	s.span.End()
}

func (o *Observer) renewStart(ctx context.Context, e redlock.Event) context.Context {
	// A renewal is background work of a lease that may live for hours: a
	// trace of its own, linked to the acquisition.
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrResource.String(e.Resource), AttrFence.Int64(int64(e.Fence)), AttrDBSystemName.String("redis"), AttrDBSystem.String("redis"))}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	ctx, span := o.tracer.Start(ctx, SpanRenew, opts...)
	return context.WithValue(ctx, opKey{}, &op{kind: e.Kind, span: span})
}

// finish ends a span with err recorded, if any.
func (o *Observer) finish(span trace.Span, err error) {
	if err != nil {
		t := ErrorType(err)
		span.RecordError(err)
		span.SetStatus(codes.Error, t)
		span.SetAttributes(AttrErrorType.String(t))
	}
	span.End()
}

// attrs returns the Observer's common attributes and more.
func (o *Observer) attrs(more ...attribute.KeyValue) []attribute.KeyValue {
	if len(o.common) == 0 {
		return more
	}
	return append(more, o.common...)
}

// ErrorType is the error.type of a Locker's error: the typed reason, as a
// short snake_case name of its sentinel (rejoining, not_acquired,
// no_quorum, lease_lost, not_held, ...), "canceled" or "deadline_exceeded"
// for a context that ended, "_OTHER" otherwise. The CLI's traces use the
// same names.
func ErrorType(err error) string { return lockresult.ErrorType(err) }

// ServerAttributes returns the attributes server.address and server.port
// of a node's address (host:port), never a password: a Node's Addr has
// none by contract, and a scheme and anything up to an @ are dropped all
// the same.
func ServerAttributes(addr string) []attribute.KeyValue {
	if i := strings.LastIndexByte(addr, '@'); i >= 0 {
		addr = addr[i+1:]
	}
	if i := strings.Index(addr, "://"); i >= 0 {
		addr = addr[i+3:]
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return []attribute.KeyValue{AttrServerAddress.String(addr)}
	}
	if p, err := strconv.Atoi(port); err == nil {
		return []attribute.KeyValue{AttrServerAddress.String(host), AttrServerPort.Int(p)}
	}
	return []attribute.KeyValue{AttrServerAddress.String(host)}
}
