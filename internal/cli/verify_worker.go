package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
)

// workerSpec is what the main process of verify --procs tells each of
// its workers (hidden flags): the run, the start of the run on the wall
// clock (the processes' records share its time base) and the worker's
// clients.
type workerSpec struct {
	run   string
	epoch int64
	first int
	count int
}

// register adds the hidden worker flags to fs.
func (w *workerSpec) register(fs *pflag.FlagSet) {
	fs.StringVar(&w.run, "worker-run", "", "")
	fs.Int64Var(&w.epoch, "worker-epoch", 0, "")
	fs.IntVar(&w.first, "worker-first", 0, "")
	fs.IntVar(&w.count, "worker-count", 0, "")
	for _, name := range []string{"worker-run", "worker-epoch", "worker-first", "worker-count"} {
		_ = fs.MarkHidden(name)
	}
}

// active reports whether this process is a worker.
func (w *workerSpec) active() bool { return w.count > 0 }

// workerLine is one line a worker writes on stdout: a lease's record, or
// a failed acquisition.
type workerLine struct {
	Cycle *cycleRecord `json:"cycle,omitempty"`
	Err   string       `json:"err,omitempty"`
	Msg   string       `json:"msg,omitempty"`
}

// runWorker runs this worker's clients until the run's end, writing each
// record as a JSON line on stdout.
func (v *verifier) runWorker(parent context.Context) error {
	w := v.o.worker
	ctx, stop := interruptible(parent)
	defer stop()
	v.runID = w.run
	v.resources = resourceNames(v.runID, v.o.resources)
	if err := v.connect(ctx); err != nil {
		v.close()
		return err
	}
	defer v.close()
	// The run's start on this process's monotonic clock: now, less the
	// time since the main process's start on the wall clock.
	v.start = time.Now().Add(-time.Since(time.Unix(0, w.epoch)))
	rctx, cancel := context.WithDeadline(ctx, v.start.Add(v.o.duration))
	defer cancel()
	var mu sync.Mutex
	enc := json.NewEncoder(v.app.Stdout)
	emit := func(l workerLine) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(l)
	}
	v.rec = newRecorder(v.o.resources, v.o.clients)
	v.rec.sink = func(c *cycleRecord, kind string, err error) {
		if c != nil {
			emit(workerLine{Cycle: c})
			return
		}
		emit(workerLine{Err: kind, Msg: v.app.redact(oneLine(err))})
	}
	limiter := newLimiter(rctx, v.o.rate)
	var wg sync.WaitGroup
	for i := range w.count {
		wg.Go(func() { v.client(rctx, w.first+i, v.lockers[i%len(v.lockers)], limiter) })
	}
	wg.Wait()
	return interrupted(ctx).orNil()
}

// orNil returns e as an error, nil when e is nil.
func (e *cliError) orNil() error {
	if e == nil {
		return nil
	}
	return e
}

// workerSet is the worker processes of a run.
type workerSet struct {
	cmds []*exec.Cmd
	outs []*bytes.Buffer
	errs []*bytes.Buffer
	wg   sync.WaitGroup
	recs []workerLine
	mu   sync.Mutex
}

// startWorkers starts procs-1 copies of this program, which run the
// clients after the first local ones.
func (v *verifier) startWorkers(ctx context.Context, local int) (*workerSet, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, &cliError{code: exitFailure, kind: kindFailure, msg: "verify: cannot find this program to start --procs copies: " + err.Error()}
	}
	g := &v.app.g
	ws := &workerSet{}
	rest := v.o.clients - local
	workers := v.o.procs - 1
	first := local
	for i := range workers {
		count := rest / workers
		if i < rest%workers {
			count++
		}
		args := []string{"verify",
			"--worker-run", v.runID, "--worker-epoch", strconv.FormatInt(v.start.UnixNano(), 10),
			"--worker-first", strconv.Itoa(first), "--worker-count", strconv.Itoa(count),
			"--clients", strconv.Itoa(v.o.clients), "--procs", strconv.Itoa(v.o.procs),
			"--resources", strconv.Itoa(v.o.resources), "--duration", v.o.duration.String(),
			"--rate", strconv.FormatFloat(v.o.rate*float64(count)/float64(v.o.clients), 'g', -1, 64),
			"--register", v.o.reg, "--hold", v.o.hold.String(), "--prefix", g.prefix, "--ttl", g.ttl.String(),
		}
		if g.timeout > 0 {
			args = append(args, "--timeout", g.timeout.String())
		}
		switch {
		case g.noRejoin:
			args = append(args, "--rejoin-delay", "0")
		case g.rejoin > 0:
			args = append(args, "--rejoin-delay", g.rejoin.String())
		}
		switch {
		case g.noQueue:
			args = append(args, "--queue-ttl", "0")
		case g.queueTTL > 0:
			args = append(args, "--queue-ttl", g.queueTTL.String())
		}
		if g.noHand {
			args = append(args, "--no-hand-over")
		}
		if g.owner != "" {
			args = append(args, "--owner", g.owner)
		}
		first += count
		cmd := exec.CommandContext(context.WithoutCancel(ctx), exe, args...)
		// The node URLs go through the environment, not the command line,
		// where other users could read their passwords.
		cmd.Env = append(os.Environ(), envNodes+"="+strings.Join(v.urls, ","))
		var stdout, stderr bytes.Buffer
		cmd.Stderr = &stderr
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			ws.kill()
			return nil, &cliError{code: exitFailure, kind: kindFailure, msg: "verify: " + err.Error()}
		}
		if err := cmd.Start(); err != nil {
			ws.kill()
			return nil, &cliError{code: exitFailure, kind: kindFailure, msg: "verify: cannot start a --procs copy: " + err.Error()}
		}
		ws.cmds = append(ws.cmds, cmd)
		ws.outs = append(ws.outs, &stdout)
		ws.errs = append(ws.errs, &stderr)
		ws.wg.Go(func() { ws.read(pipe, &stdout) })
	}
	return ws, nil
}

// read decodes a worker's lines until its stdout ends; what is not a
// record is kept for the error message.
func (ws *workerSet) read(r interface{ Read([]byte) (int, error) }, other *bytes.Buffer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var l workerLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || (l.Cycle == nil && l.Err == "") {
			other.Write(sc.Bytes())
			other.WriteByte('\n')
			continue
		}
		ws.mu.Lock()
		ws.recs = append(ws.recs, l)
		ws.mu.Unlock()
	}
}

// kill stops the workers started so far.
func (ws *workerSet) kill() {
	for _, c := range ws.cmds {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
}

// wait waits for every worker, adds their records to rec, and returns an
// error naming the workers that failed.
func (ws *workerSet) wait(rec *recorder) error {
	ws.wg.Wait()
	var errs []error
	for i, c := range ws.cmds {
		if err := c.Wait(); err != nil {
			msg := strings.TrimSpace(ws.errs[i].String() + " " + ws.outs[i].String())
			errs = append(errs, fmt.Errorf("--procs copy %d failed (%v): %s", i+1, err, msg))
		}
	}
	for _, l := range ws.recs {
		if l.Cycle != nil {
			rec.addCycle(*l.Cycle)
		} else {
			rec.addErr(l.Err, errors.New(l.Msg))
		}
	}
	return errors.Join(errs...)
}
