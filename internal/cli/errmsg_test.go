package cli

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
)

// TestMisconfiguredExitCode: nodes that answered but fail for reasons that
// will not pass (a wrong password on one, a read-only replica on another)
// are not "cannot reach": exit 8, each named with what to fix, and no
// "rejoin state unknown:" prefix. Below a majority of such nodes, a
// no-quorum error stays a no-quorum error.
func TestMisconfiguredExitCode(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	wrongpass := fmt.Errorf("rejoin state unknown: %w", redisErr("WRONGPASS invalid username-password pair or user is disabled."))
	replica := fmt.Errorf("%w: %w", redlock.ErrReadOnly, redisErr("READONLY You can't write against a read only replica. script: 5c8e37af..., on @user_script:175."))
	node := func(addr string, err error) error { return &redlock.NodeError{Addr: addr, Err: err} }
	tests := []struct {
		name  string
		total int
		errs  []error
		code  int
		kind  string
		want  []string
	}{
		{"password and replica", 3, []error{node("b:1", wrongpass), node("c:1", replica)}, exitCannotGrant, kindMisconfigured,
			[]string{"no majority can grant: 2 of 3 nodes answered but cannot take part, which leaves 1, 2 needed; retrying will not help",
				"b:1: WRONGPASS invalid username-password pair or user is disabled - access denied (check the user and password in its URL, and its ACL)",
				"c:1: READONLY You can't write against a read only replica - it is a read-only replica (every node must be a primary)"}},
		{"two replicas and one down of five", 5, []error{node("a:1", replica), node("b:1", replica), node("c:1", replica), node("d:1", refused)}, exitCannotGrant, kindMisconfigured,
			[]string{"3 of 5 nodes answered but cannot take part", "also d:1: connection refused"}},
		{"one replica, one down", 3, []error{node("b:1", replica), node("c:1", refused)}, exitNoQuorum, kindNoQuorum,
			[]string{"cannot reach a majority", "c:1: connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := fmt.Errorf("%w: %w", redlock.ErrNoQuorum, errors.Join(tt.errs...))
			ce := noQuorumError(err, answeredNodes(err, tt.total), tt.total)
			require.Equal(t, tt.code, ce.code, ce.msg)
			require.Equal(t, tt.kind, ce.kind)
			for _, w := range tt.want {
				require.Contains(t, ce.msg, w)
			}
			require.NotContains(t, ce.msg, "rejoin state unknown")
			require.NotContains(t, ce.msg, "script:")
		})
	}
}

// TestReasonUnwrapsRejoinUnknown: the library's "rejoin state unknown:"
// wrapping of a failed call does not reach the message.
func TestReasonUnwrapsRejoinUnknown(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	require.Equal(t, "connection refused", reason(fmt.Errorf("rejoin state unknown: %w", refused)))
}
