package cli

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/e6344662/go-redlock/chaos"
)

// verifyResult is verify's report, the --json output.
type verifyResult struct {
	RunID     string `json:"run_id"`
	Nodes     int    `json:"nodes"`
	Prefix    string `json:"prefix"`
	Register  string `json:"register"`
	Faults    string `json:"faults"`
	Clients   int    `json:"clients"`
	Resources int    `json:"resources"`
	Procs     int    `json:"procs"`
	// DurationMS is how long the run took, checks included.
	DurationMS int64 `json:"duration_ms"`

	// Operations counts every recorded operation: acquisitions (granted
	// or failed), register reads and writes, releases.
	Operations    int            `json:"operations"`
	Acquisitions  int            `json:"acquisitions"`
	AcquireErrors map[string]int `json:"acquire_errors"`
	// Holders counts the clients that held a lock at least once;
	// HandOvers the leases whose holder differs from the resource's
	// previous holder.
	Holders    int `json:"holders"`
	HandOvers  int `json:"hand_overs"`
	Reads      int `json:"reads"`
	ReadErrors int `json:"read_errors"`
	Writes     int `json:"writes"`
	Accepted   int `json:"writes_accepted"`
	Stale      int `json:"writes_stale"`
	Unknown    int `json:"writes_unknown"`
	LostLeases int `json:"lost_leases"`

	AcquireMS quantilesMS `json:"acquire_ms"`
	HoldMS    quantilesMS `json:"hold_ms"`

	FaultsInjected int `json:"faults_injected"`

	Violations     verifyViolations `json:"violations"`
	ViolationCount int              `json:"violation_count"`
	// Linearizable is "yes", "no", or "unknown" (the check ran out of
	// time).
	Linearizable string   `json:"linearizable"`
	Examples     []string `json:"examples,omitempty"`

	HTML         string `json:"html,omitempty"`
	KeysRemoved  int    `json:"keys_removed"`
	CleanupError string `json:"cleanup_error,omitempty"`
}

// quantilesMS are p50 and p99 in fractional milliseconds.
type quantilesMS struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

// verifyViolations counts each kind of violation; all must be 0.
type verifyViolations struct {
	// MutualExclusion: leases of one resource whose held windows (from the
	// grant to the last check that the lease was still valid) overlap.
	MutualExclusion int `json:"mutual_exclusion"`
	// ValidityOverlap: leases whose validity windows overlap.
	ValidityOverlap int `json:"validity_overlap"`
	// TokenOrder: a lease asked for after another was granted with a token
	// not above it (TokenRegressions), or a token given twice.
	TokenOrder int `json:"token_order"`
	// StaleAccepted: writes accepted after a higher token's had been.
	StaleAccepted int `json:"stale_accepted"`
	// LostWrites: writes accepted inside their lease and then lost.
	LostWrites int `json:"lost_writes"`
	// FinalMismatch: registers whose final value is not the last accepted
	// write.
	FinalMismatch int `json:"final_mismatch"`
	// NotLinearizable: 1 when porcupine found no linearization.
	NotLinearizable int `json:"not_linearizable"`
}

// total is the number of violations.
func (v verifyViolations) total() int {
	return v.MutualExclusion + v.ValidityOverlap + v.TokenOrder + v.StaleAccepted + v.LostWrites + v.FinalMismatch + v.NotLinearizable
}

// quantile returns the q-quantile of ds (sorted in place); 0 when empty.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(math.Ceil(q*float64(len(ds)))) - 1
	return ds[max(0, min(i, len(ds)-1))]
}

// quantiles summarizes ds.
func quantiles(ds []time.Duration) quantilesMS {
	return quantilesMS{P50: toMS(quantile(ds, 0.5)), P99: toMS(quantile(ds, 0.99))}
}

// check runs every checker over the recorded history.
func (v *verifier) check() *verifyResult {
	r := v.rec
	res := &verifyResult{
		RunID: v.runID, Nodes: len(v.urls), Prefix: v.app.g.prefix, Register: v.o.reg, Faults: v.o.faults,
		Clients: v.o.clients, Resources: v.o.resources, Procs: v.o.procs,
		AcquireErrors: map[string]int{},
	}
	r.mu.Lock()
	for k, n := range r.errs {
		res.AcquireErrors[k] = n
	}
	res.Acquisitions = len(r.acquire)
	res.ReadErrors = r.readErrs
	res.AcquireMS = quantiles(r.acquire)
	res.HoldMS = quantiles(r.hold)
	res.Operations = r.attempts + r.released + r.finalReads
	valid := r.valid
	r.mu.Unlock()

	holders := map[int]bool{}
	for i, h := range r.hist {
		name := v.resources[i]
		rep := chaos.Check(h)
		res.Reads += rep.Reads
		res.Writes += rep.Writes
		res.Accepted += rep.Accepted
		res.Stale += rep.Rejected
		res.Unknown += rep.UnknownOps
		res.LostLeases += h.LostLeases
		res.Operations += rep.Reads + rep.Writes
		vi := &res.Violations
		vi.MutualExclusion += rep.Overlaps
		vi.TokenOrder += rep.TokenRegressions + rep.DuplicateTokens
		vi.StaleAccepted += rep.StaleAccepted
		vi.LostWrites += rep.LostInWindow
		if rep.FinalMismatch {
			vi.FinalMismatch++
		}
		for _, ex := range rep.Examples {
			res.Examples = append(res.Examples, name+": "+ex)
		}
		n, ex := validityOverlaps(valid[i])
		vi.ValidityOverlap += n
		if ex != "" {
			res.Examples = append(res.Examples, name+": validity-overlap: "+ex)
		}
		leases := slices.Clone(h.Leases)
		slices.SortFunc(leases, func(a, b chaos.Lease) int { return cmp.Compare(a.AcquiredAt, b.AcquiredAt) })
		for j, l := range leases {
			holders[l.Client] = true
			if j > 0 && l.Client != leases[j-1].Client {
				res.HandOvers++
			}
		}
	}
	res.Holders = len(holders)
	switch v.linearizable() {
	case porcupine.Ok:
		res.Linearizable = "yes"
	case porcupine.Illegal:
		res.Linearizable = "no"
		res.Violations.NotLinearizable = 1
		res.Examples = append(res.Examples, "not linearizable: no order of the register operations explains what the clients saw (see --html)")
	default:
		res.Linearizable = "unknown"
	}
	res.ViolationCount = res.Violations.total()
	if len(res.Examples) > 6 {
		res.Examples = res.Examples[:6]
	}
	return res
}

// validityOverlaps counts the windows that overlap an earlier-granted
// one's, and describes the first.
func validityOverlaps(ws []validWindow) (int, string) {
	ws = slices.Clone(ws)
	slices.SortFunc(ws, func(a, b validWindow) int { return cmp.Compare(a.from, b.from) })
	var until time.Duration = math.MinInt64
	var prev validWindow
	n, ex := 0, ""
	for _, w := range ws {
		if w.from < until {
			n++
			if ex == "" {
				ex = fmt.Sprintf("lease %d (client %d, granted at %v) was granted while lease %d (client %d) was valid until %v",
					w.fence, w.client, w.from, prev.fence, prev.client, until)
			}
		}
		if w.to > until {
			until, prev = w.to, w
		}
	}
	return n, ex
}

// regOp is one register operation of resource Res, for porcupine.
type regOp struct {
	Res int
	Op  chaos.Op
}

// porcupineModel is chaos.RegisterModel partitioned by resource.
func (v *verifier) porcupineModel() porcupine.Model {
	base := chaos.RegisterModel.ToModel()
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			parts := make([][]porcupine.Operation, len(v.resources))
			for _, op := range history {
				i := op.Input.(regOp).Res
				parts[i] = append(parts[i], op)
			}
			return slices.DeleteFunc(parts, func(p []porcupine.Operation) bool { return len(p) == 0 })
		},
		Init: base.Init,
		Step: func(state, input, output any) (bool, any) {
			return base.Step(state, input.(regOp).Op, output.(regOp).Op)
		},
		Equal: base.Equal,
		Hash:  base.Hash,
		DescribeOperation: func(input, output any) string {
			in := input.(regOp)
			return v.resources[in.Res] + " " + base.DescribeOperation(in.Op, output.(regOp).Op)
		},
		DescribeState: base.DescribeState,
	}
}

// porcupineOps is the register history of every resource; a write with an
// unknown outcome stays pending forever, as porcupine expects.
func (v *verifier) porcupineOps() []porcupine.Operation {
	var out []porcupine.Operation
	for i, h := range v.rec.hist {
		for _, op := range h.Ops {
			ret := op.Return.Nanoseconds()
			if op.Kind == chaos.Write && op.Outcome == chaos.Unknown {
				ret = math.MaxInt64
			}
			in := regOp{Res: i, Op: op}
			out = append(out, porcupine.Operation{ClientId: op.Client, Input: in, Output: in,
				Call: op.Call.Nanoseconds(), Return: ret})
		}
	}
	return out
}

// linearizable checks the register histories with porcupine, keeping
// what --html needs.
func (v *verifier) linearizable() porcupine.CheckResult {
	res, info := porcupine.CheckOperationsVerbose(v.porcupineModel(), v.porcupineOps(), verifyCheckTimeout)
	v.info = &info
	return res
}

// writeHTML writes porcupine's visualization, with each resource's
// holders as a timeline of annotations.
func (v *verifier) writeHTML(res *verifyResult) error {
	if v.info == nil {
		return fmt.Errorf("no history was checked")
	}
	var notes []porcupine.Annotation
	for i, h := range v.rec.hist {
		for _, l := range h.Leases {
			desc := fmt.Sprintf("client %d, token %d", l.Client, l.Fence)
			if l.Lost {
				desc += " (lost)"
			}
			notes = append(notes, porcupine.Annotation{
				Tag:         "holders of " + v.resources[i],
				Start:       l.AcquiredAt.Nanoseconds(),
				End:         l.HeldUntil.Nanoseconds(),
				Description: desc,
				Details:     fmt.Sprintf("asked at %v, granted at %v, last seen held at %v", l.CalledAt, l.AcquiredAt, l.HeldUntil),
			})
		}
	}
	if res.ViolationCount > 0 {
		notes = append(notes, porcupine.Annotation{Tag: "verify", Start: 0, Description: fmt.Sprintf("%d violations", res.ViolationCount),
			Details: strings.Join(res.Examples, "\n"), BackgroundColor: "#f4b6b6"})
	}
	v.info.AddAnnotations(notes)
	return porcupine.VisualizePath(v.porcupineModel(), *v.info, v.o.html)
}

// fmtErrorCounts lists counts by kind in name order, or "none".
func fmtErrorCounts(errs map[string]int) string {
	m := make(map[string]int64, len(errs))
	for k, n := range errs {
		m[k] = int64(n)
	}
	return fmtErrors(m)
}

// printVerify prints the report for people.
func (a *App) printVerify(res *verifyResult) {
	tw := a.table()
	fmt.Fprintf(tw, "run:\t%s on %s, prefix %s, register on %s, faults %s, %s in %s, %s\n",
		res.RunID, plural(res.Nodes, "node"), res.Prefix, res.Register, res.Faults, plural(res.Clients, "client"), plural(res.Procs, "process"), plural(res.Resources, "resource"))
	fmt.Fprintf(tw, "operations:\t%d (%d acquisitions, %d reads, %d writes: %d accepted, %d stale, %d unknown)\n",
		res.Operations, res.Acquisitions, res.Reads, res.Writes, res.Accepted, res.Stale, res.Unknown)
	fmt.Fprintf(tw, "holders:\t%d clients held a lock; %s\n", res.Holders, plural(res.HandOvers, "hand-over"))
	fmt.Fprintf(tw, "acquire:\tp50 %s  p99 %s\n", fmtMS(res.AcquireMS.P50), fmtMS(res.AcquireMS.P99))
	fmt.Fprintf(tw, "hold:\tp50 %s  p99 %s\n", fmtMS(res.HoldMS.P50), fmtMS(res.HoldMS.P99))
	fmt.Fprintf(tw, "acquire errors:\t%s\n", fmtErrorCounts(res.AcquireErrors))
	if res.LostLeases > 0 || res.ReadErrors > 0 {
		fmt.Fprintf(tw, "lost:\t%s, %s\n", plural(res.LostLeases, "lease"), plural(res.ReadErrors, "failed read"))
	}
	if res.Faults != faultsNone {
		fmt.Fprintf(tw, "faults:\t%d injected (%s)\n", res.FaultsInjected, res.Faults)
	}
	vi := res.Violations
	fmt.Fprintf(tw, "violations:\t%d (mutual exclusion %d, validity overlap %d, token order %d, stale accepted %d, lost writes %d, final mismatch %d)\n",
		res.ViolationCount, vi.MutualExclusion, vi.ValidityOverlap, vi.TokenOrder, vi.StaleAccepted, vi.LostWrites, vi.FinalMismatch)
	fmt.Fprintf(tw, "linearizable:\t%s\n", res.Linearizable)
	for _, ex := range res.Examples {
		fmt.Fprintf(tw, "example:\t%s\n", ex)
	}
	if res.HTML != "" {
		fmt.Fprintf(tw, "html:\t%s\n", res.HTML)
	}
	fmt.Fprintf(tw, "cleanup:\t%s under %s deleted\n", plural(res.KeysRemoved, "key"), res.Prefix)
	_ = tw.Flush()
}

// fmtMS formats fractional milliseconds for people.
func fmtMS(ms float64) string {
	return fmtDuration(time.Duration(ms * float64(time.Millisecond)))
}

// progress shows a progress line on the terminal every second until done
// is closed, then erases it.
func (v *verifier) progress(done <-chan struct{}) {
	w := v.app.Stderr
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	shown := false
	for {
		select {
		case <-done:
			if shown {
				fmt.Fprint(w, "\r\x1b[K")
			}
			return
		case <-tick.C:
			granted, failed := v.rec.counts()
			elapsed := min(time.Since(v.start), v.o.duration)
			frac := float64(elapsed) / float64(v.o.duration)
			const width = 20
			bar := strings.Repeat("#", int(frac*width)) + strings.Repeat(".", width-int(frac*width))
			fmt.Fprintf(w, "\r[%s] %s/%s  %d acquisitions  %s\x1b[K", bar, fmtDuration(elapsed.Round(time.Second)), fmtDuration(v.o.duration),
				granted, plural(failed, "failed acquisition"))
			shown = true
		}
	}
}
