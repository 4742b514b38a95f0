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
	jobs chan func()
	quit chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	stopped bool
}

func newWorkers() *workers {
	return &workers{jobs: make(chan func()), quit: make(chan struct{})}
}

// run starts job on an idle worker, or on a new one if none is idle. After
// stop, it runs job on a goroutine of its own.
func (w *workers) run(job func()) {
	select {
	case w.jobs <- job:
		return
	default:
	}
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		go job()
		return
	}
	w.wg.Add(1)
	w.mu.Unlock()
	go w.work(job)
}

func (w *workers) work(job func()) {
	defer w.wg.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		job()
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
