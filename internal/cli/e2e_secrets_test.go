package cli

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/testutil"
)

// closedPort returns a local TCP port that nothing listens on (it was free
// a moment ago).
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// TestE2ESecretsNeverPrinted: whatever shape a node URL with a password
// has, no command prints the password, on stdout or stderr, as text or
// JSON. Needs no redis-server.
func TestE2ESecretsNeverPrinted(t *testing.T) {
	t.Parallel()
	const pw = "s3cretPW"
	down := "127.0.0.1:" + strconv.Itoa(closedPort(t))
	tests := []struct {
		name string
		url  string
		code int
		want string
	}{
		// The example of the issue: "redis//" for "redis://".
		{"missing colon", "redis//:" + pw + "@127.0.0.1:7306", exitUsage, "malformed node URL redis//:xxxxx@127.0.0.1:7306: missing redis:// scheme"},
		{"missing slashes", "redis:" + pw + "@127.0.0.1:7306", exitUsage, "missing redis:// scheme"},
		{"no scheme", ":" + pw + "@127.0.0.1:7306", exitUsage, "missing redis:// scheme"},
		{"user, no scheme", "user:" + pw + "@127.0.0.1:7306", exitUsage, "malformed node URL user:xxxxx@127.0.0.1:7306"},
		{"bad port", "redis://u:" + pw + "@127.0.0.1:port", exitUsage, "malformed node URL redis://u:xxxxx@127.0.0.1:port"},
		// go-redis's own reason, which it gives for the URL with its password
		// masked too, so it cannot hold the password.
		{"bad database", "redis://:" + pw + "@127.0.0.1:7306/db", exitUsage, "node URL redis://:xxxxx@127.0.0.1:7306/xxxxx: the path must be a database number"},
		{"query password", "redis://127.0.0.1:7306?password=" + pw, exitUsage, "redis://127.0.0.1:7306?password=xxxxx"},
		{"sentinel password", "redis://127.0.0.1:7306?db=0&sentinel_password=" + pw, exitUsage, "sentinel_password=xxxxx"},
		{"unescaped @", "redis://:" + pw + "@x@127.0.0.1:7306", exitNoQuorum, "cannot reach a majority"},
		// Well-formed, nothing listening: the address, never the password.
		{"unreachable", "redis://:" + pw + "@" + down, exitNoQuorum, down + ": connection refused"},
		{"unreachable with user", "rediss://user:" + pw + "@" + down, exitNoQuorum, down + ": connection refused"},
		{"unreachable cluster", "redis+cluster://:" + pw + "@" + down + "?addr=" + down, exitNoQuorum, "cluster(" + down + "," + down + "): connection refused"},
		{"unreachable sentinel", "redis+sentinel://u:" + pw + "@" + down + "?master_name=m&password=" + pw, exitNoQuorum, "sentinel(m@" + down + ")"},
		{"cluster bad option", "redis+cluster://:" + pw + "@127.0.0.1:7306?bogus=1", exitUsage, "redis+cluster://:xxxxx@127.0.0.1:7306?bogus=1: redis: unexpected option: bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, args := range [][]string{
				{"acquire", "x", "--nodes", tt.url},
				{"acquire", "x", "--nodes", tt.url, "--json"},
				{"status", "x", "--nodes", tt.url, "--json"},
				{"release", "x", "--token", strings.Repeat("ab", 16), "--nodes", tt.url},
				{"run", "x", "--nodes", tt.url, "--", "true"},
			} {
				r := cli(t, nil, append(args, "--timeout", "500ms")...)
				requireCode(t, r, tt.code, tt.want)
				require.NotContains(t, r.stdout, pw, "%q", args)
				require.NotContains(t, r.stderr, pw, "%q", args)
			}
			// From the environment too, and doctor (exit 1 on a FAIL).
			r := cli(t, []string{envNodes + "=" + tt.url}, "doctor", "--json", "--timeout", "500ms")
			require.Contains(t, []int{exitUsage, exitFailure}, r.code, r.stderr)
			require.NotContains(t, r.stdout+r.stderr, pw)
		})
	}
}

// TestE2EShortPasswordMasksURLsOnly: with the password "or", the URL's
// password is masked, and the words that contain "or" (password,
// majority) are not garbled.
func TestE2EShortPasswordMasksURLsOnly(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3, testutil.WithPassword("rightPW123"))
	var urls []string
	for _, a := range c.Addrs() {
		urls = append(urls, "redis://:or@"+a)
	}
	for _, args := range [][]string{{"acquire", "x"}, {"acquire", "x", "--json"}} {
		r := cli(t, nodesEnv(urls), args...)
		requireCode(t, r, exitAccessDenied, "access denied: check the user and password")
		require.Contains(t, r.stderr, "cannot reach a majority of the nodes")
		require.NotContains(t, r.stdout+r.stderr, "xxxxx", "nothing but a URL's password is masked")
		require.NotContains(t, r.stdout+r.stderr, ":or@")
	}
	r := cli(t, nil, "acquire", "x", "--nodes", "redis://:or@127.0.0.1:port")
	requireCode(t, r, exitUsage, "malformed node URL redis://:xxxxx@127.0.0.1:port")
}
