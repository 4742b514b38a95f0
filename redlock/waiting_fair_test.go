package redlock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
)

// The fair waiting (wait_fair.go) driven with synthetic attempt results:
// each test makes the answers a real attempt's calls would have read
// (fairWait.queue's reader), the outcome the engine would have made of
// them (failedAttempt), and asks the waiting what it does next. The nodes
// are fakes: no server, no Lua, no sleeps.

// fairWaiting returns a fair waiting for resource "r" on a Locker over n
// fake nodes whose backoff waits an hour, started as an attempt starts it.
func fairWaiting(t *testing.T, n int) (*Locker, *fairWait, []*fakeNode) {
	t.Helper()
	nodes := newFakeNodes(n, nil)
	l := fakeLocker(t, nodes, Config{NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }})
	w, err := l.newWaiting(context.Background(), "r")
	require.NoError(t, err)
	fw := w.(*fairWait)
	t.Cleanup(func() { fw.done(false) })
	return l, fw, nodes
}

// over is a channel that is closed: calls that have ended.
func over() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// answer makes one attempt of fw whose calls read the given answers (by
// node index; nodes left out stay silent) and returns its outcome, after
// the waiting read it (failed) and with the nodes it kept.
func answer(t *testing.T, l *Locker, fw *fairWait, answers map[int]grant) (*outcome, []int) {
	t.Helper()
	_, read := fw.queue()
	fw.started(startedCalls{at: time.Now(), wg: new(sync.WaitGroup), over: over()})
	replies := make(map[int]reply[vote], len(answers))
	for i, g := range answers {
		v := vote{ok: g.OK, left: g.left, holderTTL: g.HolderTTL, reason: g.Reason}
		if g.OK {
			v.counters = []fencing.Token{g.Counter}
		}
		v = read(i, g, v)
		replies[i] = reply[vote]{val: v}
	}
	o := failedAttempt(l, time.Now(), replies)
	kept := fw.failed(context.Background(), o, newToken())
	return o, kept
}

var (
	busy    = grant{HolderTTL: time.Minute}                      // another holder
	handed7 = grant{handed: true, Counter: 7}                    // the place holds it
	granted = grant{OK: true, Counter: 5}                        // the attempt's token holds it
	queued  = func(ticket int64, headLeft time.Duration) grant { // free, kept for another head
		return grant{Reason: queuedReason, ticket: ticket, headLeft: headLeft}
	}
)

// TestWaitingFairMinorityHandOvers: a place that holds the lock on fewer
// than a majority of nodes, while the others refuse, gives its locks back
// and keeps its turn under a new place (the same ticket), so that waiters
// the nodes named differently do not each keep a minority; while a silent
// node could still make its majority, it keeps them.
func TestWaitingFairMinorityHandOvers(t *testing.T) {
	for name, tc := range map[string]struct {
		answers  map[int]grant
		giveBack bool
	}{
		"the others refuse":        {answers: map[int]grant{0: handed7, 1: busy, 2: busy}, giveBack: true},
		"a node is silent":         {answers: map[int]grant{0: handed7, 1: busy}, giveBack: false},
		"the others are queued":    {answers: map[int]grant{0: handed7, 1: queued(3, time.Second), 2: queued(3, time.Second)}, giveBack: true},
		"a majority is handed":     {answers: map[int]grant{0: handed7, 1: handed7, 2: busy}, giveBack: false},
		"nothing is handed at all": {answers: map[int]grant{0: busy, 1: busy, 2: busy}, giveBack: false},
	} {
		t.Run(name, func(t *testing.T) {
			l, fw, nodes := fairWaiting(t, 3)
			fw.p.ticket = 3
			id, fields := fw.p.id, fw.p.fields()
			o, kept := answer(t, l, fw, tc.answers)
			require.Empty(t, kept, "nothing granted: nothing to take over")
			lease, wait, err := fw.next(context.Background(), o)
			require.NoError(t, err)
			if !tc.giveBack {
				require.Equal(t, id, fw.p.id, "the place is kept")
				if lease != nil {
					require.NoError(t, lease.Release(context.Background()))
				}
				return
			}
			require.Nil(t, lease)
			require.Zero(t, wait, "after a give-back the next attempt comes at once (it already waited a split delay)")
			require.NotEqual(t, id, fw.p.id, "a new place")
			require.Equal(t, int64(3), fw.p.ticket, "with the same turn")
			for _, n := range nodes {
				n.await(t, "leave")
				leaves := n.scriptCalls("leave")
				require.Len(t, leaves, 1)
				require.Equal(t, fields.list(), append([]any{leaves[0].args[0]}, leaves[0].args[4:9]...), "%s: the old place leaves", n.addr)
				require.Equal(t, "give", leaves[0].args[3], "%s: giving its lock back", n.addr)
			}
		})
	}
}

// TestWaitingFairStaleAnnouncement: a hand-over announced before an
// attempt's calls went out stops counting once the node answers that the
// lock is not the place's (it lapsed, or went to another holder); one
// announced while the attempt ran still counts, and so does one from a
// node that did not answer.
func TestWaitingFairStaleAnnouncement(t *testing.T) {
	l, fw, _ := fairWaiting(t, 3)
	fw.joinHub(fw.p.id)
	require.NotNil(t, fw.w)
	l.hub.handOver(fw.key, 0, fw.p.id, 7)
	l.hub.handOver(fw.key, 2, fw.p.id, 7)
	h, _ := l.handed(fw.p, fw.w)
	require.Equal(t, []int{0, 2}, h)

	// Node 0 answers a refusal for another holder; node 2 is silent.
	answer(t, l, fw, map[int]grant{0: busy, 1: busy})
	h, _ = l.handed(fw.p, fw.w)
	require.Equal(t, []int{2}, h, "node 0's announcement is stale; node 2 did not answer")

	// Announced while the next attempt ran: its refusal may predate it.
	_, read := fw.queue()
	l.hub.handOver(fw.key, 0, fw.p.id, 9)
	v := vote{holderTTL: time.Minute}
	v = read(0, busy, v)
	o := failedAttempt(l, time.Now(), map[int]reply[vote]{0: {val: v}})
	fw.failed(context.Background(), o, newToken())
	h, counters := l.handed(fw.p, fw.w)
	require.Equal(t, []int{0, 2}, h)
	require.Equal(t, fencing.Token(9), counters[0])
}

// TestWaitingFairTickets: nodes that gave the waiter different tickets are
// told the highest at once, twice in a row at most; then it waits, and no
// longer than the head's place has left (a head that died holds the lock
// up no longer than that), nor than a third of its own place's TTL.
func TestWaitingFairTickets(t *testing.T) {
	l, fw, _ := fairWaiting(t, 3)
	split := map[int]grant{0: queued(2, 40*time.Millisecond), 1: queued(3, 40*time.Millisecond), 2: queued(3, time.Second)}
	for round := range 2 {
		o, _ := answer(t, l, fw, split)
		lease, wait, err := fw.next(context.Background(), o)
		require.NoError(t, err)
		require.Nil(t, lease)
		require.Zero(t, wait, "round %d: the tickets disagree: at once", round)
		require.Equal(t, int64(3), fw.p.ticket, "the highest is brought to every node")
	}
	o, _ := answer(t, l, fw, split)
	_, wait, err := fw.next(context.Background(), o)
	require.NoError(t, err)
	require.Equal(t, 41*time.Millisecond, wait, "a node that keeps disagreeing is told on the next attempt; the head lapses in 40 ms")
	require.NotNil(t, fw.w, "it waits in the hub for the head's release")

	agreed := map[int]grant{0: queued(3, 0), 1: queued(3, 0), 2: queued(3, 0)}
	o, _ = answer(t, l, fw, agreed)
	_, wait, err = fw.next(context.Background(), o)
	require.NoError(t, err)
	require.Equal(t, l.cfg.QueueTTL/3, wait, "renew the place in time")
}

// TestWaitingFairHandedMajority: announcements from a majority of nodes
// that they handed the lock over make the lease, without an attempt: the
// fence is theirs, and the lease's release takes the place out of the
// nodes' queues.
func TestWaitingFairHandedMajority(t *testing.T) {
	l, fw, nodes := fairWaiting(t, 3)
	fw.started(startedCalls{at: time.Now(), wg: new(sync.WaitGroup), over: over()})
	fw.joinHub(fw.p.id)
	fields := fw.p.fields()
	l.hub.handOver(fw.key, 0, fw.p.id, 7)
	lease, next := fw.handedOver(context.Background())
	require.Nil(t, lease)
	require.Equal(t, waitMore, next, "one node of three: the others' news is on its way")
	l.hub.handOver(fw.key, 2, fw.p.id, 7)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := fw.sleep(ctx, time.Hour) // woken by the announcement
	require.NoError(t, err)
	require.NotNil(t, lease)
	require.Equal(t, fencing.Token(7), lease.Fence())
	require.Equal(t, fw.p.token, lease.Token(), "the place's token holds the handed locks")
	for _, n := range nodes {
		require.Empty(t, n.scriptCalls("acquire"), "no attempt")
		require.Empty(t, n.scriptCalls("fence"), "the counters agree: no fence step")
	}

	require.NoError(t, lease.Release(context.Background()))
	for _, n := range nodes {
		n.await(t, "release") // Release returned at a majority
		rel := n.scriptCalls("release")
		require.Equal(t, append([]any{"place"}, fields.list()...), rel[0].args[6:13], "%s: the release removes the place", n.addr)
	}
}

// TestWaitingFairTakesGrantsOver: an attempt that one node granted while
// another had handed the lock over to the place (a majority together)
// moves the grant under the place's token and takes the lease from the
// two; the clean-up spares the node it kept.
func TestWaitingFairTakesGrantsOver(t *testing.T) {
	l, fw, nodes := fairWaiting(t, 3)
	o, kept := answer(t, l, fw, map[int]grant{0: granted, 1: handed7, 2: busy})
	require.Equal(t, []int{0}, kept)
	require.Len(t, nodes[0].scriptCalls("rehold"), 1)
	require.Empty(t, nodes[2].scriptCalls("rehold"), "a node that refused is not asked")

	lease, wait, err := fw.next(context.Background(), o)
	require.NoError(t, err)
	require.NotNil(t, lease, "found handed over without an announcement")
	require.Zero(t, wait)
	require.Equal(t, fencing.Token(7), lease.Fence())
	require.NoError(t, lease.Release(context.Background()))
}

// TestWaitingFairSplitVote: a fair attempt that a minority granted, with
// no hand-over, is a split vote as in the plain waiting (waitBase's rule):
// no grant is taken over, the pause is a random point up to twice the
// attempt's duration, doubled for each split in a row, and an attempt
// that nobody granted starts the count again.
func TestWaitingFairSplitVote(t *testing.T) {
	l, fw, _ := fairWaiting(t, 3)
	for round := range 3 {
		start := time.Now()
		o, kept := answer(t, l, fw, map[int]grant{0: granted, 1: busy, 2: queued(2, 0)})
		require.Empty(t, kept, "nothing handed over to the place: no grant taken over")
		lease, wait, err := fw.next(context.Background(), o)
		require.NoError(t, err)
		require.Nil(t, lease)
		require.Equal(t, round+1, fw.splits)
		require.LessOrEqual(t, wait, 2*time.Since(start)<<round, "round %d", round)
	}
	o, _ := answer(t, l, fw, map[int]grant{0: busy, 1: busy, 2: queued(2, 0)})
	_, _, err := fw.next(context.Background(), o)
	require.NoError(t, err)
	require.Zero(t, fw.splits, "nobody granted: no split")
}

// TestWaitingFairLapsedHead: nodes that keep a free lock for another head
// make the waiter try again when that head's place runs out, not later; a
// release that names the other head does not wake it, and the head's
// leaving (its place lapsed or given up) that names this waiter wakes it
// at once, on one node's word.
func TestWaitingFairLapsedHead(t *testing.T) {
	l, fw, _ := fairWaiting(t, 3)
	kept := queued(1, 30*time.Millisecond)
	o, _ := answer(t, l, fw, map[int]grant{0: kept, 1: kept, 2: kept})
	lease, wait, err := fw.next(context.Background(), o)
	require.NoError(t, err)
	require.Nil(t, lease)
	require.Equal(t, 31*time.Millisecond, wait, "again once the head's place has run out")
	require.NotNil(t, fw.w, "it waits in the hub meanwhile")

	for i := range 2 {
		l.hub.notify(i, fw.key, "0a1b2c3d otherplace")
	}
	require.Empty(t, fw.w.wake, "a release handed to the other head wakes nobody here")

	l.hub.notify(2, fw.key, leaveMark+"4e5f6a7b "+fw.p.id)
	require.Len(t, fw.w.wake, 1, "the head left and named this waiter: woken at once")
}
