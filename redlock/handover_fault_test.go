package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// TestADelayedCleanUpReleaseNeverFreesALaterLease: a failed attempt's
// clean-up release that times out can still reach its node later (a TCP
// segment held back, delivered after a partition heals). It must delete
// nothing but that attempt's own grant: each attempt has its own token,
// so a later attempt's lease on the node stands, and no other caller can
// gather a majority while that lease is valid. (With one token for every
// attempt of an Acquire, the late release deleted the lease's lock and a
// TryAcquire got the lock on the other two nodes.)
func TestADelayedCleanUpReleaseNeverFreesALaterLease(t *testing.T) {
	c := testutil.StartRedis(t, 3)
	ctx := testutil.Context(t)
	cfg := redlock.Config{
		LeaseDuration:   3 * time.Second,
		NodeCallTimeout: 150 * time.Millisecond,
		QueueTTL:        400 * time.Millisecond,
		RejoinDelay:     -1,
		NewBackOff:      func() backoff.BackOff { return backoff.NewConstantBackOff(50 * time.Millisecond) },
	}
	w, proxy := behindProxy(t, c, cfg, scripts.Release)
	key := w.Key("r")
	// Node 2 alone is free at first: the first attempt is granted there
	// only, and its clean-up release to node 2 is held back.
	require.NoError(t, c.Server(0).Client().Set(ctx, key, foreignLock, 300*time.Millisecond).Err())
	require.NoError(t, c.Server(1).Client().Set(ctx, key, foreignLock, 1200*time.Millisecond).Err())
	proxy.arm()
	lease, err := w.Acquire(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, 1, proxy.heldCount(), "a clean-up release was held back")
	proxy.flush()

	other := processLocker(t, c, redlock.Config{LeaseDuration: 3 * time.Second, RejoinDelay: -1})
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		stolen, err := other.TryAcquire(ctx, "r")
		if err == nil {
			valid := time.Now().Before(lease.ValidUntil()) && lease.Context().Err() == nil
			_ = stolen.Release(context.Background())
			require.False(t, valid, "another caller got the lock while the lease was valid")
		}
	}
	require.NoError(t, lease.Release(ctx))
}

// TestAHandOverTooShortForALeaseIsTakenOverAtOnce: with QueueTTL shorter
// than the lease, a lock handed over lasts only what the place had left,
// too little for a lease to renew in time; the head takes it over with an
// attempt at once (for the full TTL), rather than holding a lease that is
// lost on arrival or sleeping on a lock it was given.
func TestAHandOverTooShortForALeaseIsTakenOverAtOnce(t *testing.T) {
	c := testutil.StartRedis(t, 3)
	cfg := redlock.Config{LeaseDuration: 10 * time.Second, NodeCallTimeout: 100 * time.Millisecond, QueueTTL: time.Second, RejoinDelay: -1,
		NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }}
	holder := processLocker(t, c, cfg)
	lease, err := holder.Acquire(testutil.Context(t), "r")
	require.NoError(t, err)
	heldEverywhere(t, holder, lease)
	w := processLocker(t, c, cfg)
	done := make(chan *redlock.Lease, 1)
	go func() {
		ls, err := w.Acquire(testutil.Context(t), "r")
		if assertNoError(t, err) {
			done <- ls
		}
	}()
	time.Sleep(300 * time.Millisecond) // the place has 0.7 s left
	released := time.Now()
	require.NoError(t, lease.Release(context.Background()))
	var ls *redlock.Lease
	select {
	case ls = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the head did not take the lock")
	}
	require.Less(t, time.Since(released), 2*time.Second, "taken over at once, not after a wait")
	require.Greater(t, time.Until(ls.ValidUntil()), 5*time.Second, "a full lease")
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, ls.Context().Err(), "not lost on arrival")
	require.NoError(t, ls.Release(context.Background()))
}

// TestAPausedNodeDoesNotSlowTheHandOver: with one node of three paused
// (it answers nothing), the other two hand the lock over to the waiter
// as the holder releases, once the waiter's calls to the paused node have
// timed out: the hand-off then takes less than one more call timeout (2 s
// here; a few ms on a quiet machine, 0.6 s seen at load 10). The release
// while a call to the paused node is still pending is the test below.
func TestAPausedNodeDoesNotSlowTheHandOver(t *testing.T) {
	c := testutil.StartRedis(t, 3)
	cfg := redlock.Config{LeaseDuration: 6 * time.Second, RejoinDelay: -1}
	holder := processLocker(t, c, cfg)
	w := processLocker(t, c, cfg)
	callTimeout := w.Config().NodeCallTimeout
	for round := range 3 {
		lease, err := holder.Acquire(testutil.Context(t), "r")
		require.NoError(t, err)
		if round == 0 {
			require.NoError(t, c.Server(2).Pause())
			t.Cleanup(func() { _ = c.Server(2).Resume() })
		}
		done := make(chan time.Time, 1)
		go func() {
			ls, err := w.Acquire(testutil.Context(t), "r")
			if assertNoError(t, err) {
				done <- time.Now()
				assertNoError(t, ls.Release(context.Background()))
			}
		}()
		time.Sleep(callTimeout + callTimeout/2) // the waiter's calls to the paused node time out meanwhile
		released := time.Now()
		require.NoError(t, lease.Release(context.Background()))
		select {
		case got := <-done:
			t.Logf("round %d: hand-off %v", round, got.Sub(released).Round(time.Microsecond))
			require.Less(t, got.Sub(released), callTimeout, "round %d", round)
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: the waiter never got the lock", round)
		}
		require.Eventually(t, func() bool { // its release
			for _, s := range c.Servers()[:2] {
				if s.Client().Exists(testutil.Context(t), w.Key("r")).Val() != 0 {
					return false
				}
			}
			return true
		}, 10*time.Second, 5*time.Millisecond, "round %d: the waiter released", round)
	}
}

// TestAReleaseGoesAtOnceToTheNodesItHasNoCallOn: the holder took the lock
// while node 2 was paused, so its acquire call there is still pending
// (up to NodeCallTimeout, 5 s here) when it releases. The release goes at
// once to nodes 0 and 1, and to node 2 only once that call has ended (a
// late grant there is released too). So the lock is free on a majority at
// once: the fair queue's head is handed it, and a plain Locker's lock is
// gone from nodes 0 and 1, long before the pending call ends. (Before, the whole
// release waited for the call: the hand-off took 1.5-2 s of a 2 s call
// timeout.)
func TestAReleaseGoesAtOnceToTheNodesItHasNoCallOn(t *testing.T) {
	cfg := redlock.Config{LeaseDuration: 15 * time.Second, NodeCallTimeout: 5 * time.Second, RejoinDelay: -1}
	plain := cfg
	plain.QueueTTL = -1
	for _, tc := range []struct {
		name string
		cfg  redlock.Config
		// take gets the lock the holder releases with other, another
		// process's Locker, and sends when it has it; queued says when
		// the release may begin.
		take func(t *testing.T, c *testutil.RedisCluster, other *redlock.Locker, got chan<- time.Time) (queued func() bool)
	}{
		{"a waiter queued on the other nodes is handed the lock", cfg, func(t *testing.T, c *testutil.RedisCluster, w *redlock.Locker, got chan<- time.Time) func() bool {
			go func() {
				ls, err := w.Acquire(testutil.Context(t), "r")
				if assertNoError(t, err) {
					got <- time.Now()
					assertNoError(t, ls.Release(context.Background()))
				}
			}()
			ctx, key := testutil.Context(t), w.Key("r")+":queue"
			return func() bool {
				return c.Server(0).Client().ZCard(ctx, key).Val() == 1 && c.Server(1).Client().ZCard(ctx, key).Val() == 1
			}
		}},
		{"a plain Locker's lock is gone from the other nodes", plain, func(t *testing.T, c *testutil.RedisCluster, other *redlock.Locker, got chan<- time.Time) func() bool {
			ctx, key := testutil.Context(t), other.Key("r")
			go func() {
				for ctx.Err() == nil {
					if c.Server(0).Client().Exists(ctx, key).Val() == 0 && c.Server(1).Client().Exists(ctx, key).Val() == 0 {
						got <- time.Now()
						return
					}
					time.Sleep(time.Millisecond) // polling the servers, as Eventually would
				}
			}()
			return func() bool { return true }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testutil.StartRedis(t, 3)
			holder := processLocker(t, c, tc.cfg)
			other := processLocker(t, c, tc.cfg)                  // dialled while node 2 answers
			warm, err := holder.Acquire(testutil.Context(t), "r") // the nodes know the scripts, the counters agree
			require.NoError(t, err)
			require.NoError(t, warm.Release(context.Background()))
			require.NoError(t, c.Server(2).Pause())
			t.Cleanup(func() { _ = c.Server(2).Resume() })
			lease, err := holder.Acquire(testutil.Context(t), "r") // nodes 0 and 1; node 2's call pending
			require.NoError(t, err)
			acquired := time.Now()
			got := make(chan time.Time, 1)
			require.Eventually(t, tc.take(t, c, other, got), 10*time.Second, time.Millisecond, "the other caller waits")
			released := time.Now()
			done := make(chan error, 1)
			go func() { done <- lease.Release(context.Background()) }()
			select {
			case at := <-got:
				t.Logf("taken %v after the release began", at.Sub(released).Round(time.Microsecond))
				// The pending call ends 5 s after the holder's acquire
				// began: waiting for it would take more than 2.5 s here
				// unless the machine stalled for that long.
				require.Less(t, at.Sub(released), cfg.NodeCallTimeout/2, "the release waited for the call to the paused node")
				require.Less(t, released.Sub(acquired), cfg.NodeCallTimeout/2, "the pending call may have ended: the test proves nothing")
			case <-time.After(30 * time.Second):
				t.Fatal("the lock was never taken")
			}
			select {
			case err := <-done: // after the call to node 2 has ended
				require.NoError(t, err)
			case <-time.After(30 * time.Second):
				t.Fatal("Release did not return")
			}
		})
	}
}
