package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/e6344662/go-redlock/fencing"
)

// RWLease is one lease of a read-write lock (redlock.RWLock) that a client
// was granted: a reader's (Shared) or the writer's. Its valid window is
// [AcquiredAt, Until), as for SemLease; CalledAt is when the client called
// Acquire or AcquireShared.
type RWLease struct {
	Lock   string
	Shared bool
	Client int
	Fence  fencing.Token
	// CalledAt, AcquiredAt and Until are as SemLease's, with CalledAt when
	// the acquisition began.
	CalledAt, AcquiredAt, Until time.Duration
}

// RWReport is what CheckRW found.
type RWReport struct {
	// Readers and Writers count the leases checked.
	Readers, Writers int
	// WriterOverlaps counts writers' windows that overlap another lease's
	// window (a reader's or a writer's) on the same lock.
	WriterOverlaps int
	// TokenOrder counts leases whose token is not above that of a lease it
	// must exceed: a writer's every lease acquired before its call began,
	// a reader's every such writer's.
	TokenOrder int
	// Examples holds a few violations, described.
	Examples []string
}

// Violations is the number of violations found.
func (r *RWReport) Violations() int { return r.WriterOverlaps + r.TokenOrder }

func (r *RWReport) example(format string, args ...any) {
	if len(r.Examples) < 5 {
		r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
	}
}

// String summarizes the report.
func (r *RWReport) String() string {
	return fmt.Sprintf("rw: %d readers, %d writers; %d writer overlaps, %d token order violations %v",
		r.Readers, r.Writers, r.WriterOverlaps, r.TokenOrder, r.Examples)
}

// CheckRW checks the leases of read-write locks: no writer's window
// overlaps another lease's window on the same lock (touching windows do
// not overlap, empty windows overlap nothing), and tokens are ordered
// (docs/design.md §14): a writer's exceeds the token of every lease on the
// lock acquired before the writer's call began, and a reader's that of
// every such writer.
func CheckRW(leases []RWLease) *RWReport {
	r := &RWReport{}
	byLock := map[string][]RWLease{}
	for _, l := range leases {
		byLock[l.Lock] = append(byLock[l.Lock], l)
		if l.Shared {
			r.Readers++
		} else {
			r.Writers++
		}
	}
	for name, ls := range byLock {
		slices.SortFunc(ls, func(a, b RWLease) int { return cmp.Compare(a.AcquiredAt, b.AcquiredAt) })
		for i, w := range ls {
			if w.Shared || w.Until <= w.AcquiredAt {
				continue
			}
			for j, o := range ls {
				if i == j || (!o.Shared && j < i) {
					continue // a pair of writers is counted once
				}
				if o.Until > o.AcquiredAt && o.AcquiredAt < w.Until && w.AcquiredAt < o.Until {
					r.WriterOverlaps++
					r.example("lock %q: writer token %d (client %d, %v to %v) overlaps %s token %d (client %d, %v to %v)",
						name, w.Fence, w.Client, w.AcquiredAt, w.Until, kind(o.Shared), o.Fence, o.Client, o.AcquiredAt, o.Until)
				}
			}
		}
		for _, b := range ls {
			for _, a := range ls {
				if a.AcquiredAt >= b.CalledAt || (b.Shared && a.Shared) {
					continue
				}
				if b.Fence <= a.Fence {
					r.TokenOrder++
					r.example("lock %q: %s token %d (client %d, called %v) is not above %s token %d (client %d, acquired %v)",
						name, kind(b.Shared), b.Fence, b.Client, b.CalledAt, kind(a.Shared), a.Fence, a.Client, a.AcquiredAt)
				}
			}
		}
	}
	return r
}

func kind(shared bool) string {
	if shared {
		return "reader"
	}
	return "writer"
}

// MultiLease is one set of leases a client was granted at once
// (redlock.Locker.AcquireAll), or a single mutex lease (a set of one).
// Every lease of the set shares the window [AcquiredAt, Until); CalledAt
// is when the acquisition began.
type MultiLease struct {
	Client    int
	Resources []string
	// Fences holds each resource's fencing token, in Resources' order.
	Fences                      []fencing.Token
	CalledAt, AcquiredAt, Until time.Duration
}

// MultiReport is what CheckMulti found.
type MultiReport struct {
	// Sets counts the sets checked, Leases their leases.
	Sets, Leases int
	// Partial counts sets granted with a lease missing (all or none).
	Partial int
	// Overlaps counts pairs of windows holding one resource at once.
	Overlaps int
	// TokenOrder counts leases whose token is not above that of a lease on
	// the same resource acquired before their call began.
	TokenOrder int
	// Examples holds a few violations, described.
	Examples []string
}

// Violations is the number of violations found.
func (r *MultiReport) Violations() int { return r.Partial + r.Overlaps + r.TokenOrder }

func (r *MultiReport) example(format string, args ...any) {
	if len(r.Examples) < 5 {
		r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
	}
}

// String summarizes the report.
func (r *MultiReport) String() string {
	return fmt.Sprintf("multi: %d sets, %d leases; %d partial, %d overlaps, %d token order violations %v",
		r.Sets, r.Leases, r.Partial, r.Overlaps, r.TokenOrder, r.Examples)
}

// CheckMulti checks sets of leases taken at once: each set holds every
// resource it named (a token for each), no resource is held by two
// windows at once (touching windows do not overlap, empty windows overlap
// nothing), and on each resource a lease's token exceeds that of every
// lease acquired before its call began.
func CheckMulti(sets []MultiLease) *MultiReport {
	r := &MultiReport{Sets: len(sets)}
	type one struct {
		set   int
		fence fencing.Token
	}
	byRes := map[string][]one{}
	for i, s := range sets {
		r.Leases += len(s.Fences)
		if len(s.Fences) != len(s.Resources) || slices.Contains(s.Fences, 0) {
			r.Partial++
			r.example("client %d: set %v granted with tokens %v", s.Client, s.Resources, s.Fences)
			continue
		}
		for k, res := range s.Resources {
			byRes[res] = append(byRes[res], one{i, s.Fences[k]})
		}
	}
	for res, ls := range byRes {
		for x, a := range ls {
			sa := sets[a.set]
			for y, b := range ls {
				sb := sets[b.set]
				if x < y && sa.Until > sa.AcquiredAt && sb.Until > sb.AcquiredAt && sa.AcquiredAt < sb.Until && sb.AcquiredAt < sa.Until {
					r.Overlaps++
					r.example("%q held by client %d (%v to %v) and client %d (%v to %v)", res, sa.Client, sa.AcquiredAt, sa.Until, sb.Client, sb.AcquiredAt, sb.Until)
				}
				if sa.AcquiredAt < sb.CalledAt && b.fence <= a.fence {
					r.TokenOrder++
					r.example("%q: token %d (client %d, called %v) is not above token %d (client %d, acquired %v)", res, b.fence, sb.Client, sb.CalledAt, a.fence, sa.Client, sa.AcquiredAt)
				}
			}
		}
	}
	return r
}
