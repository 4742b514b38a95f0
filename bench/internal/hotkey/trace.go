package hotkey

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/e6344662/go-redlock/bench/internal/impls"
)

// Record is one acquisition in a traced run, as one JSON line. Times are
// wall-clock Unix nanoseconds, so that the records of several processes on
// one machine (one clock) can be merged.
type Record struct {
	// Proc numbers the process, Worker the worker within it.
	Proc   int `json:"proc"`
	Worker int `json:"worker"`
	// Resource is the lock held, when the worker names it (impls.Holder: a
	// semaphore's slot); empty for a plain lock on the run's key.
	Resource string `json:"res,omitempty"`
	// Called is when Acquire was called, Acquired when it returned with the
	// lock, Released when Release was called.
	Called   int64 `json:"call"`
	Acquired int64 `json:"acq"`
	Released int64 `json:"rel"`
	// Attempts is the process's attempt counter (impls.Impl.Attempts, every
	// worker's attempts so far) when this Acquire returned; zero without
	// one. The attempts of one acquisition are not told apart from those of
	// the process's other workers.
	Attempts int64 `json:"attempts,omitempty"`
}

// TraceOptions configure one traced run.
type TraceOptions struct {
	// Key is the contended lock's name.
	Key string
	// Hold is how long each holder keeps the lock.
	Hold time.Duration
	// Proc is copied into every record.
	Proc int
	// Attempts, when set, is read after every acquisition (Record.Attempts).
	Attempts func() int64
}

// Trace is Run's loop, keeping a record of every acquisition instead of
// summing them up: one goroutine per worker takes opts.Key, holds it for
// opts.Hold, releases it and asks again, until ctx ends. It returns the
// records in the order of their Release calls, how many acquisitions and
// releases failed (those cut short by ctx's end aside) and the first such
// error.
func Trace(ctx context.Context, workers []impls.Worker, opts TraceOptions) (recs []Record, errs int, first error) {
	var mu sync.Mutex
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if errs == 0 {
			first = err
		}
		errs++
	}
	var wg sync.WaitGroup
	for me, w := range workers {
		holder, _ := w.(impls.Holder)
		wg.Go(func() {
			for ctx.Err() == nil {
				called := time.Now()
				err := w.Acquire(ctx, opts.Key)
				got := time.Now()
				if err != nil {
					if ctx.Err() == nil {
						fail(err)
					}
					continue
				}
				r := Record{Proc: opts.Proc, Worker: me, Called: called.UnixNano(), Acquired: got.UnixNano()}
				if opts.Attempts != nil {
					r.Attempts = opts.Attempts()
				}
				if holder != nil {
					r.Resource = holder.Held()
				}
				Hold(opts.Hold)
				r.Released = time.Now().UnixNano()
				// Release even when the run is over, so that the lock is
				// free for the next run; ctx's end must not cut it short.
				if err := w.Release(context.WithoutCancel(ctx)); err != nil {
					fail(err)
				}
				mu.Lock()
				recs = append(recs, r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return recs, errs, first
}

// Layout is how many processes took part in a traced run, each with how
// many workers, and how many holders the lock admits at once (1 for a
// mutex, K for a semaphore of K slots).
type Layout struct {
	Procs, Workers, Limit int
}

// Merged is what the records of all processes of one run show, merged by
// the time each acquisition returned.
type Merged struct {
	// Acquisitions counts the records.
	Acquisitions int
	// Elapsed runs from the run's common start to the last acquisition.
	Elapsed time.Duration
	// Handoffs holds, when the limit is 1, for every acquisition by another
	// worker than the previous holder's, the time from the previous
	// holder's Release call to this Acquire returning, in order.
	Handoffs []time.Duration
	// CrossHandoffs are the hand-offs whose next holder is in another
	// process than the previous holder.
	CrossHandoffs []time.Duration
	// Waits holds every Acquire call's duration (call to return), in order.
	Waits []time.Duration
	// Held sums the time the lock was held (Acquire's return to the
	// Release call) over every acquisition: with Elapsed, it shows how
	// much of the run the lock stood idle between holders.
	Held time.Duration
	// PerWorker counts the acquisitions of worker w of process p at index
	// p*Workers+w.
	PerWorker []int
	// Overlaps counts acquisitions that returned while Limit others held
	// the lock, or while another held the same resource (a semaphore's
	// slot): mutual-exclusion failures; it must be zero.
	Overlaps int
	// MaxHolders is the most holders seen at once.
	MaxHolders int
}

// Merge merges the records of every process of a run that started at
// start (Unix nanoseconds) and computes what they show.
func Merge(recs []Record, l Layout, start int64) Merged {
	recs = slices.Clone(recs)
	slices.SortStableFunc(recs, func(a, b Record) int { return cmp.Compare(a.Acquired, b.Acquired) })
	m := Merged{Acquisitions: len(recs), PerWorker: make([]int, l.Procs*l.Workers)}
	if len(recs) == 0 {
		return m
	}
	m.Elapsed = time.Duration(recs[len(recs)-1].Acquired - start)
	for i, r := range recs {
		m.Waits = append(m.Waits, time.Duration(r.Acquired-r.Called))
		m.Held += time.Duration(r.Released - r.Acquired)
		if i := r.Proc*l.Workers + r.Worker; r.Worker < l.Workers && i >= 0 && i < len(m.PerWorker) {
			m.PerWorker[i]++
		}
		if i == 0 || l.Limit != 1 {
			continue
		}
		prev := recs[i-1]
		if prev.Proc == r.Proc && prev.Worker == r.Worker {
			continue
		}
		d := time.Duration(r.Acquired - prev.Released)
		m.Handoffs = append(m.Handoffs, d)
		if prev.Proc != r.Proc {
			m.CrossHandoffs = append(m.CrossHandoffs, d)
		}
	}
	var over []bool // over[i]: recs[i] overlapped
	over, m.MaxHolders = overlaps(recs, max(l.Limit, 1), nil)
	bySlot := map[string][]int{}
	for i, r := range recs {
		if r.Resource != "" {
			bySlot[r.Resource] = append(bySlot[r.Resource], i)
		}
	}
	for _, idx := range bySlot {
		o, _ := overlaps(recs, 1, idx)
		for j, bad := range o {
			if bad {
				over[idx[j]] = true
			}
		}
	}
	for _, bad := range over {
		if bad {
			m.Overlaps++
		}
	}
	return m
}

// overlaps sweeps the holding intervals [Acquired, Released] of recs (only
// those at idx when idx is not nil; recs are sorted by Acquired) and marks
// each acquisition that returned while limit others held the lock. It also
// returns the most holders at once. A release and an acquisition at the
// same nanosecond do not overlap.
func overlaps(recs []Record, limit int, idx []int) (over []bool, most int) {
	if idx == nil {
		idx = make([]int, len(recs))
		for i := range idx {
			idx[i] = i
		}
	}
	over = make([]bool, len(idx))
	var releases []int64 // the current holders' Release calls, sorted
	for j, i := range idx {
		r := recs[i]
		// Holders that released at or before this acquisition are gone.
		n, _ := slices.BinarySearch(releases, r.Acquired+1)
		releases = releases[n:]
		if len(releases) >= limit {
			over[j] = true
		}
		k, _ := slices.BinarySearch(releases, r.Released)
		releases = slices.Insert(releases, k, r.Released)
		most = max(most, len(releases))
	}
	return over, most
}

// ShareRatio returns the largest worker's acquisitions over the smallest's
// (a worker that never acquired counts as one, so the ratio stays finite),
// and how many workers never acquired.
func (m Merged) ShareRatio() (ratio float64, starved int) { return shareRatio(m.PerWorker) }

// Rate returns acquisitions per second.
func (m Merged) Rate() float64 { return rate(float64(m.Acquisitions), m.Elapsed) }
