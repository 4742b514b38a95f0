package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/internal/loadgen"
	"github.com/e6344662/go-redlock/redlock"
)

// parseBench parses args as bench's flags (and the global --nodes), the way
// the command does, and validates them.
func parseBench(t *testing.T, args ...string) (benchOptions, error) {
	t.Helper()
	var o benchOptions
	var g globals
	fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	g.register(fs)
	o.register(fs)
	require.NoError(t, fs.Parse(args))
	return o, o.validate(fs)
}

// TestBenchFlagValidation: valid combinations of bench's flags pass; each
// invalid one is a usage error with its message.
func TestBenchFlagValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string // "" for valid
	}{
		{"defaults", nil, ""},
		{"issue example", []string{"--clients", "8", "--resources", "1", "--duration", "10s", "--hold", "1ms"}, ""},
		{"hold zero", []string{"--hold", "0"}, ""},
		{"warmup", []string{"--warmup", "2s"}, ""},
		{"one client", []string{"--clients", "1"}, ""},
		{"as many resources as clients", []string{"--clients", "4", "--resources", "4"}, ""},
		{"per-client lockers", []string{"--lockers", "per-client"}, ""},
		{"embedded", []string{"--embedded", "3"}, ""},
		{"embedded max", []string{"--embedded", "25"}, ""},
		{"metrics addr", []string{"--metrics-addr", "127.0.0.1:0"}, ""},
		{"metrics all interfaces", []string{"--metrics-addr", ":9464"}, ""},
		{"metrics ipv6", []string{"--metrics-addr", "[::1]:9464"}, ""},
		{"metrics name", []string{"--metrics-addr", "localhost:9464"}, ""},
		{"zero clients", []string{"--clients", "0"}, "--clients must be from 1 to 10000, got 0"},
		{"negative clients", []string{"--clients", "-3"}, "--clients must be from 1 to 10000, got -3"},
		{"too many clients", []string{"--clients", "10001"}, "--clients must be from 1 to 10000"},
		{"zero resources", []string{"--resources", "0"}, "--resources must be at least 1, got 0"},
		{"more resources than clients", []string{"--clients", "2", "--resources", "3"}, "--resources 3 is more than --clients 2"},
		{"zero duration", []string{"--duration", "0"}, "--duration must be a positive duration, got 0s"},
		{"negative duration", []string{"--duration", "-1s"}, "--duration must be a positive duration"},
		{"negative hold", []string{"--hold", "-1ms"}, "--hold must not be negative, got -1ms"},
		{"negative warmup", []string{"--warmup", "-1s"}, "--warmup must not be negative"},
		{"zero wait", []string{"--wait", "0s"}, "--wait must be a positive duration"},
		{"bad lockers", []string{"--lockers", "each"}, `--lockers must be shared or per-client, got "each"`},
		{"embedded zero", []string{"--embedded", "0"}, "--embedded must be from 1 to 25 nodes, got 0"},
		{"embedded too many", []string{"--embedded", "26"}, "--embedded must be from 1 to 25 nodes, got 26"},
		{"embedded and nodes", []string{"--embedded", "3", "--nodes", "redis://127.0.0.1:6379"}, "--embedded and --nodes cannot be used together"},
		{"metrics no port", []string{"--metrics-addr", "9464"}, `malformed --metrics-addr "9464": want HOST:PORT`},
		{"metrics port name", []string{"--metrics-addr", "localhost:http"}, `port "http" is not a number from 0 to 65535`},
		{"metrics port range", []string{"--metrics-addr", ":65536"}, `port "65536" is not a number`},
		{"metrics negative port", []string{"--metrics-addr", ":-1"}, `port "-1" is not a number`},
		{"metrics empty", []string{"--metrics-addr", ""}, `malformed --metrics-addr ""`},
		{"metrics too many colons", []string{"--metrics-addr", "1.2.3.4:5:6"}, "too many colons in address"},
		{"metrics URL", []string{"--metrics-addr", "http://x:1"}, "malformed --metrics-addr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseBench(t, tt.args...)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			ce, ok := err.(*cliError)
			require.True(t, ok, "%T", err)
			require.Equal(t, exitUsage, ce.code)
			require.Contains(t, ce.msg, tt.want)
		})
	}
}

// TestBenchUsageErrors: the command exits 2 with one line on stderr, before
// any network traffic.
func TestBenchUsageErrors(t *testing.T) {
	t.Parallel()
	nodes := map[string]string{envNodes: "redis://127.0.0.1:1"}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no nodes", nil, []string{"bench"}, "no nodes: set --nodes or REDLOCK_NODES"},
		{"argument", nodes, []string{"bench", "x"}, `bench takes no arguments, got ["x"]`},
		{"clients", nodes, []string{"bench", "--clients", "0"}, "--clients must be from 1"},
		{"clients not a number", nodes, []string{"bench", "--clients", "many"}, `invalid argument "many" for "--clients"`},
		{"duration", nodes, []string{"bench", "--duration", "0s"}, "--duration must be a positive duration"},
		{"global ttl", nodes, []string{"bench", "--ttl", "0"}, "--ttl must be a positive duration"},
		{"metrics addr", nodes, []string{"bench", "--metrics-addr", "nope"}, `malformed --metrics-addr "nope"`},
		{"run metrics addr", nodes, []string{"run", "r", "--metrics-addr", "127.0.0.1", "--", "true"}, `malformed --metrics-addr "127.0.0.1"`},
		{"embedded with nodes", nil, []string{"bench", "--embedded", "3", "--nodes", "redis://127.0.0.1:1"}, "cannot be used together"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runInProcess(t, tt.env, tt.args...)
			require.Equal(t, exitUsage, code, "stderr: %s", stderr)
			require.Empty(t, stdout)
			requireOneLine(t, stderr, tt.want)
		})
	}
}

// TestBenchExitCode: bench's exit code from the acquisitions and errors.
func TestBenchExitCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		acquisitions int64
		errs         map[string]int64
		want         int
	}{
		{"acquired", 10, nil, exitOK},
		{"acquired despite errors", 1, map[string]int64{"acquire_no_quorum": 5}, exitOK},
		{"no quorum", 0, map[string]int64{"acquire_no_quorum": 2, "acquire_wait_timeout": 1}, exitNoQuorum},
		{"stayed busy", 0, nil, exitBusy},
		{"wait ran out", 0, map[string]int64{"acquire_wait_timeout": 3}, exitBusy},
		{"other", 0, map[string]int64{"acquire_failure": 1}, exitFailure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := &benchResult{Acquisitions: tt.acquisitions, Errors: tt.errs}
			for _, v := range tt.errs {
				res.ErrorsTotal += v
			}
			require.Equal(t, tt.want, benchExitCode(context.Background(), res))
		})
	}
}

// TestBenchErrorKind: the names of failed acquires and releases in the
// results.
func TestBenchErrorKind(t *testing.T) {
	t.Parallel()
	other := errors.New("boom")
	for want, c := range map[string]struct {
		op  loadgen.Op
		err error
	}{
		"acquire_no_quorum":    {loadgen.OpAcquire, fmt.Errorf("x: %w", redlock.ErrNoQuorum)},
		"acquire_busy":         {loadgen.OpAcquire, redlock.ErrNotAcquired},
		"acquire_wait_timeout": {loadgen.OpAcquire, context.DeadlineExceeded},
		"acquire_failure":      {loadgen.OpAcquire, other},
		"release_no_quorum":    {loadgen.OpRelease, redlock.ErrNoQuorum},
		"release_lease_lost":   {loadgen.OpRelease, redlock.ErrLeaseLost},
		"release_timeout":      {loadgen.OpRelease, context.DeadlineExceeded},
		"release_failure":      {loadgen.OpRelease, redlock.ErrNotAcquired},
	} {
		require.Equal(t, want, benchErrorKind(c.op, c.err))
	}
}

// TestFmtErrors: the errors line lists counts by kind, in name order.
func TestFmtErrors(t *testing.T) {
	t.Parallel()
	require.Equal(t, "none", fmtErrors(nil))
	require.Equal(t, "acquire_no_quorum 3, release_lease_lost 1", fmtErrors(map[string]int64{"release_lease_lost": 1, "acquire_no_quorum": 3}))
}

// TestBenchProgress: on a terminal the line is rewritten in place and
// erased at the end; elsewhere it is one line per interval.
func TestBenchProgress(t *testing.T) {
	t.Parallel()
	for _, tty := range []bool{true, false} {
		t.Run(fmt.Sprint("tty=", tty), func(t *testing.T) {
			t.Parallel()
			b := &bench{o: benchOptions{duration: time.Minute}}
			measureStart := time.Now()
			acquire := loadgen.NewHist()
			acquire.Record(time.Millisecond)
			state := func(now time.Time) loadgen.Progress {
				return loadgen.Progress{Measured: now.Sub(measureStart), Total: 1, Acquire: acquire.Snapshot()}
			}
			var w lockedBuffer
			done := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() { b.progress(&w, done, tty, 5*time.Millisecond, state) })
			waitFor(t, 5*time.Second, "two progress lines", func() bool { return strings.Count(w.String(), "1 acquisitions") >= 2 })
			close(done)
			wg.Wait()
			out := w.String()
			require.Contains(t, out, "/1m0s  1 acquisitions")
			require.Contains(t, out, "p50 1ms")
			require.Contains(t, out, "0 errors")
			if tty {
				require.NotContains(t, out, "\n")
				require.True(t, strings.HasPrefix(out, "\r"))
				require.True(t, strings.HasSuffix(out, "\r\x1b[K"), "%q", out)
			} else {
				require.NotContains(t, out, "\r")
				for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
					require.True(t, strings.HasPrefix(l, "redlock-cli: bench: "), "%q", l)
				}
			}
		})
	}
}

// lockedBuffer is a bytes.Buffer safe for one writer and concurrent
// readers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
