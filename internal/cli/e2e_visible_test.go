package cli

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// TestE2ERejoiningNodesAreNotBusy: servers just started without AOF sit
// out their rejoin delay. acquire then exits 9 (rejoining), naming the
// nodes, instead of 4 (busy); with --wait it says so on stderr at once and
// takes the lock when the delay has passed.
func TestE2ERejoiningNodesAreNotBusy(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3, testutil.WithConfig("appendonly no"))
	env := nodesEnv(c.URLs())
	// The delay must cover the lease (a shorter one is a usage error).
	const delay, ttl = "--rejoin-delay=6s", "--ttl=6s"
	// testutil vouches for the servers it starts; this test is about
	// their first use: no marker yet (Safety v4, design §6.2).
	for _, s := range c.Servers() {
		require.NoError(t, s.Do(testutil.Context(t), "DEL", testutil.DefaultMarker).Err())
	}

	r := cli(t, env, "acquire", "fresh", delay, ttl)
	requireCode(t, r, exitRejoining, `"fresh" is unavailable, not busy: `)
	require.Regexp(t, `[23] of 3 nodes are rejoining after a restart or a loss of data: each refuses every lock until its rejoin delay \(--rejoin-delay, default the --ttl\) has passed since then: 127\.0\.0\.1:\d+ \(its marker key is missing \(first use, FLUSHALL or FLUSHDB, SWAPDB, a restart without data, or the marker deleted\); it grants again in [\d.]+m?s\)`, r.stderr)
	// What to do: it passes by itself; --wait waits for it.
	require.Contains(t, r.stderr, "nobody holds the lock and this passes by itself: retry after that, or wait for it with --wait DURATION")
	require.Empty(t, r.stdout)

	r = cli(t, env, "acquire", "fresh", delay, ttl, "--json")
	requireCode(t, r, exitRejoining, "unavailable")
	obj := decode(t, r)
	require.Equal(t, "rejoining", obj["error"])
	require.Equal(t, 9.0, obj["exit_code"])
	require.GreaterOrEqual(t, len(obj["rejoining"].([]any)), 2)
	for _, addr := range obj["rejoining"].([]any) {
		require.Contains(t, c.Addrs(), addr)
	}

	r = cli(t, env, "run", "fresh", delay, ttl, "--", "true")
	requireCode(t, r, exitRejoining, "unavailable, not busy")

	// Waiting: one warning line at once, then the lock.
	cmd := cliCommand(t, env, "acquire", "fresh", delay, ttl, "--wait", "20s", "--json")
	var stdout, stderr lockedBuffer // read while the command writes
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	require.NoError(t, cmd.Start())
	waitFor(t, 3*time.Second, "the rejoining warning", func() bool {
		return strings.Contains(stderr.String(), "warning: ")
	})
	r = waitCLI(t, cmd, &stdout, &stderr, start)
	requireCode(t, r, exitOK, "warning: ")
	require.Contains(t, r.stderr, "nodes are rejoining after a restart")
	require.Equal(t, "fresh", decode(t, r)["resource"])

	// Once the delay has passed, a held lock is busy again (exit 4).
	r = cli(t, env, "acquire", "fresh", delay, ttl)
	requireCode(t, r, exitBusy, `"fresh" is busy`)
}

// TestE2EMinorityMisconfiguredIsVisible: a node with a wrong password, or a
// replica among the nodes, leaves the lock to the other two; the lock is
// granted, with one warning line naming the node and why.
func TestE2EMinorityMisconfiguredIsVisible(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3, testutil.WithPassword("rightPW123"))
	urls := c.URLs()
	urls[2] = strings.ReplaceAll(urls[2], "rightPW123", "wrongPW456")
	for _, args := range [][]string{{"acquire", "pw"}, {"acquire", "pw2", "--wait", "2s"}, {"run", "pw3", "--", "true"}} {
		r := cli(t, nodesEnv(urls), args...)
		requireCode(t, r, exitOK, "warning: node "+c.Server(2).Addr()+" cannot take part in the quorum: access denied")
		require.Contains(t, r.stderr, "WRONGPASS")
		require.Contains(t, r.stderr, "one failure fewer to spare")
		require.NotContains(t, r.stdout+r.stderr, "wrongPW456")
	}

	// A replica in the node set.
	s := testutil.StartRedis(t, 4)
	require.NoError(t, s.Server(3).Do(t.Context(), "REPLICAOF", "127.0.0.1", s.Server(0).Port()).Err())
	withReplica := []string{s.URLs()[1], s.URLs()[2], s.URLs()[3]}
	waitFor(t, 10*time.Second, "the replica to sync", func() bool {
		info, err := s.Server(3).Do(t.Context(), "INFO", "replication").Text()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	r := cli(t, nodesEnv(withReplica), "acquire", "rep", "--json")
	requireCode(t, r, exitOK, "warning: node "+s.Server(3).Addr()+" cannot take part in the quorum: it is a read-only replica")
	require.Contains(t, r.stderr, "(REPLICA redlock: this node is a replica of ")
	require.Equal(t, 1, strings.Count(r.stderr, s.Server(3).Addr()), r.stderr)
	require.Len(t, decode(t, r)["granted"], 2)

	// A node that is merely down is shown by status, not warned about here.
	require.NoError(t, s.Server(3).Kill())
	r = cli(t, nodesEnv(withReplica), "acquire", "down", "--timeout", "500ms")
	requireCode(t, r, exitOK, "")
	require.Empty(t, r.stderr)
}

// TestE2EStatusWithoutAMajority: with a majority of the nodes down from
// the start, status still prints every node's row (the live node's lock,
// the others' errors), counts the node that answered, and exits 3; --json
// gives the same in one object with the error fields.
func TestE2EStatusWithoutAMajority(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	r := cli(t, env, "acquire", "jobs", "--owner", "cron-7", "--json")
	requireCode(t, r, exitOK, "")
	token := decode(t, r)["token"].(string)
	require.NoError(t, c.Server(1).Kill())
	require.NoError(t, c.Server(2).Kill())

	r = cli(t, env, "status", "jobs", "--timeout", "500ms")
	requireCode(t, r, exitNoQuorum, "cannot reach a majority of the nodes: 1 of 3 answered, 2 needed: ")
	require.Regexp(t, regexp.QuoteMeta(c.Server(0).Addr())+`\s+held\s+`+token[:8]+`\s+cron-7\s`, r.stdout)
	for _, i := range []int{1, 2} {
		require.Regexp(t, regexp.QuoteMeta(c.Server(i).Addr())+`\s+-.*connection refused`, r.stdout)
	}
	require.Contains(t, r.stdout, `"jobs": unknown: only 1 node answered, quorum 2 of 3`)
	require.NotContains(t, r.stdout, token)

	r = cli(t, env, "status", "jobs", "--timeout", "500ms", "--json")
	requireCode(t, r, exitNoQuorum, "1 of 3 answered")
	st := decode(t, r)
	require.Equal(t, "no_quorum", st["error"])
	require.Equal(t, 3.0, st["exit_code"])
	require.Equal(t, 1.0, st["answered"])
	require.Equal(t, "unknown", st["state"])
	nodes := st["nodes"].([]any)
	require.Len(t, nodes, 3)
	require.Equal(t, true, nodes[0].(map[string]any)["held"])
	require.Equal(t, "connection refused", nodes[1].(map[string]any)["error"])

	// Every slot of a semaphore gets its table.
	r = cli(t, env, "status", "jobs", "-n", "2", "--timeout", "500ms")
	requireCode(t, r, exitNoQuorum, "1 of 3 answered")
	require.Contains(t, r.stdout, `"jobs#0": unknown`)
	require.Contains(t, r.stdout, `"jobs#1": unknown`)
}

// TestE2EWaitCountsTheNodesThatAnswered: when the majority goes away during
// a --wait, the final error counts the node that still answered.
func TestE2EWaitCountsTheNodesThatAnswered(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	r := cli(t, env, "acquire", "held", "--ttl", "30s")
	requireCode(t, r, exitOK, "")

	cmd := cliCommand(t, env, "acquire", "held", "--wait", "2s", "--timeout", "300ms")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	require.NoError(t, cmd.Start())
	time.Sleep(500 * time.Millisecond)
	require.NoError(t, c.Server(1).Kill())
	require.NoError(t, c.Server(2).Kill())
	r = waitCLI(t, cmd, &stdout, &stderr, start)
	// The node that still answers is counted, and only it: whichever
	// answers the last attempt had when it ended, the dead nodes' late
	// failures are seen before the error is printed, and a late answer is
	// counted (and said to be late).
	requireCode(t, r, exitNoQuorum, "cannot reach a majority of the nodes: 1 of 3 answered")
	for _, i := range []int{1, 2} {
		require.Contains(t, r.stderr, c.Server(i).Addr()+": connection refused")
	}
}

// TestE2ENoQuorumCountsLateFailures: the attempt ends at the second
// answer that rules a majority out (a busy node's refusal and a dead
// node's failure), before the call to a node whose writes are paused
// (CLIENT PAUSE WRITE: it still answers the INFO of Dial) has failed. The
// error counts that node as not answered and names it (it said "2 of 3
// answered": a node yet to answer counted as answering).
func TestE2ENoQuorumCountsLateFailures(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	r := cli(t, env, "acquire", "held", "--ttl", "1m")
	requireCode(t, r, exitOK, "")
	require.NoError(t, c.Server(1).Kill())
	ctx := testutil.Context(t)
	require.NoError(t, c.Server(2).Do(ctx, "CLIENT", "PAUSE", 60000, "WRITE").Err())
	t.Cleanup(func() { _ = c.Server(2).Do(context.Background(), "CLIENT", "UNPAUSE").Err() })

	for _, args := range [][]string{
		{"acquire", "held", "--timeout", "1s"},
		{"run", "held", "--timeout", "1s", "--", "true"},
	} {
		r = cli(t, env, args...)
		requireCode(t, r, exitNoQuorum, "cannot reach a majority of the nodes: 1 of 3 answered, 2 needed: ")
		require.Contains(t, r.stderr, c.Server(1).Addr()+": connection refused", args[0])
		require.Contains(t, r.stderr, c.Server(2).Addr()+": timed out", args[0])
	}
	r = cli(t, env, "acquire", "held", "--timeout", "1s", "--json")
	requireCode(t, r, exitNoQuorum, "1 of 3 answered")
	require.Equal(t, 1.0, decode(t, r)["answered"])
}

// TestAttemptFailureCountsTheNodesThatAnswered: a failed attempt's nodes
// that answered are those that granted or refused in time, plus, once
// its calls have ended, those that answered later (neither named by the
// attempt nor failed late); until then the message says the count is of
// the answers before the attempt ended.
func TestAttemptFailureCountsTheNodesThatAnswered(t *testing.T) {
	ne := func(addr string) *redlock.NodeError {
		return &redlock.NodeError{Addr: addr, Err: errors.New("connection refused")}
	}
	tests := []struct {
		name    string
		ae      redlock.AcquireError
		late    []*redlock.NodeError
		settled bool
		want    string
	}{
		{"two failed, one answered late", redlock.AcquireError{Total: 3, NodeErrors: []error{ne("a"), ne("b")}}, nil, true,
			"1 of 3 answered (1 after the attempt had ended), 2 needed: a: connection refused; b: connection refused"},
		{"two failed, one not yet", redlock.AcquireError{Total: 3, NodeErrors: []error{ne("a"), ne("b")}}, nil, false,
			"0 of 3 answered before the attempt ended (1 had not answered yet), 2 needed: a: connection refused; b: connection refused"},
		{"refused, failed, one failed late", redlock.AcquireError{Total: 3, Refused: []string{"a (busy)"}, NodeErrors: []error{ne("b")}}, []*redlock.NodeError{ne("c")}, true,
			"1 of 3 answered, 2 needed: b: connection refused; c: connection refused"},
		{"one granted, one refused, one failed", redlock.AcquireError{Total: 3, Granted: 1, Refused: []string{"b"}, NodeErrors: []error{ne("c")}}, nil, true,
			"2 of 3 answered, 2 needed: c: connection refused"},
		{"two silent, both failed late", redlock.AcquireError{Total: 3, NodeErrors: []error{ne("a"), errors.New("2 nodes did not answer within 300ms")}}, []*redlock.NodeError{ne("b"), ne("c")}, true,
			"0 of 3 answered, 2 needed: a: connection refused; b: connection refused; c: connection refused"},
		{"five, two silent", redlock.AcquireError{Total: 5, Refused: []string{"a"}, NodeErrors: []error{ne("b"), ne("c"), errors.New("2 nodes did not answer within 1s")}}, []*redlock.NodeError{ne("d"), ne("e")}, true,
			"1 of 5 answered, 3 needed: b: connection refused; c: connection refused; d: connection refused; e: connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ce := attemptFailure(&tt.ae, &tt.ae, tt.late, tt.settled)
			require.Equal(t, "cannot reach a majority of the nodes: "+tt.want, ce.msg)
			require.Same(t, &tt.ae, ce.err)
		})
	}
}

// TestWatcherFindsLateFailures: the acquire calls that failed after the
// last attempt started, on nodes the attempt does not name, are late
// failures; a failure from before the attempt, another operation's, or a
// node it names is not; an attempt other than the last cannot be told.
func TestWatcherFindsLateFailures(t *testing.T) {
	w := newWatcher(nil, func(string, ...any) {}, false)
	fail := func(node, op string) {
		w.Observe(redlock.Event{Kind: redlock.EventNodeError, Node: node, Op: op, Err: &redlock.NodeError{Addr: node, Err: errors.New("connection refused")}})
	}
	fail("c", "acquire") // before the attempt
	time.Sleep(10 * time.Millisecond)
	ae := &redlock.AcquireError{Total: 4, Refused: []string{"a (busy)"}, NodeErrors: []error{&redlock.NodeError{Addr: "b", Err: errors.New("x")}}}
	w.Observe(redlock.Event{Kind: redlock.EventAttempt, Latency: time.Millisecond, Err: ae})
	late, ok := w.lateFailures(ae)
	require.True(t, ok)
	require.Empty(t, late)
	fail("b", "acquire")
	fail("d", "release")
	fail("d", "acquire")
	late, ok = w.lateFailures(ae)
	require.True(t, ok)
	require.Len(t, late, 1)
	require.Equal(t, "d", late[0].Addr)
	_, ok = w.lateFailures(&redlock.AcquireError{})
	require.False(t, ok)
	_, ok = (*watcher)(nil).lateFailures(ae)
	require.False(t, ok)
}

// TestE2EFlushedNodesSayTheyLostData: FLUSHALL on two of three durable
// servers while a lock is held. acquire then exits 9 (rejoining, not busy)
// and says which nodes may have lost data and when they grant again (the
// attempt may stop before the second one answers).
func TestE2EFlushedNodesSayTheyLostData(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	env := nodesEnv(c.URLs())
	r := cli(t, env, "acquire", "flushed", "--ttl", "4s")
	requireCode(t, r, exitOK, "")
	for _, i := range []int{0, 1} {
		require.NoError(t, c.Server(i).Do(testutil.Context(t), "FLUSHALL").Err())
	}
	r = cli(t, env, "acquire", "flushed", "--ttl", "4s")
	requireCode(t, r, exitRejoining, `"flushed" is unavailable, not busy: `)
	require.Regexp(t, `[12] of 3 nodes are rejoining after a restart or a loss of data: .*127\.0\.0\.1:\d+ \(its marker key is missing \(first use, FLUSHALL or FLUSHDB, SWAPDB, a restart without data, or the marker deleted\); it grants again in [\d.]+m?s\)`, r.stderr)
}
