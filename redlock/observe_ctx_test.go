package redlock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

type spanKey struct{}

// spanRecorder is a ContextObserver that makes a "span" (an id in the
// context) at every start event and records, for every event, the span
// of the context it came with.
type spanRecorder struct {
	next   atomic.Int64
	mu     sync.Mutex
	events []spanEvent
}

type spanEvent struct {
	kind       redlock.EventKind
	span, made int64 // the context's span; the span a start made
	e          redlock.Event
}

// startKinds are the kinds that begin an operation: a ContextObserver's
// context returned for one of them is the operation's.
var startKinds = map[redlock.EventKind]bool{
	redlock.EventAcquireStart: true, redlock.EventAttemptStart: true, redlock.EventNodeCallStart: true,
	redlock.EventReleaseStart: true, redlock.EventRenewStart: true,
}

func (r *spanRecorder) Observe(redlock.Event) { panic("Observe called on a ContextObserver") }

func (r *spanRecorder) ObserveContext(ctx context.Context, e redlock.Event) context.Context {
	parent, _ := ctx.Value(spanKey{}).(int64)
	ev := spanEvent{kind: e.Kind, span: parent, e: e}
	if startKinds[e.Kind] {
		ev.made = r.next.Add(1)
		ctx = context.WithValue(ctx, spanKey{}, ev.made)
	}
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	return ctx
}

func (r *spanRecorder) all() []spanEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]spanEvent(nil), r.events...)
}

// settled reports whether every node call heard of has ended, one lease
// has ended, and releases nodes answered a release.
func (r *spanRecorder) settled(releases int) bool {
	n := map[redlock.EventKind]int{}
	released := 0
	for _, ev := range r.all() {
		n[ev.kind]++
		if ev.kind == redlock.EventNodeCall && ev.e.Op == "release" {
			released++
		}
	}
	return n[redlock.EventNodeCallStart] == n[redlock.EventNodeCall] && n[redlock.EventLeaseEnd] == 1 && released == releases
}

// TestContextObserverGetsTheCallersContext: every event of an Acquire, its
// attempts and node calls, and a Release, comes with the caller's context
// or the one its start returned: the operations nest as spans do.
func TestContextObserverGetsTheCallersContext(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	rec := &spanRecorder{}
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 5 * time.Second, Observer: rec})
	ctx := context.WithValue(testutil.Context(t), spanKey{}, int64(-1)) // the caller's span
	lease, err := l.Acquire(ctx, "nest")
	require.NoError(t, err)
	require.NoError(t, lease.Release(ctx))
	// The calls a majority made unnecessary end in the background, and so
	// does the release of a node whose acquire call was still running
	// (it starts once that call has ended): every node answers one
	// release.
	require.Eventually(t, func() bool { return rec.settled(3) }, 10*time.Second, time.Millisecond)

	made := map[int64]spanEvent{} // span -> its start
	for _, ev := range rec.all() {
		if ev.made != 0 {
			made[ev.made] = ev
		}
	}
	parentKind := func(span int64) redlock.EventKind { return made[span].kind }
	count := map[redlock.EventKind]int{}
	for _, ev := range rec.all() {
		count[ev.kind]++
		switch ev.kind {
		case redlock.EventAcquireStart, redlock.EventReleaseStart:
			require.Equal(t, int64(-1), ev.span, "%s not under the caller's span", ev.kind)
		case redlock.EventAcquireEnd:
			require.Equal(t, redlock.EventAcquireStart, parentKind(ev.span))
			require.NoError(t, ev.e.Err)
			require.Equal(t, lease.Fence(), ev.e.Fence)
			require.Equal(t, 1, ev.e.Attempts)
			require.Equal(t, redlock.LockMutex, ev.e.Lock)
		case redlock.EventAttemptStart:
			require.Equal(t, redlock.EventAcquireStart, parentKind(ev.span))
		case redlock.EventAttempt:
			require.Equal(t, redlock.EventAttemptStart, parentKind(ev.span))
		case redlock.EventNodeCallStart:
			require.Contains(t, []redlock.EventKind{redlock.EventAttemptStart, redlock.EventReleaseStart}, parentKind(ev.span), "node call %s", ev.e.Op)
		case redlock.EventNodeCall:
			require.Equal(t, redlock.EventNodeCallStart, parentKind(ev.span))
			require.Equal(t, redlock.VoteGranted, ev.e.Vote, "%s on %s", ev.e.Op, ev.e.Node)
		case redlock.EventReleaseEnd:
			require.Equal(t, redlock.EventReleaseStart, parentKind(ev.span))
			require.NoError(t, ev.e.Err)
			require.Positive(t, ev.e.Held)
		case redlock.EventLeaseEnd:
			require.Equal(t, redlock.EventAcquireStart, parentKind(ev.span), "a lease's events carry its acquisition's context")
			require.ErrorIs(t, ev.e.Err, redlock.ErrLeaseReleased)
		}
	}
	require.Equal(t, 1, count[redlock.EventAcquireStart])
	require.Equal(t, 1, count[redlock.EventAcquireEnd])
	require.Equal(t, 1, count[redlock.EventReleaseEnd])
	require.Equal(t, 1, count[redlock.EventLeaseEnd])
	require.Equal(t, count[redlock.EventNodeCallStart], count[redlock.EventNodeCall])
	require.GreaterOrEqual(t, count[redlock.EventNodeCall], 4, "acquire and release on 3 nodes (a majority at least)")
}

// TestObserverThatPanicsOrBlocksDoesNotBreakTheLock: an Observer that
// panics at every event, or one that blocks forever, leaves every lock
// operation working; the blocked one costs at most ObserverTimeout once.
func TestObserverThatPanicsOrBlocksDoesNotBreakTheLock(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	var blocked atomic.Bool
	for _, tc := range []struct {
		name string
		obs  redlock.Observer
	}{
		{"panics", redlock.ObserverFunc(func(e redlock.Event) { panic(fmt.Sprint("observer down at ", e.Kind)) })},
		{"blocks", redlock.ObserverFunc(func(redlock.Event) {
			if blocked.CompareAndSwap(false, true) {
				<-release // the first event blocks until the test ends
			}
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testutil.NewMiniCluster(t, 3, testutil.WithWallClock())
			// A lease long enough that a loaded machine (-race, other
			// packages' tests beside) renews it before it runs out: a
			// 600 ms lease lapsed now and then before its first renewal.
			l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 2 * time.Second, Observer: tc.obs})
			ctx := testutil.Context(t)
			start := time.Now()
			for i := range 30 {
				lease, err := l.Acquire(ctx, fmt.Sprint("guarded-", i))
				require.NoError(t, err)
				require.NoError(t, lease.Release(ctx))
			}
			// Waiting ObserverTimeout at each of their ten events or more
			// would take 30 s; the guard waits once. Generous for a loaded
			// machine.
			require.Less(t, time.Since(start), 100*redlock.ObserverTimeout, "a blocked Observer held the lock up")
			// A lease outlives several renewals.
			lease, err := l.Acquire(ctx, "renewed")
			require.NoError(t, err)
			first := lease.ValidUntil()
			require.Eventually(t, func() bool { return lease.ValidUntil().After(first) }, 20*time.Second, 5*time.Millisecond)
			require.NoError(t, lease.Context().Err())
			require.NoError(t, lease.Release(ctx))
		})
	}
}
