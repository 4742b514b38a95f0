// Package chaos is redlock's fault-injection suite: many clients lock one
// resource on five real redis-server processes and do fenced
// read-modify-writes of a register on a sixth, while a nemesis kills,
// restarts, pauses and flushes the lock nodes, cuts clients from some of
// them (network namespaces), slows and breaks their connections (a proxy),
// makes their clocks jump or run fast (libfaketime), and some clients stall
// past their leases. Every operation is recorded with the monotonic clock
// of the one process the clients share, and checkers read the history
// afterwards:
//
//   - the register's history is linearizable as a fenced register
//     (github.com/anishathalye/porcupine, with the model in this package);
//   - accepted writes carry non-decreasing tokens, and no write was accepted
//     after a higher token had been accepted;
//   - no two leases' held windows overlap, and tokens strictly increase
//     from one holder to the next;
//   - no accepted write is lost, and the final register is the last
//     accepted write;
//   - no lease was granted while a majority of the nodes was down (or, in a
//     partition, cut from the client that got it);
//   - no more leases of a semaphore than its limit are valid at once, and
//     no two leases of one of its slots are.
//
// The suite itself lives in this package's tests (go test ./chaos/); see
// RELIABILITY.md at the root of the repository for the scenarios, what they
// found and how to replay one. The history types and the checkers are
// exported so that they can be tested on histories made by hand.
package chaos

import (
	"sync"
	"time"

	"github.com/e6344662/go-redlock/fencing"
)

// OpKind says whether an Op read or wrote the register.
type OpKind int

const (
	// Read is a redisfence.Store Read of the register.
	Read OpKind = iota + 1
	// Write is a redisfence.Store Write of the register.
	Write
)

// Outcome is the result of a write.
type Outcome int

const (
	// Accepted means the resource stored the value.
	Accepted Outcome = iota + 1
	// Stale means the resource refused the token as lower than one it had
	// accepted (a *fencing.StaleError); Highest says which.
	Stale
	// Unknown means the write failed in a way that leaves its effect unknown
	// (a timeout, a broken connection).
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case Accepted:
		return "accepted"
	case Stale:
		return "stale"
	case Unknown:
		return "unknown"
	}
	return "invalid"
}

// Op is one operation on the register. Call and Return are offsets from the
// start of the history on the monotonic clock.
type Op struct {
	Client int
	// Lease is the index in History.Leases of the lease the client held (or
	// believed it held) for this operation, or -1 (the final read).
	Lease        int
	Kind         OpKind
	Call, Return time.Duration

	// Value is the value written (Write) or read (Read; "" when not found).
	Value string
	// Token is the fencing token the write carried.
	Token fencing.Token
	// Outcome is the write's result.
	Outcome Outcome
	// Highest is the highest token the resource reported: the fence read
	// (Read) or the higher token that made a write stale (Stale).
	Highest fencing.Token
	// Found reports whether a read found a value.
	Found bool
}

// Lease is one lease a client was granted.
type Lease struct {
	Client int
	Fence  fencing.Token
	// CalledAt is when the client called Acquire, AcquiredAt when Acquire
	// returned the lease.
	CalledAt, AcquiredAt time.Duration
	// HeldUntil is the last instant at which the client verified that it
	// still held the lease: Context not done and ValidUntil in the future.
	// [AcquiredAt, HeldUntil] is a window in which the lease was certainly
	// held, so two such windows must never overlap.
	HeldUntil time.Duration
	// Stalled reports whether the client stalled past its lease during this
	// lease (it then wrote without checking).
	Stalled bool
	// Lost reports whether the lease had been lost when it was released.
	Lost bool
}

// SemLease is one lease of a semaphore (redlock.Semaphore) that a client
// was granted. Its valid window is [AcquiredAt, Until): from when Acquire
// returned it to the earlier of when the client called Release and the
// lease's ValidUntil (read once Release has returned, so that it includes
// every renewal). Touching windows do not overlap: a holder that releases
// at t and a holder granted at t are not valid at once.
type SemLease struct {
	// Semaphore names the semaphore, Limit is the limit K it must respect
	// (the one the suite meant, whatever the holder's Semaphore said).
	Semaphore string
	Limit     int
	// Slot is the slot's resource ("R#i") the lease locks.
	Slot   string
	Client int
	Fence  fencing.Token
	// AcquiredAt is when Acquire returned the lease, Until the end of its
	// valid window; an Until not after AcquiredAt means that the lease was
	// no longer valid when Acquire returned it (an empty window).
	AcquiredAt, Until time.Duration
}

// Fault is one fault the nemesis injected.
type Fault struct {
	Kind  string
	Nodes []int
	// Start is when the fault was in place (every node down, paused or
	// flushed), End when healing began.
	Start, End time.Duration
	// MajorityDown reports that a majority of the lock nodes could not
	// answer between Start and End (only to Clients, when it is set).
	MajorityDown bool
	// Clients, when not empty, are the only clients the fault concerns: a
	// network partition cuts some clients from some nodes, and the others
	// still reach every node.
	Clients []int
}

// History is what a run recorded. Its methods are safe for concurrent use;
// read the fields only once recording has finished.
type History struct {
	mu    sync.Mutex
	start time.Time

	Ops    []Op
	Leases []Lease
	Faults []Fault
	// SemLeases are the semaphore leases, in the order they were released.
	SemLeases []SemLease
	// AcquireErrors counts Acquire calls that failed, by a short reason.
	AcquireErrors map[string]int
	// SemAcquireErrors counts semaphore Acquire calls that failed.
	SemAcquireErrors int
	// ReadErrors counts reads of the register that failed.
	ReadErrors int
	// Stalls counts client stalls past a lease.
	Stalls int
	// LostLeases counts leases that were lost (Release reported
	// ErrLeaseLost) rather than released.
	LostLeases int
}

// NewHistory starts a history now.
func NewHistory() *History {
	return &History{start: time.Now(), AcquireErrors: map[string]int{}}
}

// Now returns the time since the history started, on the monotonic clock.
func (h *History) Now() time.Duration { return time.Since(h.start) }

// Since converts an instant to an offset from the history's start.
func (h *History) Since(t time.Time) time.Duration { return t.Sub(h.start) }

// AddOp records op and returns its index.
func (h *History) AddOp(op Op) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Ops = append(h.Ops, op)
	return len(h.Ops) - 1
}

// AddLease records a lease and returns its index.
func (h *History) AddLease(l Lease) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Leases = append(h.Leases, l)
	return len(h.Leases) - 1
}

// UpdateLease applies fn to lease i.
func (h *History) UpdateLease(i int, fn func(*Lease)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fn(&h.Leases[i])
}

// AddSemLease records a semaphore lease.
func (h *History) AddSemLease(l SemLease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.SemLeases = append(h.SemLeases, l)
}

// AddFault records a fault.
func (h *History) AddFault(f Fault) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Faults = append(h.Faults, f)
}

// Count adds one to a counter kept under the history's lock.
func (h *History) Count(fn func(h *History)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fn(h)
}
