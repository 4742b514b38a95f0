package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// composeConfig returns the redis-server settings of docker-compose.yml's
// "command:" line as redis.conf lines.
func composeConfig(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docker-compose.yml")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "command:")
		if !ok {
			continue
		}
		var argv []string
		require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(rest)), &argv), line)
		require.Equal(t, "redis-server", argv[0])
		require.Zero(t, len(argv[1:])%2, "odd arguments: %q", argv)
		var conf []string
		for i := 1; i < len(argv); i += 2 {
			name, ok := strings.CutPrefix(argv[i], "--")
			require.True(t, ok, argv[i])
			conf = append(conf, name+" "+argv[i+1])
		}
		return conf
	}
	t.Fatal("no command: line in docker-compose.yml")
	return nil
}

// doctorChecks runs doctor --json and indexes its checks by node and name.
func doctorChecks(t *testing.T, urls []string) (result, doctorResult, map[string]check) {
	t.Helper()
	r := cli(t, nodesEnv(urls), "doctor", "--json", "--timeout", "1s")
	var res doctorResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	byKey := map[string]check{}
	for _, c := range res.Checks {
		byKey[c.Node+" "+c.Check] = c
	}
	return r, res, byKey
}

// TestE2EDoctorComposeConfig: servers configured like docker-compose.yml
// pass every check.
func TestE2EDoctorComposeConfig(t *testing.T) {
	t.Parallel()
	conf := composeConfig(t)
	require.Contains(t, conf, "appendfsync always")
	require.Contains(t, conf, "maxmemory-policy noeviction")
	c := testutil.StartRedis(t, 5, testutil.WithConfig(conf...))

	r, res, checks := doctorChecks(t, c.URLs())
	requireCode(t, r, exitOK, "")
	require.True(t, res.OK)
	require.Zero(t, res.Fail)
	require.Zero(t, res.Warn, "checks: %+v", res.Checks)
	require.Len(t, res.Checks, 5*10+5)
	for _, s := range c.Servers() {
		for _, name := range []string{"reachable", "version", "role", "persistence", "eviction", "trust", "scripts", "clock"} {
			require.Equal(t, statusOK, checks[s.Addr()+" "+name].Status, "%s %s", s.Addr(), name)
		}
	}

	r = cli(t, nodesEnv(c.URLs()), "doctor")
	requireCode(t, r, exitOK, "")
	require.Regexp(t, `(?m)^NODE\s+CHECK\s+STATUS\s+DETAIL$`, r.stdout)
	require.Contains(t, r.stdout, "appendonly yes, appendfsync always")
	require.Contains(t, r.stdout, "doctor: 0 FAIL, 0 WARN, 55 OK")
}

// TestE2EDoctorFlagsUnsafeNodes: a replica is FAIL (and the node set not
// independent); allkeys-* with a maxmemory is FAIL (the library refuses
// the node, Safety v4), volatile-* OK; no persistence and a primary with a
// replica are WARN.
func TestE2EDoctorFlagsUnsafeNodes(t *testing.T) {
	t.Parallel()
	primary := testutil.StartRedisServer(t)
	lru := testutil.StartRedisServer(t, testutil.WithConfig("maxmemory-policy allkeys-lru", "maxmemory 100mb"))
	noAOF := testutil.StartRedisServer(t, testutil.WithConfig("appendonly no"))
	volatile := testutil.StartRedisServer(t, testutil.WithConfig("maxmemory-policy volatile-ttl", "maxmemory 100mb"))
	replica := testutil.StartRedisServer(t, testutil.WithConfig("replicaof 127.0.0.1 "+strconv.Itoa(primary.Port())))
	waitFor(t, 10*time.Second, "the replica to connect", func() bool {
		info, err := primary.Do(t.Context(), "INFO", "replication").Text()
		return err == nil && strings.Contains(info, "connected_slaves:1")
	})

	urls := []string{primary.URL(), lru.URL(), noAOF.URL(), volatile.URL(), replica.URL()}
	r, res, checks := doctorChecks(t, urls)
	requireCode(t, r, exitFailure, "doctor: 3 checks FAIL")
	require.False(t, res.OK)
	require.Equal(t, 3, res.Fail) // the replica's role, allkeys-lru, and the node set: not independent

	want := map[string]string{
		lru.Addr() + " eviction":         statusFail,
		volatile.Addr() + " eviction":    statusOK,
		replica.Addr() + " role":         statusFail,
		primary.Addr() + " role":         statusWarn,
		noAOF.Addr() + " persistence":    statusWarn,
		primary.Addr() + " eviction":     statusOK,
		primary.Addr() + " persistence":  statusOK,
		replica.Addr() + " scripts":      statusOK,
		nodeSetNode + " node_count":      statusOK,
		nodeSetNode + " quorum":          statusOK,
		nodeSetNode + " distinct":        statusOK,
		nodeSetNode + " independent":     statusFail,
		lru.Addr() + " reachable":        statusOK,
		noAOF.Addr() + " version":        statusOK,
		volatile.Addr() + " persistence": statusOK,
		lru.Addr() + " trust":            statusOK,
		// The replica attaching gave the primary a new replication id:
		// its marker vouches for the old one (the next lock sits out).
		primary.Addr() + " trust": statusWarn,
	}
	for key, status := range want {
		require.Equal(t, status, checks[key].Status, "%s: %+v", key, checks[key])
	}
	require.Contains(t, checks[lru.Addr()+" eviction"].Detail, "allkeys-lru with maxmemory 104857600 can evict any key")
	require.Contains(t, checks[lru.Addr()+" eviction"].Detail, "the library refuses this node")
	require.Contains(t, checks[volatile.Addr()+" eviction"].Detail, "a live lease's evidence (its fence counter) has none")
	require.Contains(t, checks[lru.Addr()+" trust"].Detail, "maxmemory 104857600 with maxmemory-policy allkeys-lru: the library refuses this node")
	require.True(t, checks[lru.Addr()+" trust"].Trust.MayEvict)
	require.False(t, checks[primary.Addr()+" trust"].Trust.MayEvict)
	require.Contains(t, checks[replica.Addr()+" role"].Detail, fmt.Sprintf("replica of 127.0.0.1:%d", primary.Port()))
	require.Contains(t, checks[noAOF.Addr()+" persistence"].Detail, "appendonly no: a restart forgets")

	r = cli(t, nodesEnv(urls), "doctor")
	requireCode(t, r, exitFailure, "")
	require.Regexp(t, `(?m)^`+lru.Addr()+`\s+eviction\s+FAIL\s+maxmemory-policy allkeys-lru`, r.stdout)
	require.Regexp(t, `(?m)^`+replica.Addr()+`\s+role\s+FAIL\s+replica of`, r.stdout)
	require.Contains(t, r.stdout, "doctor: 3 FAIL, 4 WARN") // the primary: role and trust (its replica changed its replication id); no persistence; the replica's trust

	// With the data-loss rule off, allkeys-* is refused all the same, and
	// the trust rows say the rule is off.
	r = cli(t, nodesEnv(urls[1:4]), "doctor", "--json", "--rejoin-delay", "0")
	requireCode(t, r, exitFailure, "doctor: 1 check FAILs")
	require.Contains(t, r.stdout, "the data-loss rule is off (--rejoin-delay 0)")
}

// TestE2EDoctorNodeSet: checks on the node set as a whole.
func TestE2EDoctorNodeSet(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 4)
	urls := c.URLs()

	_, res, checks := doctorChecks(t, urls)
	require.True(t, res.OK)
	require.Equal(t, statusWarn, checks["* node_count"].Status)
	require.Contains(t, checks["* node_count"].Detail, "4 nodes tolerate 1 down, as 3 would")

	// The same server under two names counts once.
	dup := "redis://localhost:" + strconv.Itoa(c.Server(0).Port())
	_, res, checks = doctorChecks(t, []string{urls[0], urls[1], dup})
	require.False(t, res.OK)
	require.Equal(t, statusFail, checks["* distinct"].Status)
	require.Contains(t, checks["* distinct"].Detail, c.Server(0).Addr()+" = localhost:")

	// A majority down: those nodes and the quorum are FAIL.
	require.NoError(t, c.Server(1).Kill())
	require.NoError(t, c.Server(2).Kill())
	r, res, checks := doctorChecks(t, urls[:3])
	requireCode(t, r, exitFailure, "")
	require.Equal(t, statusFail, checks[c.Server(1).Addr()+" reachable"].Status)
	require.Equal(t, "connection refused", checks[c.Server(1).Addr()+" reachable"].Detail)
	require.Equal(t, statusFail, checks["* quorum"].Status)
	require.Equal(t, 3, res.Fail)

	// A single node.
	_, _, checks = doctorChecks(t, urls[:1])
	require.Equal(t, statusWarn, checks["* node_count"].Status)
}

// TestE2EDoctorConfigRefused: a server that refuses CONFIG (as managed
// services do) cannot be verified: WARN, not OK.
func TestE2EDoctorConfigRefused(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	locked := testutil.StartRedisServer(t, testutil.WithConfig(`rename-command CONFIG ""`))
	urls := append(c.URLs()[:2], locked.URL())
	r, res, checks := doctorChecks(t, urls)
	requireCode(t, r, exitOK, "")
	require.Equal(t, 2, res.Warn) // persistence, eviction
	for _, name := range []string{"persistence", "eviction"} {
		ch := checks[locked.Addr()+" "+name]
		require.Equal(t, statusWarn, ch.Status)
		require.Contains(t, ch.Detail, "cannot read the configuration (CONFIG GET: ERR unknown command")
	}
	require.Equal(t, statusOK, checks[locked.Addr()+" scripts"].Status)
}

// TestE2EDoctorScriptsRenamed: a server where EVAL or EVALSHA is renamed
// away fails the scripts check, whatever its script cache holds: doctor
// runs both commands itself rather than loading the scripts.
func TestE2EDoctorScriptsRenamed(t *testing.T) {
	t.Parallel()
	ok := testutil.StartRedisServer(t)
	noEval := testutil.StartRedisServer(t, testutil.WithConfig(`rename-command EVAL ""`))
	noEvalSha := testutil.StartRedisServer(t, testutil.WithConfig(`rename-command EVALSHA "EVALSHA-ELSEWHERE"`))
	urls := []string{ok.URL(), noEval.URL(), noEvalSha.URL()}

	r, res, checks := doctorChecks(t, urls)
	requireCode(t, r, exitFailure, "doctor: 2 checks FAIL")
	require.Equal(t, 2, res.Fail, "%+v", res.Checks)
	require.Equal(t, statusOK, checks[ok.Addr()+" scripts"].Status)

	c := checks[noEval.Addr()+" scripts"]
	require.Equal(t, statusFail, c.Status)
	require.Equal(t, "EVAL is renamed or disabled (ERR unknown command 'eval'): after a restart or SCRIPT FLUSH empties the script cache, no script can run", c.Detail)
	c = checks[noEvalSha.Addr()+" scripts"]
	require.Equal(t, statusFail, c.Status)
	require.Equal(t, "EVALSHA is renamed or disabled (ERR unknown command 'evalsha'): every lock operation runs its script with EVALSHA", c.Detail)

	// The script cached (as a Locker's first EVAL leaves it) hides nothing.
	require.NoError(t, noEval.Client().ScriptLoad(t.Context(), scripts.Inspect.Source()).Err())
	_, _, checks = doctorChecks(t, urls)
	require.Equal(t, statusFail, checks[noEval.Addr()+" scripts"].Status)
	require.Contains(t, checks[noEval.Addr()+" scripts"].Detail, "EVAL is renamed or disabled")
}

// TestE2EDoctorMinimalACL: doctor passes as the minimal ACL user of
// docs/security.md (testutil.LockerACL): CONFIG is refused (persistence
// and eviction WARN), and the scripts
// run. A user confined to another prefix fails the scripts check, named.
func TestE2EDoctorMinimalACL(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	var urls []string
	for _, s := range c.Servers() {
		require.NoError(t, s.SetACLUser(t.Context(), "redlock", "acl-pw", testutil.LockerACL("redlock:")...))
		urls = append(urls, s.UserURL("redlock", "acl-pw"))
	}

	r, res, checks := doctorChecks(t, urls)
	requireCode(t, r, exitOK, "")
	require.Equal(t, 6, res.Warn, "%+v", res.Checks) // persistence, eviction per node
	for _, s := range c.Servers() {
		for _, name := range []string{"reachable", "version", "role", "scripts", "clock"} {
			require.Equal(t, statusOK, checks[s.Addr()+" "+name].Status, "%s %s: %+v", s.Addr(), name, checks[s.Addr()+" "+name])
		}
		for _, name := range []string{"persistence", "eviction"} {
			ch := checks[s.Addr()+" "+name]
			require.Equal(t, statusWarn, ch.Status)
			require.Contains(t, ch.Detail, "cannot read the configuration (CONFIG GET: NOPERM")
		}
		require.Contains(t, checks[s.Addr()+" scripts"].Detail, "EVALSHA and EVAL both ran the read-only inspect script on redlock:{redlock-doctor}")
	}
	require.Equal(t, "3 distinct servers (by run_id)", checks["* distinct"].Detail)
	require.NotContains(t, r.stdout+r.stderr, "acl-pw")

	// An older ACL without TIME: the clock comes from INFO instead.
	noTime := slices.DeleteFunc(testutil.LockerACL("redlock:"), func(r string) bool { return r == "+time" })
	require.NoError(t, c.Server(0).SetACLUser(t.Context(), "notime", "acl-pw", noTime...))
	_, _, checks = doctorChecks(t, []string{c.Server(0).UserURL("notime", "acl-pw")})
	require.Contains(t, checks[c.Server(0).Addr()+" clock"].Detail, "(from INFO server_time_usec: TIME refused)")

	// Keys under another prefix are not this user's.
	r = cli(t, nodesEnv(urls[:1]), "doctor", "--json", "--prefix", "other:")
	requireCode(t, r, exitFailure, "doctor: 1 check FAILs")
	require.Contains(t, r.stdout, "EVALSHA refused: the ACL does not let this user use keys under --prefix (NOPERM")
}

// TestE2EDoctorTrust: the trust row after a lock (trusted since the
// server started: durable, nothing lost), after a FLUSHALL (no marker; INFO
// shows the FLUSHALL) and once a lock noticed the loss (sitting out, why
// and for how long). An ACL user that may not run INFO in a script is
// FAIL: the node could not judge a loss.
func TestE2EDoctorTrust(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	const delay = time.Minute // far longer than the test: the node still sits out when doctor looks
	l, err := redlock.New(c.Nodes(), redlock.Config{LeaseDuration: 10 * time.Second, RejoinDelay: delay})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	lock := func() {
		t.Helper()
		lease, err := l.TryAcquire(t.Context(), "r")
		require.NoError(t, err)
		require.NoError(t, lease.Release(t.Context()))
	}
	lock()

	_, res, checks := doctorChecks(t, c.URLs())
	require.True(t, res.OK, "%+v", res.Checks)
	for _, s := range c.Servers() {
		ch := checks[s.Addr()+" trust"]
		require.Equal(t, statusOK, ch.Status, "%+v", ch)
		require.Contains(t, ch.Detail, "trusted since ")
		require.Equal(t, trustTrusted, ch.Trust.State)
		require.Equal(t, "redlock:~trust:db0", ch.Trust.Marker)
		require.True(t, ch.Trust.InfoInScripts)
		require.NotEmpty(t, ch.Trust.Since)
	}

	flushed := c.Server(0)
	require.NoError(t, flushed.Do(t.Context(), "FLUSHALL").Err())
	_, _, checks = doctorChecks(t, c.URLs())
	ch := checks[flushed.Addr()+" trust"]
	require.Equal(t, statusWarn, ch.Status, "%+v", ch)
	require.Contains(t, ch.Detail, "no marker: the next lock counts a loss, and the node grants nothing for the ")
	require.Equal(t, trustNoMarker, ch.Trust.State)

	lock() // the other two grant; the flushed node notices the loss
	r, res, checks := doctorChecks(t, c.URLs())
	requireCode(t, r, exitOK, "")
	ch = checks[flushed.Addr()+" trust"]
	require.Equal(t, statusWarn, ch.Status, "%+v", ch)
	require.Regexp(t, `^sitting out for \S+ more \(until .+\): its marker was missing \(a first use, FLUSHALL or FLUSHDB`, ch.Detail)
	require.Equal(t, trustSittingOut, ch.Trust.State)
	require.Equal(t, "no-marker", ch.Trust.Why)
	require.InDelta(t, delay.Seconds(), ch.Trust.WaitSeconds, 30, "the node sits out about the rejoin delay")
	require.Equal(t, 1, res.Warn, "%+v", res.Checks)
	require.Equal(t, statusOK, checks[c.Server(1).Addr()+" trust"].Status)

	r = cli(t, nodesEnv(c.URLs()), "doctor")
	require.Regexp(t, `(?m)^`+flushed.Addr()+`\s+trust\s+WARN\s+sitting out for `, r.stdout)
	t.Logf("doctor after a FLUSHALL:\n%s", r.stdout)

	// A user that may run scripts but not INFO: not safe.
	noInfo := slices.DeleteFunc(testutil.LockerACL("redlock:"), func(r string) bool { return r == "+info" })
	require.NoError(t, c.Server(1).SetACLUser(t.Context(), "noinfo", "acl-pw", noInfo...))
	r, res, checks = doctorChecks(t, []string{c.Server(1).UserURL("noinfo", "acl-pw")})
	requireCode(t, r, exitFailure, "")
	ch = checks[c.Server(1).Addr()+" trust"]
	require.Equal(t, statusFail, ch.Status, "%+v", ch)
	require.Contains(t, ch.Detail, "not safe: INFO inside a script failed for this user (ERR The user executing the script can't run this command")
	require.False(t, ch.Trust.InfoInScripts)
	require.False(t, res.OK)
}

// TestE2EDoctorWrongPasswordHint: doctor's row for a node that refuses
// the password says what to fix, not only the server's WRONGPASS.
func TestE2EDoctorWrongPasswordHint(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3, testutil.WithPassword("rightPW123"))
	urls := c.URLs()
	urls[1] = strings.ReplaceAll(urls[1], "rightPW123", "wrongPW456")
	r, _, checks := doctorChecks(t, urls)
	require.Equal(t, exitFailure, r.code)
	row := checks[c.Server(1).Addr()+" reachable"]
	require.Equal(t, statusFail, row.Status)
	require.Contains(t, row.Detail, "WRONGPASS")
	require.Contains(t, row.Detail, "check the user and password in its URL")
	require.NotContains(t, r.stdout+r.stderr, "wrongPW456")
}
