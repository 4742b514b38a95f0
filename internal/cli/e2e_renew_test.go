package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// TestE2ERenewNeverCutsALock: renew without --ttl refuses (exit 2,
// would_shorten) to cut a lock taken with a longer TTL, and leaves it as it
// was; with --ttl it extends it; a bare renew of a lock taken with the
// default TTL extends it as before.
func TestE2ERenewNeverCutsALock(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())

	r := cli(t, env, "acquire", "shrink", "--ttl", "15m", "--json")
	requireCode(t, r, exitOK, "")
	token := decode(t, r)["token"].(string)

	r = cli(t, env, "renew", "shrink", "--token", token)
	requireCode(t, r, exitUsage, `renew would shorten the lock on "shrink" from `)
	require.Regexp(t, `from 1[45]m[0-9.]+s left to the default --ttl 10s: give --ttl explicitly \(the TTL it was acquired with, or 1[45]m[0-9]+s to keep it as it is\)`, r.stderr)
	r = cli(t, env, "renew", "shrink", "--token", token, "--json")
	requireCode(t, r, exitUsage, "would shorten")
	obj := decode(t, r)
	require.Equal(t, "would_shorten", obj["error"])
	require.Equal(t, 2.0, obj["exit_code"])
	require.Greater(t, obj["remaining_ttl_ms"].(float64), (14*time.Minute).Seconds()*1000)
	require.Equal(t, 10000.0, obj["ttl_ms"])

	// The lock still has its 15 minutes on every node.
	r = cli(t, env, "status", "shrink", "--json")
	requireCode(t, r, exitOK, "")
	st := decode(t, r)
	require.Equal(t, "held", st["state"])
	require.Greater(t, st["holder"].(map[string]any)["ttl_ms"].(float64), (14*time.Minute).Seconds()*1000)

	// An explicit --ttl is applied, longer or shorter.
	r = cli(t, env, "renew", "shrink", "--token", token, "--ttl", "20m", "--json")
	requireCode(t, r, exitOK, "")
	require.Greater(t, decode(t, r)["ttl_ms"].(float64), (19*time.Minute).Seconds()*1000)
	r = cli(t, env, "renew", "shrink", "--token", token, "--ttl", "30s", "--json")
	requireCode(t, r, exitOK, "")
	require.Less(t, decode(t, r)["ttl_ms"].(float64), 30000.0)

	// A lock taken with the default TTL (or a shorter one) renews bare.
	r = cli(t, env, "acquire", "plain", "--ttl", "5s", "--json")
	requireCode(t, r, exitOK, "")
	token = decode(t, r)["token"].(string)
	r = cli(t, env, "renew", "plain", "--token", token, "--json")
	requireCode(t, r, exitOK, "")
	require.Greater(t, decode(t, r)["ttl_ms"].(float64), 9000.0)
	r = cli(t, env, "renew", "plain", "--token", token)
	requireCode(t, r, exitOK, "")
	require.Contains(t, r.stdout, `renewed "plain" until`)
}

// TestRemainingTTL: the time a lock has left is the quorum-th longest TTL
// among the nodes where the token holds it; other holders, free nodes,
// failed nodes and keys without expiry do not count.
func TestRemainingTTL(t *testing.T) {
	const tok, other = "aa", "bb"
	held := func(token string, ttl time.Duration) redlock.NodeStatus {
		return redlock.NodeStatus{Info: redlock.LockInfo{Held: true, Token: token, TTL: ttl}}
	}
	failed := redlock.NodeStatus{Info: redlock.LockInfo{Held: true, Token: tok, TTL: time.Hour}, Err: redlock.ErrNoQuorum}
	free := redlock.NodeStatus{}
	tests := []struct {
		name   string
		nodes  []redlock.NodeStatus
		quorum int
		want   time.Duration
	}{
		{"all three", []redlock.NodeStatus{held(tok, 3*time.Minute), held(tok, 15*time.Minute), held(tok, 14*time.Minute)}, 2, 14 * time.Minute},
		{"one longer node does not decide", []redlock.NodeStatus{held(tok, time.Hour), held(tok, time.Second), held(tok, 2*time.Second)}, 2, 2 * time.Second},
		{"a minority holds it", []redlock.NodeStatus{held(tok, time.Hour), free, held(other, time.Hour)}, 2, 0},
		{"failed node ignored", []redlock.NodeStatus{held(tok, time.Hour), failed, free}, 2, 0},
		{"no expiry ignored", []redlock.NodeStatus{held(tok, -1), held(tok, -1), held(tok, time.Minute)}, 2, 0},
		{"five nodes", []redlock.NodeStatus{held(tok, 5), held(tok, 4), held(tok, 3), held(tok, 2), held(tok, 1)}, 3, 3},
		{"no nodes", nil, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, remainingTTL(&redlock.Status{Nodes: tt.nodes}, tok, tt.quorum))
		})
	}
}
