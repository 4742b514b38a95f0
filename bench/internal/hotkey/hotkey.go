// Package hotkey runs the one-hot-key scenario: workers contend for a
// single lock, each holding it for a fixed time before releasing it, and
// every hand-off to a different worker is timed.
package hotkey

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/e6344662/go-redlock/bench/internal/impls"
)

// Options bound one run.
type Options struct {
	// Key is the contended lock's name.
	Key string
	// Hold is how long each holder keeps the lock.
	Hold time.Duration
	// Limit stops the run after this many acquisitions (0: no limit).
	Limit int64
	// Duration stops the run after this long (0: no limit).
	Duration time.Duration
}

// Result is what one run measured.
type Result struct {
	// Acquisitions counts successful acquisitions.
	Acquisitions int64
	// Elapsed runs from the start to the last counted acquisition.
	Elapsed time.Duration
	// Handoffs holds, for every acquisition by a worker other than the
	// previous holder, the time from the previous holder's Release call to
	// this Acquire returning, in order.
	Handoffs []time.Duration
	// Waits holds, for every acquisition, how long its Acquire call took
	// (the releaser's own immediate re-acquisitions included), in order.
	Waits []time.Duration
	// PerWorker counts each worker's acquisitions.
	PerWorker []int64
	// Overlaps counts acquisitions that returned while another worker held
	// the lock: a mutual-exclusion failure; it must be zero.
	Overlaps int
	// Errors counts failed acquisitions and releases other than those cut
	// short by the end of the run.
	Errors int
}

// Rate returns acquisitions per second.
func (r Result) Rate() float64 { return rate(float64(r.Acquisitions), r.Elapsed) }

// ShareRatio returns the largest worker's acquisitions over the smallest's
// (a worker that never acquired counts as one, so the ratio stays finite),
// and how many workers never acquired.
func (r Result) ShareRatio() (ratio float64, starved int) { return shareRatio(r.PerWorker) }

// rate is n per second of elapsed (0 for no time).
func rate(n float64, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return n / elapsed.Seconds()
}

// shareRatio is ShareRatio over per-worker acquisition counts.
func shareRatio[T int | int64](perWorker []T) (ratio float64, starved int) {
	if len(perWorker) == 0 {
		return 0, 0
	}
	lo, hi := perWorker[0], perWorker[0]
	for _, n := range perWorker {
		lo, hi = min(lo, n), max(hi, n)
		if n == 0 {
			starved++
		}
	}
	return float64(hi) / float64(max(lo, 1)), starved
}

// Run starts one goroutine per worker, all contending for opts.Key, and
// stops them when the limit or the duration is reached or ctx ends.
func Run(ctx context.Context, workers []impls.Worker, opts Options) Result {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if opts.Duration > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, opts.Duration)
		defer stop()
	}

	var (
		mu         sync.Mutex
		holder     = -1 // worker holding the lock now
		releaser   = -1 // worker that released it last
		releasedAt time.Time
		res        = Result{PerWorker: make([]int64, len(workers))}
		last       time.Time
		count      atomic.Int64
	)
	if c := min(opts.Limit, 1<<20); c > 0 {
		res.Handoffs = make([]time.Duration, 0, c)
		res.Waits = make([]time.Duration, 0, c)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for me, w := range workers {
		wg.Go(func() {
			<-start
			for ctx.Err() == nil {
				called := time.Now()
				err := w.Acquire(ctx, opts.Key)
				got := time.Now()
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						res.Errors++
						mu.Unlock()
					}
					continue
				}
				n := count.Add(1)
				mu.Lock()
				if holder >= 0 {
					res.Overlaps++
				}
				holder = me
				if opts.Limit == 0 || n <= opts.Limit {
					if releaser >= 0 && releaser != me {
						res.Handoffs = append(res.Handoffs, got.Sub(releasedAt))
					}
					res.Acquisitions++
					res.Waits = append(res.Waits, got.Sub(called))
					res.PerWorker[me]++
					last = got
				}
				mu.Unlock()

				Hold(opts.Hold)

				mu.Lock()
				holder, releaser, releasedAt = -1, me, time.Now()
				mu.Unlock()
				// Release even when the run is over, so the next run's
				// lock is free; the run's end must not cut it short.
				if err := w.Release(context.WithoutCancel(ctx)); err != nil {
					mu.Lock()
					res.Errors++
					mu.Unlock()
				}
				if opts.Limit > 0 && n >= opts.Limit {
					cancel()
				}
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	res.Elapsed = last.Sub(began)
	return res
}
