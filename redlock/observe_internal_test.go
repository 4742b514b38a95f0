package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stubNode is a Node that is never called: the tests below build events
// only.
type stubNode struct{ Node }

func (stubNode) Addr() string { return "127.0.0.1:1" }

// TestNoObserverAddsNoAllocation: without an Observer or a Logger, every
// observation point of a lock operation (the starts and ends of
// acquisitions, attempts, node calls, releases and renewals) allocates
// nothing.
func TestNoObserverAddsNoAllocation(t *testing.T) {
	l := &Locker{nodes: []Node{stubNode{}}}
	ls := &Lease{locker: l, resource: "r", ctx: context.Background()}
	ctx := context.Background()
	failure := errors.New("x")
	allocs := testing.AllocsPerRun(1000, func() {
		actx, op := l.beginAcquire(ctx, "acquire", LockMutex, "r")
		op.try()
		var lease *Lease
		var err error
		l.endAcquire(actx, &op, &lease, nil, &err)
		octx := l.begin(actx, Event{Kind: EventAttemptStart, Resource: "r"})
		nctx, start := l.beginNodeCall(octx, "acquire", 0)
		endNodeCall(l, nctx, octx, "acquire", 0, start, grant{OK: true}, nil)
		l.emitCtx(octx, Event{Kind: EventAttempt, Resource: "r", Err: failure})
		rctx, began := ls.beginRelease(ctx)
		ls.endRelease(rctx, began, &err)
		renew := ls.beginRenew()
		_ = renewContext(ls.ctx, renew)
		ls.endRenew(renew, time.Now(), time.Now(), true)
		ls.renewFailing(renew, tally{})
		ls.endLease()
		told := false
		l.rejoinWait(ctx, &outcome{rejoining: 1}, &told)
	})
	require.Zero(t, allocs)
}
