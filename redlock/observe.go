package redlock

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/e6344662/go-redlock/fencing"
)

// EventKind says what an Event reports.
type EventKind int

const (
	// EventAttempt is one acquisition attempt, successful (Err nil) or not.
	// It ends the attempt that EventAttemptStart began.
	EventAttempt EventKind = iota + 1
	// EventAcquired is a lease granted by Acquire or TryAcquire; Latency
	// includes any waiting, Attempts counts the attempts.
	EventAcquired
	// EventRenewed is a renewal cycle that extended the lease; Left is the
	// validity the lease still had when the renewal landed (the slack).
	EventRenewed
	// EventLost is a lease lost: renewal could not keep a majority.
	EventLost
	// EventReleased is a lease released by Release or Close.
	EventReleased
	// EventNodeError is one node call that failed (Node, Op, Err).
	EventNodeError

	// The kinds below reach only a ContextObserver (and, for
	// EventRenewFailing and EventRejoinWait, the Logger). Each
	// ...Start event begins an operation whose context the Locker hands
	// to the events nested in it and to its node calls; exactly one end
	// event follows it, with the context the start returned.

	// EventAcquireStart begins an acquisition: Acquire, TryAcquire,
	// AcquireAll, TryAcquireAll, a read-write lock's or a semaphore's
	// (Op "acquire" or "try_acquire", Lock the kind of lock, Resource).
	EventAcquireStart
	// EventAcquireEnd ends it: Err nil with the lease (Fence, Count leases,
	// Attempts, Waited, HandOver), or the failure.
	EventAcquireEnd
	// EventAttemptStart begins one attempt (ended by EventAttempt).
	EventAttemptStart
	// EventNodeCallStart begins one call to one node (Node, Op).
	EventNodeCallStart
	// EventNodeCall ends it: Vote (and Reason for a refusal), Err for a
	// failure, Latency.
	EventNodeCall
	// EventReleaseStart begins Lease.Release; EventReleaseEnd ends it
	// (Held, Err).
	EventReleaseStart
	// EventReleaseEnd ends Lease.Release.
	EventReleaseEnd
	// EventRenewStart begins one renewal cycle of a lease; its context
	// carries the values of the context of the acquisition that made the
	// lease (not its cancellation). EventRenewEnd ends it: Err nil and
	// Left (the slack) when renewed, ErrLeaseLost when not.
	EventRenewStart
	// EventRenewEnd ends a renewal cycle.
	EventRenewEnd
	// EventRenewFailing is the early warning: one round of a renewal cycle
	// failed (Granted of Total, Err) while the lease is still valid for
	// Left; the cycle retries until the lease is renewed or lost.
	EventRenewFailing
	// EventRejoinWait says, once per Acquire, that the lock is free but the
	// nodes are sitting out their rejoin delay (Config.RejoinDelay):
	// Reason says why, Left how long at most.
	EventRejoinWait
	// EventLeaseEnd is a lease ended (released, lost or orphaned; Err is
	// the cause, ErrLeaseReleased for a release), Held how long it was
	// held. Emitted once per lease.
	EventLeaseEnd
)

var eventNames = map[EventKind]string{
	EventAttempt:       "attempt",
	EventAcquired:      "acquired",
	EventRenewed:       "renewed",
	EventLost:          "lost",
	EventReleased:      "released",
	EventNodeError:     "node_error",
	EventAcquireStart:  "acquire_start",
	EventAcquireEnd:    "acquire_end",
	EventAttemptStart:  "attempt_start",
	EventNodeCallStart: "node_call_start",
	EventNodeCall:      "node_call",
	EventReleaseStart:  "release_start",
	EventReleaseEnd:    "release_end",
	EventRenewStart:    "renew_start",
	EventRenewEnd:      "renew_end",
	EventRenewFailing:  "renew_failing",
	EventRejoinWait:    "rejoin_wait",
	EventLeaseEnd:      "lease_end",
}

// String returns the kind's name in snake_case, as used in metrics.
func (k EventKind) String() string {
	if s, ok := eventNames[k]; ok {
		return s
	}
	return "unknown"
}

// starts reports whether the kind begins an operation (...Start): a
// ContextObserver's context returned for it is the operation's.
func (k EventKind) starts() bool {
	switch k {
	case EventAcquireStart, EventAttemptStart, EventNodeCallStart, EventReleaseStart, EventRenewStart:
		return true
	}
	return false
}

// legacy reports whether the kind reaches an Observer that is not a
// ContextObserver (the kinds that existed before ContextObserver).
func (k EventKind) legacy() bool { return k >= EventAttempt && k <= EventNodeError }

// LockKind names the kind of lock an acquisition is for.
type LockKind string

// The kinds of lock.
const (
	LockMutex     LockKind = "mutex"     // Acquire, TryAcquire
	LockAll       LockKind = "all"       // AcquireAll, TryAcquireAll
	LockWrite     LockKind = "write"     // RWLock.Acquire, TryAcquire
	LockRead      LockKind = "read"      // RWLock.AcquireShared, TryAcquireShared
	LockSemaphore LockKind = "semaphore" // Semaphore.Acquire, TryAcquire
)

// Vote is one node's answer to one call (EventNodeCall).
type Vote string

// The votes.
const (
	// VoteGranted: the node said yes (granted, renewed, released,
	// confirmed the fence; for an acquire, HandOver reports a lock the
	// node had handed over to the caller's place).
	VoteGranted Vote = "granted"
	// VoteRefused: the node answered no; Reason says why when it did.
	VoteRefused Vote = "refused"
	// VoteFailed: the call failed or timed out (Err); its outcome on the
	// node is unknown.
	VoteFailed Vote = "failed"
	// VoteLate: the node answered after the fan-out's deadline
	// (Config.NodeCallTimeout), when the caller had stopped listening and
	// counted it as silent; Reason holds the answer ("granted: ...").
	VoteLate Vote = "late"
)

// Event is one thing a Locker did, for an Observer. Fields that do not apply
// to a kind are zero. An Event never holds a lease's token or a node's
// password.
type Event struct {
	Kind     EventKind
	Resource string
	// Node is the node's address (EventNodeError, node calls).
	Node string
	// Op is the node operation: "acquire", "fence", "renew", "release",
	// "inspect" or "rehold" (node calls), or the acquisition: "acquire" or
	// "try_acquire" (EventAcquireStart, EventAcquireEnd).
	Op string
	// Granted counts the nodes that said yes (grants, renewals, releases);
	// Total is the number of nodes.
	Granted, Total int
	// Attempts counts acquisition attempts (EventAcquired,
	// EventAcquireEnd).
	Attempts int
	// Latency is how long the operation took.
	Latency time.Duration
	// Err is the failure, if any.
	Err error

	// Lock is the kind of lock (EventAcquireStart, EventAcquireEnd).
	Lock LockKind
	// Vote is a node's answer (EventNodeCall); Reason says why a node
	// refused, or why an Acquire waits (EventRejoinWait).
	Vote   Vote
	Reason string
	// Fence is the lease's fencing token (EventAcquireEnd: the first
	// lease's; EventLeaseEnd).
	Fence fencing.Token
	// Count is the number of leases made (EventAcquireEnd: one per
	// resource of AcquireAll).
	Count int
	// Waited is how long the acquisition waited before the lock was its:
	// to the start of the attempt that won, or to the hand-over.
	Waited time.Duration
	// HandOver reports a lock handed over to the caller by its release
	// (EventAcquireEnd), or a node call answering that the node had
	// (EventNodeCall).
	HandOver bool
	// Left is validity left: when a renewal landed (EventRenewed,
	// EventRenewEnd), while a renewal is failing (EventRenewFailing), or
	// the longest wait announced (EventRejoinWait).
	Left time.Duration
	// Held is how long the lease was held (EventReleaseEnd, EventLeaseEnd).
	Held time.Duration
}

// Observer receives a Locker's events, for metrics or tracing. Observe is
// called for the kinds EventAttempt to EventNodeError only; a
// ContextObserver receives every kind, with the caller's context.
//
// Delivery is guarded: each event is handed to the Observer on a
// goroutine of its own while the Locker waits for it at most
// ObserverTimeout; a panic in the Observer is recovered (and logged once
// at error level); an Observer still running after ObserverTimeout is left
// to finish, and every event is dropped (not delivered) until it returns.
// So an Observer that panics or blocks never breaks a lock operation nor
// holds it up for longer than ObserverTimeout per event, once, but it
// misses events. A healthy Observer has seen an operation's events by the
// time the operation returns. Observe must be safe for concurrent use.
type Observer interface {
	Observe(Event)
}

// ContextObserver is the successor of Observer: it receives every event
// with the context of the call it belongs to (the caller's, or for a
// lease's renewals the acquisition's), so that it can start and end
// spans and read baggage. For a start event (EventAcquireStart,
// EventAttemptStart, EventNodeCallStart, EventReleaseStart,
// EventRenewStart) the context it returns becomes the operation's: the Locker passes it to the
// nested events, to the end event and to the node calls (the Node's Eval
// gets it). It must return ctx or a context derived from it, and its
// return is ignored for the other kinds. The Locker calls ObserveContext
// instead of Observe.
//
// An end event may come with a context that is not the one its start
// returned, when the start was dropped or ran past ObserverTimeout (see
// Observer): a ContextObserver must recognise the contexts it made.
type ContextObserver interface {
	Observer
	ObserveContext(ctx context.Context, e Event) context.Context
}

// ObserverFunc adapts a function to an Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// ObserverTimeout bounds how long a lock operation waits for its Observer
// to take one event (see Observer).
const ObserverTimeout = 100 * time.Millisecond

// observerGuard is a Locker's guard on its Observer's calls.
type observerGuard struct {
	// overdue counts calls that ran past ObserverTimeout and have not
	// returned: while it is positive, events are dropped.
	overdue  atomic.Int32
	dropped  atomic.Uint64
	panicked atomic.Bool
}

// delivery is one event handed to the Observer.
type delivery struct {
	ctx   context.Context
	e     Event
	out   context.Context
	state atomic.Int32 // deliveryPending, deliveryDone, deliveryAbandoned
	done  chan struct{}
}

const (
	deliveryPending int32 = iota
	deliveryDone
	deliveryAbandoned
)

// deliver hands e to the Observer under the guard and returns the context
// it returned (ctx when it did not, or for the kinds that return none).
func (l *Locker) deliver(ctx context.Context, e Event) context.Context {
	g := &l.observing
	if g.overdue.Load() > 0 {
		g.dropped.Add(1)
		return ctx
	}
	d := &delivery{ctx: ctx, e: e, out: ctx, done: make(chan struct{})}
	go l.run(d)
	t := time.NewTimer(ObserverTimeout)
	select {
	case <-d.done:
		t.Stop()
		return d.out
	case <-t.C:
	}
	if d.state.CompareAndSwap(deliveryPending, deliveryAbandoned) {
		g.overdue.Add(1)
		g.dropped.Add(1)
		return ctx
	}
	<-d.done // it returned just now
	return d.out
}

// run calls the Observer with d's event, recovering a panic.
func (l *Locker) run(d *delivery) {
	defer func() {
		if r := recover(); r != nil {
			d.out = d.ctx
			if l.observing.panicked.CompareAndSwap(false, true) && l.cfg.Logger != nil {
				l.cfg.Logger.LogAttrs(context.Background(), slog.LevelError, "redlock: the Observer panicked; the lock goes on (logged once)",
					slog.String("event", d.e.Kind.String()), slog.String("panic", fmt.Sprint(r)))
			}
		}
		if !d.state.CompareAndSwap(deliveryPending, deliveryDone) {
			l.observing.overdue.Add(-1) // abandoned: events flow again
		}
		close(d.done)
	}()
	if co, ok := l.cfg.Observer.(ContextObserver); ok {
		if out := co.ObserveContext(d.ctx, d.e); out != nil && d.e.Kind.starts() {
			d.out = out
		}
		return
	}
	l.cfg.Observer.Observe(d.e)
}

// observed reports whether the Locker has a ContextObserver: the events
// only it receives are built only then.
func (l *Locker) observed() bool {
	if l.cfg.Observer == nil {
		return false
	}
	_, ok := l.cfg.Observer.(ContextObserver)
	return ok
}

// begin reports the start of an operation (a ...Start kind) and returns
// the operation's context: ctx itself without a ContextObserver.
func (l *Locker) begin(ctx context.Context, e Event) context.Context {
	if !l.observed() {
		return ctx
	}
	return l.deliver(ctx, e)
}

// emitCtx hands e, which belongs to the call whose context is ctx, to the
// Observer and the Logger, if any.
func (l *Locker) emitCtx(ctx context.Context, e Event) {
	if o := l.cfg.Observer; o != nil {
		if _, ok := o.(ContextObserver); ok || e.Kind.legacy() {
			l.deliver(ctx, e)
		}
	}
	if l.cfg.Logger != nil {
		l.log(ctx, e)
	}
}

// log writes e to the Logger at its level; most new kinds are not logged.
func (l *Locker) log(ctx context.Context, e Event) {
	lg := l.cfg.Logger
	level := slog.LevelDebug
	msg := "redlock: " + e.Kind.String()
	switch e.Kind {
	case EventAcquired, EventRenewed, EventReleased:
	case EventNodeError:
		level = slog.LevelWarn
		if e.Op == "acquire" || e.Op == "fence" {
			level = slog.LevelDebug // expected while contending with a node down
		}
	case EventLost:
		level = slog.LevelError
	case EventRenewFailing:
		level = slog.LevelWarn
		msg = fmt.Sprintf("redlock: renewal failing, lease valid for %d ms", e.Left.Milliseconds())
	case EventRejoinWait:
		level = slog.LevelInfo
		msg = fmt.Sprintf("redlock: waiting up to %s for nodes rejoining after a restart or a loss of data (Config.RejoinDelay)", e.Left.Round(time.Millisecond))
	default:
		return // attempts and the operations' starts and ends: too chatty for a log
	}
	if !lg.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("resource", e.Resource)}
	if e.Node != "" {
		attrs = append(attrs, slog.String("node", e.Node), slog.String("op", e.Op))
	}
	if e.Total > 0 {
		attrs = append(attrs, slog.Int("granted", e.Granted), slog.Int("nodes", e.Total))
	}
	if e.Attempts > 0 {
		attrs = append(attrs, slog.Int("attempts", e.Attempts))
	}
	if e.Reason != "" {
		attrs = append(attrs, slog.String("reason", e.Reason))
	}
	attrs = append(attrs, slog.Duration("latency", e.Latency))
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	lg.LogAttrs(ctx, level, msg, attrs...)
}

// leaseEvent fills the lease's resource and node count into e. Tokens are
// never part of an event.
func (ls *Lease) leaseEvent(e Event) Event {
	e.Resource = ls.resource
	e.Total = len(ls.locker.nodes)
	return e
}

// acquireOp records one observed acquisition (Acquire and its kin) for
// its end event: it lives on the caller's stack.
type acquireOp struct {
	op       string
	lock     LockKind
	resource string
	start    time.Time
	tried    time.Time // the start of the latest attempt
	attempts int
	handOver bool
}

// beginAcquire reports the start of an acquisition and returns its
// context and record.
func (l *Locker) beginAcquire(ctx context.Context, op string, lock LockKind, resource string) (context.Context, acquireOp) {
	a := acquireOp{op: op, lock: lock, resource: resource}
	if !l.observed() {
		return ctx, a
	}
	a.start = time.Now()
	a.tried = a.start
	return l.deliver(ctx, Event{Kind: EventAcquireStart, Op: op, Lock: lock, Resource: resource, Total: len(l.nodes)}), a
}

// try notes the start of an attempt.
func (a *acquireOp) try() {
	a.attempts++
	if !a.start.IsZero() {
		a.tried = time.Now()
	}
}

// endAcquire reports the end of an acquisition with its leases (one
// lease: lease; several: leases) or err, and gives each lease the
// acquisition's context for its later events. Deferred by the
// acquisitions with pointers to their results.
func (l *Locker) endAcquire(ctx context.Context, a *acquireOp, lease **Lease, leases *[]*Lease, err *error) {
	if !l.observed() || a.start.IsZero() {
		return
	}
	now := time.Now()
	e := Event{Kind: EventAcquireEnd, Op: a.op, Lock: a.lock, Resource: a.resource, Total: len(l.nodes), Attempts: a.attempts,
		Latency: now.Sub(a.start), HandOver: a.handOver, Err: *err}
	var made []*Lease
	if lease != nil && *lease != nil {
		made = []*Lease{*lease}
	} else if leases != nil {
		made = *leases
	}
	if *err == nil && len(made) > 0 {
		e.Fence, e.Count, e.Granted = made[0].fence, len(made), len(made[0].granted)
		e.Waited = a.tried.Sub(a.start)
		if a.handOver {
			e.Waited = e.Latency
		}
		octx := context.WithoutCancel(ctx)
		for _, ls := range made {
			ls.mu.Lock()
			ls.obs = leaseObs{ctx: octx, at: now}
			ls.mu.Unlock()
		}
	}
	l.deliver(ctx, e)
}

// leaseObs is what a lease keeps for its events when observed: the
// context of the acquisition that made it and when it was acquired.
type leaseObs struct {
	ctx context.Context
	at  time.Time
}

// obsCtx returns the lease's context for its events (the acquisition's,
// without its cancellation) and when it was acquired; Background and zero
// when it is not observed.
func (ls *Lease) obsCtx() (context.Context, time.Time) {
	if !ls.locker.observed() {
		return context.Background(), time.Time{}
	}
	ls.mu.Lock()
	o := ls.obs
	ls.mu.Unlock()
	if o.ctx == nil {
		return context.Background(), o.at
	}
	return o.ctx, o.at
}

// held is how long the lease has been held, when observed.
func held(at time.Time) time.Duration {
	if at.IsZero() {
		return 0
	}
	return time.Since(at)
}

// beginRelease reports the start of Release.
func (ls *Lease) beginRelease(ctx context.Context) (context.Context, time.Time) {
	if !ls.locker.observed() {
		return ctx, time.Time{}
	}
	return ls.locker.deliver(ctx, ls.leaseEvent(Event{Kind: EventReleaseStart})), time.Now()
}

// endRelease reports the end of Release (deferred, with its result).
func (ls *Lease) endRelease(ctx context.Context, start time.Time, err *error) {
	if start.IsZero() || !ls.locker.observed() {
		return
	}
	_, at := ls.obsCtx()
	ls.locker.deliver(ctx, ls.leaseEvent(Event{Kind: EventReleaseEnd, Fence: ls.fence, Latency: time.Since(start), Held: held(at), Err: *err}))
}

// beginRenew reports the start of a renewal cycle and returns its context
// (Background when not observed).
func (ls *Lease) beginRenew() context.Context {
	if !ls.locker.observed() {
		return context.Background()
	}
	ctx, _ := ls.obsCtx()
	return ls.locker.deliver(ctx, ls.leaseEvent(Event{Kind: EventRenewStart, Fence: ls.fence}))
}

// endRenew reports the end of a renewal cycle begun at start, for a lease
// valid until validUntil when it began: renewed (ok) or not.
func (ls *Lease) endRenew(ctx context.Context, start, validUntil time.Time, ok bool) {
	if !ls.locker.observed() {
		return
	}
	e := ls.leaseEvent(Event{Kind: EventRenewEnd, Fence: ls.fence, Latency: time.Since(start), Left: time.Until(validUntil)})
	if !ok {
		e.Err, e.Left = ErrLeaseLost, 0
	}
	ls.locker.deliver(ctx, e)
}

// renewFailing is the early warning: a round of a renewal cycle failed
// with votes while the lease is still valid.
func (ls *Lease) renewFailing(ctx context.Context, votes tally) {
	l := ls.locker
	if !l.observed() && l.cfg.Logger == nil {
		return
	}
	left := time.Until(ls.ValidUntil())
	if left <= 0 {
		return
	}
	l.emitCtx(ctx, ls.leaseEvent(Event{Kind: EventRenewFailing, Fence: ls.fence, Granted: votes.yes, Left: left, Err: l.verdict("renew", ls.resource, votes)}))
}

// endLease reports a lease ended with cause (ErrLeaseReleased,
// ErrLeaseLost, ErrLeaseOrphaned).
func (ls *Lease) endLease() {
	if !ls.locker.observed() {
		return
	}
	ctx, at := ls.obsCtx()
	ls.locker.deliver(ctx, ls.leaseEvent(Event{Kind: EventLeaseEnd, Fence: ls.fence, Held: held(at), Err: context.Cause(ls.ctx)}))
}

// renewContext is the context of a renewal cycle's calls: ls.ctx's
// cancellation with the values of octx, the renewal's observed context.
func renewContext(lctx, octx context.Context) context.Context {
	if octx == context.Background() {
		return lctx
	}
	return valuesFrom{lctx, octx}
}

// valuesFrom is a context whose values come from another one.
type valuesFrom struct {
	context.Context
	values context.Context
}

func (c valuesFrom) Value(key any) any { return c.values.Value(key) }

// beginNodeCall reports the start of a node call and returns its context.
func (l *Locker) beginNodeCall(ctx context.Context, op string, i int) (context.Context, time.Time) {
	if !l.observed() {
		return ctx, time.Time{}
	}
	return l.deliver(ctx, Event{Kind: EventNodeCallStart, Node: l.nodes[i].Addr(), Op: op, Total: len(l.nodes)}), time.Now()
}

// endNodeCall reports the end of a node call begun at start with its
// answer v or err; deadline is the fan-out's context (an answer after it
// ended came late).
func endNodeCall[T any](l *Locker, ctx, deadline context.Context, op string, i int, start time.Time, v T, err error) {
	if !l.observed() {
		return
	}
	e := Event{Kind: EventNodeCall, Node: l.nodes[i].Addr(), Op: op, Total: len(l.nodes), Latency: time.Since(start), Err: err}
	if err != nil {
		e.Vote = VoteFailed
	} else {
		e.Vote, e.Reason, e.HandOver = voteOf(v)
		if deadline.Err() != nil {
			e.Reason = string(e.Vote) + ": " + e.Reason
			e.Vote = VoteLate
		}
	}
	l.deliver(ctx, e)
}

// voteOf reads a node's answer.
func voteOf(v any) (Vote, string, bool) {
	switch a := v.(type) {
	case grant:
		switch {
		case a.OK:
			return VoteGranted, "", false
		case a.handed:
			return VoteGranted, handedReason, true
		case a.Reason != "":
			return VoteRefused, a.Reason, false
		}
		return VoteRefused, "held by another token", false
	case multiGrant:
		switch {
		case a.ok:
			return VoteGranted, "", false
		case a.reason != "":
			return VoteRefused, a.reason, false
		}
		return VoteRefused, "held by another token", false
	case bool:
		if a {
			return VoteGranted, "", false
		}
		return VoteRefused, "not held by the token", false
	}
	return VoteGranted, "", false // an answer (inspect, rehold)
}

// rejoinWait says once per Acquire (told) why it waits when the lock is
// free but nodes are rejoining (issue: a first Acquire on fresh servers
// waited RejoinDelay silently).
func (l *Locker) rejoinWait(ctx context.Context, o *outcome, told *bool) {
	if *told || o == nil || o.rejoining == 0 || (l.cfg.Observer == nil && l.cfg.Logger == nil) {
		return
	}
	*told = true
	why := ""
	for _, r := range o.err.Refused {
		if strings.Contains(r, rejoiningReason) {
			why = r
			break
		}
	}
	left := o.err.HolderTTL
	if left < 0 {
		left = 0
	}
	l.emitCtx(ctx, Event{Kind: EventRejoinWait, Resource: o.err.Resource, Granted: len(o.granted), Total: len(l.nodes), Left: left,
		Reason: fmt.Sprintf("%d of %d nodes refused because they are rejoining: %s", o.rejoining, len(l.nodes), why)})
}
