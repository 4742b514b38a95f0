package cli

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/e6344662/go-redlock/internal/lockresult"
	"github.com/e6344662/go-redlock/redlock"
)

// --trace: the spans of redlockotel (docs/observability.md: the same span,
// attribute and event names), printed one JSON object a line or sent to
// an OpenTelemetry collector as OTLP/HTTP with JSON encoding. The CLI
// does not import redlockotel: internal/cli is in the root module, which
// would then require OpenTelemetry (see metrics.go); this small adapter
// makes the same spans from the same events.

// traceScope is the instrumentation scope of the CLI's spans:
// redlockotel's.
const traceScope = "github.com/e6344662/go-redlock/redlockotel"

// traceFlushTimeout bounds the export of the last spans when the command
// ends.
const traceFlushTimeout = 3 * time.Second

// traceBatch is how many ended spans an OTLP exporter sends at once.
const traceBatch = 256

// addTraceFlag adds --trace to fs.
func addTraceFlag(fs *pflag.FlagSet, dest *string) {
	fs.StringVar(dest, "trace", "", "trace the lock operations: print each span as a JSON line on `stdout|stderr`, or send them as OTLP/HTTP (JSON) to an OpenTelemetry collector at http(s)://HOST:PORT[/v1/traces]")
}

// checkTrace rejects a --trace that is neither stdout, stderr nor an
// http(s) URL with a host.
func checkTrace(dest string) error {
	switch dest {
	case "", "stdout", "stderr":
		return nil
	}
	u, err := url.Parse(dest)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageErrorf("malformed --trace %q: want stdout, stderr or an OTLP/HTTP endpoint such as http://127.0.0.1:4318", dest)
	}
	return nil
}

// traceState is --trace's destination and, once started, how to flush
// it.
type traceState struct {
	dest    string
	flushed func()
}

// registerTrace adds --trace to root's persistent flags and starts the
// tracing before any command runs.
func (a *App) registerTrace(root *cobra.Command) {
	ts := &a.trace
	addTraceFlag(root.PersistentFlags(), &ts.dest)
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		stop, err := a.startTrace(ts.dest)
		if err != nil {
			return err
		}
		ts.flushed = stop
		return nil
	}
}

// stop flushes the spans when the command ends.
func (ts *traceState) stop() {
	if ts.flushed != nil {
		ts.flushed()
		ts.flushed = nil
	}
}

// startTrace starts tracing to dest (--trace) and adds the tracer to
// a.observer; stop flushes the spans. With dest empty it does nothing.
func (a *App) startTrace(dest string) (stop func(), err error) {
	if dest == "" {
		return func() {}, nil
	}
	if err := checkTrace(dest); err != nil {
		return nil, err
	}
	var exp spanExporter
	switch dest {
	case "stdout":
		exp = &lineExporter{w: a.Stdout}
	case "stderr":
		exp = &lineExporter{w: a.Stderr}
	default:
		u, _ := url.Parse(dest)
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
		}
		exp = &otlpExporter{url: u.String(), client: &http.Client{Timeout: traceFlushTimeout}, warn: a.warnf}
	}
	t := &tracer{exp: exp}
	a.observer = observers(a.observer, t)
	return func() { exp.flush() }, nil
}

// observers combines two Observers (either may be nil) into one.
func observers(a, b redlock.Observer) redlock.Observer {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return observerPair{a, b}
}

// observerPair hands every event to both of its Observers.
type observerPair [2]redlock.Observer

// Observe hands e to both, as ContextObservers when they are.
func (p observerPair) Observe(e redlock.Event) { p.ObserveContext(context.Background(), e) }

// ObserveContext hands e to both; for a start event the second gets the
// context the first returned.
func (p observerPair) ObserveContext(ctx context.Context, e redlock.Event) context.Context {
	for _, o := range p {
		if co, ok := o.(redlock.ContextObserver); ok {
			ctx = co.ObserveContext(ctx, e)
		} else if isLegacy(e.Kind) {
			o.Observe(e)
		}
	}
	return ctx
}

// isLegacy reports whether an Observer that is not a ContextObserver
// receives events of kind k.
func isLegacy(k redlock.EventKind) bool {
	return k >= redlock.EventAttempt && k <= redlock.EventNodeError
}

// watched returns the Observer of a session's Locker: a.watch (when set)
// in front of a.observer. The watcher is a plain Observer, made to
// forward the old kinds to a.observer; when a.observer is a
// ContextObserver, the pair hands it every event with its context
// instead, and the watcher forwards nothing.
func (a *App) watched() redlock.Observer {
	if a.watch == nil {
		return a.observer
	}
	if co, ok := a.observer.(redlock.ContextObserver); ok {
		a.watch.next = nil
		return watchedPair{watch: a.watch, next: co}
	}
	return a.watch
}

// watchedPair is a watcher in front of a ContextObserver.
type watchedPair struct {
	watch *watcher
	next  redlock.ContextObserver
}

// Observe hands e to both.
func (w watchedPair) Observe(e redlock.Event) { w.ObserveContext(context.Background(), e) }

// ObserveContext hands the old kinds to the watcher, and every event to
// the next Observer.
func (w watchedPair) ObserveContext(ctx context.Context, e redlock.Event) context.Context {
	if isLegacy(e.Kind) {
		w.watch.Observe(e)
	}
	return w.next.ObserveContext(ctx, e)
}

// span is one span the tracer made.
type span struct {
	kind                   redlock.EventKind // its start event
	traceID                [16]byte
	spanID, parentID, link [8]byte
	name                   string
	client                 bool
	start, end             time.Time
	attrs                  map[string]any
	events                 []spanEvent
	errType, errMsg        string
	parent                 *span
	granted, refused, fail atomic.Int32 // an attempt's tally
	attempts               atomic.Int32 // an acquisition's attempts
	mu                     sync.Mutex
	ended                  bool
}

type spanEvent struct {
	name  string
	at    time.Time
	attrs map[string]any
}

type spanKey struct{}

// tracer is a redlock.ContextObserver that makes redlockotel's spans.
type tracer struct{ exp spanExporter }

var _ redlock.ContextObserver = (*tracer)(nil)

// Observe is not called: the Locker calls ObserveContext.
func (*tracer) Observe(redlock.Event) {}

// spanOf returns the span of ctx begun by kind, or nil.
func spanOf(ctx context.Context, kind redlock.EventKind) *span {
	s, _ := ctx.Value(spanKey{}).(*span)
	if s == nil || s.kind != kind {
		return nil
	}
	return s
}

// ObserveContext makes and ends the spans.
func (t *tracer) ObserveContext(ctx context.Context, e redlock.Event) context.Context {
	switch e.Kind {
	case redlock.EventAcquireStart:
		name := "redlock.acquire"
		if e.Op == "try_acquire" {
			name = "redlock.try_acquire"
		}
		return t.start(ctx, e.Kind, name, false, nil, map[string]any{"redlock.resource": e.Resource, "redlock.lock.kind": string(e.Lock),
			"redlock.operation": e.Op, "db.system.name": "redis", "db.system": "redis", "redlock.nodes": e.Total})
	case redlock.EventAcquireEnd:
		t.end(ctx, redlock.EventAcquireStart, e.Err, func(s *span) {
			s.attrs["redlock.attempts"] = e.Attempts
			if e.Err == nil {
				s.attrs["redlock.outcome"] = "acquired"
				s.attrs["redlock.fence"] = int64(e.Fence)
				s.attrs["redlock.wait.duration"] = e.Waited.Seconds()
				s.attrs["redlock.hand_over"] = e.HandOver
				s.attrs["redlock.leases"] = e.Count
			}
		})
	case redlock.EventAttemptStart:
		parent := spanOf(ctx, redlock.EventAcquireStart)
		attrs := map[string]any{"redlock.resource": e.Resource, "redlock.nodes": e.Total}
		if parent != nil {
			attrs["redlock.attempt"] = int(parent.attempts.Add(1))
		}
		return t.start(ctx, e.Kind, "redlock.attempt", false, parent, attrs)
	case redlock.EventAttempt:
		t.end(ctx, redlock.EventAttemptStart, e.Err, func(s *span) {
			s.attrs["redlock.votes.granted"] = int(s.granted.Load())
			s.attrs["redlock.votes.refused"] = int(s.refused.Load())
			s.attrs["redlock.votes.failed"] = int(s.fail.Load())
		})
	case redlock.EventNodeCallStart:
		attrs := map[string]any{"db.system.name": "redis", "db.system": "redis", "redlock.node.operation": e.Op}
		host, port, err := net.SplitHostPort(e.Node)
		if err != nil {
			host = e.Node
		}
		attrs["server.address"] = host
		if p, err := strconv.Atoi(port); err == nil {
			attrs["server.port"] = p
		}
		return t.start(ctx, e.Kind, "redlock.node."+e.Op, true, spanOf(ctx, redlock.EventAttemptStart), attrs)
	case redlock.EventNodeCall:
		t.end(ctx, redlock.EventNodeCallStart, e.Err, func(s *span) {
			s.attrs["redlock.vote"] = string(e.Vote)
			if e.Reason != "" {
				s.attrs["redlock.vote.reason"] = e.Reason
			}
			if a := s.parent; a != nil {
				switch e.Vote {
				case redlock.VoteGranted:
					a.granted.Add(1)
				case redlock.VoteRefused:
					a.refused.Add(1)
				default:
					a.fail.Add(1)
				}
				s.attrs["redlock.votes.granted"] = int(a.granted.Load())
				s.attrs["redlock.votes.refused"] = int(a.refused.Load())
				s.attrs["redlock.votes.failed"] = int(a.fail.Load())
			}
		})
	case redlock.EventReleaseStart:
		return t.start(ctx, e.Kind, "redlock.release", false, nil, map[string]any{"redlock.resource": e.Resource})
	case redlock.EventReleaseEnd:
		t.end(ctx, redlock.EventReleaseStart, e.Err, func(s *span) {
			s.attrs["redlock.fence"] = int64(e.Fence)
			s.attrs["redlock.hold.duration"] = e.Held.Seconds()
		})
	case redlock.EventRenewStart:
		// A trace of its own, linked to the acquisition.
		var link [8]byte
		var traceID [16]byte
		if p, _ := ctx.Value(spanKey{}).(*span); p != nil {
			link, traceID = p.spanID, p.traceID
		}
		ctx = t.start(context.WithValue(ctx, spanKey{}, nil), e.Kind, "redlock.renew", false, nil, map[string]any{"redlock.resource": e.Resource, "redlock.fence": int64(e.Fence)})
		if s := spanOf(ctx, e.Kind); s != nil && link != ([8]byte{}) {
			s.link = link
			s.attrs["redlock.link.trace_id"] = hex.EncodeToString(traceID[:])
		}
		return ctx
	case redlock.EventRenewEnd:
		t.end(ctx, redlock.EventRenewStart, e.Err, func(s *span) {
			if e.Err == nil {
				s.attrs["redlock.renew.slack"] = e.Left.Seconds()
			}
		})
	case redlock.EventRenewFailing:
		if s := spanOf(ctx, redlock.EventRenewStart); s != nil {
			s.addEvent("redlock.renew.failing", map[string]any{"redlock.lease.valid_for": e.Left.Seconds(), "redlock.votes.granted": e.Granted,
				"redlock.nodes": e.Total, "error.type": lockresult.ErrorType(e.Err)})
		}
	case redlock.EventRejoinWait:
		if s := spanOf(ctx, redlock.EventAcquireStart); s != nil {
			s.addEvent("redlock.rejoin_wait", map[string]any{"redlock.reason": e.Reason, "redlock.wait.duration": e.Left.Seconds()})
		}
	}
	return ctx
}

func (s *span) addEvent(name string, attrs map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.events = append(s.events, spanEvent{name: name, at: time.Now(), attrs: attrs})
	}
}

// start begins a span under the span of ctx, if any.
func (t *tracer) start(ctx context.Context, kind redlock.EventKind, name string, client bool, parent *span, attrs map[string]any) context.Context {
	s := &span{kind: kind, name: name, client: client, start: time.Now(), attrs: attrs, parent: parent}
	if p, _ := ctx.Value(spanKey{}).(*span); p != nil {
		s.traceID, s.parentID = p.traceID, p.spanID
	} else {
		randomID(s.traceID[:])
	}
	randomID(s.spanID[:])
	return context.WithValue(ctx, spanKey{}, s)
}

// end ends the span of ctx begun by kind, once, after fill adds its
// attributes, and exports it.
func (t *tracer) end(ctx context.Context, kind redlock.EventKind, err error, fill func(*span)) {
	s := spanOf(ctx, kind)
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	s.end = time.Now()
	fill(s)
	if err != nil {
		s.errType, s.errMsg = lockresult.ErrorType(err), err.Error()
		s.attrs["error.type"] = s.errType
		if kind == redlock.EventAcquireStart {
			s.attrs["redlock.outcome"] = s.errType
		}
	}
	s.mu.Unlock()
	t.exp.export(s)
}

// randomID fills b with random bytes, never all zero.
func randomID(b []byte) {
	for {
		for i := range b {
			b[i] = byte(rand.Uint32())
		}
		for _, c := range b {
			if c != 0 {
				return
			}
		}
	}
}

// spanExporter takes ended spans.
type spanExporter interface {
	export(*span)
	flush()
}

// lineExporter prints each span as one JSON line.
type lineExporter struct {
	mu sync.Mutex
	w  io.Writer
}

func (x *lineExporter) export(s *span) {
	obj := map[string]any{
		"name": s.name, "trace_id": hex.EncodeToString(s.traceID[:]), "span_id": hex.EncodeToString(s.spanID[:]),
		"start": s.start.UTC().Format(time.RFC3339Nano), "duration_ms": float64(s.end.Sub(s.start).Microseconds()) / 1000,
		"attributes": s.attrs, "status": "unset",
	}
	if s.parentID != ([8]byte{}) {
		obj["parent_span_id"] = hex.EncodeToString(s.parentID[:])
	}
	if s.link != ([8]byte{}) {
		obj["link_span_id"] = hex.EncodeToString(s.link[:])
	}
	if s.errType != "" {
		obj["status"] = "error"
		obj["error"] = s.errMsg
	}
	if len(s.events) > 0 {
		evs := make([]map[string]any, len(s.events))
		for i, ev := range s.events {
			evs[i] = map[string]any{"name": ev.name, "time": ev.at.UTC().Format(time.RFC3339Nano), "attributes": ev.attrs}
		}
		obj["events"] = evs
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	_, _ = x.w.Write(append(b, '\n'))
}

func (x *lineExporter) flush() {}

// otlpExporter sends spans to an OTLP/HTTP endpoint, JSON encoded, in
// batches of traceBatch and at flush.
type otlpExporter struct {
	url    string
	client *http.Client
	warn   func(format string, args ...any)

	mu      sync.Mutex
	pending []*span
	sending sync.WaitGroup
	warned  atomic.Bool
}

func (x *otlpExporter) export(s *span) {
	x.mu.Lock()
	x.pending = append(x.pending, s)
	var batch []*span
	if len(x.pending) >= traceBatch {
		batch, x.pending = x.pending, nil
	}
	x.mu.Unlock()
	if batch != nil {
		x.sending.Add(1)
		go func() {
			defer x.sending.Done()
			x.send(batch)
		}()
	}
}

func (x *otlpExporter) flush() {
	x.mu.Lock()
	batch := x.pending
	x.pending = nil
	x.mu.Unlock()
	if len(batch) > 0 {
		x.send(batch)
	}
	x.sending.Wait()
}

// send posts one batch; a failure is reported once on stderr.
func (x *otlpExporter) send(batch []*span) {
	body, err := json.Marshal(otlpRequest(batch))
	if err == nil {
		var resp *http.Response
		resp, err = x.client.Post(x.url, "application/json", bytes.NewReader(body))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				err = fmt.Errorf("HTTP %s", resp.Status)
			}
		}
	}
	if err != nil && x.warned.CompareAndSwap(false, true) {
		x.warn("--trace: cannot send spans to %s: %s", x.url, reason(err))
	}
}

// otlpRequest is an ExportTraceServiceRequest in OTLP's JSON encoding.
func otlpRequest(batch []*span) map[string]any {
	spans := make([]map[string]any, len(batch))
	for i, s := range batch {
		kind := 1 // SPAN_KIND_INTERNAL
		if s.client {
			kind = 3 // SPAN_KIND_CLIENT
		}
		o := map[string]any{
			"traceId": hex.EncodeToString(s.traceID[:]), "spanId": hex.EncodeToString(s.spanID[:]),
			"name": s.name, "kind": kind,
			"startTimeUnixNano": strconv.FormatInt(s.start.UnixNano(), 10), "endTimeUnixNano": strconv.FormatInt(s.end.UnixNano(), 10),
			"attributes": otlpAttrs(s.attrs),
		}
		if s.parentID != ([8]byte{}) {
			o["parentSpanId"] = hex.EncodeToString(s.parentID[:])
		}
		if s.errType != "" {
			o["status"] = map[string]any{"code": 2, "message": s.errType} // STATUS_CODE_ERROR
		}
		if len(s.events) > 0 {
			evs := make([]map[string]any, len(s.events))
			for j, ev := range s.events {
				evs[j] = map[string]any{"name": ev.name, "timeUnixNano": strconv.FormatInt(ev.at.UnixNano(), 10), "attributes": otlpAttrs(ev.attrs)}
			}
			o["events"] = evs
		}
		spans[i] = o
	}
	return map[string]any{"resourceSpans": []any{map[string]any{
		"resource":   map[string]any{"attributes": otlpAttrs(map[string]any{"service.name": "redlock-cli"})},
		"scopeSpans": []any{map[string]any{"scope": map[string]any{"name": traceScope}, "spans": spans}},
	}}}
}

// otlpAttrs encodes attributes as OTLP KeyValues.
func otlpAttrs(attrs map[string]any) []map[string]any {
	out := make([]map[string]any, 0, len(attrs))
	for k, v := range attrs {
		var val map[string]any
		switch x := v.(type) {
		case string:
			val = map[string]any{"stringValue": x}
		case bool:
			val = map[string]any{"boolValue": x}
		case int:
			val = map[string]any{"intValue": strconv.Itoa(x)}
		case int64:
			val = map[string]any{"intValue": strconv.FormatInt(x, 10)}
		case float64:
			val = map[string]any{"doubleValue": x}
		default:
			val = map[string]any{"stringValue": fmt.Sprint(x)}
		}
		out = append(out, map[string]any{"key": k, "value": val})
	}
	return out
}
