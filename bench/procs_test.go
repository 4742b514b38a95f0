package bench_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/bench/internal/hotkey"
	"github.com/e6344662/go-redlock/bench/internal/impls"
	"github.com/e6344662/go-redlock/bench/internal/redisproc"
	"github.com/e6344662/go-redlock/bench/internal/stats"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
)

// The cross-process benchmarks run their workers in child processes: this
// test binary again, running only TestProcChild, with the run described
// in the environment variable childEnv (a childSpec as JSON). Each child
// writes a record per acquisition (hotkey.Record, JSON lines) to a file;
// the parent merges them by time.

const (
	childEnv  = "REDLOCK_BENCH_CHILD"
	readyLine = "redlock-bench-child: ready"
)

var procDuration = flag.Duration("bench.procdur", 5*time.Second, "how long each cross-process run lasts per op (Benchmark*Processes)")

// childSpec is what a child process runs.
type childSpec struct {
	Proc  int      `json:"proc"`
	Addrs []string `json:"addrs"`
	// Impl is redlock (Acquire, one Locker per process), redsync (Lock with
	// its default retry delay) or semaphore (Limit slots).
	Impl     string        `json:"impl"`
	Limit    int           `json:"limit,omitempty"`
	Key      string        `json:"key"`
	Workers  int           `json:"workers"`
	Hold     time.Duration `json:"hold"`
	Duration time.Duration `json:"duration"`
	// Out is the records file; the child's summary (childEnd) goes to
	// Out+".end".
	Out string `json:"out"`
}

// childEnd is a child's summary of its run.
type childEnd struct {
	Proc         int    `json:"proc"`
	Acquisitions int    `json:"acquisitions"`
	Attempts     int64  `json:"attempts"`
	HasAttempts  bool   `json:"has_attempts"`
	Errors       int    `json:"errors"`
	FirstError   string `json:"first_error,omitempty"`
}

// TestProcChild is the body of a child process of the cross-process
// benchmarks; it returns at once unless $REDLOCK_BENCH_CHILD is set.
func TestProcChild(t *testing.T) {
	raw := os.Getenv(childEnv)
	if raw == "" {
		return
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatalf("%s: %v", childEnv, err)
	}
	if err := runChild(spec); err != nil {
		t.Fatalf("process %d: %v", spec.Proc, err)
	}
}

// runChild connects to the nodes, warms up its workers, says it is ready
// on stdout, waits for the start time on stdin, runs hotkey.Trace until
// start+Duration and writes the records and its summary.
func runChild(spec childSpec) error {
	// The parent writes "start <unix ns>" on stdin and keeps it open until
	// this process has exited: end of file means that the parent has died
	// or given up, and a child must not outlive it.
	start := make(chan int64, 1)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		if sc.Scan() {
			if ns, err := strconv.ParseInt(strings.TrimPrefix(sc.Text(), "start "), 10, 64); err == nil {
				start <- ns
			}
		}
		for sc.Scan() {
		}
		fmt.Fprintln(os.Stderr, "redlock-bench-child: stdin closed, exiting")
		os.Exit(3)
	}()

	clients := make([]*redis.Client, len(spec.Addrs))
	nodes := make([]redlock.Node, len(spec.Addrs))
	for i, a := range spec.Addrs {
		clients[i] = redisproc.Client(a)
		nodes[i] = redisnode.New(clients[i])
	}
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	var (
		impl *impls.Impl
		err  error
	)
	switch spec.Impl {
	case "redlock":
		impl, err = impls.Redlock("redlock", nodes, impls.Wait, true)
	case "redlock-noqueue":
		impl, err = impls.Redlock("redlock-noqueue", nodes, impls.Wait, true, func(c *redlock.Config) { c.QueueTTL = -1 })
	case "redsync":
		impl = impls.Redsync("redsync", clients, impls.RedsyncOptions{Tries: 1 << 30})
	case "semaphore":
		impl, err = impls.RedlockSemaphore("semaphore", nodes, spec.Limit)
	default:
		err = fmt.Errorf("unknown impl %q", spec.Impl)
	}
	if err != nil {
		return err
	}
	defer func() { _ = impl.Close() }()

	// Every worker takes and releases a key of its own first: dials its
	// connections and loads the scripts before the run.
	ws := make([]impls.Worker, spec.Workers)
	errs := make([]error, len(ws))
	warm, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	var wg sync.WaitGroup
	for i := range ws {
		ws[i] = impl.NewWorker()
		wg.Go(func() { errs[i] = cycle(warm, ws[i], fmt.Sprintf("%s:warm:%d:%d", spec.Key, spec.Proc, i)) })
	}
	wg.Wait()
	cancel()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}

	fmt.Println(readyLine)
	var begin time.Time
	select {
	case ns := <-start:
		begin = time.Unix(0, ns)
	case <-time.After(time.Minute):
		return errors.New("no start time from the parent within a minute")
	}
	time.Sleep(time.Until(begin))
	ctx, stop := context.WithDeadline(context.Background(), begin.Add(spec.Duration))
	defer stop()
	var attempts0 int64
	if impl.Attempts != nil {
		attempts0 = impl.Attempts()
	}
	recs, nerr, first := hotkey.Trace(ctx, ws, hotkey.TraceOptions{Key: spec.Key, Hold: spec.Hold, Proc: spec.Proc, Attempts: impl.Attempts})
	end := childEnd{Proc: spec.Proc, Acquisitions: len(recs), Errors: nerr}
	if first != nil {
		end.FirstError = first.Error()
	}
	if impl.Attempts != nil {
		end.Attempts, end.HasAttempts = impl.Attempts()-attempts0, true
	}
	return writeRecords(spec.Out, recs, end)
}

// writeRecords writes recs as JSON lines to path and end to path+".end".
func writeRecords(path string, recs []hotkey.Record, end childEnd) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return err
	}
	js, err := json.Marshal(end)
	if err != nil {
		return err
	}
	return os.WriteFile(path+".end", js, 0o644)
}

// readRecords reads what writeRecords wrote.
func readRecords(path string) ([]hotkey.Record, childEnd, error) {
	var end childEnd
	js, err := os.ReadFile(path + ".end")
	if err != nil {
		return nil, end, err
	}
	if err := json.Unmarshal(js, &end); err != nil {
		return nil, end, fmt.Errorf("%s.end: %w", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, end, err
	}
	defer f.Close()
	var recs []hotkey.Record
	dec := json.NewDecoder(f)
	for dec.More() {
		var r hotkey.Record
		if err := dec.Decode(&r); err != nil {
			return nil, end, fmt.Errorf("%s: %w", path, err)
		}
		recs = append(recs, r)
	}
	if len(recs) != end.Acquisitions {
		return nil, end, fmt.Errorf("%s: %d records, the summary says %d", path, len(recs), end.Acquisitions)
	}
	return recs, end, nil
}

// child is one running child process.
type child struct {
	proc    int
	cmd     *exec.Cmd
	stdin   *os.File // the parent's end of the child's stdin
	ready   chan struct{}
	exited  chan struct{} // closed once err and the output are final
	err     error
	mu      sync.Mutex
	out     bytes.Buffer // stdout and stderr, but the ready line
	outDone chan struct{}
}

// startChild starts this test binary running TestProcChild for spec. The
// process is killed when ctx ends. Once it has exited, the child is sent on
// exits (which must have room for it).
func startChild(ctx context.Context, spec childSpec, exits chan<- *child) (*child, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestProcChild$", "-test.count=1",
		"-test.timeout="+(spec.Duration+2*time.Minute).String())
	cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		_, _ = inR.Close(), inW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, outW
	err = cmd.Start()
	_, _ = inR.Close(), outW.Close()
	if err != nil {
		_, _ = inW.Close(), outR.Close()
		return nil, fmt.Errorf("start process %d: %w", spec.Proc, err)
	}
	c := &child{proc: spec.Proc, cmd: cmd, stdin: inW, ready: make(chan struct{}), exited: make(chan struct{}), outDone: make(chan struct{})}
	go func() {
		defer close(c.outDone)
		defer outR.Close()
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			if sc.Text() == readyLine {
				close(c.ready)
				continue
			}
			c.mu.Lock()
			c.out.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
		}
	}()
	go func() {
		err := cmd.Wait()
		<-c.outDone
		c.err = err
		close(c.exited)
		exits <- c
	}()
	return c, nil
}

// output returns the tail of what the child printed.
func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.out.String()
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return s
}

// stop closes the child's stdin (it exits on end of file) and waits for it
// to exit; the caller has also cancelled its context, which kills it.
func (c *child) stop() {
	_ = c.stdin.Close()
	<-c.exited
}

// procResult is one cross-process run, merged.
type procResult struct {
	hotkey.Merged
	attempts    int64 // every process's attempts during the run
	hasAttempts bool
	errors      int
	firstError  string
}

// runProcs runs spec in procs child processes (Proc and Out set for each),
// started together once every one is ready, and merges their records. The
// timer runs from just before the common start until the last child has
// exited. Every child is killed when runProcs returns, whatever happened.
func runProcs(b *testing.B, spec childSpec, procs int) procResult {
	b.Helper()
	b.StopTimer()
	dir := b.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var children []*child
	exits := make(chan *child, procs)
	defer func() {
		cancel() // kills the children still running
		for _, c := range children {
			c.stop()
		}
	}()
	for p := range procs {
		s := spec
		s.Proc, s.Out = p, filepath.Join(dir, fmt.Sprintf("proc%d.jsonl", p))
		c, err := startChild(ctx, s, exits)
		if err != nil {
			b.Fatal(err)
		}
		children = append(children, c)
	}
	notReady := time.After(time.Minute)
	for _, c := range children {
		select {
		case <-c.ready:
		case <-c.exited:
			b.Fatalf("process %d exited before it was ready: %v\n%s", c.proc, c.err, c.output())
		case <-notReady:
			b.Fatalf("process %d not ready within a minute\n%s", c.proc, c.output())
		}
	}

	begin := time.Now().Add(50 * time.Millisecond)
	b.StartTimer()
	for _, c := range children {
		if _, err := fmt.Fprintf(c.stdin, "start %d\n", begin.UnixNano()); err != nil {
			b.Fatalf("process %d: write the start time: %v", c.proc, err)
		}
	}
	// A child that fails ends the run at once (the others are killed).
	late := time.After(time.Until(begin) + spec.Duration + time.Minute)
	for range children {
		select {
		case c := <-exits:
			if c.err != nil {
				b.Fatalf("process %d: %v\n%s", c.proc, c.err, c.output())
			}
		case <-late:
			b.Fatalf("processes still running a minute after the run's end")
		}
	}
	b.StopTimer()

	var (
		all []hotkey.Record
		res procResult
	)
	for _, c := range children {
		recs, end, err := readRecords(filepath.Join(dir, fmt.Sprintf("proc%d.jsonl", c.proc)))
		if err != nil {
			b.Fatal(err)
		}
		all = append(all, recs...)
		res.attempts += end.Attempts
		res.hasAttempts = end.HasAttempts
		if res.errors == 0 {
			res.firstError = end.FirstError
		}
		res.errors += end.Errors
	}
	res.Merged = hotkey.Merge(all, hotkey.Layout{Procs: procs, Workers: spec.Workers, Limit: max(spec.Limit, 1)}, begin.UnixNano())
	return res
}

// check fails the benchmark on any overlap and on more than 1% failed
// acquisitions or releases.
func (r procResult) check(b *testing.B, what string) {
	b.Helper()
	if r.Overlaps > 0 {
		b.Errorf("%s: %d of %d acquisitions overlapped another holder (at most %d at once)", what, r.Overlaps, r.Acquisitions, r.MaxHolders)
	}
	if r.Acquisitions == 0 {
		b.Errorf("%s: no acquisition", what)
	}
	if r.errors > 0 {
		b.Logf("%s: %d acquisitions or releases failed; first: %s", what, r.errors, r.firstError)
	}
	if r.errors > max(r.Acquisitions/100, 1) {
		b.Errorf("%s: %d of %d acquisitions or releases failed", what, r.errors, r.Acquisitions)
	}
}

// attemptsPerAcq returns the attempts per acquisition, or -1 without an
// attempt count.
func (r procResult) attemptsPerAcq() float64 {
	if !r.hasAttempts {
		return -1
	}
	return float64(r.attempts) / float64(max(r.Acquisitions, 1))
}

// p99 returns the 0.99-quantile of ds in microseconds.
func p99(ds []time.Duration) float64 { return stats.Micros(stats.Quantile(ds, 0.99)) }

// BenchmarkHotKeyProcesses is BenchmarkHotKey across OS processes: one key
// on 3 nodes, contended by P = 2 and 4 processes of 4 workers each, every
// holder keeping it for -bench.hold (1ms). redlock: Acquire, one Locker per
// process shared by its 4 workers; redsync: Lock with its default retry
// delay (50-250ms), unlimited tries. Each process is this test binary
// again (TestProcChild); all of them start at one wall-clock instant and
// run for -bench.procdur (5s) per op, and their records are merged by
// time. A hand-off is the time from the previous holder's Release call to
// the next holder's Acquire returning, when the next holder is another
// worker; xproc- metrics count only those whose next holder is in another
// process. An acquisition returning before the previous holder's Release
// call is an overlap and fails the benchmark.
func BenchmarkHotKeyProcesses(b *testing.B) {
	const n, workersPerProc = 3, 4
	c := startServers(b, n)
	for _, procs := range []int{2, 4} {
		for _, impl := range []string{"redlock", "redsync", "redlock-noqueue"} {
			b.Run(fmt.Sprintf("procs=%d/impl=%s", procs, impl), func(b *testing.B) {
				r := runProcs(b, childSpec{
					Addrs:    c.Addrs(),
					Impl:     impl,
					Key:      fmt.Sprintf("hotproc:%s:%d", impl, round.Add(1)),
					Workers:  workersPerProc,
					Hold:     *hold,
					Duration: time.Duration(b.N) * *procDuration,
				}, procs)
				r.check(b, impl)
				share, starved := r.ShareRatio()
				acq := float64(max(r.Acquisitions, 1))
				b.ReportMetric(r.Rate(), "acq/s")
				b.ReportMetric(stats.Micros(stats.Quantile(r.Handoffs, 0.50)), "handoff-p50-us")
				b.ReportMetric(p99(r.Handoffs), "handoff-p99-us")
				b.ReportMetric(stats.Micros(mean(r.Handoffs)), "handoff-mean-us")
				b.ReportMetric(stats.Micros(r.Held/time.Duration(max(r.Acquisitions, 1))), "hold-mean-us")
				b.ReportMetric(p99(r.CrossHandoffs), "xproc-handoff-p99-us")
				b.ReportMetric(p99(r.Waits), "wait-p99-us")
				b.ReportMetric(float64(len(r.Handoffs))/acq, "handoffs/acq")
				b.ReportMetric(float64(len(r.CrossHandoffs))/acq, "xproc-handoffs/acq")
				b.ReportMetric(float64(len(r.Handoffs))/float64(b.N), "handoffs/op")
				b.ReportMetric(share, "share-max/min")
				b.ReportMetric(float64(starved), "starved")
				if a := r.attemptsPerAcq(); a >= 0 {
					b.ReportMetric(a, "attempts/acq")
				}
				b.ReportMetric(float64(r.Overlaps), "overlaps")
			})
		}
	}
}

// semOps counts BenchmarkSemaphoreProcesses's ops, to alternate which of
// the two runs goes first.
var semOps atomic.Int64

// BenchmarkSemaphoreProcesses compares redlock's Semaphore of K=4 slots
// with its mutex (Locker.Acquire on one key), both contended by 16 workers
// in 4 processes (one Locker per process), each holder keeping what it got
// for -bench.hold (1ms). Every op runs both, for -bench.procdur each, one
// after the other on the same servers (which goes first alternates), so
// that their ratio is measured in one run: throughput (acq/s) and the p99
// of Acquire calls' durations (wait-p99). More than K holders at once, or
// two holders of one slot, is an overlap and fails the benchmark.
func BenchmarkSemaphoreProcesses(b *testing.B) {
	const n, procs, workersPerProc, k = 3, 4, 4, 4
	c := startServers(b, n)
	b.Run(fmt.Sprintf("procs=%d/workers=%d/K=%d", procs, procs*workersPerProc, k), func(b *testing.B) {
		order := []string{"mutex", "semaphore"}
		if semOps.Add(1)%2 == 0 {
			slices.Reverse(order)
		}
		runs := map[string]procResult{}
		for _, which := range order {
			spec := childSpec{
				Addrs:    c.Addrs(),
				Impl:     "redlock",
				Key:      fmt.Sprintf("semproc:%s:%d", which, round.Add(1)),
				Workers:  workersPerProc,
				Hold:     *hold,
				Duration: time.Duration(b.N) * *procDuration,
			}
			if which == "semaphore" {
				spec.Impl, spec.Limit = "semaphore", k
			}
			r := runProcs(b, spec, procs)
			r.check(b, which)
			runs[which] = r
		}
		mu, sem := runs["mutex"], runs["semaphore"]
		b.ReportMetric(mu.Rate(), "mutex-acq/s")
		b.ReportMetric(sem.Rate(), "sem-acq/s")
		b.ReportMetric(sem.Rate()/mu.Rate(), "acq-sem-vs-mutex")
		b.ReportMetric(p99(mu.Waits), "mutex-wait-p99-us")
		b.ReportMetric(p99(sem.Waits), "sem-wait-p99-us")
		b.ReportMetric(p99(sem.Waits)/p99(mu.Waits), "wait-p99-sem-vs-mutex")
		b.ReportMetric(mu.attemptsPerAcq(), "mutex-attempts/acq")
		b.ReportMetric(sem.attemptsPerAcq(), "sem-attempts/acq")
		muShare, _ := mu.ShareRatio()
		semShare, _ := sem.ShareRatio()
		b.ReportMetric(muShare, "mutex-share-max/min")
		b.ReportMetric(semShare, "sem-share-max/min")
		b.ReportMetric(float64(sem.MaxHolders), "sem-max-holders")
		b.ReportMetric(float64(mu.Overlaps+sem.Overlaps), "overlaps")
	})
}

// mean is the average of ds (0 for none).
func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(max(len(ds), 1))
}
