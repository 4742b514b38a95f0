package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/testutil"
)

// realSubscribed waits until every server has n subscribers on key's
// release channel.
func realSubscribed(t *testing.T, servers []*testutil.RedisServer, key string, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, s := range servers {
			got, err := s.Client().PubSubNumSub(context.Background(), key+":released").Result()
			if err != nil || got[key+":released"] != n {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond)
}
