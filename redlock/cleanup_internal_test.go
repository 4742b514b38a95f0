package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/scripts"
)

// redialedNode is a node whose acquire is late: it is granted after the
// attempt failed (as a client's retry after a reset would be).
type redialedNode struct {
	Node
	gate chan struct{}
}

func (n *redialedNode) Eval(ctx context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	if s == scripts.Acquire {
		<-n.gate
		return n.Node.Eval(context.Background(), s, keys, args...)
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestAGrantThatCouldNotBeGivenBackIsCleanedUp: a node granted a late call
// after the attempt had failed. The failed attempt's clean-up waits for
// the call and releases the lock there (since Safety v4 there is no
// give-back of grants made on new connections: the node's own checks,
// scripts/trust.lua, decide in the script).
func TestAGrantThatCouldNotBeGivenBackIsCleanedUp(t *testing.T) {
	var servers []*miniredis.Miniredis
	var nodes []Node
	late := &redialedNode{gate: make(chan struct{})}
	for i := range 3 {
		m := miniredis.RunT(t)
		servers = append(servers, m)
		if i == 0 {
			late.Node = testNode(t, m.Addr())
			nodes = append(nodes, late)
		} else {
			nodes = append(nodes, testNode(t, m.Addr()))
		}
	}
	l, err := New(nodes, Config{LeaseDuration: 3 * time.Second})
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
