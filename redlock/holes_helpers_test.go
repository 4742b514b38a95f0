package redlock_test

import (
	"context"
	"sync"
	"time"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/scripts"
)

// The holes_*_test.go files pin the seven holes of issue 31 (problem 2):
// each test bounds one rule of the Go core exactly, so that the mutant of
// mutants/ that breaks the rule fails it (make mutants).

// hookNode forwards to Node, except that hook, when set, sees every call
// first: it may answer in the node's place (done true), or run the call on
// the node itself through next and change the reply.
type hookNode struct {
	redlock.Node
	hook func(ctx context.Context, s *scripts.Script, keys []string, args []any, next func() (any, error)) (reply any, err error, done bool)
}

func (n hookNode) Eval(ctx context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	next := func() (any, error) { return n.Node.Eval(ctx, s, keys, args...) }
	if n.hook != nil {
		if r, err, done := n.hook(ctx, s, keys, args, next); done {
			return r, err
		}
	}
	return next()
}

// firstCall records the earliest moment a call of one script reached any
// node: a round's start is no later than it.
type firstCall struct {
	mu sync.Mutex
	at time.Time
}

func (f *firstCall) mark() {
	now := time.Now()
	f.mu.Lock()
	if f.at.IsZero() || now.Before(f.at) {
		f.at = now
	}
	f.mu.Unlock()
}

func (f *firstCall) get() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.at
}
