package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/e6344662/go-redlock/testutil"
)

// benchFields are the fields of bench's --json result.
var benchFields = []string{"run_id", "nodes", "embedded", "clients", "resources", "lockers", "hold_ms",
	"warmup_ms", "duration_ms", "interrupted", "acquisitions", "acquisitions_per_sec", "acquire_ms",
	"handoffs", "handoff_ms", "same_client_retakes", "client_acquisitions", "fair_share_min",
	"fair_share_max", "errors", "errors_total", "exit_code"}

// requireBenchResult checks the invariants of a bench result with at
// least one acquisition, and returns it.
func requireBenchResult(t *testing.T, r result, clients int) map[string]any {
	t.Helper()
	res := decode(t, r)
	for _, f := range benchFields {
		require.Contains(t, res, f)
	}
	acq := res["acquisitions"].(float64)
	require.Greater(t, acq, 0.0)
	require.Greater(t, res["acquisitions_per_sec"].(float64), 0.0)
	lat := res["acquire_ms"].(map[string]any)
	for _, k := range []string{"p50", "p90", "p99", "max", "mean"} {
		require.Contains(t, lat, k)
	}
	require.Greater(t, lat["p50"].(float64), 0.0)
	require.LessOrEqual(t, lat["p50"].(float64), lat["p90"].(float64))
	require.LessOrEqual(t, lat["p90"].(float64), lat["p99"].(float64))
	require.LessOrEqual(t, lat["p99"].(float64), lat["max"].(float64))
	per := res["client_acquisitions"].([]any)
	require.Len(t, per, clients)
	sum := 0.0
	for _, n := range per {
		sum += n.(float64)
	}
	require.Equal(t, acq, sum)
	require.LessOrEqual(t, res["fair_share_min"].(float64), 1.0)
	require.GreaterOrEqual(t, res["fair_share_max"].(float64), 1.0)
	require.Regexp(t, `^[0-9a-f]{8}$`, res["run_id"])
	require.Equal(t, float64(r.code), res["exit_code"])
	return res
}

// The bench end-to-end tests are not parallel: bench keeps the CPUs busy,
// which would starve the timing-sensitive tests that run in parallel (Go
// runs sequential top-level tests before the parallel ones resume).

// skipBenchShort skips an embedded bench run under -short: it keeps both
// cores busy for seconds, and TestBenchInProcess covers the same code in
// the quick loop.
func skipBenchShort(t *testing.T) {
	if testing.Short() {
		t.Skip("bench runs for seconds at full CPU: make test runs it")
	}
}

// TestE2EBenchRedis runs bench against real redis-server nodes: several
// clients on one hot resource hand the lock to each other; the locks are
// free afterwards.
func TestE2EBenchRedis(t *testing.T) {
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	r := cli(t, env, "bench", "--clients", "4", "--resources", "1", "--duration", "1s", "--hold", "1ms", "--json")
	requireCode(t, r, exitOK, "")
	require.Empty(t, r.stderr)
	res := requireBenchResult(t, r, 4)
	require.Equal(t, 3.0, res["nodes"])
	require.Equal(t, false, res["embedded"])
	require.Equal(t, "shared", res["lockers"])
	require.Equal(t, 1.0, res["hold_ms"])
	require.InDelta(t, 1000, res["duration_ms"], 200)
	require.Equal(t, false, res["interrupted"])
	require.Equal(t, 0.0, res["errors_total"])
	require.Empty(t, res["errors"])
	require.Greater(t, res["handoffs"].(float64), 0.0, "four clients on one resource hand it over")
	ho := res["handoff_ms"].(map[string]any)
	require.Greater(t, ho["p50"].(float64), 0.0)
	require.LessOrEqual(t, ho["p50"].(float64), ho["p99"].(float64))
	require.LessOrEqual(t, ho["p99"].(float64), ho["max"].(float64))
	require.LessOrEqual(t, res["handoffs"].(float64)+res["same_client_retakes"].(float64), res["acquisitions"].(float64))

	r = cli(t, env, "status", "bench:"+res["run_id"].(string)+":0", "--json")
	requireCode(t, r, exitOK, "")
	st := decode(t, r)
	require.Equal(t, "free", st["state"])
	require.Greater(t, st["fence"].(float64), 0.0)
}

// TestE2EBenchEmbedded runs bench on in-process nodes, with no Redis:
// the table, then JSON with per-client Lockers and several resources.
func TestE2EBenchEmbedded(t *testing.T) {
	skipBenchShort(t)
	r := cli(t, nil, "bench", "--embedded", "3", "--clients", "3", "--duration", "700ms")
	requireCode(t, r, exitOK, "")
	require.Empty(t, r.stderr)
	for _, want := range []string{
		`(?m)^bench: +3 nodes \(embedded\), 3 clients on 1 resource, shared Locker, hold 1ms, 700ms \(run [0-9a-f]{8}\)$`,
		`(?m)^acquisitions: +[1-9]\d* \(\d+\.\d/s\)$`,
		`(?m)^acquire: +p50 \S+  p90 \S+  p99 \S+  max \S+  \(mean \S+\)$`,
		`(?m)^hand-off: +[1-9]\d* to a waiting client: p50 \S+  p99 \S+  max \S+$`,
		`(?m)^client share: +min \d\.\d\d  max \d\.\d\d of a fair share \(\d+\.\.\d+ acquisitions per client\)$`,
		`(?m)^errors: +none$`,
	} {
		require.Regexp(t, want, r.stdout)
	}

	// Separate Lockers contend without a shared queue; under the race
	// detector on a busy machine they may hand over rarely, so only the
	// shape of the result is checked here.
	r = cli(t, nil, "bench", "--embedded", "1", "--clients", "4", "--resources", "2", "--lockers", "per-client",
		"--hold", "0", "--warmup", "200ms", "--duration", "700ms", "--json")
	requireCode(t, r, exitOK, "")
	res := requireBenchResult(t, r, 4)
	require.Equal(t, 1.0, res["nodes"])
	require.Equal(t, true, res["embedded"])
	require.Equal(t, "per-client", res["lockers"])
	require.Equal(t, 2.0, res["resources"])
	require.Equal(t, 0.0, res["hold_ms"])
	require.Equal(t, 200.0, res["warmup_ms"])
	require.InDelta(t, 700, res["duration_ms"], 200)
}

// TestE2EBenchInterrupted: SIGINT stops the run early; the results are
// still printed, and the exit code is 130.
func TestE2EBenchInterrupted(t *testing.T) {
	skipBenchShort(t)
	cmd := cliCommand(t, nil, "bench", "--embedded", "3", "--clients", "2", "--duration", "1m", "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	require.NoError(t, cmd.Start())
	// Long enough for acquisitions to be counted, also for a race-enabled
	// binary on a loaded machine (after 800ms one run had counted none).
	time.Sleep(2 * time.Second)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	r := waitCLI(t, cmd, &stdout, &stderr, start)
	requireCode(t, r, 128+int(syscall.SIGINT), "interrupted by SIGINT (Ctrl-C)")
	res := requireBenchResult(t, r, 2)
	require.Equal(t, true, res["interrupted"])
	require.Less(t, res["duration_ms"].(float64), 10000.0)
	require.Less(t, r.elapsed, 10*time.Second)
}

// TestE2EBenchNoQuorum: with no node reachable, bench exits 3 at once.
func TestE2EBenchNoQuorum(t *testing.T) {
	t.Parallel()
	r := cli(t, []string{envNodes + "=redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3"}, "bench", "--duration", "5s", "--json")
	requireCode(t, r, exitNoQuorum, "cannot reach a majority of the nodes: 0 of 3 answered")
	require.Equal(t, "no_quorum", decode(t, r)["error"])
}

// TestBenchInProcess runs bench with a metrics server in this process and
// checks that nothing outlives the command. Not parallel, for goleak.
func TestBenchInProcess(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	code, stdout, stderr := runInProcess(t, nil, "bench", "--embedded", "3", "--clients", "3",
		"--duration", "300ms", "--metrics-addr", "127.0.0.1:0", "--json")
	require.Equal(t, exitOK, code, "stderr: %s", stderr)
	require.Regexp(t, `^redlock-cli: serving metrics on http://127\.0\.0\.1:\d+/metrics\n$`, stderr)
	require.Contains(t, stdout, `"embedded":true`)
}

// metricsURLRe finds the metrics address that --metrics-addr prints.
var metricsURLRe = regexp.MustCompile(`serving metrics on (http://\S+/metrics)`)

// scrape returns the metrics at url, or "" when they cannot be fetched.
func scrape(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		return ""
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return ""
	}
	return string(b)
}

// metricValue returns the value of the sample named series (with its
// labels, as printed) in a text exposition, or -1 when absent.
func metricValue(body, series string) float64 {
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if ok && name == series {
			v, err := strconv.ParseFloat(val, 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// TestE2ERunMetrics scrapes the metrics of "run --metrics-addr" while
// COMMAND runs: the acquisition, renewals, and the errors of a node killed
// meanwhile; the server is gone once run exits.
func TestE2ERunMetrics(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	out := filepath.Join(t.TempDir(), "out")
	cmd := cliCommand(t, append(nodesEnv(c.URLs()), childEnv("trap", out)...),
		"run", "job", "--ttl", "1200ms", "--metrics-addr", "127.0.0.1:0", "--", testBin)
	var stdout bytes.Buffer
	var stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	require.NoError(t, cmd.Start())
	done := make(chan struct{}) // closed once run has exited
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	defer func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			select {
			case <-done:
			case <-time.After(cliTimeout):
				t.Errorf("run did not exit after SIGKILL")
			}
		}
	}()

	var url string
	waitFor(t, 10*time.Second, "the metrics address on stderr", func() bool {
		m := metricsURLRe.FindStringSubmatch(stderr.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	})
	readPID(t, out) // COMMAND runs: the lock is held
	client := &http.Client{Timeout: 2 * time.Second}

	var body string
	waitFor(t, 10*time.Second, "two renewals", func() bool {
		body = scrape(t, client, url)
		return metricValue(body, "redlock_renewals_total") >= 2
	})
	for series, want := range map[string]float64{
		`redlock_acquire_attempts_total{result="acquired"}`:  1,
		`redlock_acquire_attempts_total{result="busy"}`:      0,
		`redlock_acquire_attempts_total{result="no_quorum"}`: 0,
		`redlock_acquire_attempts_total{result="error"}`:     0,
		`redlock_acquire_duration_seconds_count`:             1,
		`redlock_acquire_duration_seconds_bucket{le="+Inf"}`: 1,
		`redlock_acquire_duration_seconds_bucket{le="30"}`:   1,
		`redlock_attempt_grants_count`:                       1,
		`redlock_attempt_grants_bucket{le="1"}`:              0, // a majority granted
		`redlock_attempt_grants_bucket{le="3"}`:              1,
		`redlock_leases_lost_total`:                          0,
		`redlock_releases_total{result="released"}`:          0,
	} {
		require.Equal(t, want, metricValue(body, series), "%s in\n%s", series, body)
	}
	require.GreaterOrEqual(t, metricValue(body, "redlock_attempt_grants_sum"), 2.0)
	require.Greater(t, metricValue(body, "redlock_acquire_duration_seconds_sum"), 0.0)
	require.Less(t, metricValue(body, "redlock_acquire_duration_seconds_sum"), 5.0)
	require.Greater(t, metricValue(body, "go_goroutines"), 0.0, "the Go collector is served too")

	// A node dies: its renewals fail, the lease lives on with the other two.
	// (On a loaded machine a live node may have missed a call already.)
	dead := c.Server(2)
	series := fmt.Sprintf(`redlock_node_errors_total{node="%s",op="renew"}`, dead.Addr())
	before := max(metricValue(body, series), 0)
	require.NoError(t, dead.Kill())
	waitFor(t, 10*time.Second, "renew errors of the dead node", func() bool {
		body = scrape(t, client, url)
		return metricValue(body, series) > before
	})
	require.Equal(t, 0.0, metricValue(body, "redlock_leases_lost_total"))

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-done:
	case <-time.After(cliTimeout):
		t.Fatalf("run did not exit after SIGTERM; stderr: %s", stderr.String())
	}
	require.Equal(t, 3, cmd.ProcessState.ExitCode(), "COMMAND's code; stderr: %s", stderr.String())
	require.Less(t, time.Since(start), 20*time.Second)
	client.CloseIdleConnections()
	_, err := client.Get(url)
	require.Error(t, err, "the metrics server outlived run")
	require.NotContains(t, stderr.String(), "goroutine ")
}
