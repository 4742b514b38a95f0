package redlock

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

var (
	// ErrNotAcquired means the lock is held by someone else: not enough nodes
	// granted it in one attempt. The error that wraps it is an *AcquireError.
	ErrNotAcquired = errors.New("redlock: lock not acquired")
	// ErrNoQuorum means no majority of nodes answered; the per-node errors
	// are joined into the error that wraps it.
	ErrNoQuorum = errors.New("redlock: no majority of nodes reachable")
	// ErrLeaseLost is the cause of a lease's Context when automatic renewal
	// could not keep the lease, and is wrapped by operations on a lost lease.
	ErrLeaseLost = errors.New("redlock: lease lost")
	// ErrLeaseReleased is the cause of a lease's Context after Release.
	ErrLeaseReleased = errors.New("redlock: lease released")
	// ErrInvalidConfig wraps every rejected Config value, node list or URL.
	ErrInvalidConfig = errors.New("redlock: invalid configuration")
	// ErrInvalidResource wraps every rejected resource name or token.
	ErrInvalidResource = errors.New("redlock: invalid resource")
	// ErrNotHeld means a renew or release by token found the token holding
	// the lock on fewer than a majority of nodes.
	ErrNotHeld = errors.New("redlock: lock not held by this token")
	// ErrWrongType means a lock or fence key holds data that is not
	// redlock's (someone else's key under the prefix). The data is left as is.
	ErrWrongType = errors.New("redlock: key holds a value of the wrong type")
	// ErrClosed is returned by a Locker after Close.
	ErrClosed = errors.New("redlock: locker closed")
	// ErrLeaseOrphaned is the cause of a lease's Context after Orphan, and
	// is wrapped by Release on an orphaned lease.
	ErrLeaseOrphaned = errors.New("redlock: lease orphaned")
	// ErrNodeFull means a node cannot take a lock because it is out of
	// memory: its used memory is above maxmemory, and it evicts nothing
	// (maxmemory-policy noeviction, as Redlock requires), so it refuses
	// every write that needs memory (Redis's OOM error). Locks it already
	// holds can still be renewed and released. Free memory on the node or
	// raise its maxmemory. An *AcquireError wraps it when full nodes alone
	// rule out a majority, and Acquire then returns at once rather than
	// retry what waiting does not fix; the *NodeError of each full node
	// wraps it too.
	ErrNodeFull = errors.New("redlock: node out of memory")
	// ErrReadOnly means a node is a replica, which can never take a lock
	// or count as a vote (its scripts read INFO replication and refuse
	// with an error starting "REPLICA", writable or not): every node must
	// be an independent primary. Check the node URLs (a replica's address,
	// or a primary demoted by a failover).
	// An *AcquireError wraps it when replicas alone rule out a majority,
	// and Acquire then returns at once; the *NodeError of each replica
	// wraps it too.
	ErrReadOnly = errors.New("redlock: node is a read-only replica")
	// ErrFenceExhausted means a node's fence counter for the resource is at
	// 9223372036854775807, the largest integer Redis holds, so no greater
	// fencing token can be issued. The node refuses the lock before writing
	// anything rather than issue a token twice. It does not pass with time:
	// lock the resource under a new name. An *AcquireError wraps it when
	// such nodes alone rule out a majority, and Acquire then returns at once;
	// the *NodeError of each such node wraps it too.
	ErrFenceExhausted = errors.New("redlock: fence counter exhausted")

	// ErrRejoining marks an attempt refused by nodes that sit out their
	// rejoin delay (Config.RejoinDelay) because they may have lost locks
	// they granted (docs/design.md §6.2): a node whose marker key is
	// missing (first use, FLUSHALL or FLUSHDB, SWAPDB, a restart without
	// data), whose data's identity changed (any restart, a failover or a
	// failback), or whose clock stepped back; and a node that finds a lock
	// key missing while its fence counter records a live lease (evicted or
	// deleted), until that lease's end. The refusal's reason names which.
	// It passes with time; an *AcquireError wraps it, beside
	// ErrNotAcquired, when such nodes refused.
	ErrRejoining = errors.New("redlock: nodes rejoining after a restart or a loss of data")

	// ErrEvictsLocks means a node's server may evict keys without a TTL:
	// maxmemory is set with a maxmemory-policy allkeys-*, under which no
	// key of ours is safe from eviction (docs/design.md §6.2). The Locker
	// reads the policy (CONFIG GET) when it first uses the node, after a
	// new connection and every few seconds, and such a node grants nothing
	// until the policy is noeviction or volatile-*. An *AcquireError wraps
	// it when such nodes alone rule out a majority, and Acquire then
	// returns at once; the *NodeError of each such node wraps it too.
	ErrEvictsLocks = errors.New("redlock: node may evict lock keys (maxmemory-policy allkeys-*)")

	errBadReply = errors.New("redlock: unexpected script reply")
)

// NodeError is the failure of one call to one node. Addr never holds a
// password.
type NodeError struct {
	Addr string
	Err  error
}

func (e *NodeError) Error() string { return "node " + e.Addr + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *NodeError) Unwrap() error { return e.Err }

// AcquireError describes a failed acquisition attempt. It wraps one
// sentinel: ErrNotAcquired (the lock is busy, or the attempt ran out of
// validity); ErrNodeFull, ErrReadOnly, ErrFenceExhausted or ErrEvictsLocks (nodes failing
// for that reason alone rule out a majority: waiting will not help); or
// ErrNoQuorum (no majority answered, or one refused our credentials). It
// also wraps the per-node errors, so errors.Is finds the sentinel of a
// single node's error as well.
type AcquireError struct {
	// Resource is the resource that was asked for.
	Resource string
	// Granted, Needed and Total count the nodes that granted the lock, the
	// quorum, and all nodes.
	Granted, Needed, Total int
	// Refused lists the nodes that refused the lock: held by another token,
	// or unable to grant it for a reason the Node gave (in parentheses).
	Refused []string
	// HolderTTL is the longest remaining TTL of the current holder among the
	// refusing nodes; zero when unknown.
	HolderTTL time.Duration
	// Reason says why, in words, when it was not only a count of grants.
	Reason string
	// NodeErrors holds one *NodeError per node that failed.
	NodeErrors []error

	kind      error
	permanent bool // failures that waiting will not change rule out a majority (lasting)
	rejoining int  // refusals of nodes within their rejoin delay
}

// lasting looks through the node errors of an attempt that node failures
// decided for failures that waiting will not change: credentials the node
// refuses, full nodes, read-only replicas, and fence counters at their
// maximum. When those of one kind alone rule out a majority, the attempt
// takes that kind's sentinel (credentials keep ErrNoQuorum, with a
// reason); when several kinds together do, it keeps ErrNoQuorum with a
// reason. Either way it is permanent: Acquire returns it at once.
func (e *AcquireError) lasting() {
	spare := e.Total - e.Needed // nodes a majority can do without
	var denied, full, readOnly, exhausted, disabled, evicts int
	for _, err := range e.NodeErrors {
		switch {
		case isAuthError(err):
			denied++
		case isScriptsDisabled(err):
			disabled++
		case errors.Is(err, ErrNodeFull):
			full++
		case errors.Is(err, ErrReadOnly):
			readOnly++
		case errors.Is(err, ErrFenceExhausted):
			exhausted++
		case errors.Is(err, ErrEvictsLocks):
			evicts++
		}
	}
	switch {
	case denied > spare:
		e.Reason = "access denied by a majority of nodes: check the user, password and ACL"
	case full > spare:
		e.kind = ErrNodeFull
		e.Reason = "out of memory on a majority of nodes: free memory or raise maxmemory"
	case readOnly > spare:
		e.kind = ErrReadOnly
		e.Reason = "a majority of nodes are read-only replicas: every node must be a primary"
	case exhausted > spare:
		e.kind = ErrFenceExhausted
		e.Reason = "the fence counter is at its maximum on a majority of nodes: use a new resource name"
	case evicts > spare:
		e.kind = ErrEvictsLocks
		e.Reason = "a majority of nodes may evict keys without a TTL (maxmemory-policy allkeys-*): set noeviction or a volatile-* policy"
	case disabled > spare:
		e.Reason = "EVAL or EVALSHA is renamed or disabled on a majority of nodes: the lock scripts cannot run there"
	case denied+full+readOnly+exhausted+disabled+evicts > spare:
		e.Reason = fmt.Sprintf("nodes that cannot grant rule out a majority: %d access denied, %d out of memory, %d read-only, %d with the fence counter at its maximum, %d without EVAL/EVALSHA, %d evicting any key",
			denied, full, readOnly, exhausted, disabled, evicts)
	default:
		return
	}
	e.permanent = true
}

func (e *AcquireError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %q: granted by %d of %d nodes, %d needed", e.kind, e.Resource, e.Granted, e.Total, e.Needed)
	if e.Reason != "" {
		b.WriteString(" (" + e.Reason + ")")
	}
	if len(e.Refused) > 0 {
		fmt.Fprintf(&b, "; refused by %s", strings.Join(e.Refused, ", "))
		if e.HolderTTL > 0 {
			fmt.Fprintf(&b, " for %s more", e.HolderTTL.Round(time.Millisecond))
		} else if e.HolderTTL < 0 {
			b.WriteString(" with no expiry")
		}
	}
	b.WriteString(nodeErrors(e.NodeErrors).Error())
	return b.String()
}

// Unwrap returns the sentinel and the node errors, for errors.Is and
// errors.As.
func (e *AcquireError) Unwrap() []error {
	errs := append([]error{e.kind}, e.NodeErrors...)
	if e.rejoining > 0 {
		errs = append(errs, ErrRejoining)
	}
	return errs
}

// nodeErrors formats per-node errors on one line, each after "; ", and
// unwraps to them for errors.Is and errors.As. Empty, it formats as "".
type nodeErrors []error

func (es nodeErrors) Error() string {
	var b strings.Builder
	for _, err := range es {
		b.WriteString("; " + err.Error())
	}
	return b.String()
}

// Unwrap returns the node errors.
func (es nodeErrors) Unwrap() []error { return es }
