package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// hangingAcquireNode is a node whose Acquire blocks, ignoring its context,
// until the test ends: a paused server behind a client without context
// deadlines.
type hangingAcquireNode struct {
	redlock.Node
	release <-chan struct{}
}

func (n hangingAcquireNode) Eval(ctx context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	if s != scripts.Acquire {
		return n.Node.Eval(ctx, s, keys, args...)
	}
	<-n.release
	return nil, context.Canceled
}

// busyWithOneHangingNode returns a Locker over three nodes: the first hangs
// on every acquire, the other two hold a foreign lock on resource.
func busyWithOneHangingNode(t *testing.T, resource string) *redlock.Locker {
	c := testutil.NewMiniCluster(t, 3)
	unblock := make(chan struct{})
	nodes := c.Nodes()
	nodes[0] = hangingAcquireNode{Node: nodes[0], release: unblock}
	l := newLocker(t, nodes, redlock.Config{LeaseDuration: 3 * time.Second})
	t.Cleanup(func() { close(unblock) }) // before the Locker's Close
	for i := 1; i < 3; i++ {
		require.NoError(t, c.Set(i, l.Key(resource), foreignLock))
	}
	return l
}

// TestBusyAnswerDoesNotWaitForAHangingNode: the refusals of a majority
// decide the attempt; the node that does not answer is cleaned up later,
// in the background, and never holds up the caller.
func TestBusyAnswerDoesNotWaitForAHangingNode(t *testing.T) {
	l := busyWithOneHangingNode(t, "busy")
	start := time.Now()
	_, err := l.TryAcquire(testutil.Context(t), "busy")
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.Less(t, time.Since(start), l.Config().NodeCallTimeout, "the busy answer waited for the hanging node")
}

// TestAcquireEndsWithItsContextWhenANodeHangs: Acquire on a busy lock
// returns when its context ends, whatever a node's call is doing.
func TestAcquireEndsWithItsContextWhenANodeHangs(t *testing.T) {
	l := busyWithOneHangingNode(t, "busy")
	const bound = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	start := time.Now()
	_, err := l.Acquire(ctx, "busy")
	took := time.Since(start)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// The node hangs until the test ends; anything near its NodeCallTimeout
	// (1s) means Acquire waited for it.
	require.Less(t, took, bound+l.Config().NodeCallTimeout/2, "Acquire overran its context")
}

// countingNode counts the calls that start after closed is set, and tells
// started (when set) that an acquire call began.
type countingNode struct {
	redlock.Node
	delay   time.Duration
	closed  *atomic.Bool
	late    *atomic.Int32
	started chan<- struct{}
}

func (n countingNode) note() {
	if n.closed.Load() {
		n.late.Add(1)
	}
}

func (n countingNode) Eval(ctx context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	n.note()
	if s == scripts.Acquire {
		if n.started != nil {
			select {
			case n.started <- struct{}{}:
			default:
			}
		}
		time.Sleep(n.delay)
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestCloseWaitsForAttemptsInFlight: Close called while an attempt is
// running returns only after that attempt and its clean-up are done; no
// node call starts after Close has returned.
func TestCloseWaitsForAttemptsInFlight(t *testing.T) {
	t.Parallel() // bound by the wall clock (leases, delays, hung nodes)
	c := testutil.NewMiniCluster(t, 3)
	var closed atomic.Bool
	var late atomic.Int32
	var nodes []redlock.Node
	started := make(chan struct{}, 1)
	for _, n := range c.Nodes() {
		nodes = append(nodes, countingNode{Node: n, delay: 500 * time.Millisecond, closed: &closed, late: &late, started: started})
	}
	l, err := redlock.New(nodes, redlock.Config{LeaseDuration: 3 * time.Second})
	require.NoError(t, err)
	var wg sync.WaitGroup
	var acqErr error
	wg.Go(func() { _, acqErr = l.TryAcquire(testutil.Context(t), "closing") })
	select {
	case <-started: // the attempt's calls are running
	case <-time.After(10 * time.Second):
		t.Fatal("the attempt never called a node")
	}
	require.NoError(t, l.Close())
	closed.Store(true)
	wg.Wait()
	require.ErrorIs(t, acqErr, redlock.ErrClosed)
	time.Sleep(300 * time.Millisecond) // room for any straggler to show
	require.Zero(t, late.Load(), "node calls started after Close returned")
	for i := range 3 {
		require.False(t, c.Server(i).Exists(l.Key("closing")), "node %d keeps the lock", i)
	}
}

// lateNode answers Acquire only once gate is closed, with failWith when it
// is set, and counts the Release calls it gets.
type lateNode struct {
	redlock.Node
	gate      <-chan struct{}
	failWith  error
	releases  *atomic.Int32
	onRelease func() // when set, called as each release call starts
}

func (n lateNode) Eval(ctx context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	switch s {
	case scripts.Acquire:
		<-n.gate
		if n.failWith != nil {
			return nil, n.failWith
		}
		return n.Node.Eval(context.Background(), s, keys, args...)
	case scripts.Release:
		n.releases.Add(1)
		if n.onRelease != nil {
			n.onRelease()
		}
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// heldReleaseNode holds each release call until the until channel closes
// (or the call's deadline passes: counted in timedOut), after telling
// started that it began.
type heldReleaseNode struct {
	redlock.Node
	started  chan<- struct{}
	until    <-chan struct{}
	timedOut *atomic.Int32
}

func (n heldReleaseNode) Eval(ctx context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	if s == scripts.Release {
		select {
		case n.started <- struct{}{}:
		default:
		}
		select {
		case <-n.until:
		case <-ctx.Done():
			n.timedOut.Add(1)
			return nil, ctx.Err()
		}
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// acquireWithACallHeld takes "late" with TryAcquire on a Locker over
// nodes, whose node 0 holds its acquire call until gate closes (lateNode),
// with cfg's queue on when fair. It returns the lock's key, the lease and
// open, which closes gate once; open also runs at the test's clean-up,
// before the Locker closes (its Close waits for the call).
func acquireWithACallHeld(t *testing.T, nodes []redlock.Node, cfg redlock.Config, fair bool, gate chan struct{}) (string, *redlock.Lease, func()) {
	t.Helper()
	if !fair {
		cfg.QueueTTL = -1
	}
	l := newLocker(t, nodes, cfg)
	open := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(open)
	lease, err := l.TryAcquire(testutil.Context(t), "late")
	require.NoError(t, err)
	return l.Key("late"), lease, open
}

// requireReleased waits for a Release's result on done, at most within,
// and requires that it succeeded.
func requireReleased(t *testing.T, done <-chan error, within time.Duration) {
	t.Helper()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(within):
		t.Fatal("Release did not return")
	}
}

// TestALeaseReleasesAtOnceWhereItHasNoCallAndLaterWhereItHas: a lease
// granted by nodes 1 and 2 while its acquire call to node 0 is still
// running is released on nodes 1 and 2 at once, and on node 0 only once
// that call has ended (Release returns after that): the late grant there
// does not outlive the lease, and the lock is free on a majority without
// waiting for the late node.
func TestALeaseReleasesAtOnceWhereItHasNoCallAndLaterWhereItHas(t *testing.T) {
	for _, fair := range []bool{true, false} {
		t.Run(fmt.Sprintf("fair=%v", fair), func(t *testing.T) {
			c := testutil.NewMiniCluster(t, 3)
			gate := make(chan struct{})
			var releases atomic.Int32
			nodes := c.Nodes()
			nodes[0] = lateNode{Node: nodes[0], gate: gate, releases: &releases}
			key, lease, open := acquireWithACallHeld(t, nodes, redlock.Config{LeaseDuration: 3 * time.Second}, fair, gate)
			require.False(t, c.Server(0).Exists(key), "node 0's call is held")
			done := make(chan error, 1)
			go func() { done <- lease.Release(context.Background()) }()
			require.Eventually(t, func() bool { return !c.Server(1).Exists(key) && !c.Server(2).Exists(key) },
				10*time.Second, time.Millisecond, "not released at once on the nodes the lease has no call on")
			require.Zero(t, releases.Load(), "released on node 0 before its call ended")
			open() // node 0 grants now, late
			requireReleased(t, done, 10*time.Second)
			require.Equal(t, int32(1), releases.Load(), "release calls to the late node")
			require.False(t, c.Server(0).Exists(key), "the late grant outlived the lease")
		})
	}
}

// TestTheLateNodesReleaseDoesNotWaitForTheOthersAnswers: the release of
// a node the lease had to wait for (its acquire call to node 0 was still
// running) starts as soon as that call ends, while the other nodes'
// release calls are still running, not after their answers: an
// uncontended release costs one round trip after the lease's last call,
// not two. Here nodes 1 and 2 answer their release only once node 0's has
// started.
func TestTheLateNodesReleaseDoesNotWaitForTheOthersAnswers(t *testing.T) {
	for _, fair := range []bool{true, false} {
		t.Run(fmt.Sprintf("fair=%v", fair), func(t *testing.T) {
			c := testutil.NewMiniCluster(t, 3)
			gate, lateReleased := make(chan struct{}), make(chan struct{})
			started := make(chan struct{}, 2)
			var releases, timedOut atomic.Int32
			nodes := c.Nodes()
			nodes[0] = lateNode{Node: nodes[0], gate: gate, releases: &releases,
				onRelease: sync.OnceFunc(func() { close(lateReleased) })}
			for i := 1; i < 3; i++ {
				nodes[i] = heldReleaseNode{Node: nodes[i], started: started, until: lateReleased, timedOut: &timedOut}
			}
			key, lease, open := acquireWithACallHeld(t, nodes, redlock.Config{LeaseDuration: 20 * time.Second, NodeCallTimeout: 5 * time.Second}, fair, gate)
			done := make(chan error, 1)
			go func() { done <- lease.Release(context.Background()) }()
			for range 2 {
				select {
				case <-started:
				case <-time.After(10 * time.Second):
					t.Fatal("the release did not start at once on nodes 1 and 2")
				}
			}
			open() // node 0's acquire call ends: its release may start
			requireReleased(t, done, 20*time.Second)
			require.Zero(t, timedOut.Load(), "node 0's release waited for the answers of nodes 1 and 2")
			require.Equal(t, int32(1), releases.Load(), "release calls to the late node")
			require.False(t, c.Server(0).Exists(key), "the late grant outlived the lease")
			// Release needs a majority of the first nodes' answers, not
			// all: the other's release may still be landing.
			require.Eventually(t, func() bool { return !c.Server(1).Exists(key) && !c.Server(2).Exists(key) },
				10*time.Second, time.Millisecond, "nodes 1 and 2 still hold the lock")
		})
	}
}

// TestTheCleanUpCallsOnlyTheLateNodesThatMayHoldTheLock: an attempt that
// the refusals of a majority decided leaves its call to the third node
// running; once that call ends, the clean-up releases the lock there only
// if the node granted it or failed (the outcome is unknown), and spares a
// node that refused a call.
func TestTheCleanUpCallsOnlyTheLateNodesThatMayHoldTheLock(t *testing.T) {
	for _, tc := range []struct {
		name         string
		busy         bool // the late node holds a foreign lock too
		failWith     error
		wantReleases int32
	}{
		{name: "late refusal", busy: true, wantReleases: 0},
		{name: "late grant", wantReleases: 1},
		{name: "late failure", failWith: errors.New("connection reset"), wantReleases: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testutil.NewMiniCluster(t, 3)
			gate := make(chan struct{})
			var releases atomic.Int32
			nodes := c.Nodes()
			nodes[0] = lateNode{Node: nodes[0], gate: gate, failWith: tc.failWith, releases: &releases}
			l, err := redlock.New(nodes, redlock.Config{LeaseDuration: 3 * time.Second})
			require.NoError(t, err)
			for i := range 3 {
				if i > 0 || tc.busy {
					require.NoError(t, c.Set(i, l.Key("late"), foreignLock))
				}
			}
			_, err = l.TryAcquire(testutil.Context(t), "late")
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			close(gate)
			require.NoError(t, l.Close()) // waits for the clean-up
			require.Equal(t, tc.wantReleases, releases.Load(), "release calls to the late node")
			if !tc.busy {
				require.False(t, c.Server(0).Exists(l.Key("late")), "the late grant outlived the attempt")
			}
		})
	}
}
