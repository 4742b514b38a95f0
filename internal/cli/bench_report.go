package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/e6344662/go-redlock/internal/loadgen"
	"github.com/e6344662/go-redlock/redlock"
)

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

// summarizeLatency is the --json summary of s.
func summarizeLatency(s loadgen.Snapshot) latencyMS {
	return latencyMS{P50: toMS(s.Quantile(0.5)), P90: toMS(s.Quantile(0.9)), P99: toMS(s.Quantile(0.99)),
		Max: toMS(s.Max), Mean: toMS(s.Mean())}
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
	Server             *serverCost      `json:"server_per_acquisition,omitempty"`
	ExitCode           int              `json:"exit_code"`

	acquireSnap, handoffSnap loadgen.Snapshot
}

// printBench writes res as a table.
func (a *App) printBench(res *benchResult) {
	tw := a.table()
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
		fmt.Fprintf(tw, "acquire:\tp50 %s  p90 %s  p99 %s  max %s  (mean %s)\n", fmtDuration(s.Quantile(0.5)),
			fmtDuration(s.Quantile(0.9)), fmtDuration(s.Quantile(0.99)), fmtDuration(s.Max), fmtDuration(s.Mean()))
	}
	h := res.handoffSnap
	if res.Handoffs > 0 {
		fmt.Fprintf(tw, "hand-off:\t%d to a waiting client: p50 %s  p99 %s  max %s\n", res.Handoffs,
			fmtDuration(h.Quantile(0.5)), fmtDuration(h.Quantile(0.99)), fmtDuration(h.Max))
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
	if c := res.Server; c != nil {
		fmt.Fprintf(tw, "server:\t%.1f commands (%.2f script calls), %.1fµs in scripts, %.1fµs CPU per acquisition (all nodes)\n",
			c.CommandsPerAcq, c.ScriptsPerAcq, c.ScriptUsecPerAcq, c.CPUUsecPerAcq)
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

// result is the command's result from what the clients measured.
func (b *bench) result(ctx context.Context, nodes int, m loadgen.Result) *benchResult {
	window := m.Window
	res := &benchResult{
		RunID:              b.runID,
		Nodes:              nodes,
		Embedded:           b.o.embedded > 0,
		Clients:            b.o.clients,
		Resources:          b.o.resources,
		Lockers:            b.o.lockers,
		HoldMS:             toMS(b.o.hold),
		WarmupMS:           b.o.warmup.Milliseconds(),
		DurationMS:         window.Milliseconds(),
		Interrupted:        interrupted(ctx) != nil,
		SameClient:         m.SameClient,
		acquireSnap:        m.Acquire,
		handoffSnap:        m.Handoff,
		Errors:             m.Errors,
		ErrorsTotal:        m.ErrorsTotal,
		ClientAcquisitions: m.PerClient,
	}
	res.Acquisitions = int64(res.acquireSnap.N)
	if window > 0 {
		res.PerSecond = math.Round(float64(res.Acquisitions)/window.Seconds()*10) / 10
	}
	res.Acquire = summarizeLatency(res.acquireSnap)
	res.Handoffs = int64(res.handoffSnap.N)
	res.Handoff = summarizeLatency(res.handoffSnap)
	res.FairShareMin, res.FairShareMax = math.Round(m.FairShareMin*1000)/1000, math.Round(m.FairShareMax*1000)/1000
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

// benchErrorKind names a failed acquire or release in the results:
// acquire_no_quorum, acquire_busy, acquire_wait_timeout (--wait ran out),
// acquire_failure; release_no_quorum, release_lease_lost, release_timeout,
// release_failure.
func benchErrorKind(op loadgen.Op, err error) string {
	kind := kindFailure
	switch {
	case errors.Is(err, redlock.ErrNoQuorum):
		kind = kindNoQuorum
	case op == loadgen.OpAcquire && errors.Is(err, redlock.ErrNotAcquired):
		kind = kindBusy
	case op == loadgen.OpAcquire && errors.Is(err, context.DeadlineExceeded):
		kind = kindTimeout
	case op == loadgen.OpRelease && errors.Is(err, redlock.ErrLeaseLost):
		kind = kindLeaseLost
	case op == loadgen.OpRelease && errors.Is(err, context.DeadlineExceeded):
		kind = "timeout"
	}
	return string(op) + "_" + kind
}
