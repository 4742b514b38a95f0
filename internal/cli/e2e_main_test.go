package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// cliBin is the redlock-cli binary (cmd/redlock-cli) built by TestMain for
// the end-to-end tests; testBin is this test binary, which the tests also
// run as COMMAND under "redlock-cli run" (see childMain).
var cliBin, testBin string

// childModeEnv selects a child behaviour when this test binary runs as
// COMMAND.
const childModeEnv = "REDLOCK_E2E_CHILD"

// TestMain runs this test binary as COMMAND when run asks for it, else
// builds redlock-cli and runs the tests.
func TestMain(m *testing.M) {
	if mode := os.Getenv(childModeEnv); mode != "" {
		os.Exit(childMain(mode))
	}
	os.Exit(buildAndRun(m))
}

// buildAndRun builds the binary once, with -race when the tests run with
// it, and runs the tests.
func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "redlock-cli-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	cliBin = filepath.Join(dir, "redlock-cli")
	args := []string{"build", "-o", cliBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "github.com/e6344662/go-redlock/cmd/redlock-cli")...)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: go build:", err)
		return 1
	}
	if testBin, err = os.Executable(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: own path:", err)
		return 1
	}
	return m.Run()
}

// result is one finished invocation of the binary.
type result struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

// cliTimeout bounds every invocation.
const cliTimeout = 30 * time.Second

// cli runs the binary with args and the extra environment variables env
// (KEY=value), bounded by cliTimeout.
func cli(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := cliCommand(t, env, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	require.NoError(t, cmd.Start())
	return waitCLI(t, cmd, &stdout, &stderr, start)
}

// cliCommand prepares the binary with args; REDLOCK_NODES is cleared
// unless env sets it. A race-enabled binary (and this test binary as
// COMMAND) would sleep 1s at exit without GORACE=atexit_sleep_ms=0.
func cliCommand(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(cliBin, args...)
	cmd.Env = append(os.Environ(), envNodes+"=", "GORACE=atexit_sleep_ms=0")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// waitCLI waits for a started invocation, killing it after cliTimeout.
// stdout and stderr are the buffers the command writes to (a
// *bytes.Buffer, or a *lockedBuffer when the test reads one meanwhile).
func waitCLI(t *testing.T, cmd *exec.Cmd, stdout, stderr fmt.Stringer, start time.Time) result {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(cliTimeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("redlock-cli %q did not finish within %s; stderr: %s", cmd.Args[1:], cliTimeout, stderr)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
}

// nodesEnv is the environment naming urls as the nodes.
func nodesEnv(urls []string) []string {
	return []string{envNodes + "=" + strings.Join(urls, ",")}
}

// decode parses r's stdout as exactly one JSON object.
func decode(t *testing.T, r result) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 1, "stdout: %s", r.stdout)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &m), "stdout: %s", r.stdout)
	return m
}

// requireCode checks the exit code and, for failures, that stderr is one
// redlock-cli line containing want.
func requireCode(t *testing.T, r result, code int, want string) {
	t.Helper()
	require.Equal(t, code, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	if want != "" {
		requireOneLine(t, r.stderr, want)
	}
}

// childMain is the test binary acting as COMMAND under "redlock-cli run".
// REDLOCK_E2E_OUT names a file to append to. Modes:
//
//	env        append the REDLOCK_* variables as JSON; exit $REDLOCK_E2E_EXIT
//	interval   append "start <unixnano> <fence>", sleep $REDLOCK_E2E_SLEEP,
//	           append "end <unixnano> <fence>"
//	slot       like interval, with $REDLOCK_RESOURCE (the slot) for the fence;
//	           with $REDLOCK_E2E_PAIR=N, it first waits (10 s at most) until
//	           another slot holder is inside too, or all N have started
//	hang       append "pid <pid>", then sleep (forever, unless signalled)
//	stubborn   like hang, but ignore SIGTERM
//	deaf       like hang, but ignore SIGINT, SIGTERM and SIGHUP
//	trap       append "pid <pid>"; on SIGTERM append "got SIGTERM", exit 3
//	selfkill   kill itself with SIGKILL
//	spawn      start a "hang" grandchild in the same group, then exit 0
func childMain(mode string) int {
	out := os.Getenv("REDLOCK_E2E_OUT")
	write := func(format string, args ...any) {
		f, err := os.OpenFile(out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			panic(err)
		}
		defer func() { _ = f.Close() }()
		_, _ = fmt.Fprintf(f, format+"\n", args...)
	}
	fence := os.Getenv(envFence)
	switch mode {
	case "env":
		vars := map[string]string{
			envResource: os.Getenv(envResource), envToken: os.Getenv(envToken), envFence: fence, envCount: os.Getenv(envCount)}
		for i := range 8 {
			for _, name := range []string{envResource, envToken, envFence} {
				if v, ok := os.LookupEnv(fmt.Sprintf("%s_%d", name, i)); ok {
					vars[fmt.Sprintf("%s_%d", name, i)] = v
				}
			}
		}
		b, _ := json.Marshal(vars)
		write("%s", b)
		var code int
		_, _ = fmt.Sscan(os.Getenv("REDLOCK_E2E_EXIT"), &code)
		return code
	case "interval":
		d, _ := time.ParseDuration(os.Getenv("REDLOCK_E2E_SLEEP"))
		write("start %d %s", time.Now().UnixNano(), fence)
		time.Sleep(d)
		write("end %d %s", time.Now().UnixNano(), fence)
		return 0
	case "tag":
		write("%s %s", os.Getenv("REDLOCK_E2E_TAG"), fence)
		return 0
	case "slot":
		d, _ := time.ParseDuration(os.Getenv("REDLOCK_E2E_SLEEP"))
		write("start %d %s", time.Now().UnixNano(), os.Getenv(envResource))
		pairUp(out)
		time.Sleep(d)
		write("end %d %s", time.Now().UnixNano(), os.Getenv(envResource))
		return 0
	case "hang", "stubborn", "trap", "deaf":
		sigs := make(chan os.Signal, 1)
		switch mode {
		case "stubborn", "trap":
			signal.Notify(sigs, syscall.SIGTERM)
		case "deaf":
			signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		}
		write("pid %d", os.Getpid())
		timeout := time.After(time.Minute)
		for {
			select {
			case <-sigs:
				if mode == "trap" {
					write("got SIGTERM")
					return 3
				}
			case <-timeout:
				return 0
			}
		}
	case "selfkill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Minute)
	case "spawn":
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), childModeEnv+"=hang")
		if err := c.Start(); err != nil {
			return 1
		}
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if b, _ := os.ReadFile(out); bytes.Contains(b, []byte("pid ")) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		return 0
	}
	return 99
}

// pairUp, for a slot holder under REDLOCK_E2E_PAIR=N, waits until out
// shows another holder inside beside it (more starts than ends by two), or
// N starts (no other holder will come), or 10 s have passed: two holders
// overlap however the machine's load spreads the processes' starts.
func pairUp(out string) {
	var n int
	if _, err := fmt.Sscan(os.Getenv("REDLOCK_E2E_PAIR"), &n); err != nil {
		return
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile(out)
		starts, ends := bytes.Count(b, []byte("start ")), bytes.Count(b, []byte("end "))
		if starts-ends >= 2 || starts >= n {
			return
		}
	}
}

// childEnv is the environment that makes the test binary a COMMAND in mode
// writing to out.
func childEnv(mode, out string, extra ...string) []string {
	return append([]string{childModeEnv + "=" + mode, "REDLOCK_E2E_OUT=" + out}, extra...)
}

// waitFor polls cond every 10ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readPID waits until the file at path has a "pid N" line and returns N.
func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, 10*time.Second, "COMMAND to start", func() bool {
		b, _ := os.ReadFile(path)
		for _, l := range strings.Split(string(b), "\n") {
			if _, err := fmt.Sscanf(l, "pid %d", &pid); err == nil {
				return true
			}
		}
		return false
	})
	return pid
}

// processGone reports whether pid no longer exists (or is a zombie).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}
