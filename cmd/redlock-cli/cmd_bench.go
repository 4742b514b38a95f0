package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
kind. A progress line is shown on stderr (rewritten every second on a
terminal, else a line every 5s). SIGINT stops early and still prints the
results (then exits 130). Each run leaves one fence counter key per
resource on the nodes (PREFIX{bench:RUNID:I}:fence).

Exits 0 if there was at least one acquisition (errors are in the results);
else 3 if no majority could be reached, 4 if the resources stayed busy, 1
for other errors.

` + exitCodeHelp

func (a *app) benchCmd() *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench [--clients N] [--resources N] [--duration D] [--hold D] [--embedded N] [--metrics-addr HOST:PORT]",
		Short: "Measure lock throughput, latency and hand-off on your nodes",
		Long:  benchLong,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.prepare(cmd); err != nil {
				return err
			}
			if err := o.validate(cmd.Flags()); err != nil {
				return err
			}
			b := &bench{app: a, o: o}
			return b.run(cmd.Context())
		},
	}
	o.register(cmd.Flags())
	return cmd
}

// latencyMS is a latency summary in --json output, in fractional
// milliseconds.
type latencyMS struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// toMS converts d to milliseconds, to the microsecond.
func toMS(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}

func summarizeLatency(s histSnapshot) latencyMS {
	return latencyMS{P50: toMS(s.quantile(0.5)), P90: toMS(s.quantile(0.9)), P99: toMS(s.quantile(0.99)),
		Max: toMS(s.max), Mean: toMS(s.mean())}
}

// benchResult is bench's result, the --json output.
type benchResult struct {
	RunID              string           `json:"run_id"`
	Nodes              int              `json:"nodes"`
	Embedded           bool             `json:"embedded"`
	Clients            int              `json:"clients"`
	Resources          int              `json:"resources"`
	Lockers            string           `json:"lockers"`
	HoldMS             float64          `json:"hold_ms"`
	WarmupMS           int64            `json:"warmup_ms"`
	DurationMS         int64            `json:"duration_ms"`
	Interrupted        bool             `json:"interrupted"`
	Acquisitions       int64            `json:"acquisitions"`
	PerSecond          float64          `json:"acquisitions_per_sec"`
	Acquire            latencyMS        `json:"acquire_ms"`
	Handoffs           int64            `json:"handoffs"`
	Handoff            latencyMS        `json:"handoff_ms"`
	SameClient         int64            `json:"same_client_retakes"`
	ClientAcquisitions []int64          `json:"client_acquisitions"`
	FairShareMin       float64          `json:"fair_share_min"`
	FairShareMax       float64          `json:"fair_share_max"`
	Errors             map[string]int64 `json:"errors"`
	ErrorsTotal        int64            `json:"errors_total"`
	ExitCode           int              `json:"exit_code"`

	acquireSnap, handoffSnap histSnapshot
}

// printBench writes res as a table.
func (a *app) printBench(res *benchResult) {
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	where := plural(res.Nodes, "node")
	if res.Embedded {
		where += " (embedded)"
	}
	fmt.Fprintf(tw, "bench:\t%s, %s on %s, %s Locker, hold %s, %s (run %s)\n", where, plural(res.Clients, "client"),
		plural(res.Resources, "resource"), res.Lockers, fmtDuration(time.Duration(res.HoldMS*float64(time.Millisecond))),
		fmtDuration(time.Duration(res.DurationMS)*time.Millisecond), res.RunID)
	if res.Interrupted {
		fmt.Fprintf(tw, "\tinterrupted: the results cover the %s that ran\n", fmtDuration(time.Duration(res.DurationMS)*time.Millisecond))
	}
	fmt.Fprintf(tw, "acquisitions:\t%d (%.1f/s)\n", res.Acquisitions, res.PerSecond)
	if res.Acquisitions > 0 {
		s := res.acquireSnap
		fmt.Fprintf(tw, "acquire:\tp50 %s  p90 %s  p99 %s  max %s  (mean %s)\n", fmtDuration(s.quantile(0.5)),
			fmtDuration(s.quantile(0.9)), fmtDuration(s.quantile(0.99)), fmtDuration(s.max), fmtDuration(s.mean()))
	}
	h := res.handoffSnap
	if res.Handoffs > 0 {
		fmt.Fprintf(tw, "hand-off:\t%d to a waiting client: p50 %s  p99 %s  max %s\n", res.Handoffs,
			fmtDuration(h.quantile(0.5)), fmtDuration(h.quantile(0.99)), fmtDuration(h.max))
	} else {
		fmt.Fprintf(tw, "hand-off:\tnone to a waiting client\n")
	}
	if res.SameClient > 0 {
		fmt.Fprintf(tw, "\t%d retaken by the client that released it\n", res.SameClient)
	}
	if res.Acquisitions > 0 {
		lo, hi := slices.Min(res.ClientAcquisitions), slices.Max(res.ClientAcquisitions)
		fmt.Fprintf(tw, "client share:\tmin %.2f  max %.2f of a fair share (%d..%d acquisitions per client)\n",
			res.FairShareMin, res.FairShareMax, lo, hi)
	}
	fmt.Fprintf(tw, "errors:\t%s\n", fmtErrors(res.Errors))
	_ = tw.Flush()
}

// fmtErrors lists error counts by kind, in name order: "none", or
// "acquire_no_quorum 3, release_lease_lost 1".
func fmtErrors(errs map[string]int64) string {
	if len(errs) == 0 {
		return "none"
	}
	kinds := make([]string, 0, len(errs))
	for k := range errs {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, errs[k])
	}
	return strings.Join(parts, ", ")
}
