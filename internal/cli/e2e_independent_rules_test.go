package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDependenceRules: how doctor and status tell two listed servers are
// not independent, from what INFO server and replication say of each (the
// servers of TestE2EDoctorNamesNodesThatAreNotIndependent, and the cases
// no e2e test starts).
func TestDependenceRules(t *testing.T) {
	primary := serverIdentity{label: "p", dialled: "10.0.0.1:6379", port: "6379", runID: "aaaa", replid: "r1", role: "master", replicas: []string{"10.0.0.2:6380"}}
	replica := serverIdentity{label: "r", dialled: "10.0.0.2:6380", port: "6380", runID: "bbbb", replid: "r1", role: "slave", master: "10.0.0.1:6379"}
	other := serverIdentity{label: "o", dialled: "10.0.0.3:6379", port: "6379", runID: "cccc", replid: "r2", role: "master"}
	for _, tc := range []struct {
		name string
		a, b serverIdentity
		want string
	}{
		{name: "independent", a: primary, b: other},
		{name: "one server twice", a: other, b: func() serverIdentity { o := other; o.label = "o2"; return o }(), want: "o and o2 are one server"},
		{name: "a replica beside a server it does not replicate", a: replica, b: other},
		{name: "replica of a listed primary", a: primary, b: replica, want: "r is a replica of p (its master is 10.0.0.1:6379)"},
		{
			name: "a primary lists its replica (the replica's master named by another address)",
			a:    primary, b: func() serverIdentity { r := replica; r.master, r.replid = "primary.example:6379", ""; return r }(),
			want: "r is a replica of p (among its connected replicas)",
		},
		{
			name: "loopback names are one host",
			a:    serverIdentity{label: "p", dialled: "localhost:7000", port: "7000", runID: "a", replid: "x"},
			b:    serverIdentity{label: "r", dialled: "127.0.0.1:7001", port: "7001", runID: "b", replid: "y", role: "slave", master: "127.0.0.1:7000"},
			want: "r is a replica of p",
		},
		{
			name: "two replicas of one unlisted primary",
			a:    replica, b: func() serverIdentity {
				r := replica
				r.label, r.runID, r.dialled = "r2", "dddd", "10.0.0.4:6380"
				return r
			}(),
			want: "r and r2 hold one replication history",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := dependence(tc.a, tc.b)
			if tc.want == "" {
				require.Empty(t, got)
				return
			}
			require.Contains(t, got, tc.want)
			require.NotEmpty(t, dependence(tc.b, tc.a), "symmetric")
		})
	}
	require.Empty(t, dependences([][]serverIdentity{{primary, replica}, {other}}), "servers behind one node (a cluster's) are not compared")
	require.Len(t, dependences([][]serverIdentity{{primary}, {replica}, {other}}), 1)
}

// TestClocksCheck: the node set's clocks row against the fencing tokens'
// clock bound, min((20s - 1s)/2, rejoin delay).
func TestClocksCheck(t *testing.T) {
	node := func(addr string, off time.Duration) *nodeReport {
		return &nodeReport{addr: addr, reachable: true, clockOK: true, clock: off, clockErr: time.Millisecond}
	}
	for _, tc := range []struct {
		name    string
		reports []*nodeReport
		rejoin  time.Duration
		status  string
		detail  string
	}{
		{name: "in step", reports: []*nodeReport{node("a", 0), node("b", 20*time.Millisecond), node("c", -10*time.Millisecond)}, rejoin: 10 * time.Second, status: statusOK, detail: "within the tokens' bound 9.5s"},
		{name: "over the warning", reports: []*nodeReport{node("a", 0), node("b", 2*time.Second)}, rejoin: 10 * time.Second, status: statusWarn, detail: "over 250ms"},
		{name: "over the tokens' bound", reports: []*nodeReport{node("a", 0), node("b", 12*time.Second)}, rejoin: 10 * time.Second, status: statusFail, detail: "b ahead of a"},
		{name: "the rejoin delay is the bound", reports: []*nodeReport{node("a", 0), node("b", 3*time.Second)}, rejoin: 2 * time.Second, status: statusFail, detail: "needs less than 2s"},
		{name: "the rule off", reports: []*nodeReport{node("a", 0), node("b", 3*time.Second)}, rejoin: -1, status: statusWarn, detail: "within the tokens' bound 9.5s"},
		{name: "this host's clock far off", reports: []*nodeReport{node("a", time.Minute), node("b", time.Minute+time.Millisecond)}, rejoin: 10 * time.Second, status: statusWarn, detail: "from this host's at most (b)"},
		{name: "no clock read", reports: []*nodeReport{{addr: "a", reachable: true}}, status: statusWarn, detail: "no server's clock could be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := clocksCheck(tc.reports, tc.rejoin)
			require.Equal(t, tc.status, row.Status, row.Detail)
			require.Contains(t, row.Detail, tc.detail)
		})
	}
}
