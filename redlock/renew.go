package redlock

import (
	"context"
	"time"
)

// A lease's lifecycle has one owner at a time and no goroutine of its own:
// a timer runs each renewal (tick) with a third of the validity left, and
// whoever decides that the lease ends — Release, Orphan, or a renewal that
// failed — ends it (end) in its own goroutine. Release and Orphan own the
// end when they stop the timer before it fires; otherwise the renewal
// running at that moment sees the lease ending and ends it itself. A lease
// holds one count in its Locker's bg from its grant until end, so Close
// waits for every lease to end.

// start schedules the first renewal of a lease just granted.
func (ls *Lease) start() {
	ls.mu.Lock() // tick reads timer under mu: it may fire before the assignment
	defer ls.mu.Unlock()
	ls.timer = time.AfterFunc(time.Until(ls.validUntil.Add(-ls.locker.cfg.validity()/3)), ls.tick)
}

// lossGuard is how long before ValidUntil a lease whose renewal is failing
// is declared lost, so that Context ends strictly before the lock can
// expire on the nodes despite timer and scheduling delays.
func lossGuard(validity time.Duration) time.Duration {
	return max(time.Millisecond, validity/10)
}

// tick renews the lease, on the timer's goroutine, and schedules the next
// renewal; when the lease is ending (released, orphaned, lost) it ends it.
func (ls *Lease) tick() {
	l := ls.locker
	if !ls.ended() {
		start := time.Now()
		validUntil := ls.ValidUntil()
		octx := ls.beginRenew()
		next, ok := ls.renewCycle(octx, validUntil.Add(-lossGuard(l.cfg.validity())))
		if ok {
			ls.setValidUntil(next)
			l.emitCtx(octx, ls.leaseEvent(Event{Kind: EventRenewed, Latency: time.Since(start), Left: time.Until(validUntil)}))
		} else {
			ls.lose(time.Since(start))
		}
		ls.endRenew(octx, start, validUntil, ok)
		ls.mu.Lock()
		if !ls.ending && ls.ctx.Err() == nil {
			ls.timer.Reset(time.Until(ls.validUntil.Add(-l.cfg.validity() / 3)))
			ls.mu.Unlock()
			return
		}
		ls.ending = true
		ls.mu.Unlock()
	}
	ls.end(context.Background())
}

// ended marks the lease as ending if its Context has ended, and reports
// whether it is ending.
func (ls *Lease) ended() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.ctx.Err() != nil {
		ls.ending = true
	}
	return ls.ending
}

// end finishes the lease, once, in its owner's goroutine: it waits for the
// renewal and acquisition calls still running (so that none lands after),
// releases the lock on the nodes unless the lease was orphaned (recording
// the outcome in releaseErr), tells its hooks that it ended, and lets the
// Locker forget it. ctx is Release's, bounding its retries (releaseNodes).
func (ls *Lease) end(ctx context.Context) {
	l := ls.locker
	ls.calls.Wait()
	ls.acquiring.Wait()
	orphaned := context.Cause(ls.ctx) == ErrLeaseOrphaned
	if !orphaned {
		ls.releaseErr = ls.releaseNodes(ctx)
	}
	ls.hooks.ended(orphaned)
	l.forget(ls)
	ls.endLease()
	close(ls.done)
	l.bg.Done()
}

// renewCycle tries to renew the lease on a majority before lossAt, retrying
// with backoff. It reports the new validity and whether it succeeded; calls
// it leaves running are counted in ls.calls.
func (ls *Lease) renewCycle(octx context.Context, lossAt time.Time) (time.Time, bool) {
	l := ls.locker
	ctx, cancel := context.WithDeadline(renewContext(ls.ctx, octx), lossAt)
	defer cancel()
	b := l.cfg.NewBackOff()
	b.Reset()
	n := len(l.nodes)
	for {
		start := time.Now()
		replies, deadline := fanout(l, ctx, "renew", l.allIdxs(), &ls.calls, func(ctx context.Context, i int) (bool, error) {
			return renew(ctx, l.nodes[i], ls.keys, ls.token, l.cfg.LeaseDuration, l.seedStep)
		})
		var votes tally
		gather(ctx, replies, deadline, n, func(r reply[bool]) bool {
			votes.add(r)
			return votes.decided(l.quorum, n)
		})
		switch {
		case ctx.Err() != nil:
			return time.Time{}, false
		case votes.yes >= l.quorum && time.Now().Before(lossAt):
			return start.Add(l.cfg.validity()), true
		case votes.no > n-l.quorum:
			return time.Time{}, false // a majority says it is not ours
		}
		ls.renewFailing(octx, votes)
		wait := b.NextBackOff()
		if wait < 0 || await(ctx, nil, wait) != nil {
			return time.Time{}, false
		}
	}
}
