package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
)

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
	for _, c := range []int{exitOK, exitFailure, exitUsage, exitNoQuorum, exitBusy, exitNotHeld, exitLeaseLost, exitCannotExec, exitNotFound} {
		require.False(t, codes[c], "code %d used twice", c)
		codes[c] = true
	}
}

func TestOneLine(t *testing.T) {
	err := fmt.Errorf("%w: release %q: token held on 0 of 3 nodes: %w", redlock.ErrNotHeld, "r",
		errors.Join(errors.New("a\nb"), errors.New("c")))
	require.Equal(t, `release "r": token held on 0 of 3 nodes: a b c`, oneLine(err))
	long := errors.New(string(make([]byte, 2*maxMessage)))
	require.LessOrEqual(t, len(oneLine(long)), maxMessage)
}

func TestReason(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	require.Equal(t, "connection refused", reason(refused))
	require.Equal(t, "timed out", reason(fmt.Errorf("x: %w", context.DeadlineExceeded)))
	require.Equal(t, "WRONGPASS bad password", reason(errors.New("WRONGPASS bad\npassword")))
}

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

func TestBusyMessage(t *testing.T) {
	ae := &redlock.AcquireError{Resource: "deploy", Granted: 1, Needed: 3, Total: 5,
		Refused: []string{"a", "b", "c", "d"}, HolderTTL: 4200 * time.Millisecond}
	ce := busyError(ae, "ci:42")
	require.Equal(t, exitBusy, ce.code)
	require.Equal(t, `"deploy" is busy: held by ci:42 for 4.2s more (granted by 1 of 5 nodes, 3 needed)`, ce.msg)
	require.Equal(t, int64(4200), ce.extra["holder_ttl_ms"])
	ce = busyError(&redlock.AcquireError{Resource: "x", Total: 3, Needed: 2, Reason: "validity elapsed during the attempt"}, "")
	require.Equal(t, `"x" is busy (granted by 0 of 3 nodes, 2 needed; validity elapsed during the attempt)`, ce.msg)
}

func TestSignalExitCode(t *testing.T) {
	require.Equal(t, 130, signalExitCode(syscall.SIGINT))
	require.Equal(t, 143, signalExitCode(syscall.SIGTERM))
	ctx, cancel := context.WithCancelCause(context.Background())
	require.Nil(t, interrupted(ctx))
	cancel(&interruptError{sig: syscall.SIGTERM})
	ce := interrupted(ctx)
	require.Equal(t, 143, ce.code)
	require.Equal(t, "interrupted by terminated", ce.msg)
}

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
