package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/cenkalti/backoff/v4"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/testutil"
)

// Mode is a way of dispatching orders with several workers.
type Mode string

const (
	// Scan: every worker scans the table and dispatches what is pending.
	Scan Mode = "scan"
	// Claim: workers claim each row with a lock (a lease per order) before
	// dispatching it.
	Claim Mode = "claim"
	// Leader: one elected leader dispatches, with fenced writes; the others
	// wait in Campaign.
	Leader Mode = "leader"
)

// Modes lists the modes in the order they are compared.
var Modes = []Mode{Scan, Claim, Leader}

// Workload is what every mode runs: the orders, the workers, and the faults
// injected on the way.
type Workload struct {
	Orders  int           // orders in all
	Batch   int           // orders arriving together
	Every   time.Duration // time between batches
	Workers int           // worker processes
	Lease   time.Duration // lease of every lock (claims and leadership)
	Poll    time.Duration // how often a worker scans the table
	Send    time.Duration // how long one dispatch (the courier call) takes
	// StallAt is the number of orders arrived when a worker freezes for
	// Stall (in leader mode, the leader), just before a dispatch; CrashAt
	// the number arrived when a worker crashes (in leader mode, the leader),
	// after the stall is over. A crashed worker restarts as a new process
	// after Restart.
	StallAt, CrashAt int
	Stall, Restart   time.Duration
}

// DefaultWorkload is what the program runs.
func DefaultWorkload() Workload {
	return Workload{
		Orders: 48, Batch: 4, Every: 80 * time.Millisecond, Workers: 4,
		Lease: 150 * time.Millisecond, Poll: 20 * time.Millisecond, Send: 3 * time.Millisecond,
		StallAt: 8, CrashAt: 32, Stall: 450 * time.Millisecond, Restart: 300 * time.Millisecond,
	}
}

// Stats is what one mode's run counted at the sink.
type Stats struct {
	Mode Mode
	// Orders is the number of orders; Effects the dispatches the courier
	// performed; Duplicates the effects beyond the first for an order.
	Orders, Effects, Duplicates int
	// EmptyPolls counts scans of the table that led to no dispatch.
	EmptyPolls int
	// Failovers counts leadership terms after the first (leader mode).
	Failovers int
	// Fenced counts writes refused for a stale fencing token.
	Fenced int
	// Undispatched counts orders never dispatched (always 0 on success).
	Undispatched int
	// Elapsed is the run's wall-clock time.
	Elapsed time.Duration
}

// Compare runs w in every mode, one after the other, each on fresh nodes
// and a fresh run of sink.
func Compare(ctx context.Context, w Workload, sink Sink) ([]Stats, error) {
	var all []Stats
	for _, m := range Modes {
		st, err := Simulate(ctx, m, w, sink)
		if err != nil {
			return all, fmt.Errorf("%s: %w", m, err)
		}
		all = append(all, st)
	}
	return all, nil
}

// Simulate runs w in mode m on three embedded lock nodes, dispatching to a
// new run of sink, and returns what the sink counted. It fails if the
// workload does not finish by ctx's end.
func Simulate(ctx context.Context, m Mode, w Workload, sink Sink) (Stats, error) {
	if w.Workers < 3 || w.Orders < w.CrashAt || w.StallAt > w.CrashAt || w.Batch < 1 {
		return Stats{}, errors.New("workload needs at least 3 workers and StallAt <= CrashAt <= Orders")
	}
	run, err := sink.NewRun(ctx)
	if err != nil {
		return Stats{}, err
	}
	var urls []string
	for range 3 {
		srv := miniredis.NewMiniRedis()
		if err := srv.StartAddr("127.0.0.1:0"); err != nil {
			return Stats{}, err
		}
		defer srv.Close()
		srv.ClockTTL(true) // lock TTLs run down with the wall clock
		urls = append(urls, "redis://"+srv.Addr())
	}
	s := &sim{mode: m, w: w, urls: urls, book: newOrderBook(w.Send, run),
		current: make([]*proc, w.Workers), restarted: make(chan struct{}, 1)}
	start := time.Now()
	err = s.run(ctx)
	st, serr := s.book.stats(ctx)
	err = errors.Join(err, serr)
	st.Mode, st.Elapsed = m, time.Since(start)
	if m == Leader {
		st.Failovers = max(0, st.Failovers-1)
	} else {
		st.Failovers = 0
	}
	return st, err
}

// sim is one run of one mode.
type sim struct {
	mode Mode
	w    Workload
	urls []string
	book *orderBook

	mu      sync.Mutex
	all     []*proc // every process started, for clean-up
	current []*proc // the live process of each worker slot
	leader  *proc   // the process that won the latest term
	arrived int

	restarted chan struct{}
}

// proc is one worker process: its own clients to the nodes (behind a
// gate), Locker and, in leader mode, Elector.
type proc struct {
	slot    int
	owner   string
	gate    *testutil.Gate
	nodes   redisnode.Nodes
	locker  *redlock.Locker
	elector *redlock.Elector

	stall, crash atomic.Bool
	stallDone    chan struct{}
}

func (s *sim) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for slot := range s.w.Workers {
		wg.Go(func() { s.supervise(ctx, slot) })
	}
	wg.Go(func() { s.produce(ctx) })
	err := s.inject(ctx)
	if err == nil {
		err = s.drain(ctx)
	}
	cancel()
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.all {
		_ = p.locker.Close()
		_ = p.nodes.Close()
	}
	return err
}

// produce adds the orders in batches.
func (s *sim) produce(ctx context.Context) {
	for n := 0; n < s.w.Orders; {
		for range s.w.Batch {
			if n < s.w.Orders {
				n++
				s.book.add(fmt.Sprintf("o%03d", n))
			}
		}
		s.mu.Lock()
		s.arrived = n
		s.mu.Unlock()
		if !sleep(ctx, s.w.Every) {
			return
		}
	}
}

// inject makes one worker stall and, after that, one crash.
func (s *sim) inject(ctx context.Context) error {
	if err := s.waitFor(ctx, func() bool { return s.arrived >= s.w.StallAt && s.target(1) != nil }); err != nil {
		return fmt.Errorf("waiting to stall a worker: %w", err)
	}
	s.mu.Lock()
	p := s.target(1)
	s.mu.Unlock()
	p.stall.Store(true)
	select {
	case <-p.stallDone:
	case <-ctx.Done():
		return fmt.Errorf("the stalled worker never woke: %w", ctx.Err())
	}
	if err := s.waitFor(ctx, func() bool { return s.arrived >= s.w.CrashAt && s.target(2) != nil }); err != nil {
		return fmt.Errorf("waiting to crash a worker: %w", err)
	}
	s.mu.Lock()
	s.target(2).crash.Store(true)
	s.mu.Unlock()
	select {
	case <-s.restarted:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the crashed worker never restarted: %w", ctx.Err())
	}
}

// drain waits until every order has arrived and been dispatched.
func (s *sim) drain(ctx context.Context) error {
	return s.waitFor(ctx, func() bool { return s.arrived == s.w.Orders && s.book.pendingCount() == 0 })
}

// waitFor polls cond (called with s.mu held) until it holds or ctx ends.
func (s *sim) waitFor(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ok := cond()
		s.mu.Unlock()
		if ok {
			return nil
		}
		if !sleep(ctx, 2*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// target picks the process a fault hits: the leader in leader mode, else
// the live process of slot. s.mu must be held.
func (s *sim) target(slot int) *proc {
	if s.mode == Leader {
		return s.leader
	}
	return s.current[slot]
}

// supervise runs the worker of slot, restarting it as a new process after
// a crash.
func (s *sim) supervise(ctx context.Context, slot int) {
	for gen := 1; ctx.Err() == nil; gen++ {
		p, err := s.start(ctx, slot, gen)
		if err != nil {
			return
		}
		if gen > 1 {
			s.restarted <- struct{}{} // buffered; one crash per run
		}
		var crashed bool
		switch s.mode {
		case Scan:
			crashed = s.scan(ctx, p)
		case Claim:
			crashed = s.claim(ctx, p)
		case Leader:
			crashed = s.lead(ctx, p)
		}
		if !crashed || !sleep(ctx, s.w.Restart) {
			return
		}
	}
}

// start launches a new process for slot: new connections, Locker, Elector.
func (s *sim) start(ctx context.Context, slot, gen int) (*proc, error) {
	nodes, err := redisnode.Dial(ctx, s.urls...)
	if err != nil {
		return nil, err
	}
	g := &testutil.Gate{}
	for _, n := range nodes {
		n.(*redisnode.Node).Client().AddHook(g)
	}
	owner := "w" + strconv.Itoa(slot)
	if gen > 1 {
		owner += "#" + strconv.Itoa(gen)
	}
	retry := max(s.w.Poll/2, time.Millisecond)
	locker, err := redlock.New(nodes, redlock.Config{
		LeaseDuration: s.w.Lease,
		Owner:         owner,
		KeyPrefix:     "dispatch:",
		NewBackOff:    func() backoff.BackOff { return backoff.NewConstantBackOff(retry) },
	})
	if err != nil {
		_ = nodes.Close()
		return nil, err
	}
	p := &proc{slot: slot, owner: owner, gate: g, nodes: nodes, locker: locker, stallDone: make(chan struct{})}
	if s.mode == Leader {
		if p.elector, err = redlock.NewElector(locker, "orders-dispatcher"); err != nil {
			_ = locker.Close()
			_ = nodes.Close()
			return nil, err
		}
	}
	s.mu.Lock()
	s.all = append(s.all, p)
	s.current[slot] = p
	s.mu.Unlock()
	return p, nil
}

// fault is called where a worker is about to dispatch: if a crash was
// asked for, the process dies (its connections go, its locks stay until
// their TTL); if a stall was asked for, the whole process freezes,
// renewals included, and then carries on as if nothing had happened. After
// a stall the caller must call p.woke once its dispatch is done.
//
// The stall is the dangerous kind: it lasts at least Stall and until
// takenOver reports that another worker has taken over (dispatched the
// order, or, in leader mode, written with a newer term), so that the
// outcome does not depend on how fast the others happen to be on a busy
// machine. It gives up waiting for the take-over after 100 Stalls.
func (s *sim) fault(ctx context.Context, p *proc, takenOver func() bool) (crashed, stalled bool) {
	if p.crash.Load() {
		p.gate.Cut()
		return true, false
	}
	if p.stall.CompareAndSwap(true, false) {
		p.gate.Cut()
		giveUp := time.Now().Add(100 * s.w.Stall)
		alive := sleep(ctx, s.w.Stall)
		for alive && !takenOver() && time.Now().Before(giveUp) {
			alive = sleep(ctx, time.Millisecond)
		}
		p.gate.Mend()
		return false, true
	}
	return false, false
}

func (p *proc) woke() { close(p.stallDone) }

// scan: every worker reads the pending orders and dispatches each of them.
func (s *sim) scan(ctx context.Context, p *proc) (crashed bool) {
	for sleep(ctx, s.w.Poll) {
		if p.crash.Load() {
			crashed, _ := s.fault(ctx, p, nil)
			return crashed
		}
		ids := s.book.pending(p.slot)
		if len(ids) == 0 {
			s.book.emptyPoll()
		}
		for _, id := range ids {
			crashed, stalled := s.fault(ctx, p, func() bool { return s.book.effectsOf(id) > 0 })
			if crashed {
				return true
			}
			if s.book.send(ctx, id) == nil {
				s.book.markDone(id)
			}
			if stalled {
				p.woke()
			}
		}
	}
	return false
}

// claim: a worker takes a lease on an order before dispatching it, and
// checks that the order is still pending once it holds the lease.
func (s *sim) claim(ctx context.Context, p *proc) (crashed bool) {
	for sleep(ctx, s.w.Poll) {
		if p.crash.Load() {
			crashed, _ := s.fault(ctx, p, nil)
			return crashed
		}
		dispatched := 0
		for _, id := range s.book.pending(p.slot) {
			lease, err := p.locker.TryAcquire(ctx, "order:"+id)
			if err != nil {
				continue // claimed by another worker (or ctx ended)
			}
			if !s.book.isPending(id) || lease.Context().Err() != nil {
				_ = lease.Release(context.Background())
				continue
			}
			crashed, stalled := s.fault(ctx, p, func() bool { return s.book.effectsOf(id) > 0 })
			if crashed {
				return true
			}
			if s.book.send(ctx, id) == nil {
				s.book.markDone(id)
			}
			dispatched++
			if stalled {
				p.woke()
			}
			_ = lease.Release(context.Background())
		}
		if dispatched == 0 {
			s.book.emptyPoll()
		}
	}
	return false
}

// lead: the workers campaign; the leader opens its term at the sink with a
// fenced write, then reads and dispatches the pending orders, every
// dispatch fenced with the term's token.
func (s *sim) lead(ctx context.Context, p *proc) (crashed bool) {
	for ctx.Err() == nil {
		term, err := p.elector.Campaign(ctx)
		if err != nil {
			return false
		}
		s.mu.Lock()
		s.leader = p
		s.mu.Unlock()
		s.book.termWon()
		// The first write of the term: from now on the sink refuses every
		// older term's writes, so what is read next is final.
		if err := s.book.openTerm(ctx, term.Fence()); err != nil {
			_ = term.Resign(context.Background())
			continue
		}
		if s.serve(ctx, p, term) {
			return true
		}
		_ = term.Resign(context.Background())
	}
	return false
}

// serve dispatches for one term until it ends; it reports a crash.
func (s *sim) serve(ctx context.Context, p *proc, term *redlock.Term) (crashed bool) {
	for {
		if p.crash.Load() {
			crashed, _ := s.fault(ctx, p, nil)
			return crashed
		}
		ids := s.book.pending(0)
		if len(ids) == 0 {
			s.book.emptyPoll()
		}
		for _, id := range ids {
			if term.Context().Err() != nil {
				return false // the term is over: stop at once
			}
			crashed, stalled := s.fault(ctx, p, func() bool { return s.book.run.Highest(ctx) > term.Fence() })
			if crashed {
				return true
			}
			err := s.book.dispatch(ctx, id, term.Fence())
			if stalled {
				p.woke()
			}
			if errors.Is(err, fencing.ErrStaleToken) {
				return false // a newer leader has written: step down
			}
			if err != nil {
				return false
			}
		}
		t := time.NewTimer(s.w.Poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-term.Context().Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// orderBook is the orders table and the courier behind it: the resource.
// The dispatches go to a Sink run. In leader mode it is also the fenced
// sink: a dispatch carries the term's fencing token, and the token check,
// the courier call and the record are one step (fencing.Fence.Do in
// memory, one transaction with pgfence.Tx in PostgreSQL).
type orderBook struct {
	sendTime time.Duration
	run      Run

	mu         sync.Mutex
	order      []string // arrival order
	pendingSet map[string]bool
	effects    map[string]int // what this process saw succeed
	emptyPolls int
	fenced     int
	terms      int
}

func newOrderBook(send time.Duration, run Run) *orderBook {
	return &orderBook{sendTime: send, run: run, pendingSet: make(map[string]bool), effects: make(map[string]int)}
}

func (b *orderBook) add(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.order = append(b.order, id)
	b.pendingSet[id] = true
}

// pending returns the pending orders in arrival order, rotated by skip so
// that claiming workers do not all start with the same row.
func (b *orderBook) pending(skip int) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ids []string
	for _, id := range b.order {
		if b.pendingSet[id] {
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 {
		k := skip % len(ids)
		ids = append(ids[k:], ids[:k]...)
	}
	return slices.Clip(ids)
}

func (b *orderBook) pendingCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pendingSet)
}

func (b *orderBook) isPending(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pendingSet[id]
}

// send is the effect, unfenced: the courier is called for id. It does not
// dedupe; a second call sends a second courier.
func (b *orderBook) send(ctx context.Context, id string) error {
	if err := b.run.Effect(ctx, id, 0, false, b.sendTime); err != nil {
		return err
	}
	b.sent(id)
	return nil
}

// sent counts an effect the sink accepted.
func (b *orderBook) sent(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.effects[id]++
}

// effectsOf returns how many times id has been sent.
func (b *orderBook) effectsOf(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.effects[id]
}

func (b *orderBook) markDone(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.pendingSet, id)
}

// openTerm is a new leader's first, empty, fenced write.
func (b *orderBook) openTerm(ctx context.Context, t fencing.Token) error {
	return b.countFenced(b.run.Effect(ctx, "", t, true, 0))
}

// dispatch sends id and marks it done, fenced by t.
func (b *orderBook) dispatch(ctx context.Context, id string, t fencing.Token) error {
	if err := b.countFenced(b.run.Effect(ctx, id, t, true, b.sendTime)); err != nil {
		return err
	}
	b.sent(id)
	b.markDone(id)
	return nil
}

// countFenced counts err if it is a stale token's refusal.
func (b *orderBook) countFenced(err error) error {
	if errors.Is(err, fencing.ErrStaleToken) {
		b.mu.Lock()
		b.fenced++
		b.mu.Unlock()
	}
	return err
}

func (b *orderBook) emptyPoll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.emptyPolls++
}

func (b *orderBook) termWon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.terms++
}

// stats counts the effects as the sink recorded them.
func (b *orderBook) stats(ctx context.Context) (Stats, error) {
	effects, err := b.run.Effects(context.WithoutCancel(ctx))
	b.mu.Lock()
	defer b.mu.Unlock()
	st := Stats{Orders: len(b.order), EmptyPolls: b.emptyPolls, Failovers: b.terms, Fenced: b.fenced, Undispatched: len(b.pendingSet)}
	for _, n := range effects {
		st.Effects += n
		st.Duplicates += n - 1
	}
	return st, err
}

// sleep waits d or until ctx ends; it reports whether ctx is still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
