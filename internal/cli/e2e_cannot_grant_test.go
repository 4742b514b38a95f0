package cli

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/testutil"
)

// TestE2ENodesThatCannotGrant: when too many nodes for a majority are out
// of memory, acquire says so and exits 8 (not 3, "cannot reach"), at once
// even with --wait: waiting does not free memory.
func TestE2ENodesThatCannotGrant(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	ctx := testutil.Context(t)
	for _, s := range c.Servers()[1:] {
		require.NoError(t, s.Do(ctx, "DEBUG", "POPULATE", 20000, "filler", 100).Err())
		require.NoError(t, s.Do(ctx, "CONFIG", "SET", "maxmemory", "1mb").Err())
	}
	env := nodesEnv(c.URLs())

	r := cli(t, env, "acquire", "full")
	requireCode(t, r, exitCannotGrant, `"full" cannot be granted: 2 of 3 nodes are out of memory (free memory or raise maxmemory), too many for the 2 needed: `)
	require.Equal(t, 1, strings.Count(r.stderr, "OOM"), r.stderr)
	require.Equal(t, 1, strings.Count(r.stderr, "out of memory"), r.stderr)

	r = cli(t, env, "acquire", "full", "--wait", "20s", "--json")
	requireCode(t, r, exitCannotGrant, "out of memory")
	require.Less(t, r.elapsed, 10*time.Second, "gave up at once, not after --wait")
	e := decode(t, r)
	require.Equal(t, kindNodeFull, e["error"])
	require.Equal(t, float64(exitCannotGrant), e["exit_code"])
	require.Equal(t, 3.0, e["total"])
	require.Equal(t, 2.0, e["needed"])

	for i, s := range c.Servers() {
		n, err := s.Do(context.WithoutCancel(ctx), "EXISTS", "redlock:{full}").Int()
		require.NoError(t, err)
		require.Zero(t, n, "node %d: no lock left behind", i)
	}
	require.False(t, strings.Contains(r.stdout, "no_quorum"))

	// doctor agrees: the full nodes are FAIL (it said "no FAIL" before).
	r = cli(t, env, "doctor")
	requireCode(t, r, exitFailure, "FAIL")
	for _, s := range c.Servers()[1:] {
		require.Regexp(t, regexp.QuoteMeta(s.Addr())+`\s+memory\s+FAIL\s+out of memory: `, r.stdout)
	}
	require.Regexp(t, regexp.QuoteMeta(c.Server(0).Addr())+`\s+memory\s+OK\s+`, r.stdout)
}

// TestE2EReplicasCannotGrant: a majority of read-only replicas exits 8
// with one message that says it once, names the replicas and quotes the
// server's reply once.
func TestE2EReplicasCannotGrant(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 4)
	ctx := testutil.Context(t)
	for _, s := range c.Servers()[2:] {
		require.NoError(t, s.Do(ctx, "REPLICAOF", "127.0.0.1", c.Server(0).Port()).Err())
	}
	env := nodesEnv(c.URLs()[1:])
	r := cli(t, env, "acquire", "ro")
	requireCode(t, r, exitCannotGrant, `"ro" cannot be granted: 2 of 3 nodes are read-only replicas (every node must be a primary: check the node URLs), too many for the 2 needed: `)
	require.Contains(t, r.stderr, c.Server(2).Addr())
	require.Contains(t, r.stderr, c.Server(3).Addr())
	require.Equal(t, 1, strings.Count(r.stderr, "a replica is never a vote"), r.stderr)
	require.Equal(t, 1, strings.Count(r.stderr, "read-only"), r.stderr)

	r = cli(t, env, "acquire", "ro", "--json")
	requireCode(t, r, exitCannotGrant, "read-only replicas")
	require.Equal(t, kindReadOnly, decode(t, r)["error"])
}

// TestE2EScriptsDisabled: nodes with EVALSHA and EVAL renamed away answer
// every command but the scripts. A majority of them exits 8
// (scripts_disabled), not 3 ("cannot reach", retry may help); a minority
// leaves the lock to the others, with a warning.
func TestE2EScriptsDisabled(t *testing.T) {
	t.Parallel()
	// FCALL too: the nodes run the scripts as functions where they can.
	renamed := testutil.WithConfig(`rename-command EVALSHA ""`, `rename-command EVAL ""`, `rename-command FCALL ""`)
	c := testutil.StartRedis(t, 3, renamed)
	env := nodesEnv(c.URLs())
	for _, args := range [][]string{{"acquire", "x"}, {"acquire", "x", "--wait", "5s"}, {"status", "x"}, {"run", "x", "--", "true"}} {
		r := cli(t, env, args...)
		requireCode(t, r, exitCannotGrant, "the nodes cannot run redlock's scripts: ")
		require.Contains(t, r.stderr, "have EVALSHA or EVAL renamed or disabled (rename-command), too many for the 2 needed")
		require.NotContains(t, r.stderr, "cannot reach")
		require.Less(t, r.elapsed, 4*time.Second, "%q gave up at once", args)
	}
	r := cli(t, env, "acquire", "x", "--json")
	requireCode(t, r, exitCannotGrant, "")
	obj := decode(t, r)
	require.Equal(t, "scripts_disabled", obj["error"])
	require.GreaterOrEqual(t, len(obj["nodes"].([]any)), 2)

	// One such node of three: the lock works, and the node is named.
	good := testutil.StartRedis(t, 2)
	bad := testutil.StartRedisServer(t, renamed)
	r = cli(t, nodesEnv(append(good.URLs(), bad.URL())), "acquire", "y")
	requireCode(t, r, exitOK, "warning: node "+bad.Addr()+" cannot take part in the quorum: EVALSHA or EVAL is renamed or disabled")

	// EVAL alone renamed (and FCALL, which would run the scripts
	// otherwise): EVALSHA answers NOSCRIPT, and the EVAL that
	// follows is refused as an unknown command, whose reply quotes its
	// arguments (the Lua source). The warning does not.
	evalOnly := testutil.StartRedisServer(t, testutil.WithConfig(`rename-command EVAL ""`, `rename-command FCALL ""`))
	r = cli(t, nodesEnv(append(good.URLs(), evalOnly.URL())), "acquire", "z", "--rejoin-delay", "0")
	requireCode(t, r, exitOK, "warning: node "+evalOnly.Addr()+" cannot take part in the quorum: EVALSHA or EVAL is renamed or disabled")
	require.Contains(t, r.stderr, "unknown command")
	require.NotContains(t, r.stderr, "with args beginning with")
	require.NotContains(t, r.stderr, "--", "no Lua source")
}

// TestE2EMixedPermanentFailures: a wrong password on one node and a
// replica as another leave no majority; both answered, and retrying cannot
// help: exit 8 (misconfigured), naming each with what to fix, not 3
// ("cannot reach") and not "rejoin state unknown:". Also with --wait: it
// gives up at once.
func TestE2EMixedPermanentFailures(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 2)
	pw := testutil.StartRedisServer(t, testutil.WithPassword("rightPW123"))
	ctx := testutil.Context(t)
	require.NoError(t, testutil.ReplicaOf(ctx, c.Server(1), c.Server(0)))
	// A primary's first replica gives it a new replication id, which the
	// data-loss rule reads as a loss (Safety v4): vouch for it again, so
	// that only the two misconfigured nodes speak.
	require.NoError(t, c.Server(0).Vouch(ctx))
	urls := []string{c.Server(0).URL(), strings.ReplaceAll(pw.URL(), "rightPW123", "wrongPW456"), c.Server(1).URL()}
	// The replica is a replica from the start: the node list has no
	// other primary than c.Server(0).
	for _, args := range [][]string{{"acquire", "x"}, {"run", "x", "--", "true"}, {"acquire", "x", "--wait", "3s"}} {
		r := cli(t, nodesEnv(urls), args...)
		requireCode(t, r, exitCannotGrant, "no majority can grant: 2 of 3 nodes answered but cannot take part")
		require.Contains(t, r.stderr, pw.Addr()+": WRONGPASS")
		require.Contains(t, r.stderr, "check the user and password in its URL")
		require.Contains(t, r.stderr, c.Server(1).Addr()+": REPLICA redlock: this node is a replica of ")
		require.Contains(t, r.stderr, "every node must be a primary")
		require.NotContains(t, r.stderr, "rejoin state unknown")
		require.NotContains(t, r.stderr, "cannot reach")
		require.NotContains(t, r.stderr, "wrongPW456")
	}
	r := cli(t, nodesEnv(urls), "acquire", "x", "--json")
	require.Equal(t, kindMisconfigured, decode(t, r)["error"])
}
