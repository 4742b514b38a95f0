package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// asRetry turns a new grant's reply ("granted") into the reply of a call
// whose token already held the lock (a client-side retry of a call that
// was applied): "retried", the lock having ms left.
func asRetry(ms int64) func(context.Context, *scripts.Script, []string, []any, func() (any, error)) (any, error, bool) {
	return func(_ context.Context, s *scripts.Script, _ []string, _ []any, next func() (any, error)) (any, error, bool) {
		if s != scripts.Acquire {
			return nil, nil, false
		}
		r, err := next()
		if v, ok := r.([]any); ok && err == nil && len(v) == 6 && v[0] == "granted" {
			r = []any{"retried", v[1], ms, v[3], v[4], v[5]}
		}
		return r, err, true
	}
}

// TestHoleRetriedGrantKeepsOnlyWhatTheLockHasLeft pins the retried acquire
// reply (issue 31, hole 4): when every node answers that the attempt's
// token already held the lock with 5 s left, the lease is valid for those
// 5 s minus the drift from the attempt's start, not for the LeaseDuration
// (30 s):
//
//	before + 5s - drift <= ValidUntil <= first acquire call + 5s - drift.
//
// The mutant retry-no-cut (validity not cut to the lock's remaining TTL)
// gives 30 s - drift.
func TestHoleRetriedGrantKeepsOnlyWhatTheLockHasLeft(t *testing.T) {
	mc := testutil.NewMiniCluster(t, 3)
	var first firstCall
	retry := asRetry(5000)
	var nodes []redlock.Node
	for _, n := range mc.Nodes() {
		nodes = append(nodes, hookNode{Node: n, hook: func(ctx context.Context, s *scripts.Script, k []string, a []any, next func() (any, error)) (any, error, bool) {
			if s == scripts.Acquire {
				first.mark()
			}
			return retry(ctx, s, k, a, next)
		}})
	}
	const ttl = 30 * time.Second
	drift := driftOf(ttl, 0.01)
	l := newLocker(t, nodes, redlock.Config{LeaseDuration: ttl, ClockDriftFactor: 0.01})
	before := time.Now()
	lease, err := tryAcquire(t, l, "hole-retry")
	require.NoError(t, err)
	defer lease.Release(context.Background())
	vu := lease.ValidUntil()
	require.False(t, vu.After(first.get().Add(5*time.Second-drift)),
		"validity ends %s after what the lock had left: not cut to the lock's remaining TTL", vu.Sub(first.get().Add(5*time.Second-drift)))
	require.False(t, vu.Before(before.Add(5*time.Second-drift)))
}

// TestHoleValidityElapsedDuringTheAttempt pins the check at the end of an
// attempt (issue 31, hole 5): every node answers that the token already
// held the lock with 1 ms left, less than the drift (32 ms at 3 s), so
// the validity ended before the answers came. The attempt fails with the
// reason "validity elapsed during the attempt", and no lease is made. The
// mutant no-elapsed-check hands out a lease whose validity is over. (The
// lease is 3 s so that the node calls have a second: with 50 ms leases
// they had 16 ms, and a loaded machine failed the attempt by timeouts,
// with no reason: ci18.)
func TestHoleValidityElapsedDuringTheAttempt(t *testing.T) {
	mc := testutil.NewMiniCluster(t, 3)
	var nodes []redlock.Node
	for _, n := range mc.Nodes() {
		nodes = append(nodes, hookNode{Node: n, hook: asRetry(1)})
	}
	l := newLocker(t, nodes, redlock.Config{LeaseDuration: 3 * time.Second, ClockDriftFactor: 0.01})
	lease, err := tryAcquire(t, l, "hole-elapsed")
	if lease != nil {
		ago := time.Since(lease.ValidUntil())
		_ = lease.Release(context.Background())
		t.Fatalf("a lease whose validity had ended was handed out (ValidUntil %s ago)", ago)
	}
	var ae *redlock.AcquireError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "validity elapsed during the attempt", ae.Reason)
}

// TestHoleFenceRefusalIsNoAcknowledgement pins the fence step (issue 31,
// hole 6): the granting nodes' counters disagree (node 0's is ten times
// the others', and its grant always comes first), so the token must be
// confirmed on a majority; nodes 1 and 2 answer the fence call "not held"
// (they lost the lock meanwhile), after node 0 acknowledged. Only
// node 0 acknowledged, so the attempt fails ("confirmed on ... nodes
// only"). The mutant fence-counts-refusals counts those refusals as
// acknowledgements and hands out a lease whose token a majority never
// confirmed.
func TestHoleFenceRefusalIsNoAcknowledgement(t *testing.T) {
	mc := testutil.NewMiniCluster(t, 3)
	var nodes []redlock.Node
	for i, n := range mc.Nodes() {
		nodes = append(nodes, hookNode{Node: n, hook: func(_ context.Context, s *scripts.Script, _ []string, _ []any, next func() (any, error)) (any, error, bool) {
			switch {
			case s == scripts.Acquire && i == 0:
				r, err := next()
				if v, ok := r.([]any); ok && err == nil && len(v) == 6 && v[0] == "granted" {
					if c, ok := v[1].(string); ok {
						v[1] = c + "0" // ten times the others' counter
					}
				}
				return r, err, true
			case s == scripts.Acquire:
				// node 0's grant is always among the first two counted
				time.Sleep(300 * time.Millisecond)
			case s == scripts.Fence && i > 0:
				// node 0's acknowledgement comes first
				time.Sleep(50 * time.Millisecond)
				return int64(0), nil, true // the lock is not ours here any more
			}
			return nil, nil, false
		}})
	}
	l := newLocker(t, nodes, redlock.Config{LeaseDuration: 10 * time.Second})
	lease, err := tryAcquire(t, l, "hole-fence")
	if lease != nil {
		_ = lease.Release(context.Background())
	}
	require.Nil(t, lease, "a lease with fencing token %d, confirmed by one node, was handed out", tokenOf(lease))
	var ae *redlock.AcquireError
	require.ErrorAs(t, err, &ae)
	require.True(t, strings.HasPrefix(ae.Reason, "fencing token ") && strings.HasSuffix(ae.Reason, " nodes only"), "reason %q", ae.Reason)
	require.NotContains(t, ae.Reason, "confirmed on 2", "reason %q", ae.Reason)
	require.NotContains(t, ae.Reason, "confirmed on 3", "reason %q", ae.Reason)
}

func tokenOf(lease *redlock.Lease) any {
	if lease == nil {
		return nil
	}
	return lease.Fence()
}

// TestHoleCleanUpCoversErroredCalls pins a failed attempt's clean-up
// (issue 31, hole 7): on nodes 0 and 1 the acquire script runs (the lock
// is set) but the call then fails (the connection broke before the reply);
// node 2 grants. One grant of three: the attempt fails, and its clean-up
// must release the lock on every node that granted or whose outcome is
// unknown, so that no lock of the failed attempt is left on any node. The
// mutant cleanup-skips-errored cleans up only where a grant was heard,
// leaving nodes 0 and 1 locked for the whole lease (30 s).
func TestHoleCleanUpCoversErroredCalls(t *testing.T) {
	mc := testutil.NewMiniCluster(t, 3)
	var nodes []redlock.Node
	for i, n := range mc.Nodes() {
		nodes = append(nodes, hookNode{Node: n, hook: func(_ context.Context, s *scripts.Script, _ []string, _ []any, next func() (any, error)) (any, error, bool) {
			if s == scripts.Acquire && i < 2 {
				_, _ = next()
				return nil, errors.New("connection reset by peer (injected after the script ran)"), true
			}
			return nil, nil, false
		}})
	}
	l := newLocker(t, nodes, redlock.Config{LeaseDuration: 30 * time.Second})
	lease, err := l.TryAcquire(testutil.Context(t), "hole-cleanup")
	require.Nil(t, lease)
	require.Error(t, err)
	key := l.Key("hole-cleanup")
	require.Eventually(t, func() bool {
		return !mc.Server(0).Exists(key) && !mc.Server(1).Exists(key) && !mc.Server(2).Exists(key)
	}, 5*time.Second, 5*time.Millisecond, "the failed attempt's lock is left on a node whose call failed after the script ran")
}
