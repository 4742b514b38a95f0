package testutil_test

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/testutil"
)

// TestServerHostPrefixAndEnv starts a server on another loopback address,
// through a command prefix that execs it only if the extra variable is in
// its environment, and restarts it the same way. The chaos suite uses the
// three options for network namespaces and libfaketime.
func TestServerHostPrefixAndEnv(t *testing.T) {
	s := testutil.StartRedisServer(t,
		testutil.WithHost("127.0.0.2"),
		// sh -c SCRIPT redis-server redis.conf: $0 is the server, $@ its config.
		testutil.WithCommandPrefix("sh", "-c", `[ "$REDLOCK_TESTUTIL_MARK" = yes ] && exec "$0" "$@"; echo "no mark" >&2; exit 3`),
		testutil.WithEnv("REDLOCK_TESTUTIL_MARK=yes"),
	)
	host, _, err := net.SplitHostPort(s.Addr())
	require.NoError(t, err)
	require.Equal(t, "127.0.0.2", host)
	require.Contains(t, s.URL(), "127.0.0.2")
	require.Equal(t, "no", configGet(t, s, "protected-mode"), "bound to an address other than 127.0.0.1")
	require.NoError(t, s.Client().Ping(ctxT(t)).Err())

	// The process that answers is the one started (testutil checks
	// process_id), so the prefix exec'd the server and Kill reaches it.
	require.NoError(t, s.Kill())
	require.Error(t, s.Client().Ping(ctxT(t)).Err())
	require.NoError(t, s.Restart())
	require.NoError(t, s.Client().Ping(ctxT(t)).Err())
}
