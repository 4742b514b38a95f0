package cli

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/testutil"
)

// TestE2ESentinelNameTypo: a Sentinel URL whose master_name no sentinel
// knows says so, instead of "all sentinels ... unreachable: redis: nil";
// as a minority node it is named in a warning once the lock is taken.
func TestE2ESentinelNameTypo(t *testing.T) {
	t.Parallel()
	g := testutil.StartSentinel(t, "locks")
	typo := strings.Replace(g.URL(), "master_name=locks", "master_name=lokcs", 1)
	require.NotEqual(t, g.URL(), typo)

	r := cli(t, nodesEnv([]string{typo}), "acquire", "x")
	// A typo that retrying cannot fix: exit 8 (misconfigured), not 3.
	requireCode(t, r, exitCannotGrant, "the sentinels answered, but none knows a primary by this master_name: check ?master_name= in the URL")
	require.NotContains(t, r.stderr, "redis: nil")

	c := testutil.StartRedis(t, 2)
	r = cli(t, nodesEnv([]string{typo, c.URLs()[0], c.URLs()[1]}), "acquire", "x")
	requireCode(t, r, exitOK, "warning: node sentinel(lokcs@")
	require.Equal(t, 1, strings.Count(r.stderr, "none knows a primary by this master_name"), r.stderr)
}

// TestE2ETLSAgainstAPlainServer: rediss:// against a server without TLS
// fails in the TLS handshake (timed out, or answered in plain RESP,
// depending on the bytes of the ClientHello), and the message says so and
// that the server may not speak TLS. It returns by --timeout: Dial bounds
// the handshake by its context (it took go-redis's 5s dial timeout).
func TestE2ETLSAgainstAPlainServer(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 1)
	tls := strings.Replace(c.URLs()[0], "redis://", "rediss://", 1)
	r := cli(t, nodesEnv([]string{tls}), "acquire", "x", "--timeout", "500ms")
	requireCode(t, r, exitNoQuorum, c.Server(0).Addr()+": TLS handshake ")
	require.Contains(t, r.stderr, "it may not speak TLS on this port (for a server without TLS, use redis:// rather than rediss://)")
	require.Less(t, r.elapsed, 4*time.Second, "bounded by --timeout, not go-redis's 5s dial timeout")
	r = cli(t, nodesEnv(c.URLs()), "status", "x", "--timeout", "500ms")
	requireCode(t, r, exitOK, "")
}

// TestIsUnknownMaster: only sentinels that all answered "no such primary"
// make the master_name reason.
func TestIsUnknownMaster(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{errors.New("redis: all sentinels specified in configuration are unreachable: redis: nil redis: nil redis: nil"), true},
		{fmt.Errorf("node x: %w", errors.New("redis: all sentinels specified in configuration are unreachable: redis: nil")), true},
		{errors.New("redis: all sentinels specified in configuration are unreachable: dial tcp 127.0.0.1:1: connect: connection refused"), false},
		{errors.New("redis: all sentinels specified in configuration are unreachable: redis: nil dial tcp: i/o timeout"), false},
		{errors.New("redis: nil"), false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, isUnknownMaster(tt.err), tt.err.Error())
	}
}
