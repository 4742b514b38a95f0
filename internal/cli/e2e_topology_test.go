package cli

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/internal/nodeurl"
	"github.com/e6344662/go-redlock/testutil"
)

// nodeName is how redlock-cli names the node of url (nodeurl's Name).
func nodeName(t *testing.T, url string) string {
	t.Helper()
	spec, err := nodeurl.Parse(url)
	require.NoError(t, err)
	return spec.Name
}

// lockCycle runs acquire, status, renew, release and status of resource on
// the n nodes of env, all of which must answer.
func lockCycle(t *testing.T, env []string, resource string, n int) {
	t.Helper()
	r := cli(t, env, "acquire", resource, "--json", "--owner", "e2e")
	requireCode(t, r, exitOK, "")
	acq := decode(t, r)
	token := acq["token"].(string)
	require.GreaterOrEqual(t, len(acq["granted"].([]any)), n/2+1, "granted: %v", acq["granted"])

	r = cli(t, env, "status", resource, "--json")
	requireCode(t, r, exitOK, "")
	st := decode(t, r)
	require.Equal(t, "held", st["state"])
	require.Equal(t, float64(n), st["answered"])
	require.Equal(t, token[:8], st["holder"].(map[string]any)["token_prefix"])

	r = cli(t, env, "renew", resource, "--token", token, "--ttl", "20s", "--json")
	requireCode(t, r, exitOK, "")
	require.Greater(t, decode(t, r)["ttl_ms"].(float64), 19000.0)

	r = cli(t, env, "release", resource, "--token", token)
	requireCode(t, r, exitOK, "")
	r = cli(t, env, "status", resource, "--json")
	requireCode(t, r, exitOK, "")
	require.Equal(t, "free", decode(t, r)["state"])
}

// runFences runs "run RESOURCE -- sh -c 'echo $REDLOCK_FENCE'" times
// times and requires strictly increasing fences.
func runFences(t *testing.T, env []string, resource string, times int) {
	t.Helper()
	last := uint64(0)
	for range times {
		r := cli(t, env, "run", resource, "--", "sh", "-c", `echo "fence=$REDLOCK_FENCE"`)
		requireCode(t, r, exitOK, "")
		v, ok := strings.CutPrefix(strings.TrimSpace(r.stdout), "fence=")
		require.True(t, ok, "stdout: %q", r.stdout)
		fence, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "stdout: %q", r.stdout)
		require.Greater(t, fence, last, "fences must increase")
		last = fence
	}
}

// TestE2EThreeClusters: three Redis Clusters of three shards each are a
// node set like three servers. Lock commands work on resources whose keys
// land on every shard, run hands out increasing fences, doctor checks
// every primary and passes; a redis:// URL naming a cluster member is
// refused, by the lock commands and by doctor, with the redis+cluster://
// URL to use; a shard down fails its row and its cluster's vote.
func TestE2EThreeClusters(t *testing.T) {
	t.Parallel()
	testutil.RedisServerPath(t) // skip here: a skip cannot end the test from the goroutines below
	clusters := make([]*testutil.Cluster, 3)
	var wg sync.WaitGroup
	for i := range clusters {
		wg.Go(func() { clusters[i] = testutil.StartCluster(t, 3) })
	}
	wg.Wait()
	urls := make([]string, len(clusters))
	for i, c := range clusters {
		if c == nil {
			t.FailNow() // StartCluster reported why
		}
		urls[i] = c.URL()
	}
	env := nodesEnv(urls)

	// Three resources per shard (every cluster splits its slots alike).
	perShard := map[int][]string{}
	for i := 0; len(perShard[0]) < 3 || len(perShard[1]) < 3 || len(perShard[2]) < 3; i++ {
		name := "job-" + strconv.Itoa(i)
		sh := clusters[0].ShardForKey("redlock:{" + name + "}")
		perShard[sh] = append(perShard[sh], name)
	}

	// One after the other: parallel subtests would queue behind the
	// package's other parallel tests.
	t.Run("lock commands", func(t *testing.T) {
		for sh := range 3 {
			for _, name := range perShard[sh][:3] {
				t.Run(strconv.Itoa(sh)+"/"+name, func(t *testing.T) {
					lockCycle(t, env, name, 3)
				})
			}
		}
	})

	t.Run("run", func(t *testing.T) {
		runFences(t, env, perShard[1][0], 3)
	})

	t.Run("doctor", func(t *testing.T) {
		r, res, checks := doctorChecks(t, urls)
		requireCode(t, r, exitOK, "")
		require.Equal(t, 3, res.Nodes)
		require.Equal(t, 2, res.Quorum)
		require.Zero(t, res.Warn, "checks: %+v", res.Checks)
		require.Len(t, res.Checks, 3*(1+3*10)+5)
		for _, c := range clusters {
			name := nodeName(t, c.URL())
			require.Equal(t, statusOK, checks[name+" cluster_state"].Status)
			require.Contains(t, checks[name+" cluster_state"].Detail, "cluster_state ok on 3 of 3 primaries, 16384 hash slots assigned")
			for i := range c.Len() {
				shard := name + "/" + c.Shard(i).Addr()
				for _, check := range []string{"reachable", "version", "role", "persistence", "eviction", "trust", "scripts", "clock"} {
					require.Equal(t, statusOK, checks[shard+" "+check].Status, "%s %s: %+v", shard, check, checks[shard+" "+check])
				}
				// The lock commands left a marker in each slot they used.
				tr := checks[shard+" trust"]
				require.Regexp(t, `^\d+ slot markers?; the latest trusted since `, tr.Detail)
				require.Equal(t, "redlock:{*}~trust:db0", tr.Trust.Marker)
				require.Positive(t, tr.Trust.SlotMarkers)
				require.Zero(t, tr.Trust.SlotsWaiting)
				require.Contains(t, checks[shard+" version"].Detail, "(cluster)")
				// Each shard ran the script on a key of its own slots.
				require.Contains(t, checks[shard+" scripts"].Detail, "EVALSHA and EVAL both ran the read-only inspect script on redlock:{redlock-doctor-")
			}
		}
		require.Equal(t, "9 distinct servers (by run_id)", checks["* distinct"].Detail)
		require.Equal(t, "3 of 3 nodes reachable, 2 needed", checks["* quorum"].Detail)

		r = cli(t, env, "doctor")
		requireCode(t, r, exitOK, "")
		name := nodeName(t, urls[0])
		require.Regexp(t, `(?m)^`+regexp.QuoteMeta(name+"/"+clusters[0].Shard(1).Addr())+`\s+scripts\s+OK\s+EVALSHA and EVAL`, r.stdout)
		require.Contains(t, r.stdout, "doctor: 0 FAIL, 0 WARN, 98 OK: no FAIL")
		t.Logf("doctor on three clusters:\n%s", r.stdout)
	})

	t.Run("member URL", func(t *testing.T) {
		member := clusters[0].Shard(0)
		set := []string{member.URL(), urls[1], urls[2]}
		r := cli(t, nodesEnv(set), "acquire", "x")
		requireCode(t, r, exitUsage, "name the whole cluster with redis+cluster://"+member.Addr())

		r, res, checks := doctorChecks(t, set)
		requireCode(t, r, exitFailure, "")
		v := checks[member.Addr()+" version"]
		require.Equal(t, statusFail, v.Status, "%+v", res.Checks)
		require.Contains(t, v.Detail, "a redis:// URL reaches this one shard only")
		require.Contains(t, v.Detail, "name the whole cluster as one node with redis+cluster://"+member.Addr())
	})

	// A flushed shard: the next lock in one of its slots makes that slot
	// sit out (the other clusters grant); doctor counts it.
	t.Run("flushed shard", func(t *testing.T) {
		c := clusters[0]
		require.NoError(t, c.Shard(0).Do(t.Context(), "FLUSHALL").Err())
		r := cli(t, env, "acquire", perShard[0][0], "--json", "--ttl", "30s", "--rejoin-delay", "1m")
		requireCode(t, r, exitOK, "")
		require.Len(t, decode(t, r)["granted"], 2)
		token := decode(t, r)["token"].(string)
		_, _, checks := doctorChecks(t, urls)
		tr := checks[nodeName(t, c.URL())+"/"+c.Shard(0).Addr()+" trust"]
		require.Equal(t, statusWarn, tr.Status, "%+v", tr)
		require.Regexp(t, `^1 slot marker; 1 sitting out, the longest for \S+ more: its marker was missing`, tr.Detail)
		require.Equal(t, trustSittingOut, tr.Trust.State)
		require.Equal(t, 1, tr.Trust.SlotsWaiting)
		require.Equal(t, "no-marker", tr.Trust.Why)
		r = cli(t, env, "release", perShard[0][0], "--token", token)
		requireCode(t, r, exitOK, "")
	})

	// Last: it kills a shard.
	t.Run("shard down", func(t *testing.T) {
		c := clusters[2]
		dead := c.Shard(1)
		require.NoError(t, c.KillShard(1))
		r, res, checks := doctorChecks(t, urls)
		requireCode(t, r, exitFailure, "doctor: 1 check FAILs")
		name := nodeName(t, c.URL())
		require.Equal(t, statusFail, checks[name+"/"+dead.Addr()+" reachable"].Status, "%+v", res.Checks)
		require.Equal(t, "connection refused", checks[name+"/"+dead.Addr()+" reachable"].Detail)
		require.Equal(t, statusOK, checks["* quorum"].Status)
		require.Equal(t, "2 of 3 nodes reachable, 2 needed", checks["* quorum"].Detail)

		// A resource on the dead shard is still granted by the other two
		// clusters.
		r = cli(t, env, "acquire", perShard[1][1], "--json")
		requireCode(t, r, exitOK, "")
		require.Len(t, decode(t, r)["granted"], 2)
	})
}

// TestE2ESentinelsAndStandalone: two Sentinel groups and a standalone
// server are a node set like three servers: lock commands and run work,
// and doctor checks each group's current primary under the group's name,
// its replica a WARN (a failover can lose the last writes).
func TestE2ESentinelsAndStandalone(t *testing.T) {
	t.Parallel()
	testutil.RedisServerPath(t) // skip here: a skip cannot end the test from the goroutines below
	groups := make([]*testutil.SentinelGroup, 2)
	var wg sync.WaitGroup
	for i := range groups {
		wg.Go(func() { groups[i] = testutil.StartSentinel(t, "locks-"+strconv.Itoa(i)) })
	}
	server := testutil.StartRedisServer(t)
	wg.Wait()
	if groups[0] == nil || groups[1] == nil {
		t.FailNow() // StartSentinel reported why
	}
	urls := []string{groups[0].URL(), groups[1].URL(), server.URL()}
	env := nodesEnv(urls)

	t.Run("lock commands", func(t *testing.T) {
		lockCycle(t, env, "nightly", 3)
	})

	t.Run("run", func(t *testing.T) {
		runFences(t, env, "nightly", 3)
	})

	t.Run("doctor", func(t *testing.T) {
		r, res, checks := doctorChecks(t, urls)
		requireCode(t, r, exitOK, "")
		require.Equal(t, 3, res.Nodes)
		require.Len(t, res.Checks, 3*10+5)
		require.Equal(t, 2, res.Warn, "checks: %+v", res.Checks)
		for _, g := range groups {
			name := nodeName(t, g.URL())
			require.True(t, strings.HasPrefix(name, "sentinel("+g.MasterName()+"@"), name)
			for _, check := range []string{"reachable", "version", "persistence", "eviction", "scripts", "clock"} {
				require.Equal(t, statusOK, checks[name+" "+check].Status, "%s %s: %+v", name, check, checks[name+" "+check])
			}
			require.Contains(t, checks[name+" reachable"].Detail, "current primary "+g.Primary().Addr())
			role := checks[name+" role"]
			require.Equal(t, statusWarn, role.Status)
			require.Contains(t, role.Detail, "the group's current primary, with 1 replica: replication is asynchronous, so a failover can lose the last writes")
		}
		require.Equal(t, statusOK, checks[server.Addr()+" role"].Status)
		require.Equal(t, "3 distinct servers (by run_id)", checks["* distinct"].Detail)

		r = cli(t, env, "doctor")
		requireCode(t, r, exitOK, "")
		require.Regexp(t, `(?m)^`+regexp.QuoteMeta(nodeName(t, urls[1]))+`\s+role\s+WARN\s+the group's current primary`, r.stdout)
		require.Contains(t, r.stdout, "doctor: 0 FAIL, 2 WARN, 33 OK: no FAIL")
		t.Logf("doctor on two Sentinel groups and a server:\n%s", r.stdout)
	})
}
