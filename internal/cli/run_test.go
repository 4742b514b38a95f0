package cli

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/e6344662/go-redlock/testutil"
)

// TestRunInProcess runs "run" in this process against miniredis nodes and
// checks exit codes and that no goroutine outlives the command. It is not
// parallel: run makes the process a child subreaper and reaps ended
// children, which must not race with the end-to-end tests' own children.
func TestRunInProcess(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	env := map[string]string{envNodes: strings.Join(c.URLs(), ",")}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	code, stdout, stderr := runInProcess(t, env, "run", "job", "--", "sh", "-c", `test -n "$REDLOCK_TOKEN" && echo fence=$REDLOCK_FENCE`)
	require.Equal(t, exitOK, code, stderr)
	require.Regexp(t, `^fence=[1-9][0-9]*\n$`, stdout)
	first, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(stdout, "fence=")), 10, 64)
	require.NoError(t, err)

	code, _, stderr = runInProcess(t, env, "run", "job", "--", "sh", "-c", "exit 9")
	require.Equal(t, 9, code)
	require.Empty(t, stderr)

	code, stdout, _ = runInProcess(t, env, "run", "job", "--json", "--", "sh", "-c", "kill -TERM $$")
	require.Equal(t, 143, code)
	require.Contains(t, stdout, `"child_signal":"terminated"`)

	code, stdout, _ = runInProcess(t, env, "status", "job", "--json")
	require.Equal(t, exitOK, code)
	require.Contains(t, stdout, `"state":"free"`)
	var st struct{ Fence uint64 }
	require.NoError(t, json.Unmarshal([]byte(stdout), &st))
	require.Greater(t, st.Fence, first, "two more holders since the first")
}

// TestFlockArgs: "run" without -- reads its arguments as flock(1) does:
// RESOURCE, then COMMAND from the first argument that is not run's flag;
// other command lines are left alone.
func TestFlockArgs(t *testing.T) {
	a := &App{}
	root := a.newRoot()
	tests := []struct {
		args, want []string
	}{
		{[]string{"run", "job", "echo", "hi"}, []string{"run", "job", "--", "echo", "hi"}},
		{[]string{"--json", "--nodes", "redis://h:1", "run", "job", "ls", "-la"}, []string{"--json", "--nodes", "redis://h:1", "run", "job", "--", "ls", "-la"}},
		{[]string{"run", "--wait", "5s", "job", "tail", "-n", "5", "f"}, []string{"run", "--wait", "5s", "job", "--", "tail", "-n", "5", "f"}},
		{[]string{"run", "job", "--wait=5s", "-n", "3", "--shared", "cmd", "--json"}, []string{"run", "job", "--wait=5s", "-n", "3", "--shared", "--", "cmd", "--json"}},
		{[]string{"run", "job", "--", "echo", "hi"}, []string{"run", "job", "--", "echo", "hi"}},
		{[]string{"run", "a", "b", "--", "true"}, []string{"run", "a", "b", "--", "true"}},
		{[]string{"run", "job"}, []string{"run", "job"}},
		{[]string{"run"}, []string{"run"}},
		{[]string{"acquire", "job", "x"}, []string{"acquire", "job", "x"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			require.Equal(t, tt.want, flockArgs(root, tt.args))
		})
	}
}

// TestRunWithoutDash: "run job COMMAND" runs COMMAND (it once panicked),
// and "run job" alone is a usage error, as JSON under --json.
func TestRunWithoutDash(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	env := map[string]string{envNodes: strings.Join(c.URLs(), ",")}
	code, stdout, stderr := runInProcess(t, env, "run", "job", "sh", "-c", "echo hi $REDLOCK_RESOURCE")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, "hi job\n", stdout)

	code, stdout, stderr = runInProcess(t, env, "run", "--json", "job")
	require.Equal(t, exitUsage, code)
	requireOneLine(t, stderr, "no COMMAND")
	require.Contains(t, stdout, `"error":"usage"`)
}
