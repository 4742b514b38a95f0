package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/testutil"
)

// TestE2EWaitOutlastsAMajorityDown: with --wait, acquire and run keep
// trying while no majority of the nodes can be reached at start, and take
// the lock once the nodes are back; when they stay down, they give up only
// when the wait has passed (exit 3, saying how long they waited).
func TestE2EWaitOutlastsAMajorityDown(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	require.NoError(t, c.Server(0).Kill())
	require.NoError(t, c.Server(1).Kill())

	// Down for the whole wait: exit 3, after the wait, not at once.
	for _, args := range [][]string{
		{"acquire", "jobs", "--wait", "1s", "--timeout", "300ms"},
		{"run", "jobs", "--wait", "1s", "--timeout", "300ms", "--", "true"},
	} {
		r := cli(t, env, args...)
		requireCode(t, r, exitNoQuorum, "still after waiting 1s: cannot reach a majority of the nodes: 1 of 3 answered, 2 needed")
		require.GreaterOrEqual(t, r.elapsed, time.Second, args[0])
	}
	r := cli(t, env, "acquire", "jobs", "--wait", "500ms", "--timeout", "300ms", "--json")
	requireCode(t, r, exitNoQuorum, "still after waiting 500ms")
	obj := decode(t, r)
	require.Equal(t, "no_quorum", obj["error"])
	require.Equal(t, 500.0, obj["waited_ms"])

	// Without --wait: one try, at once.
	r = cli(t, env, "acquire", "jobs", "--timeout", "300ms")
	requireCode(t, r, exitNoQuorum, "cannot reach a majority")
	require.NotContains(t, r.stderr, "still after waiting")

	// The nodes come back during the wait: the lock is taken.
	cmd := cliCommand(t, env, "acquire", "jobs", "--wait", "20s", "--timeout", "300ms", "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	require.NoError(t, cmd.Start())
	time.Sleep(time.Second)
	require.NoError(t, c.Server(0).Restart())
	require.NoError(t, c.Server(1).Restart())
	r = waitCLI(t, cmd, &stdout, &stderr, start)
	requireCode(t, r, exitOK, "")
	require.Greater(t, r.elapsed, time.Second)
	require.Equal(t, "jobs", decode(t, r)["resource"])
}
