package redisnode_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/testutil"
)

func TestDialRejectsBadURLs(t *testing.T) {
	ctx := testutil.Context(t)
	cases := []struct {
		name string
		urls []string
	}{
		{"no URLs", nil},
		{"not a URL", []string{"::::"}},
		{"wrong scheme", []string{"http://127.0.0.1:6379"}},
		{"bad port", []string{"redis://127.0.0.1:notaport"}},
		{"bad database", []string{"redis://127.0.0.1:6379/x"}},
		{"same server twice", []string{"redis://127.0.0.1:1", "redis://127.0.0.1:1"}},
		{"password in a bad URL", []string{"redis://user:s3cret-pw@127.0.0.1:6379/notadb"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nodes, err := redisnode.Dial(ctx, tc.urls...)
			require.Nil(t, nodes)
			require.ErrorIs(t, err, redlock.ErrInvalidConfig)
			require.NotContains(t, err.Error(), "s3cret-pw")
		})
	}
}

func TestDialToleratesAMinorityDown(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	urls := c.URLs()
	c.Kill(1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	nodes, err := redisnode.Dial(ctx, urls...)
	require.NoError(t, err)
	defer nodes.Close()
	require.Len(t, nodes, 3)
	l := newLocker(t, nodes, redlock.Config{})
	lease, err := l.TryAcquire(ctx, "dialled")
	require.NoError(t, err)
	require.NoError(t, lease.Release(ctx))

	c.Kill(2)
	_, err = redisnode.Dial(ctx, urls...)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	var nerr *redlock.NodeError
	require.ErrorAs(t, err, &nerr)
}

// TestDialNeverPrintsPasswords: a wrong password is a clear error naming the
// node, without the password.
func TestDialNeverPrintsPasswords(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := testutil.StartRedisServer(t, testutil.WithPassword("right-password"))
	url := strings.Replace(s.URL(), "redis://", "redis://:wrong-password@", 1)
	url = strings.Replace(url, ":right-password@", ":wrong-password@", 1)
	_, err := redisnode.Dial(context.Background(), url)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.Contains(t, err.Error(), s.Addr())
	require.NotContains(t, err.Error(), "wrong-password")
	require.NotContains(t, err.Error(), "right-password")

	nodes, err := redisnode.Dial(context.Background(), s.URL())
	require.NoError(t, err)
	require.NoError(t, nodes.Close())
}
