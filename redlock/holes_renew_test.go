package redlock_test

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// driftOf is the drift a Config with lease ttl and factor f holds back
// (Config.ClockDriftFactor: ceil(ttl*f) + 2ms).
func driftOf(ttl time.Duration, f float64) time.Duration {
	return time.Duration(math.Ceil(float64(ttl)*f)) + 2*time.Millisecond
}

// awaitRenewed waits (up to limit) until lease's ValidUntil moves past
// old, and returns the new one.
func awaitRenewed(t *testing.T, lease *redlock.Lease, old time.Time, limit time.Duration) time.Time {
	t.Helper()
	var vu time.Time
	require.Eventually(t, func() bool {
		vu = lease.ValidUntil()
		return vu.After(old) || lease.Context().Err() != nil
	}, limit, time.Millisecond, "the lease was not renewed within %s", limit)
	require.NoError(t, lease.Context().Err(), "the lease was lost at its first renewal: %v", context.Cause(lease.Context()))
	return vu
}

// TestHoleRenewalValidity pins the renewal's arithmetic (issue 31, holes 1
// and 2): a renewal's new validity is LeaseDuration minus the drift,
// counted from the start of its round (before any renew call reached a
// node), not from the replies, and the drift is held back. Exact bounds:
// the round starts no earlier than the timer set for a third of the
// validity before the old ValidUntil, and no later than the first renew
// call, so
//
//	old - validity/3 + validity <= new <= first call + validity.
//
// The mutants renew-from-reply (counted from the last reply: 150 ms late
// here) and renew-no-drift (LeaseDuration, not the validity: the drift of
// 302 ms too long) each break the upper bound.
func TestHoleRenewalValidity(t *testing.T) {
	t.Parallel() // bound by the wall clock (leases)
	for _, c := range []struct {
		name  string
		slow  time.Duration // every renew call waits this long before it runs
		drift float64
	}{
		{name: "counted from the round's start", slow: 150 * time.Millisecond, drift: 0.01},
		{name: "drift held back", drift: 0.1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			const ttl = 3 * time.Second
			mc := testutil.NewMiniCluster(t, 3)
			var first firstCall
			var nodes []redlock.Node
			for _, n := range mc.Nodes() {
				nodes = append(nodes, hookNode{Node: n, hook: func(ctx context.Context, s *scripts.Script, _ []string, _ []any, _ func() (any, error)) (any, error, bool) {
					if s == scripts.Renew {
						first.mark()
						time.Sleep(c.slow)
					}
					return nil, nil, false
				}})
			}
			cfg := redlock.Config{LeaseDuration: ttl, ClockDriftFactor: c.drift, NodeCallTimeout: time.Second}
			l := newLocker(t, nodes, cfg)
			lease, err := tryAcquire(t, l, "hole-renewal")
			require.NoError(t, err)
			defer lease.Release(context.Background())
			validity := ttl - driftOf(ttl, c.drift)
			old := lease.ValidUntil()
			renewed := awaitRenewed(t, lease, old, 2*ttl)
			at := first.get()
			require.False(t, at.IsZero())
			require.False(t, renewed.After(at.Add(validity)),
				"renewed validity ends %s after the first renew call plus the validity %s: counted from the replies or without the drift", renewed.Sub(at.Add(validity)), validity)
			require.False(t, renewed.Before(old.Add(-validity/3).Add(validity)),
				"renewed validity ends before the renewal's earliest start plus the validity")
		})
	}
}

// TestHoleRenewalOneNotOursIsNotALoss pins the renewal's verdict (issue 31,
// hole 3): of three nodes, one answers "not ours" to every renewal and, in
// the first round, one fails; one round without a majority either way is
// retried, not a loss. The second round has a majority and the lease lives
// on. The mutant renew-lost-on-one-no (the lease lost as soon as any node
// says "not ours") loses it at the first round.
func TestHoleRenewalOneNotOursIsNotALoss(t *testing.T) {
	t.Parallel() // bound by the wall clock (leases)
	mc := testutil.NewMiniCluster(t, 3)
	var failed atomic.Bool
	nodes := mc.Nodes()
	nodes[0] = hookNode{Node: nodes[0], hook: func(_ context.Context, s *scripts.Script, _ []string, _ []any, _ func() (any, error)) (any, error, bool) {
		if s == scripts.Renew {
			return int64(0), nil, true // not ours
		}
		return nil, nil, false
	}}
	nodes[2] = hookNode{Node: nodes[2], hook: func(_ context.Context, s *scripts.Script, _ []string, _ []any, _ func() (any, error)) (any, error, bool) {
		if s == scripts.Renew && failed.CompareAndSwap(false, true) {
			return nil, errors.New("connection reset by peer (injected)"), true
		}
		return nil, nil, false
	}}
	const ttl = 1500 * time.Millisecond
	l := newLocker(t, nodes, fastRetry(redlock.Config{LeaseDuration: ttl, NodeCallTimeout: 500 * time.Millisecond}))
	lease, err := tryAcquire(t, l, "hole-one-no")
	require.NoError(t, err)
	defer lease.Release(context.Background())
	awaitRenewed(t, lease, lease.ValidUntil(), 2*ttl)
	require.True(t, failed.Load(), "the first renewal round did not meet the failing node")
}
