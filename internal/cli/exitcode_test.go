package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
)

// TestClassify: each library error maps to its exit code and JSON kind.
func TestClassify(t *testing.T) {
	tests := []struct {
		err  error
		code int
		kind string
	}{
		{fmt.Errorf("x: %w", redlock.ErrInvalidConfig), exitUsage, kindUsage},
		{fmt.Errorf("x: %w", redlock.ErrInvalidResource), exitUsage, kindUsage},
		{fmt.Errorf("x: %w", redlock.ErrNoQuorum), exitNoQuorum, kindNoQuorum},
		{fmt.Errorf("x: %w", redlock.ErrNotAcquired), exitBusy, kindBusy},
		{fmt.Errorf("x: %w", redlock.ErrNotHeld), exitNotHeld, kindNotHeld},
		{fmt.Errorf("x: %w", redlock.ErrLeaseLost), exitLeaseLost, kindLeaseLost},
		{fmt.Errorf("x: %w", redlock.ErrNodeFull), exitCannotGrant, kindNodeFull},
		{fmt.Errorf("x: %w", redlock.ErrReadOnly), exitCannotGrant, kindReadOnly},
		{fmt.Errorf("x: %w", redlock.ErrFenceExhausted), exitCannotGrant, kindFenceFull},
		// A busy lock or an unreachable majority where one node is also
		// full keeps its own class.
		{fmt.Errorf("%w: %w", redlock.ErrNotAcquired, redlock.ErrNodeFull), exitBusy, kindBusy},
		{fmt.Errorf("%w: %w", redlock.ErrNoQuorum, redlock.ErrReadOnly), exitNoQuorum, kindNoQuorum},
		{errors.New("boom"), exitFailure, kindFailure},
		{usageErrorf("bad"), exitUsage, kindUsage},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			ce := classify(tt.err)
			require.Equal(t, tt.code, ce.code)
			require.Equal(t, tt.kind, ce.kind)
		})
	}
	// The exit codes are distinct.
	codes := map[int]bool{}
	for _, c := range []int{exitOK, exitFailure, exitUsage, exitNoQuorum, exitBusy, exitNotHeld, exitLeaseLost, exitAccessDenied, exitCannotGrant, exitCannotExec, exitNotFound} {
		require.False(t, codes[c], "code %d used twice", c)
		codes[c] = true
	}
}

// TestOneLine: messages are one line, without repeated prefixes, clipped.
func TestOneLine(t *testing.T) {
	err := fmt.Errorf("%w: release %q: token held on 0 of 3 nodes: %w", redlock.ErrNotHeld, "r",
		errors.Join(errors.New("a\nb"), errors.New("c")))
	require.Equal(t, `release "r": token held on 0 of 3 nodes: a b c`, oneLine(err))
	long := errors.New(string(make([]byte, 2*maxMessage)))
	require.LessOrEqual(t, len(oneLine(long)), maxMessage)
}

// TestReason: a node's failure in a few words.
func TestReason(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	require.Equal(t, "connection refused", reason(refused))
	require.Equal(t, "timed out", reason(fmt.Errorf("x: %w", context.DeadlineExceeded)))
	require.Equal(t, "WRONGPASS bad password", reason(errors.New("WRONGPASS bad\npassword")))
}

// TestNoQuorumMessage: the no-quorum message counts the answers and names
// each failed node.
func TestNoQuorumMessage(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	err := fmt.Errorf("%w: 1 of 3 nodes answered: %w", redlock.ErrNoQuorum, errors.Join(
		&redlock.NodeError{Addr: "10.0.0.1:6379", Err: refused},
		&redlock.NodeError{Addr: "10.0.0.2:6379", Err: context.DeadlineExceeded},
	))
	ce := noQuorumError(err, answeredNodes(err, 3), 3)
	require.Equal(t, exitNoQuorum, ce.code)
	require.Equal(t, "cannot reach a majority of the nodes: 1 of 3 answered, 2 needed: 10.0.0.1:6379: connection refused; 10.0.0.2:6379: timed out", ce.msg)
	require.Equal(t, 1, ce.extra["answered"])
}

// redisErr is an error as go-redis returns a server's error reply.
type redisErr string

// Error is the reply.
func (e redisErr) Error() string { return string(e) }

// RedisError marks a server's error reply.
func (redisErr) RedisError() {}

// TestIsAccessDenied: the server replies that refuse our credentials or
// a command.
func TestIsAccessDenied(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{redisErr("WRONGPASS invalid username-password pair or user is disabled."), true},
		{redisErr("NOAUTH Authentication required."), true},
		{redisErr("NOPERM User u has no permissions to run the 'evalsha' command"), true},
		{redisErr("ERR invalid password"), true},
		{redisErr("ERR Client sent AUTH, but no password is set"), true},
		{redisErr("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"), true},
		{fmt.Errorf("node a: %w", redisErr("WRONGPASS bad")), true},
		{redisErr("READONLY You can't write against a read only replica."), false},
		{redisErr("ERR unknown command"), false},
		{errors.New("WRONGPASS but not from a server"), false},
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, false},
		{context.DeadlineExceeded, false},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			require.Equal(t, tt.want, isAccessDenied(tt.err))
		})
	}
}

// TestAccessDeniedExitCode: a wrong password gets its own exit code when
// the refusing nodes alone rule out a majority, and the no-quorum code
// when unreachable nodes share the blame.
func TestAccessDeniedExitCode(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	wrongpass := redisErr("WRONGPASS invalid username-password pair or user is disabled.")
	node := func(addr string, err error) error { return &redlock.NodeError{Addr: addr, Err: err} }
	tests := []struct {
		name  string
		total int
		errs  []error
		code  int
		kind  string
	}{
		{"one node, wrong password", 1, []error{node("a:1", wrongpass)}, exitAccessDenied, kindAccessDenied},
		{"all three", 3, []error{node("a:1", wrongpass), node("b:1", wrongpass), node("c:1", wrongpass)}, exitAccessDenied, kindAccessDenied},
		{"two of three", 3, []error{node("a:1", wrongpass), node("b:1", wrongpass)}, exitAccessDenied, kindAccessDenied},
		{"NOAUTH", 3, []error{node("a:1", redisErr("NOAUTH Authentication required.")), node("b:1", redisErr("NOAUTH Authentication required."))}, exitAccessDenied, kindAccessDenied},
		{"one denied, one down", 3, []error{node("a:1", wrongpass), node("b:1", refused)}, exitNoQuorum, kindNoQuorum},
		{"all down", 3, []error{node("a:1", refused), node("b:1", refused), node("c:1", refused)}, exitNoQuorum, kindNoQuorum},
		{"timeouts", 3, []error{node("a:1", context.DeadlineExceeded), node("b:1", context.DeadlineExceeded)}, exitNoQuorum, kindNoQuorum},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := fmt.Errorf("%w: %w", redlock.ErrNoQuorum, errors.Join(tt.errs...))
			ce := noQuorumError(err, answeredNodes(err, tt.total), tt.total)
			require.Equal(t, tt.code, ce.code, ce.msg)
			require.Equal(t, tt.kind, ce.kind)
			require.Contains(t, ce.msg, "cannot reach a majority of the nodes")
			if tt.code == exitAccessDenied {
				require.True(t, strings.HasPrefix(ce.msg, "access denied: check the user and password"), ce.msg)
				require.Contains(t, ce.msg, "a:1: ")
			}
		})
	}
	require.NotEqual(t, exitNoQuorum, exitAccessDenied)
}

// TestBusyMessage: the busy message names the holder, its TTL and the
// votes.
func TestBusyMessage(t *testing.T) {
	ae := &redlock.AcquireError{Resource: "deploy", Granted: 1, Needed: 3, Total: 5,
		Refused: []string{"a", "b", "c", "d"}, HolderTTL: 4200 * time.Millisecond}
	ce := busyError(ae, "ci:42")
	require.Equal(t, exitBusy, ce.code)
	require.Equal(t, `"deploy" is busy: held by ci:42 for 4.2s more (granted by 1 of 5 nodes, 3 needed)`, ce.msg)
	require.Equal(t, int64(4200), ce.extra["holder_ttl_ms"])
	ce = busyError(&redlock.AcquireError{Resource: "x", Total: 3, Needed: 2, Reason: "validity elapsed during the attempt"}, "")
	require.Equal(t, `"x" is busy (granted by 0 of 3 nodes, 2 needed; validity elapsed during the attempt)`, ce.msg)

	// A key without expiry: the library's reason stays in the message.
	ae = &redlock.AcquireError{Resource: "x", Total: 3, Needed: 2, Refused: []string{"a:1", "b:1", "c:1"}, HolderTTL: -1}
	require.Contains(t, ae.Error(), "refused by a:1, b:1, c:1 with no expiry")
	ce = busyError(ae, "someone")
	require.Equal(t, exitBusy, ce.code)
	require.Equal(t, `"x" is busy: held by someone (granted by 0 of 3 nodes, 2 needed; refused by a:1, b:1, c:1 with no expiry: not a redlock lock, it stays until deleted)`, ce.msg)
	require.Equal(t, int64(-1), ce.extra["holder_ttl_ms"])
}

// TestFailSummary: doctor's error line counts the FAILs.
func TestFailSummary(t *testing.T) {
	require.Equal(t, "doctor: 1 check FAILs", failSummary(1))
	require.Equal(t, "doctor: 2 checks FAIL", failSummary(2))
	require.Equal(t, "doctor: 12 checks FAIL", failSummary(12))
}

// TestTTLMillis: TTLs in milliseconds, -1 for no expiry.
func TestTTLMillis(t *testing.T) {
	require.Equal(t, int64(-1), ttlMillis(-1))
	require.Equal(t, int64(-1), ttlMillis(-time.Second))
	require.Equal(t, int64(0), ttlMillis(0))
	require.Equal(t, int64(0), ttlMillis(999*time.Microsecond))
	require.Equal(t, int64(1500), ttlMillis(1500*time.Millisecond))
	require.Equal(t, "no expiry", ttlText(-1))
	v := verdict(statusResult{Resource: "x", State: "held", Quorum: 2, Total: 3, HeldOn: 3,
		Holder: &statusHolder{TokenPrefix: "abcdef01", Owner: "o", TTLMillis: -1}})
	require.Equal(t, `"x": held by o (token abcdef01...) on 3 nodes, quorum 2 of 3; no expiry: not a redlock lock, it stays until deleted; fence counter 0`, v)
}

// TestSignalExitCode: 128+N for signal N, from an interrupted context.
func TestSignalExitCode(t *testing.T) {
	require.Equal(t, 130, signalExitCode(syscall.SIGINT))
	require.Equal(t, 143, signalExitCode(syscall.SIGTERM))
	ctx, cancel := context.WithCancelCause(context.Background())
	require.Nil(t, interrupted(ctx))
	cancel(&interruptError{sig: syscall.SIGTERM})
	ce := interrupted(ctx)
	require.Equal(t, 143, ce.code)
	require.Equal(t, "interrupted by SIGTERM", ce.msg)
	require.Equal(t, "terminated", ce.extra["signal"], "the JSON field keeps Go's name")
}

// TestSignalName: signals as messages name them.
func TestSignalName(t *testing.T) {
	tests := []struct {
		sig  os.Signal
		want string
	}{
		{syscall.SIGINT, "SIGINT (Ctrl-C)"},
		{syscall.SIGTERM, "SIGTERM"},
		{syscall.SIGHUP, "SIGHUP"},
		{syscall.SIGKILL, "signal 9 (killed)"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, signalName(tt.sig))
	}
}

// TestRoundDur: durations for people, to about three digits.
func TestRoundDur(t *testing.T) {
	for d, want := range map[time.Duration]string{
		412345 * time.Nanosecond:  "412µs",
		1234567 * time.Nanosecond: "1.23ms",
		9876543210:                "9.877s",
		-1234567:                  "-1.23ms",
		83 * time.Second:          "1m23s",
	} {
		require.Equal(t, want, roundDur(d).String())
	}
	require.Equal(t, "none", fmtDuration(-1))
	require.Equal(t, "+0s", signed(-200*time.Nanosecond))
}

// TestDocsExitCodes: the exit-code table of the CLI reference (docs/cli.md)
// lists the codes of --help, in the same order.
func TestDocsExitCodes(t *testing.T) {
	b, err := os.ReadFile("../../docs/cli.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(b), "\n## Exit codes\n")
	require.True(t, ok, "docs/cli.md has no Exit codes section")
	table, _, _ = strings.Cut(table, "\n#")
	var readme []string
	for _, line := range strings.Split(table, "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 2 && strings.HasPrefix(line, "| ") {
			if code := strings.TrimSpace(cells[1]); code != "code" && !strings.HasPrefix(code, "---") {
				readme = append(readme, code)
			}
		}
	}
	var help []string
	for _, line := range strings.Split(exitCodeHelp, "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "other" || f[0][0] >= '0' && f[0][0] <= '9') {
			help = append(help, f[0])
		}
	}
	require.Equal(t, help, readme)
	require.Contains(t, help, strconv.Itoa(exitAccessDenied))
	require.Contains(t, help, strconv.Itoa(exitCannotGrant))
}

// TestPlural: one noun, and the plural of nouns that end in s.
func TestPlural(t *testing.T) {
	require.Equal(t, "1 node", plural(1, "node"))
	require.Equal(t, "0 nodes", plural(0, "node"))
	require.Equal(t, "2 processes", plural(2, "process"))
}
