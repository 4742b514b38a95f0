package cli

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/internal/nodeurl"
)

// status runs one check function on a fresh report and returns the row.
func rowOf(t *testing.T, f func(r *nodeReport)) check {
	t.Helper()
	r := &nodeReport{addr: "n:1"}
	f(r)
	require.Len(t, r.checks, 1)
	return r.checks[0]
}

// TestCheckPersistence: only appendonly yes with appendfsync always is OK.
func TestCheckPersistence(t *testing.T) {
	tests := []struct {
		aof, fsync, status, detail string
	}{
		{"yes", "always", statusOK, "appendonly yes, appendfsync always"},
		{"yes", "everysec", statusWarn, "appendfsync everysec: a crash can lose the last second"},
		{"yes", "no", statusWarn, "appendfsync no: a crash can lose many seconds"},
		{"no", "always", statusWarn, "appendonly no: a restart forgets this node's locks and fence counters"},
	}
	for _, tt := range tests {
		c := rowOf(t, func(r *nodeReport) {
			checkPersistence(r, map[string]string{"appendonly": tt.aof, "appendfsync": tt.fsync})
		})
		require.Equal(t, tt.status, c.Status, tt.aof+" "+tt.fsync)
		require.Contains(t, c.Detail, tt.detail)
	}
}

// TestCheckEviction (Safety v4, rule 4): noeviction and volatile-* are
// OK (a live lease's evidence has no TTL); allkeys-* with a maxmemory is
// FAIL (the library refuses the node), without one WARN; the rejoin delay
// changes nothing.
func TestCheckEviction(t *testing.T) {
	type row struct {
		policy, maxmem string
		rejoin         time.Duration
		status, detail string
	}
	tests := []row{
		{"noeviction", "0", time.Second, statusOK, "maxmemory-policy noeviction"},
		{"noeviction", "100mb", -1, statusOK, "maxmemory-policy noeviction"},
		{"allkeys-lru", "0", -1, statusWarn, "no maxmemory: nothing is evicted now"},
		{"something-new", "100", time.Second, statusWarn, "unknown maxmemory-policy"},
	}
	for _, policy := range []string{"allkeys-lru", "allkeys-lfu", "allkeys-random"} {
		for _, rejoin := range []time.Duration{5 * time.Second, -1} {
			tests = append(tests, row{policy, "104857600", rejoin, statusFail, "the library refuses this node"})
		}
	}
	for _, policy := range []string{"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"} {
		for _, maxmem := range []string{"0", "104857600"} {
			tests = append(tests, row{policy, maxmem, -1, statusOK, "a live lease's evidence (its fence counter) has none"})
		}
	}
	for _, tt := range tests {
		c := rowOf(t, func(r *nodeReport) {
			checkEviction(r, map[string]string{"maxmemory-policy": tt.policy, "maxmemory": tt.maxmem}, tt.rejoin)
		})
		require.Equal(t, tt.status, c.Status, "%+v: %s", tt, c.Detail)
		require.Equal(t, "eviction", c.Check)
		require.Contains(t, c.Detail, tt.detail, "%+v", tt)
	}
}

// TestParseMarker: the marker's value as scripts/trust.lua writes it (v4),
// an older marker (judged as vouching for no replication id), and what is
// not one.
func TestParseMarker(t *testing.T) {
	good := map[string]marker{
		"v4 abc 1796364035551001 1796364035551001 -":           {replid: "abc", from: 1796364035551001, seen: 1796364035551001, why: "-"},
		"v4 3f9c1e 1796364035551001 1796364030000000 identity": {replid: "3f9c1e", from: 1796364035551001, seen: 1796364030000000, why: "identity"},
		"v4 r 0 0 no-marker":                                   {replid: "r", why: "no-marker"},
		"abc 0 1796364035551001 -":                             {from: 1796364035551001, why: "-", oldFormat: true},
	}
	for in, want := range good {
		got, err := parseMarker(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{
		"", "abc", "v4 abc 0 1 ", "v4 abc 0 1", " v4 abc 0 1 -", "v4 abc  0 1 -", "v4 abc -1 1 -", "v4 abc 0 1.5 -",
		"v4 abc 0 1 - extra", "v4 abc x 1 -", "v4 abc 0 99999999999999999999 -", "v4 abc 0 1 -\n", "(not a string)",
	} {
		_, err := parseMarker(in)
		require.Error(t, err, "%q", in)
		require.ErrorContains(t, err, "is not a marker")
	}
}

// TestMarkerView: the trust row's status and words for each marker.
func TestMarkerView(t *testing.T) {
	const now = int64(1_800_000_000_000_000)
	sec := int64(1_000_000)
	at := func(us int64) string { return strconv.FormatInt(us, 10) }
	tests := []struct {
		name   string
		raw    string
		found  bool
		rejoin time.Duration
		state  string
		status string
		detail string
	}{
		{"missing", "", false, 10 * time.Second, trustNoMarker, statusWarn, "no marker: the next lock counts a loss, and the node grants nothing for the 10s rejoin delay"},
		{"missing, the rule off", "", false, -1, trustNoMarker, statusOK, "nothing is waited"},
		{"trusted", "v4 me " + at(now-90*sec) + " " + at(now) + " -", true, time.Second, trustTrusted, statusOK, "trusted since "},
		{"no marker before", "v4 me " + at(now+3*sec) + " " + at(now) + " no-marker", true, time.Second, trustSittingOut, statusWarn, "sitting out for 3s more"},
		{"identity", "v4 me " + at(now+2*sec) + " " + at(now) + " identity", true, time.Second, trustSittingOut, statusWarn, "its replication id changed"},
		{"clock stepped back", "v4 me " + at(now-90*sec) + " " + at(now+5*sec) + " -", true, time.Second, trustSittingOut, statusWarn, "it stepped back"},
		{"other data", "v4 them " + at(now-sec) + " " + at(now) + " -", true, time.Second, trustOtherServer, statusWarn, "vouches for replication id them, the server's is me"},
		{"older marker", "run 0 " + at(now-sec) + " -", true, time.Second, trustOtherServer, statusWarn, "older than Safety v4"},
		{"foreign data", "{\"json\": 1}", true, time.Second, trustBadMarker, statusFail, "holds data that is not redlock's"},
		{"wrong type", "(not a string)", true, time.Second, trustBadMarker, statusFail, "fails with WRONGTYPE"},
	}
	for _, tt := range tests {
		st := &trustState{Marker: "redlock:~trust:db0"}
		status, detail := markerView(st, tt.raw, tt.found, "me", now, tt.rejoin)
		require.Equal(t, tt.status, status, "%s: %s", tt.name, detail)
		require.Equal(t, tt.state, st.State, tt.name)
		require.Contains(t, detail, tt.detail, tt.name)
	}
}

// TestMarkerKey: the marker lies under the prefix, cut at its first brace
// as the library cuts it from a lock key, and names its db.
func TestMarkerKey(t *testing.T) {
	require.Equal(t, "redlock:~trust:db0", markerKey("redlock:", 0))
	require.Equal(t, "app:~trust:db3", markerKey("app:", 3))
	require.Equal(t, "app:~trust:db0", markerKey("app:{tag}:", 0))
	require.Equal(t, `a\*b\?\[c\]\\`, globEscape(`a*b?[c]\`))
}

// TestCheckMemory: the memory row from INFO memory.
func TestCheckMemory(t *testing.T) {
	tests := []struct {
		used, max string
		status    string
		detail    string
	}{
		{"1048576", "0", statusOK, "1.0 MiB used, no maxmemory limit"},
		{"524288", "1048576", statusOK, "512.0 KiB used of maxmemory 1.0 MiB"},
		{"996147", "1048576", statusWarn, "972.8 KiB used of maxmemory 1.0 MiB (95%): near the point where the node refuses new locks (OOM)"},
		{"3145728", "1048576", statusFail, "out of memory: 3.0 MiB used, maxmemory 1.0 MiB: the node refuses every new lock (OOM); free memory or raise maxmemory"},
		{"1048576", "1048576", statusFail, "out of memory"},
		{"", "0", statusWarn, "INFO memory has no used_memory or maxmemory"},
		{"812", "0", statusOK, "812 B used"},
	}
	for _, tt := range tests {
		c := rowOf(t, func(r *nodeReport) { checkMemory(r, map[string]string{"used_memory": tt.used, "maxmemory": tt.max}) })
		require.Equal(t, "memory", c.Check)
		require.Equal(t, tt.status, c.Status, tt.used+"/"+tt.max)
		require.Contains(t, c.Detail, tt.detail)
	}
}

// TestCheckRoleAndVersion: the role and version rows for each kind of
// server and of node URL.
func TestCheckRoleAndVersion(t *testing.T) {
	role := func(kind nodeurl.Kind, repl map[string]string) check {
		return rowOf(t, func(r *nodeReport) { checkRole(r, kind, repl) })
	}
	require.Equal(t, statusOK, role(nodeurl.Standalone, map[string]string{"role": "master", "connected_slaves": "0"}).Status)
	require.Equal(t, statusWarn, role(nodeurl.Standalone, map[string]string{"role": "master", "connected_slaves": "2"}).Status)
	require.Equal(t, statusWarn, role(nodeurl.Cluster, map[string]string{"role": "master", "connected_slaves": "1"}).Status)
	c := role(nodeurl.Sentinel, map[string]string{"role": "master", "connected_slaves": "1"})
	require.Equal(t, statusWarn, c.Status)
	require.Contains(t, c.Detail, "a failover can lose the last writes")
	require.Equal(t, statusOK, role(nodeurl.Sentinel, map[string]string{"role": "master", "connected_slaves": "0"}).Status)
	c = role(nodeurl.Standalone, map[string]string{"role": "slave", "master_host": "10.0.0.9", "master_port": "6379"})
	require.Equal(t, statusFail, c.Status)
	require.Contains(t, c.Detail, "replica of 10.0.0.9:6379")

	version := func(kind nodeurl.Kind, ver, mode string) check {
		return rowOf(t, func(r *nodeReport) {
			checkVersion(r, kind, map[string]string{"redis_version": ver, "redis_mode": mode})
		})
	}
	for ver, status := range map[string]string{"7.0.15": statusOK, "6.2.0": statusOK, "6.0.9": statusWarn, "2.6.11": statusFail, "junk": statusWarn} {
		require.Equal(t, status, version(nodeurl.Standalone, ver, "standalone").Status, ver)
	}
	c = version(nodeurl.Standalone, "7.2.0", "sentinel")
	require.Equal(t, statusFail, c.Status)
	require.Contains(t, c.Detail, "redis+sentinel://n:1?master_name=NAME")
	// A cluster member named by redis:// is one shard, not the node.
	c = version(nodeurl.Standalone, "7.2.0", "cluster")
	require.Equal(t, statusFail, c.Status)
	require.Contains(t, c.Detail, "redis+cluster://n:1")
	require.Equal(t, statusOK, version(nodeurl.Cluster, "7.2.0", "cluster").Status)
}

// TestClusterStateRow: the cluster_state row of a cluster node.
func TestClusterStateRow(t *testing.T) {
	shard := func(state, assigned string) *nodeReport {
		return &nodeReport{addr: "cluster(a:1)/h:" + state, reachable: true,
			clusterInfo: map[string]string{"cluster_state": state, "cluster_slots_assigned": assigned}}
	}
	c := clusterStateRow("cluster(a:1)", []*nodeReport{shard("ok", "16384"), shard("ok", "16384")})
	require.Equal(t, statusOK, c.Status)
	require.Equal(t, "cluster(a:1)", c.Node)
	require.Equal(t, "cluster_state ok on 2 of 2 primaries, 16384 hash slots assigned", c.Detail)
	c = clusterStateRow("cluster(a:1)", []*nodeReport{shard("ok", "16384"), shard("fail", "16384")})
	require.Equal(t, statusFail, c.Status)
	require.Contains(t, c.Detail, `h:fail says "fail"`)
	require.Equal(t, statusWarn, clusterStateRow("c", []*nodeReport{shard("ok", "100")}).Status)
	require.Equal(t, statusWarn, clusterStateRow("c", []*nodeReport{{reachable: true, clusterErr: errors.New("NOPERM")}}).Status)
	require.Equal(t, statusFail, clusterStateRow("c", []*nodeReport{{}}).Status)
}

// TestNodeSetChecks: the node-set rows (node_count, quorum, distinct),
// counted in nodes (URLs), whatever number of servers each has.
func TestNodeSetChecks(t *testing.T) {
	nodes := func(n, up int, ids ...string) []*nodeResult {
		var rs []*nodeResult
		for i := range n {
			r := &nodeReport{addr: string(rune('a' + i)), reachable: i < up}
			if i < len(ids) {
				r.runID = ids[i]
			}
			rs = append(rs, &nodeResult{servers: []*nodeReport{r}, up: r.reachable})
		}
		return rs
	}
	byName := func(cs []check) map[string]check {
		m := map[string]check{}
		for _, c := range cs {
			require.Equal(t, nodeSetNode, c.Node)
			m[c.Check] = c
		}
		return m
	}
	for n, status := range map[int]string{1: statusWarn, 2: statusWarn, 3: statusOK, 4: statusWarn, 5: statusOK, 6: statusWarn, 7: statusOK} {
		require.Equal(t, status, byName(nodeSetChecks(nodes(n, n)))["node_count"].Status, "n=%d", n)
	}
	m := byName(nodeSetChecks(nodes(5, 2)))
	require.Equal(t, statusFail, m["quorum"].Status)
	require.Equal(t, "only 2 of 5 nodes reachable, 3 needed: no lock can be taken", m["quorum"].Detail)
	require.Equal(t, statusOK, byName(nodeSetChecks(nodes(5, 3)))["quorum"].Status)
	m = byName(nodeSetChecks(nodes(3, 3, "x", "y", "x")))
	require.Equal(t, statusFail, m["distinct"].Status)
	require.Contains(t, m["distinct"].Detail, "a = c")

	// A cluster is one node of three servers; a server behind two nodes
	// is caught.
	cl := &nodeResult{up: true, servers: []*nodeReport{
		{addr: "cluster(s)/p1", reachable: true, runID: "p1"},
		{addr: "cluster(s)/p2", reachable: true, runID: "p2"},
		{addr: "cluster(s)/p3", reachable: true, runID: "p3"},
	}}
	set := append(nodes(2, 2, "x", "y"), cl)
	m = byName(nodeSetChecks(set))
	require.Equal(t, "3 nodes, quorum 2: tolerates 1 down", m["node_count"].Detail)
	require.Equal(t, "5 distinct servers (by run_id)", m["distinct"].Detail)
	set[0].servers[0].runID = "p2"
	require.Contains(t, byName(nodeSetChecks(set))["distinct"].Detail, "a = cluster(s)/p2")
	// A cluster with a shard down is not reachable.
	cl.up = false
	m = byName(nodeSetChecks(set))
	require.Equal(t, "2 of 3 nodes reachable, 2 needed", m["quorum"].Detail)
}

// TestCheckClocks: each node's clock against the median of the nodes.
func TestCheckClocks(t *testing.T) {
	rs := []*nodeReport{
		{addr: "a", reachable: true, clockOK: true, clock: 10 * time.Millisecond, clockErr: time.Millisecond},
		{addr: "b", reachable: true, clockOK: true, clock: 12 * time.Millisecond},
		{addr: "c", reachable: true, clockOK: true, clock: 900 * time.Millisecond},
		{addr: "d", reachable: false},
		{addr: "e", reachable: true},
	}
	checkClocks(rs)
	require.Equal(t, statusOK, rs[0].checks[0].Status)
	require.Equal(t, "-2ms from the nodes' median (±1ms); +10ms from this host", rs[0].checks[0].Detail)
	require.Equal(t, statusOK, rs[1].checks[0].Status)
	require.Equal(t, statusWarn, rs[2].checks[0].Status)
	require.Contains(t, rs[2].checks[0].Detail, "+888ms from the nodes' median")
	require.Empty(t, rs[3].checks)
	require.Equal(t, statusWarn, rs[4].checks[0].Status)
}

// TestParseVersion: server versions are parsed and ordered.
func TestParseVersion(t *testing.T) {
	v, ok := parseVersion("7.0.15")
	require.True(t, ok)
	require.Equal(t, [3]int{7, 0, 15}, v)
	require.True(t, versionLess([3]int{2, 6, 11}, minVersion))
	require.False(t, versionLess(minVersion, minVersion))
	_, ok = parseVersion("7")
	require.False(t, ok)
}
