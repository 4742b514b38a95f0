package cli

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/testutil"
)

// TestE2ELockCommands walks acquire, status, renew and release through
// every outcome against five real servers.
func TestE2ELockCommands(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 5)
	env := nodesEnv(c.URLs())

	r := cli(t, env, "acquire", "deploy", "--json", "--owner", "ci-job-42")
	requireCode(t, r, exitOK, "")
	acq := decode(t, r)
	token := acq["token"].(string)
	require.Regexp(t, `^[0-9a-f]{32}$`, token)
	require.Equal(t, "deploy", acq["resource"])
	require.Equal(t, "redlock:{deploy}", acq["key"])
	require.Equal(t, "ci-job-42", acq["owner"])
	require.GreaterOrEqual(t, acq["fence"].(float64), 1.0)
	require.GreaterOrEqual(t, len(acq["granted"].([]any)), 3)
	require.Greater(t, acq["ttl_ms"].(float64), 9000.0)
	_, err := time.Parse(time.RFC3339Nano, acq["expires_at"].(string))
	require.NoError(t, err)
	require.Empty(t, r.stderr)

	// The lock outlived the acquire process: status sees it, showing only
	// a token prefix.
	r = cli(t, env, "status", "deploy", "--json")
	requireCode(t, r, exitOK, "")
	st := decode(t, r)
	require.Equal(t, "held", st["state"])
	holder := st["holder"].(map[string]any)
	require.Equal(t, token[:8], holder["token_prefix"])
	require.Equal(t, "ci-job-42", holder["owner"])
	require.Equal(t, 5.0, st["answered"])
	require.Len(t, st["nodes"], 5)
	require.NotContains(t, r.stdout, token)

	r = cli(t, env, "status", "deploy")
	requireCode(t, r, exitOK, "")
	require.Contains(t, r.stdout, "held by ci-job-42 (token "+token[:8]+"...)")
	require.NotContains(t, r.stdout, token)
	require.Regexp(t, `(?m)^NODE\s+LOCK\s+TOKEN\s+OWNER\s+TTL\s+FENCE\s+WAITING\s+RTT\s+ERROR$`, r.stdout)

	// Busy: one attempt, exit 4, one line naming the holder.
	r = cli(t, env, "acquire", "deploy")
	requireCode(t, r, exitBusy, `"deploy" is busy: held by ci-job-42`)
	r = cli(t, env, "acquire", "deploy", "--json")
	requireCode(t, r, exitBusy, "is busy")
	busy := decode(t, r)
	require.Equal(t, "busy", busy["error"])
	require.Equal(t, 4.0, busy["exit_code"])
	require.Equal(t, "ci-job-42", busy["holder_owner"])

	// Waiting runs out: exit 4 too.
	r = cli(t, env, "acquire", "deploy", "--wait", "300ms")
	requireCode(t, r, exitBusy, `gave up waiting for "deploy" after 300ms`)

	// Renew with the token, and with a wrong one.
	r = cli(t, env, "renew", "deploy", "--token", token, "--ttl", "20s", "--json")
	requireCode(t, r, exitOK, "")
	require.Greater(t, decode(t, r)["ttl_ms"].(float64), 19000.0)
	wrong := strings.Repeat("0", 32)
	r = cli(t, env, "renew", "deploy", "--token", wrong)
	requireCode(t, r, exitNotHeld, `token held on 0 of 5 nodes`)
	r = cli(t, env, "release", "deploy", "--token", wrong, "--json")
	requireCode(t, r, exitNotHeld, "release")
	require.Equal(t, "not_held", decode(t, r)["error"])

	// Release, then the lock is free and the token holds nothing.
	r = cli(t, env, "release", "deploy", "--token", token)
	requireCode(t, r, exitOK, "")
	require.Equal(t, "released \"deploy\"\n", r.stdout)
	r = cli(t, env, "release", "deploy", "--token", token)
	requireCode(t, r, exitNotHeld, "token held on 0 of 5 nodes")
	r = cli(t, env, "renew", "deploy", "--token", token)
	requireCode(t, r, exitNotHeld, "")
	r = cli(t, env, "status", "deploy", "--json")
	requireCode(t, r, exitOK, "")
	require.Equal(t, "free", decode(t, r)["state"])

	// Text output of acquire carries everything a script needs.
	r = cli(t, env, "acquire", "deploy", "--ttl", "2s")
	requireCode(t, r, exitOK, "")
	for _, field := range []string{"resource:", "token:", "fence:", "owner:", "granted:", "expires:"} {
		require.Regexp(t, "(?m)^"+regexp.QuoteMeta(field)+`\s+\S`, r.stdout)
	}
	token2 := regexp.MustCompile(`(?m)^token:\s+([0-9a-f]{32})$`).FindStringSubmatch(r.stdout)
	require.Len(t, token2, 2, r.stdout)

	// With --wait, the next acquire gets it once the 2s TTL runs out.
	r = cli(t, env, "acquire", "deploy", "--wait", "10s", "--json")
	requireCode(t, r, exitOK, "")
	require.Greater(t, decode(t, r)["fence"].(float64), acq["fence"].(float64))
	require.Greater(t, r.elapsed, 500*time.Millisecond)
}

// TestE2ENoQuorum: with a majority of the nodes down, every command exits
// 3 with one line naming the failed nodes.
func TestE2ENoQuorum(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	r := cli(t, env, "acquire", "jobs", "--json")
	requireCode(t, r, exitOK, "")
	token := decode(t, r)["token"].(string)
	require.NoError(t, c.Server(0).Kill())
	require.NoError(t, c.Server(2).Kill())

	down := "cannot reach a majority of the nodes: 1 of 3 answered, 2 needed: "
	for _, args := range [][]string{
		{"acquire", "jobs"},
		{"acquire", "jobs", "--wait", "1s"},
		{"status", "jobs"},
		{"renew", "jobs", "--token", token},
		{"release", "jobs", "--token", token},
		{"run", "jobs", "--", "true"},
	} {
		r := cli(t, env, append(args, "--timeout", "500ms")...)
		requireCode(t, r, exitNoQuorum, down)
		require.Contains(t, r.stderr, c.Server(0).Addr()+": connection refused")
		require.Contains(t, r.stderr, c.Server(2).Addr()+": connection refused")
	}
	r = cli(t, env, "status", "jobs", "--json")
	requireCode(t, r, exitNoQuorum, "")
	require.Equal(t, "no_quorum", decode(t, r)["error"])
}

// TestE2EMinorityDown: one node of three down changes nothing for the
// user, and status shows the failed node with its error.
func TestE2EMinorityDown(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	require.NoError(t, c.Server(1).Kill())
	r := cli(t, env, "acquire", "jobs", "--json")
	requireCode(t, r, exitOK, "")
	token := decode(t, r)["token"].(string)

	r = cli(t, env, "status", "jobs", "--json")
	requireCode(t, r, exitOK, "")
	st := decode(t, r)
	require.Equal(t, "held", st["state"])
	require.Equal(t, 2.0, st["answered"])
	failed := st["nodes"].([]any)[1].(map[string]any)
	require.Equal(t, false, failed["reachable"])
	require.Equal(t, "connection refused", failed["error"])

	r = cli(t, env, "status", "jobs")
	require.Regexp(t, regexp.QuoteMeta(c.Server(1).Addr())+`\s+-.*connection refused`, r.stdout)
	r = cli(t, env, "release", "jobs", "--token", token)
	requireCode(t, r, exitOK, "")
}

// TestE2EBadInput: bad input against the real binary exits with its code
// and one line on stderr.
func TestE2EBadInput(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	wrong := strings.Repeat("ab", 16)
	tests := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"no nodes", nil, []string{"acquire", "x"}, exitUsage, "no nodes"},
		{"malformed URL", []string{envNodes + "=redis://:hunter2@[::1"}, []string{"status", "x"}, exitUsage, "malformed node URL redis://:xxxxx@[::1"},
		{"unknown flag", env, []string{"status", "x", "--colour"}, exitUsage, "unknown flag: --colour"},
		{"negative TTL", env, []string{"acquire", "x", "--ttl", "-3s"}, exitUsage, "--ttl must be a positive duration, got -3s"},
		{"empty resource", env, []string{"acquire", ""}, exitUsage, "empty resource name"},
		{"malformed token", env, []string{"release", "x", "--token", "nope"}, exitUsage, "--token must be 32 hex digits"},
		{"wrong token", env, []string{"release", "x", "--token", wrong}, exitNotHeld, `release "x": token held on 0 of 3 nodes, 2 needed; the lock expired (its --ttl passed without a renewal), was released, or is held by another token: see redlock-cli status x`},
		{"duplicate node", []string{envNodes + "=" + c.URLs()[0] + "," + c.URLs()[0]}, []string{"status", "x"}, exitUsage, "given twice"},
		{"bad db", []string{envNodes + "=" + c.URLs()[0] + "/x"}, []string{"status", "x"}, exitUsage, "the path must be a database number"},
		{"password as db", []string{envNodes + "=" + c.URLs()[0] + "/hunter2"}, []string{"status", "x"}, exitUsage, "/xxxxx: the path must be a database number"},
		{"unescaped # in password", []string{envNodes + "=redis://:hun#ter2@" + c.Server(0).Addr()}, []string{"status", "x"}, exitUsage, "not percent-encoded: write # as %23"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := cli(t, tt.env, tt.args...)
			requireCode(t, r, tt.code, tt.want)
			require.NotContains(t, r.stderr, "hunter2")
			require.Empty(t, r.stdout)
		})
	}
}

// TestE2EPasswordNodes: authenticated nodes work and the password is never
// printed.
func TestE2EPasswordNodes(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3, testutil.WithPassword("hunter2pw"))
	env := nodesEnv(c.URLs())
	r := cli(t, env, "acquire", "x", "--json")
	requireCode(t, r, exitOK, "")
	token := decode(t, r)["token"].(string)
	for _, args := range [][]string{{"status", "x"}, {"status", "x", "--json"}, {"doctor"}, {"doctor", "--json"}} {
		r = cli(t, env, args...)
		require.Contains(t, []int{exitOK}, r.code, r.stderr)
		require.NotContains(t, r.stdout+r.stderr, "hunter2pw")
	}
	bad := []string{envNodes + "=" + strings.ReplaceAll(strings.Join(c.URLs(), ","), "hunter2pw", "wrongpw12")}
	r = cli(t, bad, "release", "x", "--token", token)
	requireCode(t, r, exitAccessDenied, "WRONGPASS")
	require.NotContains(t, r.stderr, "wrongpw12")
}

// TestE2EAcquireSlot: acquire -n K takes one slot of the semaphore and
// prints its name, which renew and release take with the token, so that a
// shell script can hold a slot over several steps; with every slot taken,
// exit 4 naming the holders.
func TestE2EAcquireSlot(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	var slots []string
	var tokens []string
	for range 2 {
		r := cli(t, env, "acquire", "pool", "-n", "2", "--json", "--owner", "script")
		requireCode(t, r, exitOK, "")
		res := decode(t, r)
		require.Equal(t, "pool", res["semaphore"])
		require.Regexp(t, `^pool#[01]$`, res["resource"])
		slots = append(slots, res["resource"].(string))
		tokens = append(tokens, res["token"].(string))
	}
	require.NotEqual(t, slots[0], slots[1])
	r := cli(t, env, "acquire", "pool", "-n", "2")
	requireCode(t, r, exitBusy, `all 2 slots of "pool" are busy: pool#0 held by script`)

	r = cli(t, env, "renew", slots[0], "--token", tokens[0])
	requireCode(t, r, exitOK, "")
	r = cli(t, env, "release", slots[0], "--token", tokens[0])
	requireCode(t, r, exitOK, "")
	r = cli(t, env, "acquire", "pool", "-n", "2")
	requireCode(t, r, exitOK, "")
	require.Contains(t, r.stdout, "resource:  "+slots[0])
	require.Contains(t, r.stdout, "slot of:   pool (2 slots; renew and release take "+slots[0]+")")
}
