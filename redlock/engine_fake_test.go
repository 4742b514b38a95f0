package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/scripts"
)

// fakeNode is a Node that answers each script as its test says, with no
// server and no Lua: the engine's and the waiting's tests drive attempts,
// releases and hand-overs with synthetic answers. Every call is recorded
// in calls, in order.
type fakeNode struct {
	addr string
	// answer returns the node's reply to a script call; nil falls back to
	// fakeDefault.
	answer func(s *scripts.Script, keys []string, args []any) (any, error)

	mu    sync.Mutex
	calls []fakeCall
	// called receives each call's script name, without blocking (room
	// for 256).
	called chan string
}

// fakeCall is one recorded script call.
type fakeCall struct {
	script string
	keys   []string
	args   []any
}

func newFakeNodes(n int, answer func(i int, s *scripts.Script, keys []string, args []any) (any, error)) []*fakeNode {
	nodes := make([]*fakeNode, n)
	for i := range nodes {
		f := &fakeNode{addr: fmt.Sprintf("fake%d", i), called: make(chan string, 256)}
		if answer != nil {
			f.answer = func(s *scripts.Script, keys []string, args []any) (any, error) { return answer(i, s, keys, args) }
		}
		nodes[i] = f
	}
	return nodes
}

// fakeLocker is a Locker over fake nodes, closed when the test ends.
func fakeLocker(t *testing.T, nodes []*fakeNode, cfg Config) *Locker {
	t.Helper()
	ns := make([]Node, len(nodes))
	for i, n := range nodes {
		ns[i] = n
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = 10 * time.Second
	}
	l, err := New(ns, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l
}

func (n *fakeNode) Addr() string { return n.addr }

func (n *fakeNode) Eval(_ context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	n.mu.Lock()
	n.calls = append(n.calls, fakeCall{script: s.Name(), keys: keys, args: args})
	n.mu.Unlock()
	select {
	case n.called <- s.Name():
	default:
	}
	if n.answer != nil {
		return n.answer(s, keys, args)
	}
	return fakeDefault(s)
}

// fakeDefault answers as a node where every token holds its lock: acquire
// and renew grant, a release releases, a rehold moves the lock (counter
// 7), a leave leaves.
func fakeDefault(s *scripts.Script) (any, error) {
	switch s {
	case scripts.Acquire:
		return []any{"granted", "5", int64(0), int64(0), int64(0), ""}, nil
	case scripts.Rehold:
		return []any{"done", "7", int64(0), ""}, nil
	case scripts.Leave:
		return int64(0), nil
	case scripts.Release:
		return []any{"released", int64(0), "", ""}, nil
	case scripts.Renew, scripts.Fence:
		return int64(1), nil
	}
	return nil, errors.New("fake node: no answer for " + s.Name())
}

// scriptCalls returns the node's calls of the named script.
func (n *fakeNode) scriptCalls(name string) []fakeCall {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []fakeCall
	for _, c := range n.calls {
		if c.script == name {
			out = append(out, c)
		}
	}
	return out
}

// await waits for the node's next call of the named script (other calls
// are skipped), failing the test after a generous bound.
func (n *fakeNode) await(t *testing.T, name string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-n.called:
			if got == name {
				return
			}
		case <-timeout:
			t.Fatalf("%s: no %s call", n.addr, name)
		}
	}
}

func (n *fakeNode) Uptime(context.Context) (Uptime, error) { return Uptime{}, nil }

// Subscribe returns a subscription that carries nothing: the tests
// announce releases and hand-overs to the hub themselves.
func (n *fakeNode) Subscribe(func(key, msg string)) Subscription { return fakeSub{} }

type fakeSub struct{}

func (fakeSub) Watch(context.Context, string) error   { return nil }
func (fakeSub) Unwatch(context.Context, string) error { return nil }
func (fakeSub) Close() error                          { return nil }

// failedAttempt returns the outcome of a failed attempt that began at
// start, as attempt makes it: each answered node's vote added in order,
// the nodes not in answers silent, and the report finished.
func failedAttempt(l *Locker, start time.Time, answers map[int]reply[vote]) *outcome {
	o := newOutcome("r", l.quorum, len(l.nodes))
	o.start = start
	for i := range l.nodes {
		if r, ok := answers[i]; ok {
			r.idx = i
			o.add(l, r)
		}
	}
	o.silent = len(l.nodes) - len(o.answered)
	o.err.Granted = len(o.granted)
	_ = o.err.finish(o.rejoining)
	return o
}
