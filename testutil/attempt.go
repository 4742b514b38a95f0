package testutil

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/e6344662/go-redlock/redlock"
)

// SlowAttempt reports whether err is a failed attempt whose outcome was
// decided by time rather than by the nodes: some node did not answer within
// NodeCallTimeout or its call timed out. On a busy machine that happens to
// any attempt; tests that assert the nodes' verdict try again.
func SlowAttempt(err error) bool {
	var ae *redlock.AcquireError
	if !errors.As(err, &ae) {
		return false
	}
	for _, ne := range ae.NodeErrors {
		var terr interface{ Timeout() bool }
		if errors.Is(ne, context.DeadlineExceeded) || (errors.As(ne, &terr) && terr.Timeout()) ||
			strings.Contains(ne.Error(), "did not answer within") {
			return true
		}
	}
	return false
}

// TryAcquire is l.TryAcquire, repeated while the attempt's outcome was
// decided by a timeout (SlowAttempt), up to ten times.
func TryAcquire(t testing.TB, l *redlock.Locker, resource string) (*redlock.Lease, error) {
	t.Helper()
	return Retried(t, func(ctx context.Context) (*redlock.Lease, error) { return l.TryAcquire(ctx, resource) })
}

// Retried runs try, repeated while its attempt's outcome was decided by a
// timeout (SlowAttempt), up to ten times.
func Retried(t testing.TB, try func(context.Context) (*redlock.Lease, error)) (*redlock.Lease, error) {
	t.Helper()
	for n := 1; ; n++ {
		lease, err := try(Context(t))
		if err == nil || n == 10 || !SlowAttempt(err) {
			return lease, err
		}
		t.Logf("attempt %d timed out, trying again: %v", n, err)
	}
}
