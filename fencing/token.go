// Package fencing is the resource side of redlock: checks that make a holder
// whose lease has silently ended harmless.
//
// Every lease carries a fencing token that grows with every new holder of a
// resource. A resource that remembers the highest token it has accepted and
// refuses anything lower cannot be corrupted by a holder that was paused past
// its lease: by the time it wakes, a newer holder has written with a higher
// token, and the stale write is rejected with ErrStaleToken.
//
// The package offers three such checks:
//
//   - Fence, an in-memory fence for a resource served by one process.
//     Fence.Check gates an operation; Fence.Do also runs the operations of
//     successive holders one at a time, in token order.
//   - Store, a value store on a Redis server whose writes are checked and
//     applied in one Lua script, for a resource shared by many processes.
//   - SetHeader, TokenFromRequest and Middleware, which carry the token in
//     the Fencing-Token HTTP header and enforce it in front of a handler.
//
// Every stale rejection is a *StaleError (possibly wrapped), which matches
// ErrStaleToken under errors.Is and reports the highest token accepted.
//
// Beyond this package: fencing/pgfence (PostgreSQL, over pgx) and
// fencing/etcdfence (etcd) are Go modules of their own, so that a user of
// the lock alone downloads neither client; fencing/fencetest is the
// conformance kit every fence here passes, for checking your own; and
// docs/fencing.md shows how to fence each kind of resource, S3, GCS and
// DynamoDB included.
package fencing

import (
	"errors"
	"strconv"
)

// Token is a fencing token: it strictly increases across successive holders
// of one resource. Zero is never issued by redlock.
type Token uint64

// String formats the token in decimal.
func (t Token) String() string { return strconv.FormatUint(uint64(t), 10) }

// ErrStaleToken is returned (wrapped) when a write carries a token lower than
// one the resource has already accepted.
var ErrStaleToken = errors.New("fencing: stale token")
