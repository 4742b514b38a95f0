package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/e6344662/go-redlock/redlock"
)

// bench is one run of the bench command.
type bench struct {
	app *app
	o   benchOptions

	runID    string
	names    []string // resource names
	handoffs *handoffTracker

	// measureStart and end delimit the measured window (after --warmup).
	measureStart, end time.Time

	acquire   *latencyHist
	handoff   *latencyHist
	perClient []atomic.Int64 // acquisitions in the window, by client
	same      atomic.Int64   // retaken by the releasing client
	total     atomic.Int64   // every acquisition, warmup included
	errCount  atomic.Int64   // errors in the window

	mu   sync.Mutex
	errs map[string]int64 // errors in the window, by kind
}

// run connects, runs the clients, and prints the results.
func (b *bench) run(parent context.Context) error {
	a := b.app
	var urls []string
	nodes := b.o.embedded
	if nodes == 0 {
		var err error
		if urls, err = a.g.nodeURLs(a.getenv); err != nil {
			return err
		}
		nodes = len(urls)
	}
	if b.o.metricsAddr != "" {
		stop, err := a.startMetrics(b.o.metricsAddr, nodes)
		if err != nil {
			return err
		}
		defer stop()
	}
	ctx, stop := interruptible(parent)
	defer stop()
	if b.o.embedded > 0 {
		servers, err := startMiniredis(b.o.embedded, true)
		if err != nil {
			return &cliError{code: exitFailure, kind: kindFailure, msg: "bench: " + oneLine(err), err: err}
		}
		defer stopMiniredis(servers)
		urls = miniredisURLs(servers)
	}

	lockers, closeAll, err := b.connect(ctx, urls)
	if err != nil {
		return err
	}
	defer closeAll()

	b.init()
	b.measureStart = time.Now().Add(b.o.warmup)
	b.end = b.measureStart.Add(b.o.duration)
	runCtx, cancel := context.WithDeadline(ctx, b.end)
	defer cancel()

	progressDone := make(chan struct{})
	var progress sync.WaitGroup
	tty := isTerminal(a.stderr)
	every := benchProgressNonTTY
	if tty {
		every = benchProgressTTY
	}
	progress.Go(func() { b.progress(a.stderr, progressDone, tty, every) })
	var clients sync.WaitGroup
	for c := range b.o.clients {
		l := lockers[c%len(lockers)]
		clients.Go(func() { b.client(runCtx, c, l) })
	}
	clients.Wait()
	stopped := time.Now()
	if stopped.After(b.end) {
		stopped = b.end
	}
	close(progressDone)
	progress.Wait()

	res := b.result(ctx, nodes, stopped)
	if a.g.json {
		a.emit(res)
	} else {
		a.printBench(res)
	}
	return b.exitError(ctx, res)
}

// connect makes the Lockers: one shared, or one per client with its own
// connections. closeAll releases what they hold and closes them.
func (b *bench) connect(ctx context.Context, urls []string) ([]*redlock.Locker, func(), error) {
	n := 1
	if b.o.lockers == lockersPerClient {
		n = b.o.clients
	}
	var sessions []*session
	closeAll := func() {
		for _, s := range sessions {
			s.close()
		}
	}
	lockers := make([]*redlock.Locker, 0, n)
	for range n {
		s, err := b.app.connectURLs(ctx, urls)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		sessions = append(sessions, s)
		lockers = append(lockers, s.locker)
	}
	return lockers, closeAll, nil
}

// init prepares the resource names and the statistics.
func (b *bench) init() {
	var id [4]byte
	_, _ = rand.Read(id[:])
	b.runID = hex.EncodeToString(id[:])
	b.names = make([]string, b.o.resources)
	for i := range b.names {
		b.names[i] = "bench:" + b.runID + ":" + strconv.Itoa(i)
	}
	b.handoffs = newHandoffTracker(b.o.clients, b.o.resources)
	b.acquire, b.handoff = newLatencyHist(), newLatencyHist()
	b.perClient = make([]atomic.Int64, b.o.clients)
	b.errs = map[string]int64{}
}

// client c loops over acquire, hold, release on its resource until ctx
// ends.
func (b *bench) client(ctx context.Context, c int, l *redlock.Locker) {
	r := c % b.o.resources
	releaseTimeout := 2*b.app.g.callTimeout() + time.Second
	for ctx.Err() == nil {
		asked := time.Now()
		actx, cancel := context.WithTimeout(ctx, b.o.wait)
		lease, err := l.Acquire(actx, b.names[r])
		got := time.Now()
		cancel()
		measured := !got.Before(b.measureStart)
		if err != nil {
			if ctx.Err() != nil {
				return // the run ended during the wait: not an error
			}
			if measured {
				b.fail(acquireErrorKind(err))
			}
			if got.Sub(asked) < 10*time.Millisecond {
				sleepCtx(ctx, 10*time.Millisecond) // do not spin on an immediate failure
			}
			continue
		}
		kind, d := b.handoffs.acquired(r, c, asked, got)
		b.total.Add(1)
		if measured {
			b.acquire.record(got.Sub(asked))
			b.perClient[c].Add(1)
			switch kind {
			case handoffOther:
				b.handoff.record(d)
			case handoffSame:
				b.same.Add(1)
			}
		}
		sleepCtx(ctx, b.o.hold)
		b.handoffs.releasing(r, c, time.Now())
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		err = lease.Release(rctx)
		rcancel()
		if err != nil && measured {
			b.fail(releaseErrorKind(err))
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

// fail counts one error of kind.
func (b *bench) fail(kind string) {
	b.errCount.Add(1)
	b.mu.Lock()
	b.errs[kind]++
	b.mu.Unlock()
}

// acquireErrorKind names the failure of one Acquire whose --wait ran out
// or that failed at once.
func acquireErrorKind(err error) string {
	switch {
	case errors.Is(err, redlock.ErrNoQuorum):
		return "acquire_" + kindNoQuorum
	case errors.Is(err, redlock.ErrNotAcquired):
		return "acquire_" + kindBusy
	case errors.Is(err, context.DeadlineExceeded):
		return "acquire_" + kindTimeout
	}
	return "acquire_" + kindFailure
}

// releaseErrorKind names the failure of one Release.
func releaseErrorKind(err error) string {
	switch {
	case errors.Is(err, redlock.ErrNoQuorum):
		return "release_" + kindNoQuorum
	case errors.Is(err, redlock.ErrLeaseLost):
		return "release_" + kindLeaseLost
	case errors.Is(err, context.DeadlineExceeded):
		return "release_timeout"
	}
	return "release_" + kindFailure
}

// progress shows a progress line on w every interval until done is
// closed: on a terminal (tty) rewritten in place and erased at the end,
// else one line each time.
func (b *bench) progress(w io.Writer, done <-chan struct{}, tty bool, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	last, lastAt := int64(0), time.Now()
	shown := false
	for {
		select {
		case <-done:
			if tty && shown {
				fmt.Fprint(w, "\r\x1b[K")
			}
			return
		case now := <-tick.C:
			total := b.total.Load()
			rate := float64(total-last) / now.Sub(lastAt).Seconds()
			last, lastAt = total, now
			line := b.progressLine(now, rate)
			if tty {
				fmt.Fprint(w, "\r"+line+"\x1b[K")
			} else {
				fmt.Fprintln(w, "redlock-cli: bench: "+line)
			}
			shown = true
		}
	}
}

// progressLine describes the run at now; rate is the recent acquisition
// rate.
func (b *bench) progressLine(now time.Time, rate float64) string {
	if now.Before(b.measureStart) {
		return fmt.Sprintf("warming up, %s left  %.0f acquisitions/s", fmtDuration(b.measureStart.Sub(now).Round(100*time.Millisecond)), rate)
	}
	s := b.acquire.snapshot()
	line := fmt.Sprintf("%s/%s  %d acquisitions  %.0f/s", fmtDuration(now.Sub(b.measureStart).Round(100*time.Millisecond)),
		fmtDuration(b.o.duration), s.n, rate)
	if s.n > 0 {
		line += fmt.Sprintf("  p50 %s  p99 %s", fmtDuration(s.quantile(0.5)), fmtDuration(s.quantile(0.99)))
	}
	return line + "  " + plural(int(b.errCount.Load()), "error")
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// result summarizes the run, which stopped measuring at stopped.
func (b *bench) result(ctx context.Context, nodes int, stopped time.Time) *benchResult {
	window := max(stopped.Sub(b.measureStart), 0)
	res := &benchResult{
		RunID:       b.runID,
		Nodes:       nodes,
		Embedded:    b.o.embedded > 0,
		Clients:     b.o.clients,
		Resources:   b.o.resources,
		Lockers:     b.o.lockers,
		HoldMS:      toMS(b.o.hold),
		WarmupMS:    b.o.warmup.Milliseconds(),
		DurationMS:  window.Milliseconds(),
		Interrupted: interrupted(ctx) != nil,
		SameClient:  b.same.Load(),
		acquireSnap: b.acquire.snapshot(),
		handoffSnap: b.handoff.snapshot(),
	}
	res.Acquisitions = int64(res.acquireSnap.n)
	if window > 0 {
		res.PerSecond = math.Round(float64(res.Acquisitions)/window.Seconds()*10) / 10
	}
	res.Acquire = summarizeLatency(res.acquireSnap)
	res.Handoffs = int64(res.handoffSnap.n)
	res.Handoff = summarizeLatency(res.handoffSnap)
	res.ClientAcquisitions = make([]int64, len(b.perClient))
	for i := range b.perClient {
		res.ClientAcquisitions[i] = b.perClient[i].Load()
	}
	lo, hi := fairShares(res.ClientAcquisitions, b.o.resources)
	res.FairShareMin, res.FairShareMax = math.Round(lo*1000)/1000, math.Round(hi*1000)/1000
	b.mu.Lock()
	res.Errors = make(map[string]int64, len(b.errs))
	for k, v := range b.errs {
		res.Errors[k] = v
		res.ErrorsTotal += v
	}
	b.mu.Unlock()
	res.ExitCode = benchExitCode(ctx, res)
	return res
}

// benchExitCode is 128+N when interrupted by signal N, else 0 with at
// least one acquisition, else 3 when a majority could not be reached, 4
// when the locks stayed busy, 1 for other errors.
func benchExitCode(ctx context.Context, res *benchResult) int {
	if ie := interrupted(ctx); ie != nil {
		return ie.code
	}
	switch {
	case res.Acquisitions > 0:
		return exitOK
	case res.Errors["acquire_"+kindNoQuorum] > 0:
		return exitNoQuorum
	case res.ErrorsTotal == res.Errors["acquire_"+kindTimeout]+res.Errors["acquire_"+kindBusy]:
		return exitBusy
	}
	return exitFailure
}

// exitError is the command's error for res, whose results were printed.
func (b *bench) exitError(ctx context.Context, res *benchResult) error {
	if ie := interrupted(ctx); ie != nil {
		ie.reported = true
		return ie
	}
	window := fmtDuration(time.Duration(res.DurationMS) * time.Millisecond)
	e := &cliError{code: res.ExitCode, reported: true}
	switch res.ExitCode {
	case exitOK:
		return nil
	case exitNoQuorum:
		e.kind, e.msg = kindNoQuorum, fmt.Sprintf("bench: no acquisition in %s: cannot reach a majority of the nodes (%s)", window, fmtErrors(res.Errors))
	case exitBusy:
		e.kind, e.msg = kindBusy, fmt.Sprintf("bench: no acquisition in %s: the resources stayed busy", window)
	default:
		e.kind, e.msg = kindFailure, fmt.Sprintf("bench: no acquisition in %s: %s", window, fmtErrors(res.Errors))
	}
	return e
}
