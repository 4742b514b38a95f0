package redlock

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/e6344662/go-redlock/fencing"
)

// fairWait is an Acquire's waiting in the lock's wait queue on the nodes
// (Config.QueueTTL, docs/design.md §11): its attempts carry its place, the
// nodes give it a ticket and keep the free lock for the head of the queue,
// and a release hands the lock over to the head, whose Acquire takes the
// lease without an attempt of its own.
type fairWait struct {
	waitBase
	p *place
	// syncs counts the attempts in a row made at once to agree on a
	// ticket; notes is the hub's count of hand-over announcements to the
	// waiter when the current attempt started.
	syncs int
	notes uint64
	// heard holds, by node index, the current attempt's answers (each
	// written by its call before the attempt reads the answer: read only
	// the answered nodes'); took says the last failed attempt found locks
	// held by the place (a hand-over not announced yet).
	heard []grant
	took  bool
}

// newFairWait returns a fair waiting with a new place.
func newFairWait(base waitBase) *fairWait {
	return &fairWait{waitBase: base, p: base.l.newPlace()}
}

// queue also notes how many hand-overs had been announced before the
// attempt's calls went out (failed forgets only those), and reads each
// node's answer into heard: a refusal because the place holds the lock is
// a hand-over.
func (fw *fairWait) queue() (*queueArgs, func(int, grant, vote) vote) {
	if fw.w != nil {
		fw.notes = fw.l.hub.notes(fw.w)
	}
	heard := make([]grant, len(fw.l.nodes))
	fw.heard = heard
	return &queueArgs{place: fw.p.fields(), ticket: fw.p.ticketArg(), ttl: fw.p.ttl}, func(i int, g grant, v vote) vote {
		heard[i] = g
		if g.handed {
			v.reason = handedReason
		}
		return v
	}
}

func (fw *fairWait) started(c startedCalls) {
	if fw.p.first.IsZero() {
		fw.p.first = c.at
	}
	fw.p.addCalls(c, fw.l.cfg.NodeCallTimeout)
}

// view is what the attempt's answered nodes said of the queue: the nodes
// whose lock is held by the caller's place (a hand-over the caller had not
// heard of), how many refused for another reason, and the tickets.
func (fw *fairWait) view(o *outcome) (handed []int, others int, q queueView) {
	for _, i := range o.answered {
		g := fw.heard[i]
		switch {
		case g.handed:
			handed = append(handed, i)
		case slices.Contains(o.unsure, i) || g.OK:
		default:
			others++
			q.add(g)
		}
	}
	return handed, others, q
}

// listen hears the nodes a little longer when some hold the lock for the
// caller's place but not a majority: whether the others refuse decides
// whether the place gives them back (next). Briefly, so that a paused
// node does not hold the attempt up.
func (fw *fairWait) listen(o *outcome) time.Duration {
	if len(o.granted) >= fw.l.quorum {
		return 0
	}
	if handed, _, _ := fw.view(o); len(handed) == 0 {
		return 0
	}
	elapsed := time.Since(o.start)
	left := fw.l.cfg.NodeCallTimeout - elapsed
	if left <= 0 {
		return 0
	}
	return min(max(2*elapsed, time.Millisecond), left)
}

// failed notes which nodes hold the lock for the place, and forgets the
// hand-overs that the nodes' answers show are gone (lapsed, or gone to a
// new holder). When the attempt's grants and the place's locks make a
// majority together, the grants move under the place's token (for the
// full TTL) and count as handed over.
func (fw *fairWait) failed(ctx context.Context, o *outcome, token string) []int {
	l, p := fw.l, fw.p
	handed, _, _ := fw.view(o)
	fw.took = len(handed) > 0
	for _, i := range o.answered {
		switch {
		case slices.Contains(handed, i):
			p.found[i] = max(p.found[i], fw.heard[i].Counter)
		case !slices.Contains(o.unsure, i):
			delete(p.found, i)
			l.hub.forgetHandOver(fw.w, i, fw.notes)
		}
	}
	if len(o.granted) == 0 || len(handed) == 0 || len(o.granted)+len(handed) < l.quorum || ctx.Err() != nil {
		return nil
	}
	held := l.rehold(ctx, fw.key, o.granted, token, p, allAnswers)
	kept := make([]int, 0, len(held))
	for i, c := range held {
		p.found[i] = max(p.found[i], c)
		kept = append(kept, i)
	}
	return kept
}

// granted gives the lease hooks whose release also removes the place
// where it may still stand (nodes that did not grant; a lock handed over
// there meanwhile is the lease's, renewed and released with the others),
// and leave again after the calls still running then (a late call may
// queue it again).
func (fw *fairWait) granted(ls *Lease) {
	ls.hooks = &placeLease{fairLeases: ls.hooks.(*fairLeases), key: fw.key, place: fw.p.fields(), queuing: running(fw.p.calls, &ls.acquiring)}
}

func (fw *fairWait) next(ctx context.Context, o *outcome) (*Lease, time.Duration, error) {
	l, p := fw.l, fw.p
	_, others, q := fw.view(o)
	if others > 0 {
		if h, _ := l.handed(p, fw.w); len(h) > 0 && len(h)+o.err.Granted+o.silent < l.quorum {
			// The nodes handed the lock over to this place, but not a
			// majority of them, and even with the nodes that did not
			// answer they cannot be one: the others refused (they hold
			// the lock for another, or keep it for another head) or
			// failed. No majority may come to this place until the
			// others give up. Give its locks back and keep the turn with
			// a new place; try again at a random point soon, as after a
			// split vote, and no later than the others said they may
			// grant (a holder's TTL, a rejoining node's time left).
			l.givePlaceBack(fw.key, p, fw.w)
			fw.noteSplit(o)
			d := fw.splitDelay(o.start)
			if o.err.HolderTTL > 0 {
				d = min(d, o.err.HolderTTL)
			}
			return nil, 0, l.await(ctx, nil, d)
		}
	}
	if fw.took {
		// The attempt found locks handed over to this place that no
		// announcement had told of yet.
		if lease, _ := fw.handedOver(ctx); lease != nil {
			return lease, 0, nil
		}
	}
	// Bring the highest ticket to every node: they then order this waiter
	// alike. Nodes that gave different tickets are told at once (twice at
	// most in a row; a node that keeps disagreeing is told on the next
	// attempt).
	p.ticket = max(p.ticket, q.hi)
	if q.lo != q.hi && fw.syncs < 2 {
		fw.syncs++
		return nil, 0, nil
	}
	fw.syncs = 0
	fw.joinHub(p.id)
	// Renew the place in time, and try again when the head's place runs
	// out (a waiter that died holds the lock up no longer).
	limit := p.ttl / 3
	if q.headLeft > 0 {
		limit = min(limit, q.headLeft+time.Millisecond)
	}
	wait, err := fw.pause(o, limit)
	return nil, wait, err
}

// sleep waits, and takes the lock when the nodes hand it over: then no
// attempt is needed. While some have and the others have not yet, their
// announcements are on their way: it waits for them, no longer than
// handOverGrace (nor than this wait was to last; the next attempt finds
// the lock wherever it went). A majority that cannot make a lease (too
// little validity left) is taken over by an attempt at once.
func (fw *fairWait) sleep(ctx context.Context, d time.Duration) (*Lease, error) {
	for {
		slept := time.Now()
		if err := fw.l.await(ctx, fw.w, d); err != nil {
			return nil, err
		}
		if fw.w == nil || fw.l.isClosed() {
			return nil, nil // the next attempt reports a closed Locker
		}
		lease, next := fw.handedOver(ctx)
		if lease != nil {
			return lease, nil
		}
		if d -= time.Since(slept); next != waitMore || d <= 0 {
			return nil, nil
		}
		// The other nodes' announcements of one release come within a
		// few milliseconds of the first. When they do not, those nodes
		// handed the lock to another head (their tickets did not agree
		// yet): an attempt then finds out, and gives back a minority that
		// cannot be used, instead of each head keeping one until its
		// backoff ends.
		d = min(d, handOverGrace)
	}
}

// handOverGrace is how long a waiter that heard some nodes hand the lock
// over to it waits for the others' announcements before it makes an
// attempt.
const handOverGrace = 5 * time.Millisecond

// done gives the place up when the Acquire ends without a lease (a lease
// leaves the queue when it ends): on every node, giving back a lock
// handed over to it.
func (fw *fairWait) done(won bool) {
	if fw.w != nil {
		fw.leaveHub()
	}
	if !won && !fw.p.first.IsZero() {
		fw.l.leaveQueue(fw.key, fw.p, fw.l.allIdxs(), givingBack)
	}
}

// place is a fair Acquire's place in a lock's wait queue on the nodes
// (Config.QueueTTL, docs/design.md section 11.1): its waiter id; its
// arrival time (microseconds on this process's clock), which it proposes
// as its ticket; the highest ticket the nodes gave it so far (0 before the
// first), which it brings to every node on its next attempt so that all
// nodes order it alike; and how long each node keeps the place without a
// renewal. A node that a holder releases hands the lock over to the head
// of its queue (docs/design.md section 11.2) under the place's own token
// (never used by an attempt, each of which draws its own): the scripts
// take the place's fields (fields, placeArgs), the waiter id and, unless
// hand-overs are off (handTTL 0), the lock's TTL in milliseconds, the
// channel to announce a hand-over on ("-": the lock's own) and the lock's
// value, token and owner.
type place struct {
	id      string
	handTTL int64 // ms; 0: never handed the lock
	channel string
	token   string
	owner   string
	arrival int64
	ticket  int64
	ttl     time.Duration
	// handState is shared with the copies the attempts' node calls read.
	*handState
}

// handState is what a waiter knows of the locks handed over to its place,
// shared by the copies of the place that the attempts' calls read. Only
// the Acquire call's own goroutine touches it.
type handState struct {
	// first is the start of the Acquire's first attempt: every state of
	// its place on any node comes from an attempt that started later
	// (the place's member is this Acquire's own).
	first time.Time
	// seen counts the hand-overs handedOver last found.
	seen int
	// found holds, by node index, the counter of a lock that an attempt
	// found held by the place's token (a hand-over it had not heard of).
	found map[int]fencing.Token
	// calls are the node calls of the attempts that may still be running,
	// with when each attempt started; the final leave waits for them (a
	// late call could queue the place again).
	calls []startedCalls
}

// addCalls records an attempt's calls, forgetting those of attempts that
// started more than NodeCallTimeout (plus a margin) ago: they have ended.
func (hs *handState) addCalls(c startedCalls, timeout time.Duration) {
	hs.calls = slices.DeleteFunc(hs.calls, func(o startedCalls) bool { return c.at.Sub(o.at) > timeout+time.Second })
	hs.calls = append(hs.calls, c)
}

// waitCalls waits for every attempt's calls that may still be running.
func (hs *handState) waitCalls() {
	for _, c := range hs.calls {
		c.wg.Wait()
	}
}

// running returns the recorded attempts whose calls may still be running,
// but for those counted in own.
func running(calls []startedCalls, own *sync.WaitGroup) []startedCalls {
	var r []startedCalls
	for _, c := range calls {
		select {
		case <-c.over:
		default:
			if c.wg != own {
				r = append(r, c)
			}
		}
	}
	return r
}

// fields are the place's fields as the scripts take them.
func (p *place) fields() placeArgs {
	return placeArgs{id: p.id, handTTL: p.handTTL, channel: p.channel, token: p.token, owner: p.owner}
}

// ticketArg is the ticket argument of the acquire script: the agreed
// ticket, or before there is one the arrival time as a proposal (negated).
func (p *place) ticketArg() int64 {
	if p.ticket > 0 {
		return p.ticket
	}
	return -p.arrival
}

// newPlace returns a new waiter's place (the Locker queues: l.fair).
func (l *Locker) newPlace() *place {
	id, token := newToken()[:16], newToken()
	var handTTL int64 // named and woken, never handed the lock
	if !l.cfg.DisableHandOver {
		handTTL = nodeTTL(l.cfg.LeaseDuration)
	}
	return &place{
		id:        id,
		handTTL:   handTTL,
		channel:   l.inboxChannel(),
		token:     token,
		owner:     l.cfg.Owner,
		arrival:   time.Now().UnixMicro(),
		ttl:       l.cfg.QueueTTL,
		handState: &handState{found: make(map[int]fencing.Token, len(l.nodes))},
	}
}

// inboxChannel is the channel the nodes announce hand-overs to this
// Locker's waiters on, or "-" for the lock's own.
func (l *Locker) inboxChannel() string {
	if l.inbox == "" {
		return "-"
	}
	return releaseChannel(l.inbox)
}

// fairLeases are the lease hooks of a Locker whose waiters queue on the
// nodes: a release hands the lock over to the head of each node's queue
// (docs/design.md §11.2), and this Locker's waiters that the nodes named
// the head are woken at once.
type fairLeases struct {
	l *Locker
	// handOver is a release's hand-over, built once: the Locker's rejoin
	// delay for every node. A node that does not report its uptime (a
	// stand-in, or a user's Node over a real server) gets it too: the
	// script judges the node's data itself, and a delay turned off there
	// would let a hand-over after a loss vouch for the node at once.
	handOver handOver
}

func newFairLeases(l *Locker) *fairLeases {
	h := handOver{on: true, delay: l.cfg.RejoinDelay}
	h.built = h.args()
	return &fairLeases{l: l, handOver: h}
}

// release builds a's calls once: every node's hand-over is the same.
func (f *fairLeases) release(a releaseArgs) releasing {
	a.prepare()
	return &handingOver{l: f.l, a: a.withHandOver(f.handOver)}
}

func (*fairLeases) ended(bool) {}

// handingOver is a release that hands the lock over to the head of each
// node's queue; it notes the heads the nodes named without handing the
// lock over to them.
type handingOver struct {
	l     *Locker
	a     releaseArgs
	mu    sync.Mutex
	heads []string
}

func (r *handingOver) args(ctx context.Context, i int) releaseArgs {
	args := r.a
	args.marker = r.l.gateFor(ctx, i).marker(r.a.keys[0])
	return args
}

func (r *handingOver) heard(i int, rp released) {
	switch {
	case rp.counter > 0:
		// A waiter of this Locker need not wait for the announcement.
		r.l.hub.handOver(r.a.keys[0], i, rp.head, rp.counter)
	case rp.head != "":
		r.mu.Lock()
		if !slices.Contains(r.heads, rp.head) {
			r.heads = append(r.heads, rp.head)
		}
		r.mu.Unlock()
	}
}

// done wakes a waiter of this Locker that the nodes named the head of the
// queue: it need not wait for the announcements.
func (r *handingOver) done(time.Duration) {
	r.mu.Lock()
	heads := r.heads
	r.mu.Unlock()
	if len(heads) > 0 {
		r.l.hub.wakeHeads(r.a.keys[0], heads)
	}
}

// placeLease are the hooks of a lease a fair Acquire took: its release
// also removes the Acquire's place from the nodes where it may still
// stand, and the place leaves the queue again after the node calls of the
// Acquire's earlier attempts that were still running when the lease was
// granted (queuing): one that lands after the release queues it again.
type placeLease struct {
	*fairLeases
	key     string
	place   placeArgs
	queuing []startedCalls
	// late are the queuing calls still running when the release began.
	late []startedCalls
}

func (p *placeLease) release(a releaseArgs) releasing {
	a.place = p.place
	p.late = running(p.queuing, nil) // may land after the release
	return p.fairLeases.release(a)
}

// ended leaves the queue after the late calls: giving back a lock handed
// over to the place after the release; keeping it when the lease was
// orphaned (its lock stays until its TTL, but the place must not be handed
// a lock that nobody would renew or release).
func (p *placeLease) ended(orphaned bool) {
	switch {
	case orphaned:
		p.leaveAfter(running(p.queuing, nil), keeping)
	case len(p.late) > 0:
		p.leaveAfter(p.late, givingBack)
	}
}

// leaveAfter takes the place out of the queue on every node, in the
// background, once the given attempt calls have ended (leaveQueue); with
// givingBack, a lock handed over to the place is given up too.
func (p *placeLease) leaveAfter(calls []startedCalls, lock handedLock) {
	l := p.l
	l.leaveQueue(p.key, &place{id: p.place.id, handTTL: p.place.handTTL, channel: p.place.channel, token: p.place.token, owner: p.place.owner, handState: &handState{calls: calls}}, l.allIdxs(), lock)
}

// handedLock says what a place that leaves the queue does with a lock
// handed over to it.
type handedLock int

const (
	// keeping leaves it to its holder (an orphaned lease's lock stays
	// until its TTL).
	keeping handedLock = iota
	// givingBack gives it up: the node frees it, or hands it on.
	givingBack
)

// leaveQueue takes p out of key's queue on the nodes idxs once the calls
// of its attempts that may still queue it have ended: in the background,
// or at once in the caller's goroutine when the Locker is closed (a closed
// Locker leaves no place behind). Each call is bounded by NodeCallTimeout.
// With givingBack (an Acquire that ended without a lease), a node that had
// handed its lock over to p gives it up; where p was the head of a free
// lock, or gave it up, the node announces the next head.
func (l *Locker) leaveQueue(key string, p *place, idxs []int, lock handedLock) {
	if p == nil || len(idxs) == 0 {
		return
	}
	leave := func() {
		p.waitCalls()
		ctx, cancel := context.WithTimeout(context.Background(), l.cfg.NodeCallTimeout)
		defer cancel()
		var wg sync.WaitGroup
		a := leaveArgs{keys: lockKeys(key), place: p.fields(), give: lock == givingBack}
		for _, i := range idxs {
			wg.Go(func() { _ = leave(ctx, l.nodes[i], a) })
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
func (q *queueView) add(g grant) {
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

// handedReason is a node's reason for refusing an attempt whose place
// holds the lock: the Acquire takes it as a hand-over.
const handedReason = "handed over to this waiter's place"

// queuedReason is a node's reason for refusing a free lock: the head of
// its wait queue is another waiter.
const queuedReason = "queued: another waiter is next"

// handedOver returns a lease when a majority of the nodes handed the lock
// over to w's place p (docs/design.md section 11.2), as their announcements
// or an attempt's replies say, and otherwise what to do next. The node
// set the lock, under the place's token, to expire min(the lease duration,
// what the place had left) after the hand-over, which came after some
// attempt of this Acquire placed it there: no earlier than min(lease
// duration, QueueTTL) after the first attempt's start, even when the
// node's state went back to an older attempt's (a failover that lost
// writes). Nothing but this Acquire's end (its lease's release, or its
// leaving) frees a lock held by the place's token. The lease is valid
// until then, less the drift allowance and a millisecond for the node's
// clock read in whole milliseconds. When that leaves too little for the
// lease's first renewal (a long wait, a QueueTTL below the lease
// duration), the locks are renewed first, for the full TTL.
func (fw *fairWait) handedOver(ctx context.Context) (*Lease, handNext) {
	l, p, resource := fw.l, fw.p, fw.resource
	granted, counters := l.handed(p, fw.w)
	fresh := len(granted) > p.seen
	p.seen = len(granted)
	switch {
	case len(granted) < l.quorum && fresh:
		return nil, waitMore
	case len(granted) < l.quorum:
		return nil, tryNow
	}
	if !l.enter() {
		return nil, tryNow
	}
	defer l.bg.Done()
	validity := l.validity
	validUntil := p.first.Add(min(l.cfg.LeaseDuration, p.ttl) - l.drift - time.Millisecond)
	if time.Until(validUntil) <= lossGuard(validity)+l.cfg.NodeCallTimeout {
		// Renew the handed-over locks for the full TTL: the validity then
		// counts from the renewal's start, on the nodes that confirm, with
		// the counters they say now. Every node is asked (a rehold moves
		// only a lock the place holds): a hand-over whose announcement is
		// still on its way counts too, so a paused node among those
		// announced does not hold the hand-off up.
		start := time.Now()
		held := l.rehold(ctx, l.Key(resource), l.allIdxs(), p.token, p, majorityYes)
		if len(held) < l.quorum {
			return nil, tryNow
		}
		granted, validUntil = granted[:0], start.Add(validity)
		for i, c := range held {
			granted = append(granted, i)
			counters[i] = c
		}
	}
	slices.Sort(granted)
	ls := newLease(l, resource, p.token)
	ls.validUntil = validUntil
	ae := &AcquireError{Resource: resource, Needed: l.quorum, Total: len(l.nodes)}
	fence, err := ls.confirmFence(ctx, granted, counters, validUntil, ae)
	if err != nil || !time.Now().Before(validUntil) {
		ls.cancel(ErrLeaseReleased)
		return nil, tryNow
	}
	fw.granted(ls)
	if !l.establish(ls, granted, fence) {
		ls.cancel(ErrLeaseReleased)
		return nil, tryNow
	}
	return ls, tryNow
}

// rehold sets key, held by token from on the nodes idxs, to p's own lock
// value for the lease duration, and returns the nodes that did it with
// their fence counters, reading the answers as stop says (majorityYes:
// until a majority did or none can), until ctx ends, within
// NodeCallTimeout. ctx cancels no call: a call still running goes on
// (recorded among p's calls, which its leaving waits for), and can only
// move a lock that from still holds.
func (l *Locker) rehold(ctx context.Context, key string, idxs []int, from string, p *place, stop stopRule) map[int]fencing.Token {
	type reheld struct {
		c  fencing.Token
		ok bool
	}
	value := p.token + " " + l.cfg.Owner
	keys := lockKeys(key)
	wg := new(sync.WaitGroup)
	start := time.Now()
	replies, deadline := fanout(l, context.WithoutCancel(ctx), "rehold", idxs, wg, nil, func(ctx context.Context, i int) (reheld, error) {
		c, ok, err := rehold(ctx, l.nodes[i], keys, from, value, l.cfg.LeaseDuration, l.seedStep, l.gateFor(ctx, i))
		return reheld{c, ok}, err
	})
	p.addCalls(startedCalls{at: start, wg: wg, over: deadline}, l.cfg.NodeCallTimeout)
	held := make(map[int]fencing.Token, len(idxs))
	read := 0
	gather(ctx, replies, deadline, len(idxs), func(r reply[reheld]) bool {
		read++
		if r.err == nil && r.val.ok {
			held[r.idx] = r.val.c
		}
		return stop == majorityYes && (len(held) >= l.quorum || len(held)+len(idxs)-read < l.quorum)
	})
	return held
}

// handed returns the nodes that handed the lock over to p, as far as w
// (the announcements) and p's attempts know, and their counters by node
// index.
func (l *Locker) handed(p *place, w *waiter) ([]int, []fencing.Token) {
	var announced map[int]fencing.Token
	if w != nil {
		announced = l.hub.handovers(w)
	}
	counters := make([]fencing.Token, len(l.nodes))
	var nodes []int
	for i := range l.nodes {
		if c := max(announced[i], p.found[i]); c > 0 {
			nodes = append(nodes, i)
			counters[i] = c
		}
	}
	return nodes, counters
}

// givePlaceBack gives up p's place and the locks handed over to it on every
// node (in the background, after the calls of p's attempts), and gives the
// waiter a new place with a new id and token but the same ticket, so that
// it keeps its turn. A waiter holding a minority of hand-overs while others
// hold the rest (the nodes named different heads) would otherwise keep it
// until the locks expire. The new token keeps the old place's late
// messages (its leaving, its announcements) from touching the new place's
// locks.
func (l *Locker) givePlaceBack(key string, p *place, w *waiter) {
	old := *p
	old.handState = &handState{calls: slices.Clone(p.calls)} // read by the leaving in the background
	l.leaveQueue(key, &old, l.allIdxs(), givingBack)
	fresh := l.newPlace()
	p.id, p.token = fresh.id, fresh.token
	p.found, p.seen = make(map[int]fencing.Token, len(l.nodes)), 0
	if w != nil {
		l.hub.rename(w, p.id)
	}
}

// handNext is what an Acquire does when handedOver gives it no lease.
type handNext int

const (
	// tryNow: make an attempt (woken for another reason, or a majority
	// handed over that a lease cannot be made from).
	tryNow handNext = iota
	// waitMore: some nodes handed the lock over, the others' news is on
	// its way.
	waitMore
)
