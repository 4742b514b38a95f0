package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
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

func TestHistIndexBounds(t *testing.T) {
	t.Parallel()
	prev := -1
	check := func(v uint64) {
		i := histIndex(v)
		require.GreaterOrEqual(t, i, prev, "index not monotonic at %d", v)
		require.Less(t, i, histBuckets)
		prev = i
		low, width := histBounds(i)
		if v < 1<<histMaxBits {
			require.True(t, low <= v && v < low+width, "v=%d in bucket %d [%d, %d)", v, i, low, low+width)
			require.LessOrEqual(t, float64(width-1), float64(low)/histSub, "bucket %d too wide", i)
		}
	}
	for v := uint64(0); v < 5000; v++ {
		check(v)
	}
	for v := uint64(5000); v < 1<<histMaxBits; v = v*17/16 + 1 {
		check(v)
	}
	check(1<<histMaxBits - 1)
	require.Equal(t, histBuckets-1, histIndex(1<<histMaxBits-1))
	require.Equal(t, histBuckets-1, histIndex(math.MaxUint64), "huge values share the last bucket")
}

// snap records ds into a fresh histogram.
func snap(ds ...time.Duration) histSnapshot {
	h := newLatencyHist()
	for _, d := range ds {
		h.record(d)
	}
	return h.snapshot()
}

// ns makes durations of the given nanoseconds (exact in the histogram
// below 256).
func ns(vs ...int) []time.Duration {
	out := make([]time.Duration, len(vs))
	for i, v := range vs {
		out[i] = time.Duration(v)
	}
	return out
}

func TestQuantileNearestRank(t *testing.T) {
	t.Parallel()
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name          string
		values        []time.Duration
		p50, p90, p99 time.Duration
		max, mean     time.Duration
	}{
		{"none", nil, 0, 0, 0, 0, 0},
		{"one", ns(7), 7, 7, 7, 7, 7},
		{"two", ns(10, 20), 10, 20, 20, 20, 15},
		{"unsorted", ns(5, 1, 4, 2, 3), 3, 5, 5, 5, 3},
		{"1..100", ns(hundred...), 50, 90, 99, 100, 50},
		{"ties", ns(9, 9, 9, 9, 200), 9, 200, 200, 200, 47},
		{"negative is zero", ns(-5, 0, 10), 0, 10, 10, 10, 3},
		{"outlier max exact", []time.Duration{1, 2, 3, 90 * time.Minute}, 2, 90 * time.Minute, 90 * time.Minute, 90 * time.Minute, (90*time.Minute + 6) / 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := snap(tt.values...)
			require.Equal(t, uint64(len(tt.values)), s.n)
			require.Equal(t, tt.p50, s.quantile(0.5), "p50")
			require.Equal(t, tt.p90, s.quantile(0.9), "p90")
			require.Equal(t, tt.p99, s.quantile(0.99), "p99")
			require.Equal(t, tt.max, s.quantile(1), "max")
			require.Equal(t, tt.max, s.max)
			require.Equal(t, tt.mean, s.mean(), "mean")
		})
	}
}

// TestQuantileRelativeError compares the histogram with exact nearest-rank
// quantiles of realistic latencies: within 1/histSub.
func TestQuantileRelativeError(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	var values []time.Duration
	for range 20000 {
		// log-normal around 400µs, with a tail
		values = append(values, time.Duration(400e3*math.Exp(r.NormFloat64())))
	}
	s := snap(values...)
	slices.Sort(values)
	for _, q := range []float64{0.01, 0.1, 0.5, 0.9, 0.99, 0.999} {
		exact := values[int(math.Ceil(q*float64(len(values))))-1]
		got := s.quantile(q)
		require.InEpsilon(t, float64(exact), float64(got), 1.0/histSub, "q=%v exact %s got %s", q, exact, got)
	}
	require.Equal(t, values[len(values)-1], s.quantile(1))
}

func TestLatencyHistConcurrent(t *testing.T) {
	t.Parallel()
	h := newLatencyHist()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				h.record(time.Duration(g*1000 + i))
			}
		})
	}
	wg.Wait()
	s := h.snapshot()
	require.Equal(t, uint64(8000), s.n)
	require.Equal(t, time.Duration(7999), s.max)
	require.InEpsilon(t, 3999.5, float64(s.sum)/8000, 1e-9)
}

// TestHandoff plays sequences of acquisitions and releases on one resource
// and checks what the tracker makes of each acquisition.
func TestHandoff(t *testing.T) {
	t.Parallel()
	at := func(ms int) time.Time { return time.Unix(1000, 0).Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		release    bool
		client     int
		asked, got int // ms; for a release, got is when it started
		kind       handoffKind
		latency    time.Duration
	}
	acq := func(c, asked, got int, k handoffKind, lat time.Duration) step {
		return step{client: c, asked: asked, got: got, kind: k, latency: lat}
	}
	rel := func(c, t int) step { return step{release: true, client: c, got: t} }
	tests := []struct {
		name    string
		clients int
		steps   []step
	}{
		{"first holder", 2, []step{acq(0, 0, 1, handoffNone, 0)}},
		{"to a waiting client", 2, []step{
			acq(0, 0, 1, handoffNone, 0), rel(0, 5),
			acq(1, 2, 7, handoffOther, 2*time.Millisecond)}},
		{"to a client that asked after the release began", 2, []step{
			acq(0, 0, 1, handoffNone, 0), rel(0, 5),
			acq(1, 6, 7, handoffNone, 0)}},
		{"retaken by the releaser", 2, []step{
			acq(0, 0, 1, handoffNone, 0), rel(0, 5),
			acq(0, 5, 6, handoffSame, 0)}},
		{"retaken by the only client", 1, []step{
			acq(0, 0, 1, handoffNone, 0), rel(0, 5),
			acq(0, 5, 6, handoffNone, 0)}},
		{"a chain", 3, []step{
			acq(0, 0, 1, handoffNone, 0), rel(0, 3),
			acq(1, 0, 4, handoffOther, time.Millisecond), rel(1, 6),
			acq(2, 0, 9, handoffOther, 3*time.Millisecond), rel(2, 10),
			acq(2, 10, 11, handoffSame, 0), rel(2, 12),
			acq(0, 4, 12, handoffOther, 0)}},
		{"each release counts once", 2, []step{
			acq(0, 0, 1, handoffNone, 0), rel(0, 5),
			acq(1, 2, 6, handoffOther, time.Millisecond),
			acq(0, 6, 30, handoffNone, 0)}}, // the lease of 1 expired unreleased
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHandoffTracker(tt.clients, 1)
			for i, s := range tt.steps {
				if s.release {
					h.releasing(0, s.client, at(s.got))
					continue
				}
				kind, lat := h.acquired(0, s.client, at(s.asked), at(s.got))
				require.Equal(t, s.kind, kind, "step %d", i)
				require.Equal(t, s.latency, lat, "step %d", i)
			}
		})
	}
}

func TestHandoffSharedResources(t *testing.T) {
	t.Parallel()
	// 5 clients on 3 resources: resources 0 and 1 have two clients, 2 has one.
	h := newHandoffTracker(5, 3)
	require.True(t, h.res[0].shared)
	require.True(t, h.res[1].shared)
	require.False(t, h.res[2].shared)
}

func TestFairShares(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		perClient []int64
		resources int
		lo, hi    float64
	}{
		{"none", []int64{0, 0}, 1, 0, 0},
		{"fair", []int64{10, 10, 10, 10}, 1, 1, 1},
		{"one client", []int64{7}, 1, 1, 1},
		{"unfair", []int64{30, 10}, 1, 0.5, 1.5},
		{"starved", []int64{20, 0}, 1, 0, 2},
		{"per resource", []int64{10, 100, 10, 100}, 2, 1, 1},       // 0,2 on r0; 1,3 on r1
		{"uneven split", []int64{10, 30, 20}, 2, 2.0 / 3, 4.0 / 3}, // r0: 10,20; r1: 30
		{"idle resource left out", []int64{5, 0, 5, 0}, 2, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lo, hi := fairShares(tt.perClient, tt.resources)
			require.InDelta(t, tt.lo, lo, 1e-9, "min")
			require.InDelta(t, tt.hi, hi, 1e-9, "max")
		})
	}
}

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
			b := &bench{o: benchOptions{duration: time.Minute}, acquire: newLatencyHist()}
			b.measureStart = time.Now()
			b.acquire.record(time.Millisecond)
			b.total.Add(1)
			var w lockedBuffer
			done := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() { b.progress(&w, done, tty, 5*time.Millisecond) })
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

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
