package redlock_test

import (
	"context"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

const foreignLock = "0123456789abcdef0123456789abcdef someone-else"

// masks returns the subsets of n nodes to try: all of them for small n, and
// for larger n every size with a few random members.
func masks(n int) []uint {
	if n <= 5 {
		all := make([]uint, 1<<n)
		for m := range all {
			all[m] = uint(m)
		}
		return all
	}
	r := rand.New(rand.NewPCG(1, uint64(n)))
	var out []uint
	for k := 0; k <= n; k++ {
		for range 3 {
			perm := r.Perm(n)
			var m uint
			for _, i := range perm[:k] {
				m |= 1 << i
			}
			out = append(out, m)
		}
	}
	return out
}

// TestQuorumBoundaries checks, for N = 1, 2, 3, 5 and 7, that the lock is
// granted exactly when a majority grants it, whether the other nodes refuse
// (held by someone else) or fail, and that a failed attempt leaves
// nothing behind on the nodes that did grant.
func TestQuorumBoundaries(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 7} {
		for _, fault := range []string{"busy", "failing"} {
			t.Run(fmt.Sprintf("N=%d/%s", n, fault), func(t *testing.T) {
				c := testutil.NewMiniCluster(t, n)
				l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 2 * time.Second})
				quorum := n/2 + 1
				for _, mask := range masks(n) {
					resource := fmt.Sprintf("q-%s-%b", fault, mask)
					key := l.Key(resource)
					for i := range n {
						if mask&(1<<i) != 0 {
							continue
						}
						if fault == "busy" {
							require.NoError(t, c.Set(i, key, foreignLock))
						} else {
							c.Fail(i, "ERR injected fault")
						}
					}
					granting := bits.OnesCount(mask)
					lease, err := tryAcquire(t, l, resource)
					if granting >= quorum {
						require.NoError(t, err, "mask %b", mask)
						require.GreaterOrEqual(t, len(lease.Granted()), quorum)
						require.NoError(t, lease.Release(context.Background()))
					} else {
						require.Error(t, err, "mask %b", mask)
						if fault == "busy" {
							require.ErrorIs(t, err, redlock.ErrNotAcquired)
							require.NotErrorIs(t, err, redlock.ErrRejoining, "a busy lock is not a rejoining node")
						} else {
							require.ErrorIs(t, err, redlock.ErrNoQuorum)
						}
					}
					for i := range n {
						if mask&(1<<i) != 0 {
							// Release returns once a majority released, and a
							// failed attempt once it has its verdict; the rest
							// follows in the background.
							require.Eventually(t, func() bool { return !c.Server(i).Exists(key) }, 5*time.Second, time.Millisecond,
								"node %d keeps a grant after mask %b", i, mask)
						} else if fault == "failing" {
							c.Heal(i)
						}
					}
				}
			})
		}
	}
}

// TestMinorityFaultsDoNotStopTheLock: with two of five nodes dead or failing,
// a lease is acquired, renewed several times, and released.
func TestMinorityFaultsDoNotStopTheLock(t *testing.T) {
	for _, fault := range []string{"killed", "erroring"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			// Wall-clock TTLs: a lock left behind by an attempt that timed
			// out expires, as on a real server, instead of blocking forever.
			c := testutil.NewMiniCluster(t, 5, testutil.WithWallClock())
			l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: time.Second})
			for _, i := range []int{1, 3} {
				if fault == "killed" {
					c.Kill(i)
				} else {
					c.Fail(i, "ERR injected fault")
				}
			}
			lease, err := l.Acquire(testutil.Context(t), "minority")
			require.NoError(t, err)
			first := lease.ValidUntil()
			// Several renewals: the lease stays valid well past its first validity.
			deadline := first.Add(time.Second)
			for time.Now().Before(deadline) {
				require.NoError(t, lease.Context().Err(), "lease lost with a minority down")
				time.Sleep(10 * time.Millisecond)
			}
			require.True(t, lease.ValidUntil().After(first.Add(500*time.Millisecond)), "lease was not renewed")
			require.NoError(t, lease.Release(context.Background()))
			require.ErrorIs(t, context.Cause(lease.Context()), redlock.ErrLeaseReleased)
		})
	}
}

// TestMajorityDownMakesAcquireFailWithinContext: Acquire keeps trying while a
// majority is down, and gives up when its context ends, with the context's
// error and not "busy".
func TestMajorityDownMakesAcquireFailWithinContext(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), fastRetry(redlock.Config{LeaseDuration: time.Second}))
	c.Kill(0)
	c.Kill(2)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := l.Acquire(ctx, "majority-down")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, redlock.ErrNotAcquired)
	require.Less(t, time.Since(start), time.Second, "Acquire outlived its context")
	require.Contains(t, err.Error(), "no majority")
	require.ErrorIs(t, err, redlock.ErrNoQuorum, "the last attempt's reason is kept when it is not busy")

	_, err = l.TryAcquire(testutil.Context(t), "majority-down")
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	var nerr *redlock.NodeError
	require.ErrorAs(t, err, &nerr)
	require.Contains(t, []string{c.Addrs()[0], c.Addrs()[2]}, nerr.Addr)
}

// TestMajorityLossEndsLeaseBeforeValidity: when a majority of nodes goes
// away under a held lease, its Context ends with ErrLeaseLost, and it is
// never seen alive at or after ValidUntil, however late this process's
// goroutines run (on an idle machine it ends a tenth of the validity
// early, by the loss guard).
func TestMajorityLossEndsLeaseBeforeValidity(t *testing.T) {
	t.Parallel() // bound by the wall clock (leases, delays, hung nodes)
	for _, fault := range []string{"killed", "erroring", "lock deleted"} {
		t.Run(fault, func(t *testing.T) {
			c := testutil.NewMiniCluster(t, 5)
			// Long enough that the loss guard (a tenth of the validity) is
			// far above timer delays on a loaded machine.
			l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: time.Second})
			lease, err := l.Acquire(testutil.Context(t), "doomed")
			require.NoError(t, err)
			// Acquire returns at a majority; the other grants land just
			// after. Wait for them, or a grant landing after the fault
			// below would give the lease its majority back.
			for i := range 5 {
				require.Eventually(t, func() bool { return c.Server(i).Exists(l.Key("doomed")) }, 5*time.Second, time.Millisecond)
			}
			for _, i := range []int{0, 2, 4} {
				switch fault {
				case "killed":
					c.Kill(i)
				case "erroring":
					c.Fail(i, "ERR injected fault")
				default:
					require.NoError(t, c.Wipe(i))
				}
			}
			requireNeverAlivePastValidity(t, lease, 5*time.Second)
			require.ErrorIs(t, context.Cause(lease.Context()), redlock.ErrLeaseLost)
			require.ErrorIs(t, lease.Release(context.Background()), redlock.ErrLeaseLost)
		})
	}
}

// TestQuorumErrorDescribesTheMissingMajority: renew and release by token
// fail with a *QuorumError whose fields say what happened, wrapping
// ErrNotHeld when a majority answered and ErrNoQuorum when it did not.
func TestQuorumErrorDescribesTheMissingMajority(t *testing.T) {
	c := testutil.NewMiniCluster(t, 5)
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 2 * time.Second})
	ctx := testutil.Context(t)
	lease, err := l.TryAcquire(ctx, "q")
	require.NoError(t, err)
	// TryAcquire returns once a majority granted: let the last grants land.
	require.Eventually(t, func() bool {
		st, err := l.Inspect(ctx, "q")
		if err != nil {
			return false
		}
		for _, n := range st.Nodes {
			if n.Err != nil || n.Info.Token != lease.Token() {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond)
	other := strings.Repeat("ab", 16)

	var qe *redlock.QuorumError
	err = l.Release(ctx, "q", other)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	require.ErrorAs(t, err, &qe)
	require.Equal(t, redlock.QuorumError{Op: "release", Resource: "q", Yes: 0, No: 5, Total: 5, Needed: 3}, *qe)

	c.Kill(0)
	c.Kill(1)
	c.Kill(2)
	_, err = l.Renew(ctx, "q", lease.Token())
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.ErrorAs(t, err, &qe)
	require.Equal(t, "renew", qe.Op)
	require.Equal(t, 2, qe.Yes)
	require.Equal(t, 2, qe.Answered())
	require.Len(t, qe.Nodes, 3)
	var ne *redlock.NodeError
	require.ErrorAs(t, qe.Nodes[0], &ne)
	require.Contains(t, err.Error(), "2 of 5 nodes answered, 3 needed")
}
