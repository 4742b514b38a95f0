// Package loadgen puts lock load on redlock Lockers and measures it: clients
// in a loop of acquire (waiting for a busy lock), hold, release, on
// resources they share, with the acquire and hand-off latencies in
// lock-free histograms, each client's share of the acquisitions and the
// errors by kind. It is the harness of "redlock-cli bench", which connects
// the Lockers, shows the progress and prints the Result.
package loadgen

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/e6344662/go-redlock/redlock"
)

// Op names the operation an error came from, for Config.ErrorKind.
type Op string

// The operations of a client's loop.
const (
	OpAcquire Op = "acquire"
	OpRelease Op = "release"
)

// Config describes one run.
type Config struct {
	// Lockers are the Lockers of the clients: client c uses
	// Lockers[c % len(Lockers)].
	Lockers []*redlock.Locker
	// Clients is the number of clients, each in its own goroutine.
	Clients int
	// Resources are the lock names: client c uses Resources[c %
	// len(Resources)].
	Resources []string
	// Hold is how long a client holds the lock before releasing it.
	Hold time.Duration
	// Wait bounds one Acquire; one that runs out counts as an error.
	Wait time.Duration
	// ReleaseTimeout bounds one Release.
	ReleaseTimeout time.Duration
	// Warmup runs before the measured window, without recording.
	Warmup time.Duration
	// Duration is the length of the measured window.
	Duration time.Duration
	// ErrorKind names the failure err of op: the key it counts under in
	// Result.Errors.
	ErrorKind func(op Op, err error) string
}

// Run is one run of the clients, from Start to Wait.
type Run struct {
	cfg      Config
	handoffs *handoffTracker
	cancel   context.CancelFunc
	clients  sync.WaitGroup

	// measureStart and end delimit the measured window (after the warm-up).
	measureStart, end time.Time

	acquire   *Hist
	handoff   *Hist
	perClient []atomic.Int64 // acquisitions in the window, by client
	same      atomic.Int64   // retaken by the releasing client
	total     atomic.Int64   // every acquisition, warm-up included
	errCount  atomic.Int64   // errors in the window

	mu   sync.Mutex
	errs map[string]int64 // errors in the window, by kind
}

// Start starts cfg.Clients clients. They stop at the end of the measured
// window, or earlier when ctx ends; Wait waits for them.
func Start(ctx context.Context, cfg Config) *Run {
	r := &Run{
		cfg:       cfg,
		handoffs:  newHandoffTracker(cfg.Clients, len(cfg.Resources)),
		acquire:   NewHist(),
		handoff:   NewHist(),
		perClient: make([]atomic.Int64, cfg.Clients),
		errs:      map[string]int64{},
	}
	r.measureStart = time.Now().Add(cfg.Warmup)
	r.end = r.measureStart.Add(cfg.Duration)
	runCtx, cancel := context.WithDeadline(ctx, r.end)
	r.cancel = cancel
	for c := range cfg.Clients {
		l := cfg.Lockers[c%len(cfg.Lockers)]
		r.clients.Go(func() { r.client(runCtx, c, l) })
	}
	return r
}

// client c loops over acquire, hold, release on its resource until ctx
// ends.
func (r *Run) client(ctx context.Context, c int, l *redlock.Locker) {
	res := c % len(r.cfg.Resources)
	for ctx.Err() == nil {
		asked := time.Now()
		actx, cancel := context.WithTimeout(ctx, r.cfg.Wait)
		lease, err := l.Acquire(actx, r.cfg.Resources[res])
		got := time.Now()
		cancel()
		measured := !got.Before(r.measureStart)
		if err != nil {
			if ctx.Err() != nil {
				return // the run ended during the wait: not an error
			}
			if measured {
				r.fail(OpAcquire, err)
			}
			if got.Sub(asked) < 10*time.Millisecond {
				sleepCtx(ctx, 10*time.Millisecond) // do not spin on an immediate failure
			}
			continue
		}
		kind, d := r.handoffs.acquired(res, c, asked, got)
		r.total.Add(1)
		if measured {
			r.acquire.Record(got.Sub(asked))
			r.perClient[c].Add(1)
			switch kind {
			case handoffOther:
				r.handoff.Record(d)
			case handoffSame:
				r.same.Add(1)
			}
		}
		sleepCtx(ctx, r.cfg.Hold)
		r.handoffs.releasing(res, c, time.Now())
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.ReleaseTimeout)
		err = lease.Release(rctx)
		rcancel()
		if err != nil && measured {
			r.fail(OpRelease, err)
		}
	}
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// fail counts one failure of op.
func (r *Run) fail(op Op, err error) {
	kind := r.cfg.ErrorKind(op, err)
	r.errCount.Add(1)
	r.mu.Lock()
	r.errs[kind]++
	r.mu.Unlock()
}

// Progress is the state of a run at one instant, for a progress display.
type Progress struct {
	// WarmupLeft is what is left of the warm-up; zero once measuring.
	WarmupLeft time.Duration
	// Measured is how long the measured window has run.
	Measured time.Duration
	// Total counts every acquisition, the warm-up's included.
	Total int64
	// Acquire holds the acquire latencies measured so far (none during
	// the warm-up).
	Acquire Snapshot
	// Errors counts the errors in the measured window.
	Errors int64
}

// Progress returns the state of the run at now.
func (r *Run) Progress(now time.Time) Progress {
	p := Progress{Total: r.total.Load(), Errors: r.errCount.Load()}
	if now.Before(r.measureStart) {
		p.WarmupLeft = r.measureStart.Sub(now)
		return p
	}
	p.Measured = now.Sub(r.measureStart)
	p.Acquire = r.acquire.Snapshot()
	return p
}

// Result is what a run measured in its window.
type Result struct {
	// Window is the length of the measured window: Config.Duration, or
	// less when the run's context ended early.
	Window time.Duration
	// Acquire holds every acquisition's latency, from the Acquire call to
	// its return.
	Acquire Snapshot
	// Handoff holds the hand-off latencies: from one holder's Release call
	// to the next holder's Acquire returning, on the same resource, when
	// the next holder is another client that was already waiting.
	Handoff Snapshot
	// SameClient counts acquisitions by the client that released the
	// resource last, while others share it.
	SameClient int64
	// PerClient counts each client's acquisitions.
	PerClient []int64
	// FairShareMin and FairShareMax are the lowest and highest ratio of a
	// client's acquisitions to its fair share (its resource's acquisitions
	// divided among the clients that use it); both 0 with none.
	FairShareMin, FairShareMax float64
	// Errors counts the failures by kind (Config.ErrorKind).
	Errors map[string]int64
	// ErrorsTotal is the sum of Errors.
	ErrorsTotal int64
}

// Wait waits for the clients to stop and returns what they measured.
func (r *Run) Wait() Result {
	r.clients.Wait()
	r.cancel()
	stopped := time.Now()
	if stopped.After(r.end) {
		stopped = r.end
	}
	res := Result{
		Window:     max(stopped.Sub(r.measureStart), 0),
		Acquire:    r.acquire.Snapshot(),
		Handoff:    r.handoff.Snapshot(),
		SameClient: r.same.Load(),
		PerClient:  make([]int64, len(r.perClient)),
	}
	for i := range r.perClient {
		res.PerClient[i] = r.perClient[i].Load()
	}
	res.FairShareMin, res.FairShareMax = fairShares(res.PerClient, len(r.cfg.Resources))
	r.mu.Lock()
	res.Errors = make(map[string]int64, len(r.errs))
	for k, v := range r.errs {
		res.Errors[k] = v
		res.ErrorsTotal += v
	}
	r.mu.Unlock()
	return res
}
