package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/testutil"
)

// TestE2ERunEnvAndExitCode: run gives COMMAND the lease's variables, exits
// with COMMAND's code and releases the lock.
func TestE2ERunEnvAndExitCode(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	out := filepath.Join(t.TempDir(), "env.json")

	r := cli(t, append(env, childEnv("env", out, "REDLOCK_E2E_EXIT=7")...), "run", "build-cache", "--", testBin, "-test.run=^$")
	requireCode(t, r, 7, "")
	require.Empty(t, r.stderr)
	var got map[string]string
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(b), &got))
	require.Equal(t, "build-cache", got[envResource])
	require.Regexp(t, `^[0-9a-f]{32}$`, got[envToken])
	fence, err := strconv.ParseUint(got[envFence], 10, 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, fence, uint64(1))

	// Released on exit: the lock is free and the token holds nothing.
	r = cli(t, env, "status", "build-cache", "--json")
	requireCode(t, r, exitOK, "")
	require.Equal(t, "free", decode(t, r)["state"])
	r = cli(t, env, "release", "build-cache", "--token", got[envToken])
	requireCode(t, r, exitNotHeld, "")

	// Exit 0, and the JSON result after COMMAND's own output.
	r = cli(t, append(env, childEnv("env", out, "REDLOCK_E2E_EXIT=0")...), "run", "build-cache", "--json", "--", testBin)
	requireCode(t, r, exitOK, "")
	res := decode(t, r)
	require.Equal(t, 0.0, res["exit_code"])
	require.Equal(t, 0.0, res["child_exit_code"])
	require.Equal(t, false, res["lease_lost"])
	require.Equal(t, true, res["released"])
	require.Greater(t, res["fence"].(float64), float64(fence))

	// A COMMAND killed by a signal: 128 + the signal number.
	r = cli(t, append(env, childEnv("selfkill", out)...), "run", "build-cache", "--", testBin)
	requireCode(t, r, 128+int(syscall.SIGKILL), "")

	// COMMAND not found, or not executable: 127 and 126, lock released.
	r = cli(t, env, "run", "build-cache", "--", "/nonexistent/tool", "-x")
	requireCode(t, r, exitNotFound, `COMMAND "/nonexistent/tool" not found`)
	r = cli(t, env, "run", "build-cache", "--", out)
	requireCode(t, r, exitCannotExec, "permission denied")
	r = cli(t, env, "status", "build-cache", "--json")
	require.Equal(t, "free", decode(t, r)["state"])
}

// TestE2ERunBusy: with the lock held, run exits 4 without starting COMMAND,
// or waits for it with --wait.
func TestE2ERunBusy(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	out := filepath.Join(t.TempDir(), "out")
	r := cli(t, env, "acquire", "nightly", "--ttl", "1500ms")
	requireCode(t, r, exitOK, "")

	r = cli(t, append(env, childEnv("env", out)...), "run", "nightly", "--", testBin)
	requireCode(t, r, exitBusy, `"nightly" is busy`)
	_, err := os.Stat(out)
	require.True(t, os.IsNotExist(err), "COMMAND ran without the lock")

	r = cli(t, append(env, childEnv("env", out)...), "run", "nightly", "--wait", "10s", "--", testBin)
	requireCode(t, r, exitOK, "")
	_, err = os.Stat(out)
	require.NoError(t, err)
}

// TestE2ERunNoOverlap: concurrent runs of one resource never overlap, and
// REDLOCK_FENCE strictly increases from one holder to the next.
func TestE2ERunNoOverlap(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 5)
	out := filepath.Join(t.TempDir(), "intervals")
	env := append(nodesEnv(c.URLs()), childEnv("interval", out, "REDLOCK_E2E_SLEEP=150ms")...)

	const procs, rounds = 3, 3
	var wg sync.WaitGroup
	results := make([][]result, procs)
	for p := range procs {
		wg.Go(func() {
			for range rounds {
				results[p] = append(results[p], cli(t, env, "run", "shared", "--wait", "20s", "--", testBin))
			}
		})
	}
	wg.Wait()
	for _, rs := range results {
		for _, r := range rs {
			requireCode(t, r, exitOK, "")
		}
	}

	type interval struct {
		start, end int64
		fence      uint64
	}
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	open := map[uint64]int64{}
	var ivs []interval
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var kind string
		var at int64
		var fence uint64
		_, err := fmt.Sscanf(line, "%s %d %d", &kind, &at, &fence)
		require.NoError(t, err, line)
		if kind == "start" {
			open[fence] = at
			continue
		}
		ivs = append(ivs, interval{start: open[fence], end: at, fence: fence})
	}
	require.Len(t, ivs, procs*rounds)
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].start < ivs[j].start })
	for i := 1; i < len(ivs); i++ {
		require.Greater(t, ivs[i].start, ivs[i-1].end, "runs %d and %d overlap", i-1, i)
		require.Greater(t, ivs[i].fence, ivs[i-1].fence, "REDLOCK_FENCE did not increase")
	}
}

// TestE2ERunLeaseLost: killing a majority of the nodes while COMMAND runs
// ends the lease; COMMAND is stopped and run exits 6.
func TestE2ERunLeaseLost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode      string
		wantMsg   string
		killAfter string
	}{
		{"hang", "COMMAND was stopped (SIGTERM)", "10s"},
		{"stubborn", "COMMAND was stopped (SIGTERM, then SIGKILL)", "300ms"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			c := testutil.StartRedis(t, 5)
			out := filepath.Join(t.TempDir(), "out")
			cmd := cliCommand(t, append(nodesEnv(c.URLs()), childEnv(tt.mode, out)...),
				"run", "leader", "--ttl", "1s", "--kill-after", tt.killAfter, "--json", "--", testBin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			require.NoError(t, cmd.Start())
			pid := readPID(t, out)
			for i := range 3 {
				require.NoError(t, c.Server(i).Kill())
			}
			r := waitCLI(t, cmd, &stdout, &stderr, start)
			require.Equal(t, exitLeaseLost, r.code, "stderr: %s", r.stderr)
			require.Contains(t, r.stderr, `redlock-cli: lease on "leader" lost; sending SIGTERM to COMMAND`)
			require.Contains(t, r.stderr, tt.wantMsg)
			require.NotContains(t, r.stderr, "goroutine ")
			res := decode(t, r)
			require.Equal(t, true, res["lease_lost"])
			require.Equal(t, 6.0, res["exit_code"])
			require.True(t, processGone(pid), "COMMAND (pid %d) outlived run", pid)
			require.Less(t, r.elapsed, 8*time.Second)
		})
	}
}

// TestE2ERunForwardsSignals: SIGTERM to redlock-cli reaches COMMAND, whose
// exit code run passes on; the lock is released.
func TestE2ERunForwardsSignals(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	out := filepath.Join(t.TempDir(), "out")
	cmd := cliCommand(t, append(env, childEnv("trap", out)...), "run", "svc", "--", testBin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	require.NoError(t, cmd.Start())
	readPID(t, out)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	r := waitCLI(t, cmd, &stdout, &stderr, start)
	requireCode(t, r, 3, "")
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Contains(t, string(b), "got SIGTERM")
	r = cli(t, env, "status", "svc", "--json")
	require.Equal(t, "free", decode(t, r)["state"])
}

// TestE2ERunSecondSignalKills: a COMMAND that ignores the Ctrl-C that run
// forwards keeps running; a second Ctrl-C kills it (SIGKILL to its group),
// run exits 137 and releases the lock.
func TestE2ERunSecondSignalKills(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	out := filepath.Join(t.TempDir(), "out")
	cmd := cliCommand(t, append(env, childEnv("deaf", out)...), "run", "svc", "--json", "--", testBin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	require.NoError(t, cmd.Start())
	pid := readPID(t, out)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	time.Sleep(300 * time.Millisecond)
	require.False(t, processGone(pid), "COMMAND ignores the first SIGINT")
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	r := waitCLI(t, cmd, &stdout, &stderr, start)
	requireCode(t, r, 128+int(syscall.SIGKILL), "SIGINT (Ctrl-C) again while COMMAND still runs; sending SIGKILL")
	require.Less(t, r.elapsed, 5*time.Second)
	require.True(t, processGone(pid))
	res := decode(t, r)
	require.Equal(t, "killed", res["child_signal"])
	require.Equal(t, true, res["released"])
	r = cli(t, env, "status", "svc", "--json")
	require.Equal(t, "free", decode(t, r)["state"])
}

// TestE2ERunReapsGroup: processes COMMAND leaves behind in its group are
// stopped before the lock is released.
func TestE2ERunReapsGroup(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	out := filepath.Join(t.TempDir(), "out")
	r := cli(t, append(nodesEnv(c.URLs()), childEnv("spawn", out)...), "run", "svc", "--", testBin)
	requireCode(t, r, exitOK, "")
	require.Contains(t, r.stderr, "left processes in its group")
	pid := readPID(t, out)
	waitFor(t, 5*time.Second, "the grandchild to be gone", func() bool { return processGone(pid) })
}

// TestE2ERunInterrupted: a signal while run waits for the lock ends it
// with 128+signal, and COMMAND never starts.
func TestE2ERunInterrupted(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	out := filepath.Join(t.TempDir(), "out")
	r := cli(t, env, "acquire", "svc")
	requireCode(t, r, exitOK, "")
	cmd := cliCommand(t, append(env, childEnv("env", out)...), "run", "svc", "--wait", "20s", "--", testBin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	require.NoError(t, cmd.Start())
	// Once run waits in the lock's queue (its signal handler is set: a
	// fixed sleep was too short for a race-enabled binary under load).
	waitFor(t, 10*time.Second, "run to wait in the queue", func() bool {
		st := cli(t, env, "status", "svc", "--json")
		return st.code == exitOK && decode(t, st)["waiting"].(float64) >= 1
	})
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	r = waitCLI(t, cmd, &stdout, &stderr, start)
	requireCode(t, r, 128+int(syscall.SIGINT), "interrupted by SIGINT (Ctrl-C)")
	_, err := os.Stat(out)
	require.True(t, os.IsNotExist(err))
}

// TestE2ERunSemaphore: "run -n 2" lets two COMMANDs run at once and never
// three; a third run without --wait exits 4 (busy) while two hold slots,
// and "status -n 2" shows both slots held.
func TestE2ERunSemaphore(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	out := filepath.Join(t.TempDir(), "slots")
	const procs = 4
	// Each COMMAND waits for a second one inside (pairUp), so that two
	// overlap whatever the load does to the processes' starts.
	slotEnv := append(env, childEnv("slot", out, "REDLOCK_E2E_SLEEP=300ms", fmt.Sprintf("REDLOCK_E2E_PAIR=%d", procs))...)

	var wg sync.WaitGroup
	results := make([]result, procs)
	for p := range procs {
		wg.Go(func() { results[p] = cli(t, slotEnv, "run", "encoders", "-n", "2", "--wait", "20s", "--", testBin) })
	}
	wg.Wait()
	for _, r := range results {
		requireCode(t, r, exitOK, "")
	}
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	type event struct {
		at    int64
		delta int
		slot  string
	}
	var events []event
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var kind, slot string
		var at int64
		_, err := fmt.Sscanf(line, "%s %d %s", &kind, &at, &slot)
		require.NoError(t, err, line)
		require.Regexp(t, `^encoders#[01]$`, slot)
		d := 1
		if kind == "end" {
			d = -1
		}
		events = append(events, event{at, d, slot})
	}
	require.Len(t, events, 2*procs)
	sort.Slice(events, func(i, j int) bool { return events[i].at < events[j].at })
	inside, most := 0, 0
	for _, e := range events {
		inside += e.delta
		most = max(most, inside)
	}
	require.Equal(t, 2, most, "two at once, never three")

	// Two slots held: a third holder is refused, and status shows them.
	requireCode(t, cli(t, env, "acquire", "encoders#0", "--ttl", "30s", "--owner", "enc-a"), exitOK, "")
	requireCode(t, cli(t, env, "acquire", "encoders#1", "--ttl", "30s", "--owner", "enc-b"), exitOK, "")
	r := cli(t, env, "run", "encoders", "-n", "2", "--", testBin)
	requireCode(t, r, exitBusy, `all 2 slots of "encoders" are busy: encoders#0 held by enc-a for `)
	require.Regexp(t, `encoders#0 held by enc-a for [0-9.]+s more; encoders#1 held by enc-b for [0-9.]+s more`, r.stderr)
	r = cli(t, env, "run", "encoders", "-n", "2", "--json", "--", testBin)
	requireCode(t, r, exitBusy, "all 2 slots")
	busy := decode(t, r)
	require.Equal(t, "busy", busy["error"])
	slots := busy["slots"].([]any)
	require.Len(t, slots, 2)
	for i, owner := range []string{"enc-a", "enc-b"} {
		sl := slots[i].(map[string]any)
		require.Equal(t, fmt.Sprintf("encoders#%d", i), sl["slot"])
		require.Equal(t, owner, sl["owner"])
		require.Greater(t, sl["ttl_ms"].(float64), 20000.0)
	}
	r = cli(t, env, "run", "encoders", "-n", "2", "--wait", "300ms", "--", testBin)
	requireCode(t, r, exitBusy, `gave up waiting for a slot of "encoders" after 300ms: all 2 slots are still busy: encoders#0 held by enc-a`)
	r = cli(t, env, "status", "encoders", "-n", "2", "--json")
	requireCode(t, r, exitOK, "")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2)
	for i, line := range lines {
		var st map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &st))
		require.Equal(t, fmt.Sprintf("encoders#%d", i), st["resource"])
		require.Equal(t, "held", st["state"])
	}
	requireCode(t, cli(t, env, "run", "encoders", "-n", "0", "--", testBin), exitUsage, "-n must be between 1 and")

	// run -n --json names the slot its fence belongs to.
	r = cli(t, env, "run", "jobs", "-n", "3", "--json", "--", "true")
	requireCode(t, r, exitOK, "")
	res := decode(t, r)
	require.Equal(t, "jobs", res["resource"])
	require.Regexp(t, `^jobs#[012]$`, res["slot"])
	r = cli(t, env, "status", res["slot"].(string), "--json")
	requireCode(t, r, exitOK, "")
	require.Equal(t, res["fence"], decode(t, r)["fence"], "the fence is the slot's")
	r = cli(t, env, "run", "jobs", "--json", "--", "true")
	requireCode(t, r, exitOK, "")
	require.NotContains(t, decode(t, r), "slot", "no slot without -n")
}

// TestE2ERunWaitersTakeTurnsInArrivalOrder: four `run --wait` processes
// wait for a lock held by `acquire`, each started once the one before has
// its place in the lock's wait queue on every node. After `release` they
// run one after the other in the order they were started, with growing
// fencing tokens: the queue is FIFO across processes.
func TestE2ERunWaitersTakeTurnsInArrivalOrder(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	out := filepath.Join(t.TempDir(), "turns")
	r := cli(t, env, "acquire", "turns", "--ttl", "30s", "--json")
	requireCode(t, r, exitOK, "")
	token, _ := decode(t, r)["token"].(string)
	require.NotEmpty(t, token)
	// acquire returns once a majority granted; a run reaching the last node
	// before acquire's call would be granted there instead of queued.
	waitFor(t, 10*time.Second, "the lock held on every node", func() bool {
		r := cli(t, env, "status", "turns", "--json")
		return r.code == exitOK && decode(t, r)["held_on"] == float64(3)
	})

	const procs = 4
	type run struct {
		cmd            *exec.Cmd
		stdout, stderr bytes.Buffer
		start          time.Time
	}
	runs := make([]*run, procs)
	for i := range runs {
		rn := &run{cmd: cliCommand(t, append(env, childEnv("tag", out, fmt.Sprintf("REDLOCK_E2E_TAG=%d", i))...),
			"run", "turns", "--wait", "25s", "--", testBin)}
		rn.cmd.Stdout, rn.cmd.Stderr = &rn.stdout, &rn.stderr
		rn.start = time.Now()
		require.NoError(t, rn.cmd.Start())
		runs[i] = rn
		waitFor(t, 10*time.Second, fmt.Sprintf("run %d queued on every node", i), func() bool {
			for _, s := range c.Servers() {
				n, err := s.Client().ZCard(context.Background(), "redlock:{turns}:queue").Result()
				if err != nil || n != int64(i+1) {
					return false
				}
			}
			return true
		})
	}
	r = cli(t, env, "status", "turns", "--json")
	requireCode(t, r, exitOK, "")
	st := decode(t, r)
	require.Equal(t, float64(procs), st["waiting"], "status shows the queue")
	for _, n := range st["nodes"].([]any) {
		require.Equal(t, float64(procs), n.(map[string]any)["waiting"])
	}
	r = cli(t, env, "release", "turns", "--token", token)
	requireCode(t, r, exitOK, "")
	for _, rn := range runs {
		requireCode(t, waitCLI(t, rn.cmd, &rn.stdout, &rn.stderr, rn.start), exitOK, "")
	}

	b, err := os.ReadFile(out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, procs)
	var last uint64
	for i, line := range lines {
		var tag int
		var fence uint64
		_, err := fmt.Sscanf(line, "%d %d", &tag, &fence)
		require.NoError(t, err, line)
		require.Equal(t, i, tag, "run %d went in turn %d: %q", tag, i, lines)
		require.Greater(t, fence, last)
		last = fence
	}
}
