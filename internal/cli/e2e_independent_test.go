package cli

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/testutil"
)

// startReplica starts a redis-server replicating primary and waits until
// the primary counts it among its connected replicas.
func startReplica(t *testing.T, primary *testutil.RedisServer) *testutil.RedisServer {
	t.Helper()
	replica := testutil.StartRedisServer(t, testutil.WithConfig("replicaof 127.0.0.1 "+strconv.Itoa(primary.Port())))
	waitFor(t, 20*time.Second, "the replica to connect", func() bool {
		info, err := replica.Do(t.Context(), "INFO", "replication").Text()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	return replica
}

// TestE2EDoctorNamesNodesThatAreNotIndependent (issue 30 ask 4, Safety v4
// rule 1): doctor's node-set row "independent" FAILs, with a hint, when a
// listed node replicates another listed node, when two listed addresses
// reach one server, and when two listed replicas share one primary (one
// replication history); independent servers are OK. status names the
// same nodes in a warning line and in --json's not_independent.
func TestE2EDoctorNamesNodesThatAreNotIndependent(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 2)
	primary, other := c.Server(0), c.Server(1)
	replica := startReplica(t, primary)
	hidden := testutil.StartRedisServer(t) // a primary that is not listed
	r1, r2 := startReplica(t, hidden), startReplica(t, hidden)
	third := testutil.StartRedisServer(t)
	localhost := fmt.Sprintf("redis://localhost:%d", other.Port())

	for _, tc := range []struct {
		name  string
		urls  []string
		fail  bool
		wants []string
		// refused: the Locker itself refuses the nodes (one server twice),
		// so status stops with that error.
		refused bool
	}{
		{name: "independent primaries", urls: []string{primary.URL(), other.URL(), third.URL()}},
		{
			name: "a primary and its replica", urls: []string{primary.URL(), replica.URL(), other.URL()}, fail: true,
			wants: []string{fmt.Sprintf("%s is a replica of %s", replica.Addr(), primary.Addr())},
		},
		{
			name: "one server under two addresses", urls: []string{other.URL(), localhost, third.URL()}, fail: true, refused: true,
			wants: []string{fmt.Sprintf("%s and localhost:%d are one server", other.Addr(), other.Port())},
		},
		{
			name: "two replicas of one unlisted primary", urls: []string{r1.URL(), r2.URL(), third.URL()}, fail: true,
			wants: []string{fmt.Sprintf("%s and %s hold one replication history", r1.Addr(), r2.Addr())},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, res, checks := doctorChecks(t, tc.urls)
			row := checks[nodeSetNode+" independent"]
			if !tc.fail {
				require.Equal(t, statusOK, row.Status, "%+v", row)
				require.Contains(t, row.Detail, "3 servers behind 3 nodes")
				require.Equal(t, statusOK, checks[nodeSetNode+" clocks"].Status, "%+v", checks[nodeSetNode+" clocks"])
				require.Zero(t, res.Fail, "%+v", res.Checks)
				return
			}
			require.Equal(t, statusFail, row.Status, "%+v", row)
			require.False(t, res.OK)
			require.Contains(t, row.Detail, "the nodes are not independent: ")
			require.Contains(t, row.Detail, "Hint: a primary and its replica, or one server listed twice, hold one copy of the data")
			for _, w := range tc.wants {
				require.Contains(t, row.Detail, w)
			}

			text := cli(t, nodesEnv(tc.urls), "status", "indep")
			if tc.refused {
				require.NotZero(t, text.code)
				require.Contains(t, text.stderr, "reach the same server")
				return
			}
			require.Contains(t, text.stdout, "warning: the nodes are not independent: ", "stdout: %s\nstderr: %s", text.stdout, text.stderr)
			for _, w := range tc.wants {
				require.Contains(t, text.stdout, w)
			}
			js := decode(t, cli(t, nodesEnv(tc.urls), "status", "indep", "--json"))
			list, ok := js["not_independent"].([]any)
			require.True(t, ok, "not_independent in %v", js)
			require.NotEmpty(t, list)
			require.Contains(t, fmt.Sprint(list), tc.wants[0])
			rw := decode(t, cli(t, nodesEnv(tc.urls), "status", "indep", "--rw", "--json"))
			require.NotEmpty(t, rw["not_independent"], "status --rw: %v", rw)
		})
	}

	// status says nothing of independence where the nodes are.
	r := cli(t, nodesEnv([]string{primary.URL(), other.URL(), third.URL()}), "status", "indep")
	require.NotContains(t, r.stdout, "independent", "stdout: %s", r.stdout)
}
