package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// readEnv reads what the "env" child wrote.
func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	var got map[string]string
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(b), &got))
	return got
}

// TestE2ERunShared: run --shared runs COMMAND as a reader beside another
// reader; run --rw (the writer) is refused while a reader holds the lock
// (exit 4), and status --rw shows the reader; once it is gone, the writer
// runs.
func TestE2ERunShared(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	out := filepath.Join(t.TempDir(), "env.json")
	l, err := redlock.New(c.Nodes(), redlock.Config{})
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	rw, err := l.NewRWLock("doc")
	require.NoError(t, err)
	reader, err := rw.TryAcquireShared(testutil.Context(t))
	require.NoError(t, err)

	r := cli(t, append(env, childEnv("env", out)...), "run", "--shared", "doc", "--json", "--", testBin)
	requireCode(t, r, exitOK, "")
	res := decode(t, r)
	require.Equal(t, true, res["shared"])
	require.Greater(t, res["fence"].(float64), float64(reader.Fence()))
	require.Equal(t, "doc", readEnv(t, out)[envResource])

	r = cli(t, env, "run", "--rw", "doc", "--", testBin)
	// The busy message names the lock and who holds it.
	requireCode(t, r, exitBusy, `the read-write lock "doc" is busy: read by 1 reader (`+l.Config().Owner+`)`)
	r = cli(t, env, "status", "--rw", "doc", "--json")
	requireCode(t, r, exitOK, "")
	st := decode(t, r)
	require.Equal(t, "read", st["state"])
	require.Nil(t, st["writer"])
	require.Len(t, st["readers"], 1)
	require.Len(t, st["nodes"], 3)

	require.NoError(t, reader.Release(testutil.Context(t)))
	r = cli(t, append(env, childEnv("env", out)...), "run", "--rw", "doc", "--json", "--", testBin)
	requireCode(t, r, exitOK, "")
	require.Equal(t, true, decode(t, r)["rw"])
	r = cli(t, env, "status", "--rw", "doc", "--json")
	require.Equal(t, "free", decode(t, r)["state"])
}

// TestE2ERunSeveralResources: run A B C takes all three (COMMAND gets each
// one's variables), or, with one busy, none (exit 4, COMMAND not run,
// the others left free).
func TestE2ERunSeveralResources(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	out := filepath.Join(t.TempDir(), "env.json")

	r := cli(t, append(env, childEnv("env", out)...), "run", "a", "b", "c", "--json", "--", testBin)
	requireCode(t, r, exitOK, "")
	res := decode(t, r)
	require.Equal(t, []any{"a", "b", "c"}, res["resources"])
	require.Len(t, res["fences"], 3)
	got := readEnv(t, out)
	require.Equal(t, "3", got[envCount])
	require.Equal(t, "a", got[envResource])
	require.Equal(t, "c", got[envResource+"_2"])
	require.Equal(t, got[envFence], got[envFence+"_0"])
	require.Regexp(t, `^[0-9a-f]{32}$`, got[envToken+"_1"])

	r = cli(t, env, "acquire", "b", "--ttl", "60s", "--owner", "holder-of-b")
	requireCode(t, r, exitOK, "")
	require.NoError(t, os.Remove(out))
	r = cli(t, append(env, childEnv("env", out)...), "run", "a", "b", "c", "--", testBin)
	// The busy message names the busy resource and its holder.
	requireCode(t, r, exitBusy, `1 of the 3 resources is busy: "b" held by holder-of-b for `)
	r = cli(t, env, "run", "a", "b", "c", "--json", "--", "true")
	busy := decode(t, r)["busy"].([]any)
	require.Len(t, busy, 1)
	require.Equal(t, "b", busy[0].(map[string]any)["resource"])
	require.Equal(t, "holder-of-b", busy[0].(map[string]any)["owner"])
	_, err := os.Stat(out)
	require.True(t, os.IsNotExist(err), "COMMAND ran without every lock")
	for _, name := range []string{"a", "c"} {
		r = cli(t, env, "status", name, "--json")
		require.Equal(t, "free", decode(t, r)["state"], name)
	}
}

// TestE2ERunBadResourceSets: the combinations run refuses (exit 2).
func TestE2ERunBadResourceSets(t *testing.T) {
	t.Parallel()
	env := nodesEnv([]string{"redis://127.0.0.1:1"})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a resource twice", []string{"run", "a", "b", "a", "--", "true"}, `"a" given twice`},
		{"several shared", []string{"run", "--shared", "a", "b", "--", "true"}, "several resources"},
		{"several with -n", []string{"run", "-n", "2", "a", "b", "--", "true"}, "several resources"},
		{"shared and rw", []string{"run", "--shared", "--rw", "a", "--", "true"}, "exclude each other"},
		{"shared with -n", []string{"run", "--shared", "-n", "2", "a", "--", "true"}, "does not go with"},
		{"status --rw with -n", []string{"status", "--rw", "-n", "2", "a"}, "does not go with"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, env, tc.args...)
			requireCode(t, r, exitUsage, tc.want)
		})
	}
}
