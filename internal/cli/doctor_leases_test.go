package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// TestIsLeaseKey: the keys whose TTL is a Locker's LeaseDuration (a lock,
// a writer, a reader) and none of the others under the prefix.
func TestIsLeaseKey(t *testing.T) {
	const p = "redlock:"
	for key, want := range map[string]bool{
		"redlock:{orders}":                         true,
		"redlock:{a}b}":                            true, // a brace inside the resource
		"redlock:{doc}:rw":                         true,
		"redlock:{doc}:rw:reader:0123456789abcdef": true,
		"redlock:{orders}:fence":                   false,
		"redlock:{orders}:queue":                   false,
		"redlock:{orders}:queue:exp":               false,
		"redlock:{doc}:rw:readers":                 false,
		"redlock:{doc}:rw:intent":                  false,
		"redlock:{doc}:rw:fence":                   false,
		"redlock:~trust:db0":                       false,
		"redlock:{t}~trust:db0":                    false, // a cluster slot's marker
		"redlock:{}":                               false,
		"redlock:orders":                           false,
		"other:{orders}":                           false,
	} {
		require.Equal(t, want, isLeaseKey(p, key), key)
	}
}

// TestLeaseScanNote: the rejoin row's words on the leases seen; WARN only
// when one has more time left than the delay.
func TestLeaseScanNote(t *testing.T) {
	const delay = 10 * time.Second
	tests := []struct {
		name string
		scan leaseScan
		want string
		warn bool
	}{
		{"none", leaseScan{examined: 3}, "; no live lock under --prefix (3 keys examined)", false},
		{"within", leaseScan{examined: 9, leases: 2, longest: 9 * time.Second, key: "redlock:{a}"},
			"; the live locks under --prefix (2) have at most 9s left, within the delay (9 keys examined)", false},
		{"equal", leaseScan{examined: 1, leases: 1, longest: delay, key: "redlock:{a}"},
			"; the live locks under --prefix (1) have at most 10s left, within the delay (1 key examined)", false},
		{"longer", leaseScan{examined: 4, leases: 1, longest: 29500 * time.Millisecond, key: "redlock:{a}"},
			`; a live lock under --prefix, "redlock:{a}", has 29.5s left, more than the 10s rejoin delay: some client takes leases longer than this delay covers`, true},
		{"capped", leaseScan{examined: 10042, capped: true},
			"; no live lock under --prefix (10042 keys examined, the cap: longer leases may be among the others)", false},
		{"refused", leaseScan{op: "SCAN", err: errors.New("NOPERM no scan")}, "; live locks not checked (SCAN: NOPERM no scan)", false},
		{"refused later", leaseScan{examined: 1000, op: "PTTL", err: errors.New("i/o timeout")},
			"; live locks checked in the first 1000 keys only (PTTL: i/o timeout)", false},
		{"long key", leaseScan{examined: 1, leases: 1, longest: time.Minute, key: "redlock:{" + strings.Repeat("k", 200) + "}"},
			fmt.Sprintf(`%q..., has 1m0s left`, "redlock:{"+strings.Repeat("k", maxKeyShown-9)), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, warn := tt.scan.note(delay)
			require.Contains(t, got, tt.want)
			require.Equal(t, tt.warn, warn)
		})
	}
}

// TestE2EDoctorSeesLeasesLongerThanTheDelay: a live lock taken with a
// 30 s lease makes the rejoin row WARN on every node when doctor runs with
// a shorter rejoin delay (the default: the 10 s --ttl), naming the lock
// and what to do; OK with a delay that covers it. The scan stops at its
// cap and says so.
func TestE2EDoctorSeesLeasesLongerThanTheDelay(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	l, err := redlock.New(c.Nodes(), redlock.Config{LeaseDuration: 30 * time.Second, RejoinDelay: 30 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	lease, err := l.TryAcquire(t.Context(), "long")
	require.NoError(t, err)
	t.Cleanup(func() { _ = lease.Release(t.Context()) })
	// Its third grant may still be in flight: wait for the key everywhere.
	for _, s := range c.Servers() {
		require.Eventually(t, func() bool {
			n, err := s.Client().Exists(t.Context(), "redlock:{long}").Result()
			return err == nil && n == 1
		}, 5*time.Second, 5*time.Millisecond)
	}

	r, res, checks := doctorChecks(t, c.URLs())
	requireCode(t, r, exitOK, "") // a WARN, not a FAIL
	require.Equal(t, 3, res.Warn, "%+v", res.Checks)
	for _, s := range c.Servers() {
		ch := checks[s.Addr()+" rejoin"]
		require.Equal(t, statusWarn, ch.Status, "%+v", ch)
		require.Regexp(t, `; a live lock under --prefix, "redlock:\{long\}", has 2\d(\.\d+)?s left, more than the 10s rejoin delay: `, ch.Detail)
		require.Contains(t, ch.Detail, "give every client a rejoin delay of at least the longest lease on these nodes (Config.RejoinDelay, --rejoin-delay), or run doctor with the --rejoin-delay (default --ttl) the clients use")
	}

	r = cli(t, nodesEnv(c.URLs()), "doctor", "--json", "--timeout", "1s", "--rejoin-delay", "30s")
	requireCode(t, r, exitOK, "")
	res = decodeDoctor(t, r)
	require.Zero(t, res.Warn, "%+v", res.Checks)
	for _, ch := range res.Checks {
		if ch.Check == "rejoin" {
			require.Contains(t, ch.Detail, "; the live locks under --prefix (1) have at most ")
		}
	}

	// The minimal ACL user of docs/security.md may not SCAN: the row says
	// the leases were not checked, and stays OK.
	var urls []string
	for _, s := range c.Servers() {
		require.NoError(t, s.SetACLUser(t.Context(), "redlock", "acl-pw", testutil.LockerACL("redlock:")...))
		urls = append(urls, s.UserURL("redlock", "acl-pw"))
	}
	_, _, checks = doctorChecks(t, urls)
	for _, s := range c.Servers() {
		ch := checks[s.Addr()+" rejoin"]
		require.Equal(t, statusOK, ch.Status, "%+v", ch)
		require.Contains(t, ch.Detail, "; live locks not checked (SCAN: NOPERM")
	}

	// Past the cap the scan stops and says so.
	s := c.Server(0)
	pipe := s.Client().Pipeline()
	for i := range leaseScanCap + 2*leaseScanPage {
		pipe.Set(t.Context(), fmt.Sprintf("redlock:{filler-%d}:fence", i), "1", time.Minute)
	}
	_, err = pipe.Exec(t.Context())
	require.NoError(t, err)
	_, _, checks = doctorChecks(t, c.URLs()[:1])
	require.Regexp(t, `keys examined, the cap: longer leases may be among the others\)$`, checks[s.Addr()+" rejoin"].Detail)
}

// decodeDoctor decodes doctor's --json output.
func decodeDoctor(t *testing.T, r result) doctorResult {
	t.Helper()
	var res doctorResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	return res
}
