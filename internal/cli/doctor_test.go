package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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

// TestCheckEviction: only noeviction is OK; evicting policies are FAIL.
func TestCheckEviction(t *testing.T) {
	for policy, status := range map[string]string{
		"noeviction": statusOK, "allkeys-lru": statusFail, "allkeys-lfu": statusFail, "allkeys-random": statusFail,
		"volatile-lru": statusFail, "volatile-lfu": statusFail, "volatile-random": statusFail, "volatile-ttl": statusFail,
		"something-new": statusWarn,
	} {
		c := rowOf(t, func(r *nodeReport) { checkEviction(r, map[string]string{"maxmemory-policy": policy, "maxmemory": "0"}) })
		require.Equal(t, status, c.Status, policy)
		require.Equal(t, "eviction", c.Check)
	}
}

// TestCheckRoleAndVersion: the role and version rows for each kind of
// server.
func TestCheckRoleAndVersion(t *testing.T) {
	require.Equal(t, statusOK, rowOf(t, func(r *nodeReport) { checkRole(r, map[string]string{"role": "master", "connected_slaves": "0"}) }).Status)
	require.Equal(t, statusWarn, rowOf(t, func(r *nodeReport) { checkRole(r, map[string]string{"role": "master", "connected_slaves": "2"}) }).Status)
	c := rowOf(t, func(r *nodeReport) {
		checkRole(r, map[string]string{"role": "slave", "master_host": "10.0.0.9", "master_port": "6379"})
	})
	require.Equal(t, statusFail, c.Status)
	require.Contains(t, c.Detail, "replica of 10.0.0.9:6379")

	for ver, status := range map[string]string{"7.0.15": statusOK, "6.2.0": statusOK, "6.0.9": statusWarn, "2.6.11": statusFail, "junk": statusWarn} {
		c := rowOf(t, func(r *nodeReport) {
			checkVersion(r, map[string]string{"redis_version": ver, "redis_mode": "standalone"})
		})
		require.Equal(t, status, c.Status, ver)
	}
	require.Equal(t, statusFail, rowOf(t, func(r *nodeReport) {
		checkVersion(r, map[string]string{"redis_version": "7.2.0", "redis_mode": "sentinel"})
	}).Status)
	require.Equal(t, statusWarn, rowOf(t, func(r *nodeReport) {
		checkVersion(r, map[string]string{"redis_version": "7.2.0", "redis_mode": "cluster"})
	}).Status)
}

// TestClusterChecks: the node-set rows (node_count, quorum, distinct).
func TestClusterChecks(t *testing.T) {
	reports := func(n, up int, ids ...string) []*nodeReport {
		var rs []*nodeReport
		for i := range n {
			r := &nodeReport{addr: string(rune('a' + i)), reachable: i < up}
			if i < len(ids) {
				r.runID = ids[i]
			}
			rs = append(rs, r)
		}
		return rs
	}
	byName := func(cs []check) map[string]check {
		m := map[string]check{}
		for _, c := range cs {
			require.Equal(t, clusterNode, c.Node)
			m[c.Check] = c
		}
		return m
	}
	for n, status := range map[int]string{1: statusWarn, 2: statusWarn, 3: statusOK, 4: statusWarn, 5: statusOK, 6: statusWarn, 7: statusOK} {
		require.Equal(t, status, byName(clusterChecks(reports(n, n)))["node_count"].Status, "n=%d", n)
	}
	m := byName(clusterChecks(reports(5, 2)))
	require.Equal(t, statusFail, m["quorum"].Status)
	require.Equal(t, "only 2 of 5 nodes reachable, 3 needed: no lock can be taken", m["quorum"].Detail)
	require.Equal(t, statusOK, byName(clusterChecks(reports(5, 3)))["quorum"].Status)
	m = byName(clusterChecks(reports(3, 3, "x", "y", "x")))
	require.Equal(t, statusFail, m["distinct"].Status)
	require.Contains(t, m["distinct"].Detail, "a = c")
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
