package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/e6344662/go-redlock/internal/loadgen"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
)

// Bench limits and defaults.
const (
	maxBenchClients     = 10000
	defaultBenchWait    = 10 * time.Second
	lockersShared       = "shared"
	lockersPerClient    = "per-client"
	benchProgressTTY    = time.Second
	benchProgressNonTTY = 5 * time.Second
)

// benchOptions are the flags of bench.
type benchOptions struct {
	clients     int
	resources   int
	duration    time.Duration
	warmup      time.Duration
	hold        time.Duration
	wait        time.Duration
	lockers     string
	embedded    int
	metricsAddr string
}

// register adds bench's flags to fs.
func (o *benchOptions) register(fs *pflag.FlagSet) {
	fs.IntVar(&o.clients, "clients", 8, "concurrent clients, each in a loop of acquire, hold, release")
	fs.IntVar(&o.resources, "resources", 1, "distinct resources; client c uses resource c % resources")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long to measure")
	fs.DurationVar(&o.warmup, "warmup", 0, "run this long before measuring, without recording")
	fs.DurationVar(&o.hold, "hold", time.Millisecond, "how long each client holds the lock before releasing it (0: release at once)")
	fs.DurationVar(&o.wait, "wait", defaultBenchWait, "longest wait of one Acquire; a longer one counts as an acquire_wait_timeout error")
	fs.StringVar(&o.lockers, "lockers", lockersShared, "shared: all clients share one Locker (one process); per-client: each has its own Locker and connections (one process each)")
	fs.IntVar(&o.embedded, "embedded", 0, "run against `N` in-process Redis nodes (miniredis) instead of --nodes")
	addMetricsFlag(fs, &o.metricsAddr)
}

// validate checks bench's flags; fs tells which were set.
func (o *benchOptions) validate(fs *pflag.FlagSet) error {
	switch {
	case o.clients < 1 || o.clients > maxBenchClients:
		return usageErrorf("--clients must be from 1 to %d, got %d", maxBenchClients, o.clients)
	case o.resources < 1:
		return usageErrorf("--resources must be at least 1, got %d", o.resources)
	case o.resources > o.clients:
		return usageErrorf("--resources %d is more than --clients %d: client c uses resource c %% resources, so some would never be used", o.resources, o.clients)
	case o.warmup < 0:
		return usageErrorf("--warmup must not be negative, got %s", o.warmup)
	case o.hold < 0:
		return usageErrorf("--hold must not be negative, got %s", o.hold)
	case o.lockers != lockersShared && o.lockers != lockersPerClient:
		return usageErrorf("--lockers must be %s or %s, got %q", lockersShared, lockersPerClient, o.lockers)
	}
	if err := positive("duration", o.duration); err != nil {
		return err
	}
	if err := positive("wait", o.wait); err != nil {
		return err
	}
	if fs.Changed("embedded") {
		if o.embedded < 1 || o.embedded > maxEmbedded {
			return usageErrorf("--embedded must be from 1 to %d nodes, got %d", maxEmbedded, o.embedded)
		}
		if fs.Changed("nodes") {
			return usageErrorf("--embedded and --nodes cannot be used together")
		}
	}
	if fs.Changed("metrics-addr") {
		return checkMetricsAddr(o.metricsAddr)
	}
	return nil
}

// benchLong is the help text of bench.
const benchLong = `Measure the lock on your deployment: --clients goroutines in one process
loop over acquire (waiting, as "run --wait" does), hold for --hold, release,
for --duration, on --resources resources named bench:RUNID:I (client c uses
resource c % resources; RUNID is random, so runs never collide).

All clients share one Locker, as the goroutines of one process would; with
--lockers per-client each has its own Locker and connections, like separate
processes. --embedded N runs against N in-process Redis nodes instead, for a
quick try without any Redis.

Reports acquisitions per second; acquire latency (from the Acquire call to
its return, waiting included: p50, p90, p99, max); hand-off latency (from one
holder's Release call to the next holder's Acquire returning, when the next
holder is another client that was already waiting: p50, p99, max); each
client's share of the acquisitions relative to a fair share; and errors by
kind, and what the servers did per acquisition in the measured window
(INFO commandstats and INFO cpu, summed over the nodes: commands, script
calls, µs in the scripts, server CPU µs; not shown for servers that do not
keep these counts, such as --embedded). A progress line is shown on stderr (rewritten every second on a
terminal, else a line every 5s). SIGINT stops early and still prints the
results (then exits 130). Each run leaves one fence counter key per
resource on the nodes (PREFIX{bench:RUNID:I}:fence), which expires twice
the rejoin delay after the run.

Exits 0 if there was at least one acquisition (errors are in the results);
else 3 if no majority could be reached, 4 if the resources stayed busy, 1
for other errors.

` + exitCodeHelp

// benchCmd builds bench.
func (a *App) benchCmd() *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench [--clients N] [--resources N] [--duration D] [--hold D] [--embedded N] [--metrics-addr HOST:PORT]",
		Short: "Measure lock throughput, latency and hand-off on your nodes",
		Long:  benchLong,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.prepare(cmd, o.validate(cmd.Flags())); err != nil {
				return err
			}
			b := &bench{app: a, o: o}
			return b.run(cmd.Context())
		},
	}
	o.register(cmd.Flags())
	return cmd
}

// bench is one run of the bench command: it connects the Lockers, has
// loadgen run the clients on them, and reports what they measured.
type bench struct {
	app   *App
	o     benchOptions
	runID string
}

// run connects, runs the clients, and prints the results.
func (b *bench) run(parent context.Context) error {
	a := b.app
	var urls []string
	nodes := b.o.embedded
	if nodes == 0 {
		var err error
		if urls, err = a.g.nodeURLs(a.Getenv); err != nil {
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

	lockers, nodes0, closeAll, err := b.connect(ctx, urls)
	if err != nil {
		return err
	}
	defer closeAll()
	// The servers' counters at the start of the measured window (after the
	// warm-up) and at its end: commands and server time per acquisition.
	var (
		before    serverCounts
		countedOK bool
		counted   = make(chan struct{})
	)
	go func() {
		defer close(counted)
		select {
		case <-time.After(b.o.warmup):
		case <-ctx.Done():
			return
		}
		before, countedOK = b.serverCounts(ctx, nodes0)
	}()

	gen := loadgen.Start(ctx, loadgen.Config{
		Lockers:        lockers,
		Clients:        b.o.clients,
		Resources:      b.resources(),
		Hold:           b.o.hold,
		Wait:           b.o.wait,
		ReleaseTimeout: 2*a.g.callTimeout() + time.Second,
		Warmup:         b.o.warmup,
		Duration:       b.o.duration,
		ErrorKind:      benchErrorKind,
	})
	progressDone := make(chan struct{})
	var progress sync.WaitGroup
	tty := isTerminal(a.Stderr)
	every := benchProgressNonTTY
	if tty {
		every = benchProgressTTY
	}
	progress.Go(func() { b.progress(a.Stderr, progressDone, tty, every, gen.Progress) })
	measured := gen.Wait()
	close(progressDone)
	progress.Wait()

	<-counted
	var cost *serverCost
	if countedOK {
		if after, ok := b.serverCounts(context.WithoutCancel(ctx), nodes0); ok {
			cost = perAcquisition(before, after, int64(measured.Acquire.N))
		}
	}
	res := b.result(ctx, nodes, measured)
	res.Server = cost
	a.report(res, func() { a.printBench(res) })
	return b.exitError(ctx, res)
}

// serverCounts reads the servers' counters, bounded by the call timeout.
func (b *bench) serverCounts(ctx context.Context, nodes redisnode.Nodes) (serverCounts, bool) {
	ctx, cancel := context.WithTimeout(ctx, b.app.g.callTimeout())
	defer cancel()
	return readServerCounts(ctx, nodes)
}

// connect makes the Lockers: one shared, or one per client with its own
// connections, and returns the first one's nodes. closeAll releases what
// they hold and closes them.
func (b *bench) connect(ctx context.Context, urls []string) ([]*redlock.Locker, redisnode.Nodes, func(), error) {
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
			return nil, nil, nil, err
		}
		sessions = append(sessions, s)
		lockers = append(lockers, s.locker)
	}
	return lockers, sessions[0].nodes, closeAll, nil
}

// resources draws the run's random ID and returns the resource names,
// bench:RUNID:I.
func (b *bench) resources() []string {
	var id [4]byte
	_, _ = rand.Read(id[:])
	b.runID = hex.EncodeToString(id[:])
	names := make([]string, b.o.resources)
	for i := range names {
		names[i] = "bench:" + b.runID + ":" + strconv.Itoa(i)
	}
	return names
}
