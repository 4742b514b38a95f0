package chaos

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/e6344662/go-redlock/fencing"
)

// Register values name themselves and the value they were computed from
// (the read of a read-modify-write): "id<-prev", with prev "" for the first
// write. Following prev links back from the final value gives the chain of
// writes the register went through; an accepted write that is not on it
// was lost (overwritten by a write computed from an older read).

// NewValue returns the value of write id computed from the value read,
// prev ("" when the register was empty).
func NewValue(id, prev string) string { return id + "<-" + ValueID(prev) }

// ValueID returns the id of a value made by NewValue ("" for "").
func ValueID(v string) string {
	id, _, _ := strings.Cut(v, "<-")
	return id
}

// valuePrev returns the id of the value v was computed from.
func valuePrev(v string) string {
	_, prev, _ := strings.Cut(v, "<-")
	return prev
}

// RegisterState is the state of the fenced register: its value and the
// highest token it has accepted.
type RegisterState struct {
	Value string
	Fence fencing.Token
}

// RegisterModel is the sequential specification of a register behind
// redisfence.Store: a write is applied, and its token becomes the fence, when
// its token is not below the fence, and is refused as stale otherwise,
// reporting the fence; a read returns the value and the fence together. A
// write whose outcome is unknown may or may not have been applied.
var RegisterModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{RegisterState{}} },
	Step: func(state, input, output any) []any {
		st := state.(RegisterState)
		op := input.(Op)
		switch op.Kind {
		case Read:
			if op.Found == (st.Value != "") && op.Value == st.Value && op.Highest == st.Fence {
				return []any{st}
			}
			return nil
		case Write:
			applied := RegisterState{Value: op.Value, Fence: op.Token}
			switch op.Outcome {
			case Accepted:
				if op.Token >= st.Fence {
					return []any{applied}
				}
			case Stale:
				if op.Token < st.Fence && op.Highest == st.Fence {
					return []any{st}
				}
			case Unknown:
				if op.Token >= st.Fence {
					return []any{st, applied}
				}
				return []any{st}
			}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		op := input.(Op)
		if op.Kind == Read {
			return fmt.Sprintf("read() -> %q fence %d", op.Value, op.Highest)
		}
		return fmt.Sprintf("write(%q, %d) -> %s", op.Value, op.Token, op.Outcome)
	},
	DescribeState: func(state any) string {
		st := state.(RegisterState)
		return fmt.Sprintf("%q fence %d", st.Value, st.Fence)
	},
}

// porcupineOps converts the register history to porcupine operations. A
// write with an unknown outcome is left pending forever, as porcupine
// expects.
func porcupineOps(ops []Op) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		ret := op.Return.Nanoseconds()
		if op.Kind == Write && op.Outcome == Unknown {
			ret = math.MaxInt64
		}
		out = append(out, porcupine.Operation{
			ClientId: op.Client, Input: op, Output: op,
			Call: op.Call.Nanoseconds(), Return: ret,
		})
	}
	return out
}

// CheckLinearizable checks the register's history with porcupine, within
// timeout. When the result is not porcupine.Ok and vizPath is not empty,
// it writes porcupine's HTML visualization there.
func CheckLinearizable(ops []Op, timeout time.Duration, vizPath string) (porcupine.CheckResult, error) {
	model := RegisterModel.ToModel()
	res, info := porcupine.CheckOperationsVerbose(model, porcupineOps(ops), timeout)
	if res != porcupine.Ok && vizPath != "" {
		if err := porcupine.VisualizePath(model, info, vizPath); err != nil {
			return res, err
		}
	}
	return res, nil
}

// Report holds the counts a run's checkers found. Fields named as
// violations must be zero for the guarantees to hold; the others describe
// what happened.
type Report struct {
	Terms        int // leases granted
	LostLeases   int // leases lost rather than released
	Stalls       int // client stalls past a lease
	Reads        int
	Writes       int
	Accepted     int // writes the resource accepted
	Rejected     int // writes the resource refused as stale
	UnknownOps   int // writes with an unknown outcome
	LateWrites   int // writes begun after the writer's held window ended
	LateAccepted int // late writes accepted: no newer holder had written yet
	Faults       int
	FaultKinds   map[string]int
	AcquireErrs  int

	// LostLate counts accepted writes that were later overwritten by a
	// write computed from an older read, where the lost write was late: the
	// limit of fencing writes only (the read of a read-modify-write is not
	// fenced). Not a violation of the lock's guarantees.
	LostLate int
	// SharedTokens counts tokens carried by accepted writes of two or more
	// different leases: the resource cannot tell those holders apart. It
	// can only happen with duplicate tokens (DuplicateTokens).
	SharedTokens int

	// Semaphores: SemAcquired counts their leases, SemAcquireErrs their
	// failed Acquire calls; SemMax is, per semaphore, the most leases valid
	// at once, and SemLimit its limit.
	SemAcquired    int
	SemAcquireErrs int
	SemMax         map[string]int
	SemLimit       map[string]int

	// Violations of the resource side (must be zero in every run).
	StaleAccepted    int  // writes accepted although a higher token had been accepted before they began
	NotLinearizable  bool // porcupine found no linearization
	LinearizeUnknown bool // porcupine ran out of time
	FinalMismatch    bool // final register is not the last accepted write

	// Violations of the lock's guarantees (must be zero while its
	// assumptions hold).
	Overlaps         int // leases whose held window overlaps an earlier one's
	TokenRegressions int // leases whose token is not above that of a lease acquired before they were asked for
	DuplicateTokens  int // leases sharing a token with another lease
	LostInWindow     int // accepted writes made inside the writer's held window and lost
	MajorityGrants   int // leases granted while a majority of nodes was down
	SemOverLimit     int // semaphore leases granted while their semaphore's limit of valid leases was already reached
	SemSlotOverlaps  int // semaphore leases whose valid window overlaps that of an earlier lease of the same slot

	// Examples describes the first two cases of each kind of violation,
	// for the log.
	Examples []string
	examples map[string]int
}

// ResourceViolations counts violations of the resource side's guarantees.
func (r *Report) ResourceViolations() int {
	n := r.StaleAccepted
	for _, b := range []bool{r.NotLinearizable, r.LinearizeUnknown, r.FinalMismatch} {
		if b {
			n++
		}
	}
	return n
}

// LockViolations counts violations of the lock's guarantees.
func (r *Report) LockViolations() int {
	return r.Overlaps + r.TokenRegressions + r.DuplicateTokens + r.LostInWindow + r.MajorityGrants +
		r.SemOverLimit + r.SemSlotOverlaps
}

func (r *Report) example(kind, format string, args ...any) {
	if r.examples == nil {
		r.examples = map[string]int{}
	}
	if r.examples[kind] < 2 {
		r.examples[kind]++
		r.Examples = append(r.Examples, kind+": "+fmt.Sprintf(format, args...))
	}
}

// String formats the counts on one line.
func (r *Report) String() string {
	kinds := make([]string, 0, len(r.FaultKinds))
	for k, n := range r.FaultKinds {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
	}
	slices.Sort(kinds)
	sems := make([]string, 0, len(r.SemMax))
	for name, n := range r.SemMax {
		sems = append(sems, fmt.Sprintf("%s=%d/%d", name, n, r.SemLimit[name]))
	}
	slices.Sort(sems)
	return fmt.Sprintf("terms=%d lost_leases=%d stalls=%d reads=%d writes=%d accepted=%d stale_rejected=%d unknown=%d "+
		"late_writes=%d late_accepted=%d lost_late=%d shared_tokens=%d acquire_errors=%d faults=%d [%s] "+
		"sem_acquired=%d sem_acquire_errors=%d sem_max_valid=[%s] | "+
		"violations: resource=%d (stale_accepted=%d not_linearizable=%t final_mismatch=%t) "+
		"lock=%d (overlaps=%d token_regressions=%d duplicate_tokens=%d lost_in_window=%d majority_grants=%d "+
		"sem_over_limit=%d sem_slot_overlaps=%d)",
		r.Terms, r.LostLeases, r.Stalls, r.Reads, r.Writes, r.Accepted, r.Rejected, r.UnknownOps,
		r.LateWrites, r.LateAccepted, r.LostLate, r.SharedTokens, r.AcquireErrs, r.Faults, strings.Join(kinds, " "),
		r.SemAcquired, r.SemAcquireErrs, strings.Join(sems, " "),
		r.ResourceViolations(), r.StaleAccepted, r.NotLinearizable || r.LinearizeUnknown, r.FinalMismatch,
		r.LockViolations(), r.Overlaps, r.TokenRegressions, r.DuplicateTokens, r.LostInWindow, r.MajorityGrants,
		r.SemOverLimit, r.SemSlotOverlaps)
}

// Check runs every checker except porcupine's (see CheckLinearizable) over
// a finished history whose last op is the final read of the register.
func Check(h *History) *Report {
	r := &Report{
		Terms: len(h.Leases), Stalls: h.Stalls, LostLeases: h.LostLeases,
		Faults: len(h.Faults), FaultKinds: map[string]int{},
	}
	for _, n := range h.AcquireErrors {
		r.AcquireErrs += n
	}
	for _, f := range h.Faults {
		r.FaultKinds[f.Kind]++
	}
	for _, op := range h.Ops {
		switch {
		case op.Kind == Read:
			r.Reads++
		case op.Outcome == Accepted:
			r.Writes++
			r.Accepted++
		case op.Outcome == Stale:
			r.Writes++
			r.Rejected++
		default:
			r.Writes++
			r.UnknownOps++
		}
	}
	checkStale(h.Ops, r)
	checkLeases(h.Leases, r)
	checkLate(h, r)
	checkShared(h.Ops, r)
	checkLost(h, r)
	checkMajority(h, r)
	CheckSemaphores(h.SemLeases, r)
	r.SemAcquireErrs = h.SemAcquireErrors
	return r
}

// checkStale: no write may be accepted once a write with a higher token
// has been accepted and has returned before it began. This also makes the
// accepted tokens non-decreasing in real time.
func checkStale(ops []Op, r *Report) {
	var accepted, writes []Op
	for _, op := range ops {
		if op.Kind != Write {
			continue
		}
		writes = append(writes, op)
		if op.Outcome == Accepted {
			accepted = append(accepted, op)
		}
	}
	slices.SortFunc(accepted, func(a, b Op) int { return cmp.Compare(a.Return, b.Return) })
	slices.SortFunc(writes, func(a, b Op) int { return cmp.Compare(a.Call, b.Call) })
	var highest fencing.Token
	next := 0
	for _, w := range writes {
		for next < len(accepted) && accepted[next].Return < w.Call {
			highest = max(highest, accepted[next].Token)
			next++
		}
		if w.Outcome == Accepted && w.Token < highest {
			r.StaleAccepted++
			r.example("stale-accepted", "write %q with token %d accepted after token %d had been", w.Value, w.Token, highest)
		}
	}
}

// checkLeases: held windows never overlap, and a lease acquired before
// another was asked for has a lower token.
func checkLeases(leases []Lease, r *Report) {
	byAcq := slices.Clone(leases)
	slices.SortFunc(byAcq, func(a, b Lease) int { return cmp.Compare(a.AcquiredAt, b.AcquiredAt) })
	var until time.Duration = -1
	var prev Lease
	for _, l := range byAcq {
		if l.AcquiredAt <= until {
			r.Overlaps++
			r.example("overlap", "lease %d (client %d, acquired %v) overlaps lease %d (client %d, held until %v)",
				l.Fence, l.Client, l.AcquiredAt, prev.Fence, prev.Client, until)
		}
		if l.HeldUntil > until {
			until, prev = l.HeldUntil, l
		}
	}

	byCall := slices.Clone(leases)
	slices.SortFunc(byCall, func(a, b Lease) int { return cmp.Compare(a.CalledAt, b.CalledAt) })
	var highest fencing.Token
	next := 0
	for _, l := range byCall {
		for next < len(byAcq) && byAcq[next].AcquiredAt < l.CalledAt {
			highest = max(highest, byAcq[next].Fence)
			next++
		}
		if l.Fence <= highest {
			r.TokenRegressions++
			r.example("token-regression", "lease with token %d (client %d) asked for after a lease with token %d was granted", l.Fence, l.Client, highest)
		}
	}

	count := map[fencing.Token]int{}
	for _, l := range leases {
		count[l.Fence]++
	}
	for tok, n := range count {
		if n > 1 {
			r.DuplicateTokens += n
			r.example("duplicate-token", "token %d was given to %d leases", tok, n)
		}
	}
}

// late reports whether write op began after its lease's held window.
func late(h *History, op Op) bool {
	return op.Lease >= 0 && op.Call > h.Leases[op.Lease].HeldUntil
}

// inWindow reports whether write op returned inside its lease's held window.
func inWindow(h *History, op Op) bool {
	return op.Lease >= 0 && op.Return <= h.Leases[op.Lease].HeldUntil
}

func checkLate(h *History, r *Report) {
	for _, op := range h.Ops {
		if op.Kind == Write && late(h, op) {
			r.LateWrites++
			if op.Outcome == Accepted {
				r.LateAccepted++
			}
		}
	}
}

// checkShared counts tokens whose accepted writes came from more than one
// lease.
func checkShared(ops []Op, r *Report) {
	writers := map[fencing.Token]map[int]bool{}
	for _, op := range ops {
		if op.Kind != Write || op.Outcome != Accepted {
			continue
		}
		if writers[op.Token] == nil {
			writers[op.Token] = map[int]bool{}
		}
		writers[op.Token][op.Lease] = true
	}
	for tok, ls := range writers {
		if len(ls) > 1 {
			r.SharedTokens++
			r.example("shared-token", "token %d: writes of %d different leases were accepted", tok, len(ls))
		}
	}
}

// checkLost follows the final value's chain of reads back to the first
// write; accepted writes off the chain were lost. It also checks that the
// final read shows the last accepted write and the highest token.
func checkLost(h *History, r *Report) {
	if len(h.Ops) == 0 || h.Ops[len(h.Ops)-1].Kind != Read {
		return
	}
	final := h.Ops[len(h.Ops)-1]
	byID := map[string]Op{}
	var last *Op
	for i, op := range h.Ops {
		if op.Kind != Write || op.Outcome == Stale {
			continue
		}
		byID[ValueID(op.Value)] = op
		if op.Outcome == Accepted && (last == nil || op.Token > last.Token ||
			(op.Token == last.Token && op.Return > last.Return)) {
			last = &h.Ops[i]
		}
	}
	onChain := map[string]bool{}
	for id := ValueID(final.Value); id != "" && !onChain[id]; {
		onChain[id] = true
		op, ok := byID[id]
		if !ok {
			break
		}
		id = valuePrev(op.Value)
	}
	for _, op := range h.Ops {
		if op.Kind != Write || op.Outcome != Accepted || onChain[ValueID(op.Value)] {
			continue
		}
		if inWindow(h, op) {
			r.LostInWindow++
			r.example("lost-in-window", "write %q (token %d, client %d) was accepted inside its lease and then lost", op.Value, op.Token, op.Client)
		} else {
			r.LostLate++
		}
	}

	switch {
	case last == nil:
		r.FinalMismatch = final.Found && byID[ValueID(final.Value)].Outcome != Unknown
	case final.Value == last.Value && final.Highest == last.Token:
	default:
		// An unknown write with a token not below the last accepted one may
		// have landed last.
		op, ok := byID[ValueID(final.Value)]
		if !ok || op.Outcome != Unknown || op.Token < last.Token || final.Highest != op.Token {
			r.FinalMismatch = true
			r.example("final-mismatch", "final register %q fence %d, but the last accepted write is %q token %d",
				final.Value, final.Highest, last.Value, last.Token)
		}
	}
}

// checkMajority: no Acquire that began after a majority of nodes went down
// may have returned a lease before they came back. A fault that concerns
// some clients only (a partition) applies to their leases only.
func checkMajority(h *History, r *Report) {
	for _, f := range h.Faults {
		if !f.MajorityDown {
			continue
		}
		for _, l := range h.Leases {
			if len(f.Clients) > 0 && !slices.Contains(f.Clients, l.Client) {
				continue
			}
			if l.CalledAt > f.Start && l.AcquiredAt < f.End {
				r.MajorityGrants++
				r.example("majority-grant", "lease %d granted at %v while nodes %v were down (%v to %v)", l.Fence, l.AcquiredAt, f.Nodes, f.Start, f.End)
			}
		}
	}
}

// CheckSemaphores checks the semaphore leases (Check runs it): per
// semaphore, it sweeps their valid windows [AcquiredAt, Until) in time
// order and records the most that were valid at once (SemMax); a grant
// that makes more valid at once than the semaphore's limit is a violation
// (SemOverLimit), and so is a lease whose window overlaps that of an earlier
// lease of the same slot (SemSlotOverlaps), even below the limit: each slot
// is a lock. Windows that touch do not overlap, and empty windows count as
// acquisitions only. A semaphore's limit is the smallest Limit among its
// leases.
func CheckSemaphores(leases []SemLease, r *Report) {
	r.SemAcquired += len(leases)
	if r.SemMax == nil {
		r.SemMax, r.SemLimit = map[string]int{}, map[string]int{}
	}
	names, bySem := groupBy(leases, func(l SemLease) string { return l.Semaphore })
	for _, name := range names {
		var valid []SemLease
		limit := math.MaxInt
		for _, l := range bySem[name] {
			limit = min(limit, l.Limit)
			if l.Until > l.AcquiredAt {
				valid = append(valid, l)
			}
		}
		r.SemLimit[name] = limit
		r.SemMax[name] = max(r.SemMax[name], semPeak(name, limit, valid, r))
		semSlots(name, valid, r)
	}
}

// semPeak sweeps the windows of one semaphore's leases (all non-empty) and
// returns the most valid at once, counting the grants that exceed limit.
func semPeak(name string, limit int, leases []SemLease, r *Report) int {
	type event struct {
		at    time.Duration
		delta int // +1 a grant, -1 the end of a window
		lease int
	}
	events := make([]event, 0, 2*len(leases))
	for i, l := range leases {
		events = append(events, event{l.AcquiredAt, 1, i}, event{l.Until, -1, i})
	}
	// Ends before grants at the same instant: touching windows do not
	// overlap.
	slices.SortFunc(events, func(a, b event) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta))
	})
	valid, peak := 0, 0
	for _, ev := range events {
		valid += ev.delta
		peak = max(peak, valid)
		if ev.delta > 0 && valid > limit {
			r.SemOverLimit++
			if r.examples["sem-over-limit"] < 2 {
				l := leases[ev.lease]
				var held []string
				for _, o := range leases {
					if o.AcquiredAt <= ev.at && ev.at < o.Until {
						held = append(held, fmt.Sprintf("%s token %d (client %d, %v to %v)", o.Slot, o.Fence, o.Client, o.AcquiredAt, o.Until))
					}
				}
				r.example("sem-over-limit", "semaphore %q (limit %d): %d leases valid at %v, when client %d was granted %s: %s",
					name, limit, valid, ev.at, l.Client, l.Slot, strings.Join(held, ", "))
			}
		}
	}
	return peak
}

// semSlots counts the leases of one semaphore (all with non-empty windows)
// whose window overlaps that of an earlier lease of the same slot.
func semSlots(name string, leases []SemLease, r *Report) {
	slots, bySlot := groupBy(leases, func(l SemLease) string { return l.Slot })
	for _, slot := range slots {
		ls := bySlot[slot]
		slices.SortFunc(ls, func(a, b SemLease) int { return cmp.Compare(a.AcquiredAt, b.AcquiredAt) })
		var until time.Duration = math.MinInt64
		var prev SemLease
		for _, l := range ls {
			if l.AcquiredAt < until {
				r.SemSlotOverlaps++
				r.example("sem-slot-overlap", "semaphore %q slot %s: token %d (client %d, granted %v) overlaps token %d (client %d, valid until %v)",
					name, slot, l.Fence, l.Client, l.AcquiredAt, prev.Fence, prev.Client, until)
			}
			if l.Until > until {
				until, prev = l.Until, l
			}
		}
	}
}

// groupBy groups leases by key, keeping their order within each group, and
// returns the keys sorted.
func groupBy(leases []SemLease, key func(SemLease) string) ([]string, map[string][]SemLease) {
	groups := map[string][]SemLease{}
	for _, l := range leases {
		k := key(l)
		groups[k] = append(groups[k], l)
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, groups
}
