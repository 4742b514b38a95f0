package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/e6344662/go-redlock/testutil"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m, testutil.LeakOptions()...)
}

// smallWorkload runs in about half a second per mode.
func smallWorkload() Workload {
	return Workload{
		Orders: 24, Batch: 4, Every: 50 * time.Millisecond, Workers: 3,
		Lease: 100 * time.Millisecond, Poll: 15 * time.Millisecond, Send: 2 * time.Millisecond,
		StallAt: 4, CrashAt: 16, Stall: 300 * time.Millisecond, Restart: 200 * time.Millisecond,
	}
}

// TestLeaderModeHasNoDuplicates: with the same stall and crash, the leader
// mode dispatches every order exactly once, fences off the stalled leader's
// late write, and fails over twice (after the stall and after the crash).
// The naive modes dispatch the stalled worker's order twice: that much is
// deterministic (the stall outlasts the lease, and the others keep
// working); how many more duplicates scan has depends on timing.
func TestLeaderModeHasNoDuplicates(t *testing.T) {
	requireNoDuplicates(t, MemorySink{}, roomyWorkload())
}

// roomyWorkload is smallWorkload with room for a loaded machine (node calls
// get a third of the lease) and for the database's round trips (each fenced
// dispatch is a transaction of four).
func roomyWorkload() Workload {
	w := smallWorkload()
	w.Lease, w.Stall, w.Restart = 200*time.Millisecond, 600*time.Millisecond, 400*time.Millisecond
	return w
}

// TestPostgres runs the example on a real PostgreSQL: the same table of
// results, the effects counted as rows in the database; and the sink found
// the way psql finds it.
func TestPostgres(t *testing.T) {
	pg := testutil.StartPostgres(t)
	ctx := testutil.Context(t)
	sink, err := OpenPostgres(ctx, pg.URL(), 10*time.Second)
	require.NoError(t, err)
	t.Cleanup(sink.Close)

	t.Run("LeaderModeHasNoDuplicates", func(t *testing.T) {
		ctx := testutil.Context(t)
		requireNoDuplicates(t, sink, roomyWorkload())
		// The effects are rows: no order has two in a leader run (whose
		// rows carry a term), and the stalled leader's term wrote none
		// after the next term's first.
		var dup int
		require.NoError(t, sink.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT run, order_id FROM redlock_dispatch_effects
			WHERE term IS NOT NULL GROUP BY run, order_id HAVING count(*) > 1) d`).Scan(&dup))
		require.Zero(t, dup)
	})

	t.Run("FoundLikePsql", func(t *testing.T) {
		ctx := testutil.Context(t)
		for _, kv := range pg.Env() {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		var notes []string
		s, closeSink, err := ChooseSink(ctx, "auto", "", func(n string) { notes = append(notes, n) })
		require.NoError(t, err)
		defer closeSink()
		require.Empty(t, notes)
		require.Contains(t, s.Name(), "PostgreSQL at 127.0.0.1:")

		// The whole program, on a small workload.
		var out bytes.Buffer
		require.NoError(t, run(ctx, []string{"-orders", "12", "-workers", "3", "-lease", "200ms"}, &out, func(n string) { notes = append(notes, n) }))
		require.Contains(t, out.String(), "sink: PostgreSQL at 127.0.0.1:"+strconv.Itoa(pg.Port())+"/postgres as postgres")
		require.Regexp(t, `(?m)^ +leader +12 +12 +0 `, out.String(), "leader mode: 12 effects, 0 duplicates\n%s", out.String())
		require.Empty(t, notes)
	})
}

// TestFallsBackToMemory: with no PostgreSQL reachable, auto says so and
// uses the in-memory sink; postgres fails; memory does not try.
func TestFallsBackToMemory(t *testing.T) {
	ctx := testutil.Context(t)
	nowhere := "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2"
	var notes []string
	s, closeSink, err := ChooseSink(ctx, "auto", nowhere, func(n string) { notes = append(notes, n) })
	require.NoError(t, err)
	closeSink()
	require.Equal(t, MemorySink{}, s)
	require.Len(t, notes, 1)
	require.Contains(t, notes[0], "no PostgreSQL reachable at 127.0.0.1:1/postgres")
	require.Contains(t, notes[0], "using the in-memory sink")

	_, _, err = ChooseSink(ctx, "postgres", nowhere, nil)
	require.ErrorIs(t, err, ErrNoPostgres)
	s, _, err = ChooseSink(ctx, "memory", nowhere, nil)
	require.NoError(t, err)
	require.Equal(t, MemorySink{}, s)
	_, _, err = ChooseSink(ctx, "disk", "", nil)
	require.ErrorContains(t, err, "unknown sink")
}

func requireNoDuplicates(t *testing.T, sink Sink, w Workload) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stats, err := Compare(ctx, w, sink)
	require.NoError(t, err)
	require.Len(t, stats, 3)
	var table bytes.Buffer
	PrintTable(&table, stats)
	t.Logf("%s\n%s", sink.Name(), table.String())

	for _, s := range stats {
		require.Equal(t, w.Orders, s.Orders, s.Mode)
		require.Zero(t, s.Undispatched, "%s left orders undispatched", s.Mode)
		require.Equal(t, w.Orders, s.Effects-s.Duplicates, "%s: every order dispatched", s.Mode)
	}
	scan, claim, leader := stats[0], stats[1], stats[2]
	require.Equal(t, Leader, leader.Mode)
	require.Zero(t, leader.Duplicates, "leader mode must not duplicate")
	require.Equal(t, w.Orders, leader.Effects)
	require.GreaterOrEqual(t, leader.Fenced, 1, "the stalled leader's write must be fenced off")
	require.GreaterOrEqual(t, leader.Failovers, 2, "a failover after the stall, another after the crash")

	require.GreaterOrEqual(t, scan.Duplicates, 1, "scan: the stalled worker repeats an order")
	require.GreaterOrEqual(t, claim.Duplicates, 1, "claim: the stalled worker's claim expired and was retaken")
	require.Zero(t, scan.Fenced+claim.Fenced, "nothing fences the naive modes")
}

func TestSimulateRejectsABadWorkload(t *testing.T) {
	w := smallWorkload()
	w.Workers = 2
	_, err := Simulate(context.Background(), Leader, w, MemorySink{})
	require.Error(t, err)
}
