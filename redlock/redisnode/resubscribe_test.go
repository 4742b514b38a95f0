package redisnode_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// TestWaiterRetriesWhenItsSubscriptionComesBack: a release whose
// announcement a waiter could not hear (its pub/sub connections were cut,
// as a failover or a restart cuts them) does not leave it asleep until its
// backoff: when the subscriptions are re-established the waiter tries
// again, and takes the lock.
func TestWaiterRetriesWhenItsSubscriptionComesBack(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 3)
	// The holder's TTL (which also bounds a waiter's sleep) and the
	// backoff are far beyond the test's patience.
	l := newLocker(t, c.Nodes(), slowPolling(redlock.Config{LeaseDuration: time.Minute}))
	holder, err := l.TryAcquire(testutil.Context(t), "cut")
	require.NoError(t, err)
	holder.Orphan() // this test ends the lock behind the holder's back

	got := make(chan error, 1)
	go func() {
		lease, err := l.Acquire(testutil.Context(t), "cut")
		if err == nil {
			err = lease.Release(context.Background())
		}
		got <- err
	}()
	key := l.Key("cut")
	testutil.WaitSubscribed(t, c.Servers(), key+":released", 1)

	// The lock disappears without an announcement (as if released while
	// the waiter's connections were down), then the connections are cut.
	// (Its counter's record of the lease ends too, as a release's does:
	// a lock key lost before that record's end is refused until it.)
	for _, s := range c.Servers() {
		require.NoError(t, s.Client().Del(context.Background(), key).Err())
		v, err := s.Client().Get(context.Background(), key+":fence").Result()
		require.NoError(t, err)
		require.NoError(t, s.Client().Set(context.Background(), key+":fence", counterValue(v), time.Minute).Err())
	}
	for _, s := range c.Servers() {
		require.NoError(t, s.Client().Do(context.Background(), "CLIENT", "KILL", "TYPE", "pubsub").Err())
	}
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not try again when its subscriptions came back")
	}
}

// counterValue is the fence counter of a counter key's value (the counter,
// then what scripts/counter.lua keeps beside it).
func counterValue(v string) string {
	c, _, _ := strings.Cut(v, " ")
	return c
}
