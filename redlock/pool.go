package redlock

import (
	"sync"
	"time"
)

// workerIdle is how long an idle fan-out worker waits for more work.
const workerIdle = 10 * time.Second

// workers runs node calls on goroutines that stay alive between calls. A
// fresh goroutine per call would start on a small stack and grow it on
// every call through the Redis client; a kept worker has grown it already.
// Workers beyond the ones in use exit after workerIdle, and all of them at
// stop.
type workers struct {
	jobs chan job
	quit chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	stopped bool
}

// job is one call: fn(arg). One fn serves every node of a fan-out, so
// that a fan-out allocates one closure, not one per node.
type job struct {
	fn  func(int)
	arg int
}

func newWorkers() *workers {
	return &workers{jobs: make(chan job), quit: make(chan struct{})}
}

// run starts fn(arg) on an idle worker, or on a new one if none is idle.
// After stop, it runs it on a goroutine of its own.
func (w *workers) run(fn func(int), arg int) {
	j := job{fn, arg}
	select {
	case w.jobs <- j:
		return
	default:
	}
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		go fn(arg)
		return
	}
	w.wg.Add(1)
	w.mu.Unlock()
	go w.work(j)
}

func (w *workers) work(job job) {
	defer w.wg.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		job.fn(job.arg)
		idle.Reset(workerIdle)
		select {
		case job = <-w.jobs:
		case <-idle.C:
			return
		case <-w.quit:
			return
		}
	}
}

// stop ends every worker once its current job is done, and waits for them.
func (w *workers) stop() {
	w.mu.Lock()
	if !w.stopped {
		w.stopped = true
		close(w.quit)
	}
	w.mu.Unlock()
	w.wg.Wait()
}
