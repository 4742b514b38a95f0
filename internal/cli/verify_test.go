package cli

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
)

// TestVerifyUsageErrors: verify's flags are checked before any traffic.
func TestVerifyUsageErrors(t *testing.T) {
	nodes := map[string]string{envNodes: "redis://127.0.0.1:1"}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"verify", "--clients", "0"}, "--clients must be from 1"},
		{[]string{"verify", "--resources", "0"}, "--resources must be from 1"},
		{[]string{"verify", "--faults", "kill-nodes"}, `--faults must be none, pause or kill-conns, got "kill-nodes"`},
		{[]string{"verify", "--procs", "9"}, "--procs must be from 1 to --clients (8)"},
		{[]string{"verify", "--rate", "-1"}, "--rate must be from 0"},
		{[]string{"verify", "--register", "disk"}, "--register must be node or memory"},
		{[]string{"verify", "--register", "memory", "--procs", "2"}, "not with --procs 2"},
		{[]string{"verify", "--duration", "0s"}, "--duration must be a positive duration"},
		{[]string{"verify", "--hold", "-1s"}, "--hold must not be negative"},
		{[]string{"verify", "extra"}, "verify takes no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			code, stdout, stderr := runInProcess(t, nodes, tt.args...)
			require.Equal(t, exitUsage, code, "stderr: %s", stderr)
			require.Empty(t, stdout)
			requireOneLine(t, stderr, tt.want)
		})
	}
}

// TestValidityOverlaps: windows that touch do not overlap; one granted
// inside an earlier one does, also when a shorter one lies between.
func TestValidityOverlaps(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		ws   []validWindow
		want int
	}{
		{"none", nil, 0},
		{"one after another", []validWindow{{1, 1, 0, 10 * ms}, {2, 2, 10 * ms, 20 * ms}, {1, 3, 25 * ms, 30 * ms}}, 0},
		{"overlap", []validWindow{{1, 1, 0, 10 * ms}, {2, 2, 5 * ms, 20 * ms}}, 1},
		{"inside a long one", []validWindow{{1, 1, 0, 100 * ms}, {2, 2, 5 * ms, 6 * ms}, {3, 3, 50 * ms, 60 * ms}}, 2},
		{"order of recording does not matter", []validWindow{{2, 2, 5 * ms, 20 * ms}, {1, 1, 0, 10 * ms}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, ex := validityOverlaps(tt.ws)
			require.Equal(t, tt.want, n)
			require.Equal(t, tt.want > 0, ex != "", ex)
		})
	}
}

// TestMemRegister: the in-memory register follows redisfence.Store: a token
// not below the fence is accepted, a lower one is stale with the fence.
func TestMemRegister(t *testing.T) {
	ctx := context.Background()
	m := newMemRegister()
	_, hi, found, err := m.Read(ctx, "k")
	require.NoError(t, err)
	require.False(t, found)
	require.Zero(t, hi)
	require.NoError(t, m.Write(ctx, "k", "a", 5))
	require.NoError(t, m.Write(ctx, "k", "b", 5))
	err = m.Write(ctx, "k", "c", 4)
	var stale *fencing.StaleError
	require.True(t, errors.As(err, &stale))
	require.Equal(t, fencing.Token(5), stale.Highest)
	v, hi, found, err := m.Read(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "b", v)
	require.Equal(t, fencing.Token(5), hi)
	require.True(t, found)
}

// TestClientIDsNamed: kill-conns kills only the connections named by
// the run.
func TestClientIDsNamed(t *testing.T) {
	list := "id=3 addr=127.0.0.1:5000 laddr=127.0.0.1:6379 fd=8 name=redlock-verify-ab cmd=evalsha\n" +
		"id=4 addr=127.0.0.1:5001 laddr=127.0.0.1:6379 fd=9 name= cmd=client\n" +
		"id=5 addr=127.0.0.1:5002 laddr=127.0.0.1:6379 fd=10 name=redlock-verify-abc cmd=get\n" +
		"id=6 addr=127.0.0.1:5003 laddr=127.0.0.1:6379 fd=11 name=redlock-verify-ab cmd=get\n"
	require.Equal(t, []string{"3", "6"}, clientIDsNamed(list, "redlock-verify-ab"))
	require.Empty(t, clientIDsNamed(list, "other"))
}

// TestWithClientName: the run's client name replaces any in the URL,
// and the rest of the URL (password, db, other options) is kept.
func TestWithClientName(t *testing.T) {
	for _, raw := range []string{
		"redis://127.0.0.1:6379",
		"redis://:p%40ss@127.0.0.1:6379/2?client_name=app&dial_timeout=1s",
		"redis+sentinel://127.0.0.1:26379?master_name=m",
	} {
		got := withClientName(raw, "redlock-verify-x")
		u, err := url.Parse(got)
		require.NoError(t, err)
		require.Equal(t, []string{"redlock-verify-x"}, u.Query()["client_name"], got)
		orig, _ := url.Parse(raw)
		require.Equal(t, orig.User.String(), u.User.String())
		require.Equal(t, orig.Path, u.Path)
		require.Equal(t, orig.Query().Get("master_name"), u.Query().Get("master_name"))
	}
}

// TestGlobEscape: a prefix with glob characters matches only itself.
func TestGlobEscape(t *testing.T) {
	require.Equal(t, `a\*b\?c\[d\]e\\f:`, globEscape(`a*b?c[d]e\f:`))
}
