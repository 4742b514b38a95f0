package redlock

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/scripts"
)

// redialedNode is a node whose acquire is late and is granted on a new
// connection (as a client's retry after a reset would be); the rejoin
// check that a new connection calls for then fails, and so does the
// first release (the give-back): the call's context has run out.
type redialedNode struct {
	*RedisNode
	gate      chan struct{}
	redial    bool
	givenBack atomic.Bool
}

func (n *redialedNode) Uptime(context.Context) (Uptime, error) {
	if n.redial {
		return Uptime{}, context.DeadlineExceeded
	}
	return Uptime{Since: time.Now().Add(-time.Hour)}, nil
}

func (n *redialedNode) Eval(ctx context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	switch s {
	case scripts.Acquire:
		<-n.gate
		reply, err := n.RedisNode.Eval(context.Background(), s, keys, args...)
		n.redial = true
		return reply, err
	case scripts.Release:
		if n.givenBack.CompareAndSwap(false, true) {
			return nil, context.DeadlineExceeded // the give-back
		}
	}
	return n.RedisNode.Eval(ctx, s, keys, args...)
}

// TestAGrantThatCouldNotBeGivenBackIsCleanedUp: a node granted a late call
// on a new connection, could not be checked for a restart, and did not
// answer the give-back release. Its answer is an unknown outcome, not a
// refusal, so the failed attempt's clean-up releases the lock there.
func TestAGrantThatCouldNotBeGivenBackIsCleanedUp(t *testing.T) {
	var servers []*miniredis.Miniredis
	var nodes []Node
	late := &redialedNode{gate: make(chan struct{})}
	for i := range 3 {
		m := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		servers = append(servers, m)
		if i == 0 {
			late.RedisNode = NewRedisNode(c)
			nodes = append(nodes, late)
		} else {
			nodes = append(nodes, NewRedisNode(c))
		}
	}
	l, err := New(nodes, Config{LeaseDuration: 3 * time.Second, RejoinDelay: time.Second})
	require.NoError(t, err)
	key := l.Key("late")
	for _, m := range servers[1:] {
		require.NoError(t, m.Set(key, "0123456789abcdef0123456789abcdef someone-else"))
	}
	_, err = l.TryAcquire(context.Background(), "late")
	require.ErrorIs(t, err, ErrNotAcquired)
	close(late.gate)
	require.NoError(t, l.Close()) // waits for the clean-up
	require.False(t, servers[0].Exists(key), "the failed attempt's lock outlived it on node 0")
}
