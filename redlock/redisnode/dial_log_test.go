package redisnode_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/testutil"
)

// goRedisLog records what go-redis logs through its process-wide logger
// (by default a logger that writes to stderr).
type goRedisLog struct {
	mu    sync.Mutex
	lines []string
}

func (g *goRedisLog) Printf(_ context.Context, format string, v ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lines = append(g.lines, fmt.Sprintf(format, v...))
}

// about returns the recorded lines that mention addr (such as go-redis's
// "connection pool: failed to dial after 1 attempts: dial tcp addr: ...").
func (g *goRedisLog) about(addr string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, l := range g.lines {
		if strings.Contains(l, addr) {
			out = append(out, l)
		}
	}
	return out
}

// captureGoRedisLog routes go-redis's logging to a recorder for the rest of
// the test, then silences it again (as TestMain does).
func captureGoRedisLog(t *testing.T) *goRedisLog {
	t.Helper()
	g := &goRedisLog{}
	redis.SetLogger(g)
	t.Cleanup(logging.Disable)
	return g
}

// closedAddr returns a 127.0.0.1 address on which nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestDialDoesNotMakeGoRedisLogFailedDials: an unreachable node is reported
// in Dial's error, and go-redis logs nothing about it: not its own "failed
// to dial" line, which its default logger prints to stderr.
func TestDialDoesNotMakeGoRedisLogFailedDials(t *testing.T) {
	log := captureGoRedisLog(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	t.Run("majority unreachable", func(t *testing.T) {
		addrs := []string{closedAddr(t), closedAddr(t), closedAddr(t)}
		urls := make([]string, len(addrs))
		for i, a := range addrs {
			urls[i] = "redis://" + a
		}
		nodes, err := redisnode.Dial(ctx, urls...)
		require.Nil(t, nodes)
		require.ErrorIs(t, err, redlock.ErrNoQuorum)
		for _, a := range addrs {
			require.Contains(t, err.Error(), a, "each unreachable node is named in the error")
			require.Empty(t, log.about(a))
		}
	})

	t.Run("minority unreachable", func(t *testing.T) {
		c := testutil.NewMiniCluster(t, 2)
		down := closedAddr(t)
		nodes, err := redisnode.Dial(ctx, append(c.URLs(), "redis://"+down)...)
		require.NoError(t, err)
		require.Len(t, nodes, 3)
		require.NoError(t, nodes.Close())
		require.Empty(t, log.about(down))
	})
}
