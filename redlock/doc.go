// Package redlock provides mutual exclusion over several independent Redis
// servers (the Redlock algorithm), with fencing tokens that strictly
// increase from one holder of a resource to the next.
//
// A Locker holds a fixed set of Nodes. A lease on a resource is granted when
// a majority of the nodes grant it within the lease's validity, so the lock
// survives the loss of any minority of nodes. The lease renews itself in the
// background; if it cannot keep a majority, its Context ends with cause
// ErrLeaseLost before ValidUntil.
//
// # The contract
//
//   - Every process that locks the same resources uses the same node set. A
//     node is an independent server (or Redis Cluster, or Sentinel-managed
//     primary), never a replica of another node.
//   - Persistence is optional. A node that may have lost data (any restart,
//     with or without AOF or RDB; FLUSHALL or FLUSHDB; a failover) sits out
//     Config.RejoinDelay before it grants again, so that every lease it
//     forgot has expired first: RejoinDelay must be at least the longest
//     lease of every Locker on these nodes (New refuses one below its own
//     LeaseDuration; the other Lockers' leases are the deployment's to
//     cover, as no record on a node survives the loss). The price is that
//     a restarted node is one vote short for that long, and a majority
//     restarted at once grants nothing for that long (the Redlock paper's
//     delayed restarts). Keep a lock's evidence from eviction:
//     maxmemory-policy noeviction or a volatile-* policy; a node under an
//     allkeys-* policy is refused.
//   - Node clocks differ from each other by less than RejoinDelay; a node
//     whose clock steps back is noticed while it keeps its data (see
//     docs/design.md, section 6).
//   - Work guarded by a lease stops when Lease.Context is done, and every
//     write to the protected resource carries Lease.Fence, which the resource
//     checks (package fencing). A holder paused past its lease cannot know it
//     has lost the lock; the resource can.
//
// # Fencing tokens
//
// Each node keeps a counter per resource, incremented by every grant. The
// lease's token is the largest counter among the granting nodes, and it is
// handed out only once a majority of the nodes where this lease's lock
// stands hold at least that value. Any later holder's majority overlaps that
// one, and on the shared node its grant came after this lock had gone, so
// its counter, and its token, is larger. When the counters agree (the steady
// state) this takes no extra round trip.
//
// # Waiting
//
// Acquire waits for a busy lock by subscribing to its release channel on the
// nodes (one pub/sub connection per node per Locker), queued in arrival
// order, and retries when a majority of nodes announce the release; the
// backoff of Config.NewBackOff is the fallback for lost announcements and
// for locks that expire instead of being released.
package redlock
