package chaos_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/chaos"
	"github.com/e6344662/go-redlock/fencing"
)

// The checkers must find what they look for: each test below feeds one a
// history made by hand with exactly one kind of violation (or none).

const ms = time.Millisecond

// term builds a lease held by client c with token tok over [from, to] ms,
// asked for 1ms before.
func term(c int, tok fencing.Token, from, to int) chaos.Lease {
	return chaos.Lease{Client: c, Fence: tok, CalledAt: time.Duration(from-1) * ms, AcquiredAt: time.Duration(from) * ms, HeldUntil: time.Duration(to) * ms}
}

func read(c, lease int, from, to int, value string, highest fencing.Token) chaos.Op {
	return chaos.Op{Client: c, Lease: lease, Kind: chaos.Read, Call: time.Duration(from) * ms, Return: time.Duration(to) * ms,
		Value: value, Highest: highest, Found: value != ""}
}

func write(c, lease int, from, to int, value string, tok fencing.Token, out chaos.Outcome, highest fencing.Token) chaos.Op {
	return chaos.Op{Client: c, Lease: lease, Kind: chaos.Write, Call: time.Duration(from) * ms, Return: time.Duration(to) * ms,
		Value: value, Token: tok, Outcome: out, Highest: highest}
}

func final(at int, value string, highest fencing.Token) chaos.Op {
	return read(9, -1, at, at+1, value, highest)
}

// clean is two holders, one after the other, each reading and then
// writing what it computed from its read.
func clean() *chaos.History {
	v1 := chaos.NewValue("c0.1", "")
	v2 := chaos.NewValue("c1.1", v1)
	return &chaos.History{
		Leases: []chaos.Lease{term(0, 1, 0, 10), term(1, 2, 20, 30)},
		Ops: []chaos.Op{
			read(0, 0, 1, 2, "", 0),
			write(0, 0, 3, 4, v1, 1, chaos.Accepted, 0),
			read(1, 1, 21, 22, v1, 1),
			write(1, 1, 23, 24, v2, 2, chaos.Accepted, 0),
			final(40, v2, 2),
		},
	}
}

func linearizable(t *testing.T, h *chaos.History) porcupine.CheckResult {
	t.Helper()
	res, err := chaos.CheckLinearizable(h.Ops, 10*time.Second, "")
	require.NoError(t, err)
	return res
}

func TestCheckCleanHistory(t *testing.T) {
	h := clean()
	r := chaos.Check(h)
	require.Zero(t, r.ResourceViolations(), r.String())
	require.Zero(t, r.LockViolations(), r.String())
	require.Equal(t, 2, r.Terms)
	require.Equal(t, 2, r.Accepted)
	require.Equal(t, porcupine.Ok, linearizable(t, h))
}

func TestCheckFindsStaleWriteAccepted(t *testing.T) {
	h := clean()
	// A stalled first holder writes with token 1 after token 2 was accepted,
	// and the resource (wrongly) takes it.
	late := write(0, 0, 25, 26, chaos.NewValue("c0.2", chaos.NewValue("c0.1", "")), 1, chaos.Accepted, 0)
	h.Ops = append(h.Ops[:4], late, final(40, late.Value, 1))
	r := chaos.Check(h)
	require.Equal(t, 1, r.StaleAccepted, r.String())
	require.Equal(t, 1, r.LateWrites)
	require.Equal(t, porcupine.Illegal, linearizable(t, h))
}

func TestCheckAcceptsRejectedStaleWrite(t *testing.T) {
	h := clean()
	stale := write(0, 0, 25, 26, chaos.NewValue("c0.2", chaos.NewValue("c0.1", "")), 1, chaos.Stale, 2)
	h.Ops = append(h.Ops[:4], stale, h.Ops[4])
	r := chaos.Check(h)
	require.Zero(t, r.ResourceViolations(), r.String())
	require.Zero(t, r.LockViolations(), r.String())
	require.Equal(t, 1, r.Rejected)
	require.Equal(t, porcupine.Ok, linearizable(t, h))

	// A stale refusal that names the wrong highest token is not a fenced
	// register's behaviour.
	h.Ops[4].Highest = 7
	require.Equal(t, porcupine.Illegal, linearizable(t, h))
}

func TestCheckFindsOverlappingLeases(t *testing.T) {
	h := clean()
	h.Leases[1].AcquiredAt = 9 * ms
	h.Leases[1].CalledAt = 8 * ms
	r := chaos.Check(h)
	require.Equal(t, 1, r.Overlaps, r.String())
	require.Equal(t, porcupine.Ok, linearizable(t, h), "the resource itself was fine")
}

func TestCheckFindsTokenRegressions(t *testing.T) {
	h := clean()
	h.Leases[1].Fence = 1 // asked for after token 1 was granted, and got 1 again
	r := chaos.Check(h)
	require.Equal(t, 1, r.TokenRegressions, r.String())
	require.Equal(t, 2, r.DuplicateTokens)

	h = clean()
	h.Ops[3].Token = 1 // both holders' writes carried token 1
	r = chaos.Check(h)
	require.Equal(t, 1, r.SharedTokens, r.String())
}

func TestCheckFindsLostWrites(t *testing.T) {
	// Both holders computed their write from the empty register: the first
	// holder's write, made inside its lease, was lost.
	v1 := chaos.NewValue("c0.1", "")
	v2 := chaos.NewValue("c1.1", "")
	h := &chaos.History{
		Leases: []chaos.Lease{term(0, 1, 0, 10), term(1, 2, 20, 30)},
		Ops: []chaos.Op{
			read(0, 0, 1, 2, "", 0),
			write(0, 0, 3, 4, v1, 1, chaos.Accepted, 0),
			read(1, 1, 0, 2, "", 0), // read before its lease: a broken client
			write(1, 1, 23, 24, v2, 2, chaos.Accepted, 0),
			final(40, v2, 2),
		},
	}
	r := chaos.Check(h)
	require.Equal(t, 1, r.LostInWindow, r.String())
	require.Zero(t, r.LostLate)

	// The same loss of a write made after its writer's lease had ended is
	// fencing's limit (reads are not fenced), not a violation.
	h.Leases[0].HeldUntil = 2 * ms
	r = chaos.Check(h)
	require.Zero(t, r.LostInWindow, r.String())
	require.Equal(t, 1, r.LostLate)
}

func TestCheckFindsFinalMismatch(t *testing.T) {
	h := clean()
	h.Ops[4] = final(40, h.Ops[1].Value, 1) // the last accepted write vanished
	r := chaos.Check(h)
	require.True(t, r.FinalMismatch, r.String())
	require.Equal(t, porcupine.Illegal, linearizable(t, h))
}

func TestCheckUnknownWriteMayLandOrNot(t *testing.T) {
	for _, landed := range []bool{false, true} {
		h := clean()
		v3 := chaos.NewValue("c1.2", h.Ops[3].Value)
		h.Ops = append(h.Ops[:4], write(1, 1, 25, 26, v3, 2, chaos.Unknown, 0), final(40, h.Ops[3].Value, 2))
		if landed {
			h.Ops[5] = final(40, v3, 2)
		}
		r := chaos.Check(h)
		require.Zero(t, r.ResourceViolations(), "landed=%t: %s", landed, r)
		require.Equal(t, porcupine.Ok, linearizable(t, h), "landed=%t", landed)
	}
}

func TestCheckFindsReadOfUnwrittenValue(t *testing.T) {
	h := clean()
	h.Ops[2] = read(1, 1, 21, 22, "never-written", 1)
	require.Equal(t, porcupine.Illegal, linearizable(t, h))
}

func TestCheckFindsGrantDuringMajorityLoss(t *testing.T) {
	h := clean()
	h.Faults = []chaos.Fault{{Kind: "majority-killed", Nodes: []int{0, 1, 2}, Start: 15 * ms, End: 35 * ms, MajorityDown: true}}
	r := chaos.Check(h)
	require.Equal(t, 1, r.MajorityGrants, r.String())
	h.Faults[0].MajorityDown = false
	require.Zero(t, chaos.Check(h).MajorityGrants)
}

func TestCheckFindsGrantToClientCutFromMajority(t *testing.T) {
	h := clean()
	// Client 1 was cut from three nodes while it acquired its lease; client 0
	// was not cut.
	h.Faults = []chaos.Fault{{Kind: "partition", Nodes: []int{0, 1, 2}, Start: 15 * ms, End: 35 * ms, MajorityDown: true, Clients: []int{1}}}
	r := chaos.Check(h)
	require.Equal(t, 1, r.MajorityGrants, r.String())
	h.Faults[0].Clients = []int{0}
	require.Zero(t, chaos.Check(h).MajorityGrants)
}

func TestValueChain(t *testing.T) {
	v := chaos.NewValue("c1.2", chaos.NewValue("c0.1", ""))
	require.Equal(t, "c1.2", chaos.ValueID(v))
	require.Equal(t, "c1.2<-c0.1", v)
	require.Empty(t, chaos.ValueID(""))
}

// slot builds a lease of slot i of semaphore sem (limit k), granted to
// client c at from ms and valid until to ms.
func slot(sem string, k, i, c int, tok fencing.Token, from, to int) chaos.SemLease {
	return chaos.SemLease{Semaphore: sem, Limit: k, Slot: fmt.Sprintf("%s#%d", sem, i), Client: c, Fence: tok,
		AcquiredAt: time.Duration(from) * ms, Until: time.Duration(to) * ms}
}

func checkSem(leases ...chaos.SemLease) *chaos.Report {
	r := &chaos.Report{}
	chaos.CheckSemaphores(leases, r)
	return r
}

func TestCheckSemaphoreWithinLimit(t *testing.T) {
	// Limit 2: two slots, each handed from holder to holder; at most two
	// valid at once.
	r := checkSem(
		slot("s", 2, 0, 0, 1, 0, 10), slot("s", 2, 1, 1, 1, 5, 15),
		slot("s", 2, 0, 2, 2, 12, 20), slot("s", 2, 1, 3, 2, 16, 30),
	)
	require.Zero(t, r.LockViolations(), r.String())
	require.Equal(t, 4, r.SemAcquired)
	require.Equal(t, 2, r.SemMax["s"])
	require.Equal(t, 2, r.SemLimit["s"])
}

func TestCheckFindsSemaphoreOverLimit(t *testing.T) {
	// Three leases of a semaphore of limit 2 valid at once (at 8-10ms), each
	// of its own slot: no slot overlaps, one grant too many.
	leases := []chaos.SemLease{slot("s", 2, 0, 0, 1, 0, 10), slot("s", 2, 1, 1, 1, 5, 15), slot("s", 2, 2, 2, 1, 8, 20)}
	r := checkSem(leases...)
	require.Equal(t, 1, r.SemOverLimit, r.String())
	require.Zero(t, r.SemSlotOverlaps)
	require.Equal(t, 3, r.SemMax["s"])
	require.Equal(t, 1, r.LockViolations())
	require.Len(t, r.Examples, 1)
	require.Contains(t, r.Examples[0], "3 leases valid at 8ms")

	// Check finds it in a history, beside the lock's leases.
	h := clean()
	h.SemLeases = leases
	r = chaos.Check(h)
	require.Equal(t, 1, r.SemOverLimit, r.String())
	require.Equal(t, 1, r.LockViolations())
	require.Contains(t, r.String(), "sem_acquired=3 ")
	require.Contains(t, r.String(), "sem_max_valid=[s=3/2]")

	// The same three windows within a limit of 3 are fine.
	for i := range leases {
		leases[i].Limit = 3
	}
	r = checkSem(leases...)
	require.Zero(t, r.LockViolations(), r.String())
	require.Equal(t, 3, r.SemMax["s"])
}

func TestCheckSemaphoreTouchingWindowsDoNotOverlap(t *testing.T) {
	// Limit 1: each holder's window starts the instant the previous one
	// ends, on the same slot and across slots.
	r := checkSem(
		slot("s", 1, 0, 0, 1, 0, 10), slot("s", 1, 0, 1, 2, 10, 20),
		slot("s", 1, 1, 2, 1, 20, 30), slot("s", 1, 0, 3, 3, 30, 40),
	)
	require.Zero(t, r.LockViolations(), r.String())
	require.Equal(t, 1, r.SemMax["s"])

	// One nanosecond more is an overlap: over the limit, and on slot 0.
	late := slot("s", 1, 0, 1, 2, 10, 20)
	late.AcquiredAt -= time.Nanosecond
	r = checkSem(slot("s", 1, 0, 0, 1, 0, 10), late)
	require.Equal(t, 1, r.SemOverLimit, r.String())
	require.Equal(t, 1, r.SemSlotOverlaps)
	require.Equal(t, 2, r.SemMax["s"])
}

func TestCheckSemaphoreEmptyWindows(t *testing.T) {
	// A lease no longer valid when Acquire returned it (Until at or before
	// AcquiredAt) counts as an acquisition, never as valid.
	r := checkSem(slot("s", 1, 0, 0, 1, 0, 10), slot("s", 1, 0, 1, 2, 5, 5), slot("s", 1, 0, 2, 3, 7, 6))
	require.Zero(t, r.LockViolations(), r.String())
	require.Equal(t, 3, r.SemAcquired)
	require.Equal(t, 1, r.SemMax["s"])
}

func TestCheckSemaphoresSeparately(t *testing.T) {
	// Two semaphores of limit 1, each with one holder at a time: their
	// windows overlap each other, which is no violation. Slots of the same
	// index in two semaphores are different locks.
	r := checkSem(
		slot("a", 1, 0, 0, 1, 0, 10), slot("b", 1, 0, 1, 1, 0, 10),
		slot("a", 1, 0, 2, 2, 10, 20), slot("b", 1, 0, 3, 2, 5, 20),
	)
	require.Equal(t, 1, r.SemOverLimit, r.String()) // b: 5-10ms
	require.Equal(t, 1, r.SemSlotOverlaps)
	require.Equal(t, 1, r.SemMax["a"])
	require.Equal(t, 2, r.SemMax["b"])
	require.Contains(t, r.Examples[0], `semaphore "b"`)

	r = checkSem(slot("a", 1, 0, 0, 1, 0, 10), slot("b", 1, 0, 1, 1, 0, 10))
	require.Zero(t, r.LockViolations(), r.String())
}

func TestCheckFindsSemaphoreSlotOverlap(t *testing.T) {
	// Limit 3, two holders of slot 0 at once: within the limit, but the
	// slot is a lock.
	r := checkSem(slot("s", 3, 0, 0, 1, 0, 10), slot("s", 3, 0, 1, 2, 5, 15), slot("s", 3, 1, 2, 1, 0, 20))
	require.Zero(t, r.SemOverLimit, r.String())
	require.Equal(t, 1, r.SemSlotOverlaps)
	require.Equal(t, 3, r.SemMax["s"])
	require.Contains(t, r.Examples[0], "slot s#0: token 2 (client 1, granted 5ms) overlaps token 1")
}

func TestCheckSemaphoreLimitIsTheSmallest(t *testing.T) {
	// A holder that believed the limit to be 3 does not raise it.
	r := checkSem(slot("s", 2, 0, 0, 1, 0, 10), slot("s", 2, 1, 1, 1, 0, 10), slot("s", 3, 2, 2, 1, 0, 10))
	require.Equal(t, 1, r.SemOverLimit, r.String())
	require.Equal(t, 2, r.SemLimit["s"])
}
