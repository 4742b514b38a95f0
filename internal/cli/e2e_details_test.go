package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/testutil"
)

// TestE2EWrongPassword: a wrong or missing password exits with its own
// code, distinct from unreachable nodes', naming the server's refusal and
// never the password.
func TestE2EWrongPassword(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3, testutil.WithPassword("rightPW123"))
	good := c.URLs()
	with := func(f func(string) string) []string {
		var out []string
		for _, u := range good {
			out = append(out, f(u))
		}
		return out
	}
	wrong := with(func(u string) string { return strings.ReplaceAll(u, "rightPW123", "wrongPW456") })
	none := c.Addrs()
	for i, a := range none {
		none[i] = "redis://" + a
	}
	token := strings.Repeat("ab", 16)
	for _, tc := range []struct {
		name, refusal string
		urls          []string
	}{
		{"wrong password", "WRONGPASS", wrong},
		{"no password", "NOAUTH", none},
	} {
		for _, args := range [][]string{
			{"acquire", "x"},
			{"acquire", "x", "--wait", "1s"},
			{"status", "x"},
			{"renew", "x", "--token", token},
			{"release", "x", "--token", token},
			{"run", "x", "--", "true"},
		} {
			r := cli(t, nodesEnv(tc.urls), args...)
			requireCode(t, r, exitAccessDenied, "access denied: check the user and password")
			require.Contains(t, r.stderr, tc.refusal, "%s %q", tc.name, args)
			require.NotContains(t, r.stdout+r.stderr, "wrongPW456")
			require.NotContains(t, r.stdout+r.stderr, "rightPW123")
		}
		r := cli(t, nodesEnv(tc.urls), "acquire", "x", "--json")
		requireCode(t, r, exitAccessDenied, "")
		obj := decode(t, r)
		require.Equal(t, "access_denied", obj["error"])
		require.Equal(t, float64(exitAccessDenied), obj["exit_code"])
		require.Contains(t, obj["message"], tc.refusal)
	}

	// A user whose ACL does not cover the lock keys: the nodes answer
	// (Dial passes), then refuse the scripts (NOPERM): access denied too.
	var limited []string
	for _, srv := range c.Servers() {
		require.NoError(t, srv.SetACLUser(t.Context(), "app", "appPW789", testutil.LockerACL("other:")...))
		limited = append(limited, srv.UserURL("app", "appPW789"))
	}
	for _, args := range [][]string{{"acquire", "x"}, {"acquire", "x", "--wait", "1s"}, {"run", "x", "--", "true"}} {
		// The servers have just started and this user may not read CONFIG,
		// so the nodes would be rejoining (--rejoin-delay): not the point.
		args = append([]string{"--rejoin-delay", "0"}, args...)
		r := cli(t, nodesEnv(limited), args...)
		requireCode(t, r, exitAccessDenied, "access denied")
		require.Contains(t, r.stderr, "NOPERM", "%q", args)
		require.NotContains(t, r.stdout+r.stderr, "appPW789")
	}
	r := cli(t, nodesEnv(limited), "status", "x", "--json")
	requireCode(t, r, exitAccessDenied, "access denied")
	require.Contains(t, r.stdout, "NOPERM")
	require.Equal(t, 0.0, decode(t, r)["answered"])
	r = cli(t, nodesEnv(limited), "acquire", "x", "--prefix", "other:", "--rejoin-delay", "0")
	requireCode(t, r, exitOK, "")

	// One wrong password of three is a minority: the lock works.
	mixed := append([]string{wrong[0]}, good[1:]...)
	r = cli(t, nodesEnv(mixed), "acquire", "x", "--json")
	requireCode(t, r, exitOK, "")
	require.NotContains(t, r.stdout+r.stderr, "wrongPW456")
	// One wrong and one down: no majority, and not only for the password:
	// the unreachable-nodes code.
	require.NoError(t, c.Server(2).Kill())
	r = cli(t, nodesEnv(mixed), "status", "x", "--timeout", "500ms")
	requireCode(t, r, exitNoQuorum, "cannot reach a majority")
	require.NotContains(t, r.stdout+r.stderr, "wrongPW456")
}

// TestE2ENoExpiryKey: a key at the lock's name without a TTL (set by hand,
// not a redlock lock) shows as TTL -1 in status, and acquire says why it
// cannot take it.
func TestE2ENoExpiryKey(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	const token = "0123456789abcdef0123456789abcdef"
	for _, s := range c.Servers() {
		require.NoError(t, s.Do(t.Context(), "SET", "redlock:{legacy}", token+" by-hand").Err())
	}

	r := cli(t, env, "status", "legacy", "--json")
	requireCode(t, r, exitOK, "")
	st := decode(t, r)
	require.Equal(t, "held", st["state"])
	holder := st["holder"].(map[string]any)
	require.Equal(t, -1.0, holder["ttl_ms"])
	require.Equal(t, "by-hand", holder["owner"])
	for _, n := range st["nodes"].([]any) {
		require.Equal(t, -1.0, n.(map[string]any)["ttl_ms"], r.stdout)
	}
	require.NotContains(t, r.stdout, token)

	r = cli(t, env, "status", "legacy")
	requireCode(t, r, exitOK, "")
	require.Regexp(t, `(?m)^127\.0\.0\.1:\d+\s+held\s+01234567\s+by-hand\s+no expiry\s`, r.stdout)
	require.Contains(t, r.stdout, "no expiry: not a redlock lock, it stays until deleted")
	require.NotContains(t, r.stdout, token)

	r = cli(t, env, "acquire", "legacy")
	requireCode(t, r, exitBusy, `"legacy" is busy: held by by-hand`)
	// The attempt stops at the second refusal: no majority is left.
	require.Regexp(t, `refused by 127\.0\.0\.1:\d+(, 127\.0\.0\.1:\d+)+ with no expiry`, r.stderr)
	require.NotContains(t, r.stderr, token)

	r = cli(t, env, "acquire", "legacy", "--json")
	requireCode(t, r, exitBusy, "with no expiry")
	obj := decode(t, r)
	require.Equal(t, -1.0, obj["holder_ttl_ms"])
	require.Contains(t, obj["message"], "with no expiry")

	r = cli(t, env, "acquire", "legacy", "--wait", "300ms")
	requireCode(t, r, exitBusy, `gave up waiting for "legacy" after 300ms: still busy, held by by-hand with no expiry`)
}

// TestE2EDoctorOneFail: the summary line's grammar for a single FAIL.
func TestE2EDoctorOneFail(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	require.NoError(t, c.Server(1).Kill())
	r := cli(t, nodesEnv(c.URLs()), "doctor", "--timeout", "1s")
	requireCode(t, r, exitFailure, "doctor: 1 check FAILs")
	require.Regexp(t, `(?m)^`+c.Server(1).Addr()+`\s+reachable\s+FAIL\s+connection refused`, r.stdout)
}
