package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/testutil"
)

// fencedPsql is the shell one-liner of docs/fencing.md: a job under
// "redlock-cli run" whose SQL starts with redlock_fence, in one
// transaction (-1) that stops at the first error.
const fencedPsql = `psql -X -q -1 -v ON_ERROR_STOP=1 -v fence="$REDLOCK_FENCE" -v resource="$REDLOCK_RESOURCE" -f nightly.sql`

// nightlySQL is the job's SQL file: the fence first (\gset keeps its
// result off the output), then the write.
const nightlySQL = `SELECT redlock_fence(:'resource', :fence) AS fenced \gset
INSERT INTO nightly_runs (fence) VALUES (:fence);
`

// TestE2EFencedPsql: cron jobs under "redlock-cli run" get fenced writes
// in PostgreSQL with psql alone, through REDLOCK_FENCE and the SQL function
// redlock_fence (fencing/pgfence's migration). Each run's write lands; a
// job that resumes with an older run's fence after a newer run wrote (a
// paused job) is refused by the database, psql exits 3 with the reason,
// and nothing of it is written.
func TestE2EFencedPsql(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	pg := testutil.StartPostgres(t)
	psqlDir := pg.BinDir()
	if _, err := os.Stat(filepath.Join(psqlDir, "psql")); err != nil {
		p, err := exec.LookPath("psql")
		require.NoError(t, err, "psql (postgresql-client) is needed beside the server")
		psqlDir = filepath.Dir(p)
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nightly.sql"), []byte(nightlySQL), 0o644))
	env := append(nodesEnv(c.URLs()), pg.Env()...)
	env = append(env, "PATH="+psqlDir+string(os.PathListSeparator)+os.Getenv("PATH"))

	psql := func(extra []string, args ...string) (string, int) {
		cmd := exec.Command(filepath.Join(psqlDir, "psql"), append([]string{"-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), env...), extra...)
		out, _ := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), cmd.ProcessState.ExitCode()
	}
	migration, err := filepath.Abs(filepath.Join("..", "..", "fencing", "pgfence", "migrations", "0001_redlock_fence.sql"))
	require.NoError(t, err)
	out, code := psql(nil, "-f", migration)
	require.Zero(t, code, "migration: %s", out)
	out, code = psql(nil, "-c", "CREATE TABLE nightly_runs (fence bigint NOT NULL)")
	require.Zero(t, code, out)

	// Two runs, one after the other: both write, with increasing fences.
	var fences []uint64
	for range 2 {
		r := runIn(t, dir, env, "run", "nightly", "--", "sh", "-c", fencedPsql+` && echo "fence=$REDLOCK_FENCE"`)
		requireCode(t, r, exitOK, "")
		v, ok := strings.CutPrefix(strings.TrimSpace(r.stdout), "fence=")
		require.True(t, ok, "stdout: %q, stderr: %q", r.stdout, r.stderr)
		f, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err)
		fences = append(fences, f)
	}
	require.Greater(t, fences[1], fences[0])
	out, _ = psql(nil, "-c", "SELECT string_agg(fence::text, ',' ORDER BY fence) FROM nightly_runs")
	require.Equal(t, strconv.FormatUint(fences[0], 10)+","+strconv.FormatUint(fences[1], 10), out)

	// The first job, paused past its lease, resumes with its old fence:
	// the database refuses it.
	cmd := exec.Command("sh", "-c", fencedPsql)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), env...), "REDLOCK_FENCE="+strconv.FormatUint(fences[0], 10), "REDLOCK_RESOURCE=nightly")
	b, err := cmd.CombinedOutput()
	require.Error(t, err, "%s", b)
	require.Equal(t, 3, cmd.ProcessState.ExitCode(), "psql's exit code for an error in a script under ON_ERROR_STOP; output: %s", b)
	require.Contains(t, string(b), `redlock fencing: stale token `+strconv.FormatUint(fences[0], 10)+` for "nightly": highest accepted is `+strconv.FormatUint(fences[1], 10))
	out, _ = psql(nil, "-c", "SELECT count(*) FROM nightly_runs")
	require.Equal(t, "2", out, "the stale job wrote nothing")
}

// runIn runs the binary with args in dir (where COMMAND finds its files).
func runIn(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	cmd := cliCommand(t, env, args...)
	cmd.Dir = dir
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	require.NoError(t, cmd.Start())
	return waitCLI(t, cmd, &stdout, &stderr, start)
}
