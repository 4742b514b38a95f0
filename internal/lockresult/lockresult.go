// Package lockresult names a Locker's results for metrics and traces: the
// typed reason of an error, how a lease ended, and the result of an
// attempt or a release. The CLI's metrics and traces and the redlockotel
// module use the same names through it (docs/observability.md).
package lockresult

import (
	"context"
	"errors"
	"net"

	"github.com/e6344662/go-redlock/redlock"
)

// Results of an acquisition attempt.
const (
	AttemptAcquired = "acquired"
	AttemptBusy     = "busy"
	AttemptNoQuorum = "no_quorum"
	AttemptError    = "error"
)

// Results of a release.
const (
	ReleaseOK       = "released"
	ReleaseNoQuorum = "no_quorum"
	ReleaseError    = "error"
)

// Other is the name of a result no other name fits.
const Other = "_OTHER"

// errorTypes maps each sentinel to its name, most specific first.
var errorTypes = []struct {
	err  error
	name string
}{
	{context.DeadlineExceeded, "deadline_exceeded"},
	{context.Canceled, "canceled"},
	{redlock.ErrRejoining, "rejoining"},
	{redlock.ErrNotAcquired, "not_acquired"},
	{redlock.ErrNoQuorum, "no_quorum"},
	{redlock.ErrLeaseLost, "lease_lost"},
	{redlock.ErrLeaseReleased, "lease_released"},
	{redlock.ErrLeaseOrphaned, "lease_orphaned"},
	{redlock.ErrNotHeld, "not_held"},
	{redlock.ErrClosed, "closed"},
	{redlock.ErrInvalidResource, "invalid_resource"},
	{redlock.ErrReadOnly, "read_only"},
	{redlock.ErrNodeFull, "node_full"},
	{redlock.ErrFenceExhausted, "fence_exhausted"},
	{redlock.ErrWrongType, "wrong_type"},
}

// ErrorType is the error.type of a Locker's error: the snake_case name of
// its sentinel (rejoining, not_acquired, no_quorum, lease_lost, ...),
// "canceled" or "deadline_exceeded" for a context that ended, "timeout"
// for a network timeout, Other otherwise.
func ErrorType(err error) string {
	for _, c := range errorTypes {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return Other
}

// LeaseEnd names how a lease ended, from its Context's cause: released,
// lost, orphaned, or Other.
func LeaseEnd(cause error) string {
	switch {
	case errors.Is(cause, redlock.ErrLeaseReleased):
		return "released"
	case errors.Is(cause, redlock.ErrLeaseLost):
		return "lost"
	case errors.Is(cause, redlock.ErrLeaseOrphaned):
		return "orphaned"
	}
	return Other
}

// Attempt classifies an acquisition attempt's error.
func Attempt(err error) string {
	switch {
	case err == nil:
		return AttemptAcquired
	case errors.Is(err, redlock.ErrNotAcquired):
		return AttemptBusy
	case errors.Is(err, redlock.ErrNoQuorum):
		return AttemptNoQuorum
	}
	return AttemptError
}

// Release classifies a release's error.
func Release(err error) string {
	switch {
	case err == nil:
		return ReleaseOK
	case errors.Is(err, redlock.ErrNoQuorum):
		return ReleaseNoQuorum
	}
	return ReleaseError
}
