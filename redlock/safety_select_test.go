package redlock_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/testutil"
)

// TestSafetyAUserWithoutSelectMakesNoMarker: a new marker must delete the
// markers of its name in the server's other dbs (scripts/trust.lua, T4),
// which takes SELECT. A user whose ACL refuses SELECT is refused with an
// error that says so, and no marker is left behind: before, the search
// stopped without an error, the marker stood, and a marker swapped away
// into another db (here db 1) would vouch for itself when swapped back.
func TestSafetyAUserWithoutSelectMakesNoMarker(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := testutil.Context(t)
	c := testutil.StartRedis(t, 3)
	rules := slices.DeleteFunc(testutil.LockerACL(redlock.DefaultKeyPrefix), func(r string) bool { return r == "+select" })
	var urls []string
	for _, s := range c.Servers() {
		require.NoError(t, s.SetACLUser(ctx, "noselect", aclPassword, rules...))
		urls = append(urls, s.UserURL("noselect", aclPassword))
		require.NoError(t, s.Do(ctx, "MOVE", testutil.DefaultMarker, 1).Err()) // swapped away
	}
	nodes, err := redisnode.Dial(ctx, urls...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = nodes.Close() })
	l := newLocker(t, nodes, redlock.Config{LeaseDuration: time.Second})
	_, err = l.TryAcquire(ctx, "r")
	require.ErrorIs(t, err, redlock.ErrNoQuorum, "a node error on every node, not a refusal")
	require.ErrorContains(t, err, "SELECT refused")
	const inDB1 = "redis.call('SELECT', 1) return redis.call('EXISTS', KEYS[1])"
	for _, s := range c.Servers() {
		n, err := s.Do(ctx, "EXISTS", testutil.DefaultMarker).Int()
		require.NoError(t, err)
		require.Zero(t, n, "no marker stands in db 0 of %s", s.Addr())
		n, err = s.Do(ctx, "EXISTS", l.Key("r")).Int()
		require.NoError(t, err)
		require.Zero(t, n, "nothing granted on %s", s.Addr())
		n, err = s.Do(ctx, "EVAL", inDB1, 1, testutil.DefaultMarker).Int()
		require.NoError(t, err)
		require.Equal(t, 1, n, "the swapped-away marker is untouched (nothing could search)")
	}
}
