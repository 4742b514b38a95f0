package redlock

import (
	"context"
	"log/slog"
	"time"
)

// EventKind says what an Event reports.
type EventKind int

const (
	// EventAttempt is one acquisition attempt, successful (Err nil) or not.
	EventAttempt EventKind = iota + 1
	// EventAcquired is a lease granted by Acquire or TryAcquire; Latency
	// includes any waiting, Attempts counts the attempts.
	EventAcquired
	// EventRenewed is a renewal cycle that extended the lease.
	EventRenewed
	// EventLost is a lease lost: renewal could not keep a majority.
	EventLost
	// EventReleased is a lease released by Release or Close.
	EventReleased
	// EventNodeError is one node call that failed (Node, Op, Err).
	EventNodeError
)

var eventNames = map[EventKind]string{
	EventAttempt:   "attempt",
	EventAcquired:  "acquired",
	EventRenewed:   "renewed",
	EventLost:      "lost",
	EventReleased:  "released",
	EventNodeError: "node_error",
}

// String returns the kind's name in snake_case, as used in metrics.
func (k EventKind) String() string {
	if s, ok := eventNames[k]; ok {
		return s
	}
	return "unknown"
}

// Event is one thing a Locker did, for an Observer. Fields that do not apply
// to a kind are zero.
type Event struct {
	Kind     EventKind
	Resource string
	// Node is the node's address (EventNodeError).
	Node string
	// Op is the node operation: "acquire", "fence", "renew", "release" or
	// "inspect" (EventNodeError).
	Op string
	// Granted counts the nodes that said yes (grants, renewals, releases);
	// Total is the number of nodes.
	Granted, Total int
	// Attempts counts acquisition attempts (EventAcquired).
	Attempts int
	// Latency is how long the operation took.
	Latency time.Duration
	// Err is the failure, if any.
	Err error
}

// Observer receives a Locker's events, for metrics or tracing. Observe is
// called synchronously from the Locker's goroutines, often concurrently: it
// must be safe for concurrent use, fast, and must not block.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to an Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// emit hands e to the Observer and the Logger, if any.
func (l *Locker) emit(e Event) {
	if l.cfg.Observer != nil {
		l.cfg.Observer.Observe(e)
	}
	lg := l.cfg.Logger
	if lg == nil {
		return
	}
	level := slog.LevelDebug
	switch e.Kind {
	case EventAttempt:
		return // too chatty for a log; Observers see every attempt
	case EventNodeError:
		level = slog.LevelWarn
		if e.Op == "acquire" || e.Op == "fence" {
			level = slog.LevelDebug // expected while contending with a node down
		}
	case EventLost:
		level = slog.LevelError
	}
	if !lg.Enabled(context.Background(), level) {
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
	attrs = append(attrs, slog.Duration("latency", e.Latency))
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	lg.LogAttrs(context.Background(), level, "redlock: "+e.Kind.String(), attrs...)
}

// leaseEvent fills the lease's resource and node count into e. Tokens are
// never part of an event.
func (ls *Lease) leaseEvent(e Event) Event {
	e.Resource = ls.resource
	e.Total = len(ls.locker.nodes)
	return e
}
