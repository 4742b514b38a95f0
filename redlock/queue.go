package redlock

import (
	"context"
	"sync"
	"time"
)

// place is a fair Acquire's place in a lock's wait queue on the nodes
// (Config.QueueTTL, docs/design.md section 11.1): its waiter id; its
// arrival time (microseconds on this process's clock), which it proposes
// as its ticket; the highest ticket the nodes gave it so far (0 before the
// first), which it brings to every node on its next attempt so that all
// nodes order it alike; and how long each node keeps the place without a
// renewal.
type place struct {
	id      string
	arrival int64
	ticket  int64
	ttl     time.Duration
	// pending is the last attempt's node calls, which may still queue
	// the place after the attempt returned.
	pending *sync.WaitGroup
}

// ticketArg is the ticket argument of the acquire script: the agreed
// ticket, or before there is one the arrival time as a proposal (negated).
func (p *place) ticketArg() int64 {
	if p.ticket > 0 {
		return p.ticket
	}
	return -p.arrival
}

// newPlace returns a new waiter's place, or nil when this Locker does not
// queue (QueueTTL negative, or nodes that keep no queue).
func (l *Locker) newPlace() *place {
	if !l.fair {
		return nil
	}
	return &place{id: newToken()[:16], arrival: time.Now().UnixMicro(), ttl: l.cfg.QueueTTL}
}

// canQueue reports whether every node keeps a wait queue per lock.
func canQueue(nodes []Node) bool {
	for _, n := range nodes {
		if _, ok := n.(rejoiner); !ok {
			return false
		}
	}
	return true
}

// leaveQueue takes p out of key's queue on the nodes idxs once the calls
// that may still queue it (pending, when not nil) have ended: in the
// background, or at once in the caller's goroutine when the Locker is
// closed (a closed Locker leaves no place behind). Each call is bounded by
// NodeCallTimeout. A node where p was the head of a free lock announces the
// next head.
func (l *Locker) leaveQueue(key string, p *place, idxs []int, pending *sync.WaitGroup) {
	if p == nil || len(idxs) == 0 {
		return
	}
	leave := func() {
		if pending != nil {
			pending.Wait()
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.cfg.NodeCallTimeout)
		defer cancel()
		var wg sync.WaitGroup
		for _, i := range idxs {
			if r, ok := l.nodes[i].(rejoiner); ok {
				wg.Go(func() { _ = r.leaveQueue(ctx, key, p.id) })
			}
		}
		wg.Wait()
	}
	if !l.enter() {
		leave()
		return
	}
	go func() {
		defer l.bg.Done()
		leave()
	}()
}

// queueView is what one attempt's refusals said of the wait queue: the
// tickets the nodes gave the caller, and the least time the head's ticket
// had left on a node where the caller was not the head.
type queueView struct {
	lo, hi   int64 // lowest and highest ticket given; 0 when none
	headLeft time.Duration
}

// add notes one node's refusal.
func (q *queueView) add(g Grant) {
	if g.ticket > 0 {
		if q.lo == 0 || g.ticket < q.lo {
			q.lo = g.ticket
		}
		q.hi = max(q.hi, g.ticket)
	}
	if g.headLeft > 0 && (q.headLeft == 0 || g.headLeft < q.headLeft) {
		q.headLeft = g.headLeft
	}
}

// queuedReason is a node's reason for refusing a free lock: the head of
// its wait queue is another waiter.
const queuedReason = "queued: another waiter is next"
