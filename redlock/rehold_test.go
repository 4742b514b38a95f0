package redlock_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// reholdGate is a node whose first rehold calls wait until every node has
// handed the lock over (ready; once, for at most 2 s, shared by the nodes
// through gate: a later round, after a loaded machine let a place lapse
// somewhere, does not wait again), then tell that a rehold began (started)
// and, with hang, hold on until hang closes, ignoring their context: a
// server paused just as the lock was handed over.
type reholdGate struct {
	redlock.Node
	ready   func() bool
	gate    *sync.Once
	started chan<- struct{}
	hang    <-chan struct{}
}

func (n reholdGate) Eval(ctx context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	if s == scripts.Rehold {
		n.gate.Do(func() {
			for deadline := time.Now().Add(2 * time.Second); !n.ready() && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		})
		select {
		case n.started <- struct{}{}:
		default:
		}
		if n.hang != nil {
			<-n.hang
			return nil, context.Canceled
		}
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// reholdLease is the lease of the hand-over tests below: long enough for a
// loaded machine, short enough that a waiter renews a lock handed over to
// it (rehold) after waiting about two seconds.
const reholdLease = 3 * time.Second

// handedOverLate sets up a waiter that waits long enough for a lock handed
// over to it to need renewing under its place's token: a holder takes the
// lock, the waiter (over nodes whose rehold calls hang when hung[i]) starts
// waiting with ctx, and the holder releases once the waiter has waited two
// seconds. It returns the waiter's Locker, the channel its Acquire's
// outcome arrives on, and a channel that gets a value when a rehold begins.
func handedOverLate(t *testing.T, ctx context.Context, hung []bool) (*redlock.Locker, <-chan error, <-chan struct{}) {
	c := testutil.NewMiniCluster(t, 3)
	cfg := redlock.Config{LeaseDuration: reholdLease}
	// The holder's lease only has to outlast the wait: a long one, which a
	// loaded machine's late renewals cannot lose (a 3 s one was lost once,
	// beside two busy loops). The lock handed over lasts the waiter's.
	holder := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 30 * time.Second})
	lease, err := holder.Acquire(testutil.Context(t), "late")
	require.NoError(t, err)

	started := make(chan struct{}, 1)
	hang := make(chan struct{})
	key := holder.Key("late")
	// Every node has handed the lock over: each holds the same lock, not
	// the holder's.
	ready := func() bool {
		var v0 string
		for i := range 3 {
			v, err := c.Server(i).Get(key)
			if err != nil || strings.HasPrefix(v, lease.Token()) || (i > 0 && v != v0) {
				return false
			}
			v0 = v
		}
		return true
	}
	nodes := c.Nodes()
	gate := new(sync.Once)
	for i := range nodes {
		g := reholdGate{Node: nodes[i], ready: ready, gate: gate, started: started}
		if hung[i] {
			g.hang = hang
		}
		nodes[i] = g
	}
	waiter := newLocker(t, nodes, cfg)
	t.Cleanup(func() { close(hang) }) // before the Lockers close
	out := acquireAndRelease(ctx, waiter, "late")
	time.Sleep(2 * time.Second) // the waiter waits
	require.NoError(t, lease.Release(testutil.Context(t)))
	return waiter, out, started
}

// TestAHandOverIsTakenOnceAMajorityReheldIt: a lock handed over to a waiter
// that waited long is renewed under its place's token before it is used;
// the waiter takes it as soon as a majority confirmed, not after a paused
// node's NodeCallTimeout.
func TestAHandOverIsTakenOnceAMajorityReheldIt(t *testing.T) {
	t.Parallel() // bound by the wall clock (leases, delays, hung nodes)
	waiter, out, started := handedOverLate(t, testutil.Context(t), []bool{true, false, false})
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the hand-over was not renewed under the place's token")
	}
	begun := time.Now()
	select {
	case err := <-out:
		require.NoError(t, err)
		require.Less(t, time.Since(begun), waiter.Config().NodeCallTimeout/2, "the hand-off waited for the paused node")
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter never took the lock")
	}
}

// TestAcquireEndsWithItsContextDuringARehold: a waiter whose context ends
// while a majority of its rehold calls hang returns at once, not after
// NodeCallTimeout.
func TestAcquireEndsWithItsContextDuringARehold(t *testing.T) {
	t.Parallel() // bound by the wall clock (leases, delays, hung nodes)
	ctx, cancel := context.WithCancel(testutil.Context(t))
	defer cancel()
	waiter, out, started := handedOverLate(t, ctx, []bool{true, true, false})
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the hand-over was not renewed under the place's token")
	}
	time.Sleep(50 * time.Millisecond)
	cancel()
	begun := time.Now()
	select {
	case err := <-out:
		require.ErrorIs(t, err, context.Canceled)
		require.Less(t, time.Since(begun), waiter.Config().NodeCallTimeout/2, "Acquire outlived its context")
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire did not return")
	}
}

// slowRehold delays the rehold script on one node: a node farther away
// (another zone), not a paused one.
type slowRehold struct {
	redlock.Node
	d time.Duration
}

func (n slowRehold) Eval(ctx context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	if s == scripts.Rehold {
		time.Sleep(n.d)
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestAHandOverWaitsForASlowMajorityNode: the holder held the lock on
// nodes 0 and 1 (node 2 holds someone else's and refuses at once), and
// both hand it over to a waiter that waited long enough to rehold it.
// Node 2's quick refusal must not end the rehold before slow node 1, whose
// answer makes the majority, has answered (found by review: the waiter
// went round and round until its context ended, holding the lock).
func TestAHandOverWaitsForASlowMajorityNode(t *testing.T) {
	t.Parallel() // bound by the wall clock (leases, delays, hung nodes)
	for _, delay := range []time.Duration{0, 40 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			c := testutil.NewMiniCluster(t, 3)
			cfg := redlock.Config{LeaseDuration: reholdLease}
			holder := newLocker(t, c.Nodes(), cfg)
			key := holder.Key("late")
			require.NoError(t, c.Server(2).Set(key, strings.Repeat("f", 32)+" other"))
			lease, err := holder.TryAcquire(testutil.Context(t), "late") // nodes 0 and 1
			require.NoError(t, err)

			nodes := c.Nodes()
			nodes[1] = slowRehold{Node: nodes[1], d: delay}
			waiter := newLocker(t, nodes, cfg)
			ctx, cancel := context.WithTimeout(testutil.Context(t), 6*time.Second)
			defer cancel()
			out := acquireAndRelease(ctx, waiter, "late")
			time.Sleep(2 * time.Second) // the waiter waits: its hand-over needs a rehold
			require.NoError(t, lease.Release(testutil.Context(t)))
			require.NoError(t, <-out)
		})
	}
}

// acquireAndRelease acquires resource with l in the background, releases
// the lease at once, and sends the first error (nil for none).
func acquireAndRelease(ctx context.Context, l *redlock.Locker, resource string) <-chan error {
	out := make(chan error, 1)
	go func() {
		ls, err := l.Acquire(ctx, resource)
		if err == nil {
			err = ls.Release(context.Background())
		}
		out <- err
	}()
	return out
}
