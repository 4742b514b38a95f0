package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/scripts"
)

// Check statuses.
const (
	statusOK   = "OK"
	statusWarn = "WARN"
	statusFail = "FAIL"
)

// check is one row of the doctor's table.
type check struct {
	Node   string `json:"node"`
	Check  string `json:"check"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// nodeReport is what the doctor learned about one node.
type nodeReport struct {
	addr      string
	reachable bool
	runID     string
	checks    []check
	// clock is the node's TIME minus this host's clock at the same instant
	// (RTT-compensated); clockErr is half the round trip of that sample.
	clock, clockErr time.Duration
	clockOK         bool
}

// add appends a row for the check name with status and a detail.
func (r *nodeReport) add(name, status, format string, args ...any) {
	r.checks = append(r.checks, check{Node: r.addr, Check: name, Status: status, Detail: fmt.Sprintf(format, args...)})
}

// minVersion is the oldest server the scripts run on (SET NX PX, PTTL,
// EVALSHA); oldVersion is the first release that is still maintained.
var (
	minVersion = [3]int{2, 6, 12}
	oldVersion = [3]int{6, 2, 0}
)

// examine runs every per-node check on one server; each call is bounded by
// timeout.
func examine(ctx context.Context, c *redis.Client, addr string, timeout time.Duration) *nodeReport {
	r := &nodeReport{addr: addr}
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, timeout) }

	rtt, err := pingRTT(ctx, c, timeout)
	if err != nil {
		r.add("reachable", statusFail, "%s", reason(err))
		return r
	}
	r.reachable = true
	r.add("reachable", statusOK, "PING round trip %s", fmtDuration(rtt))

	cctx, cancel := call()
	server, err := infoSection(cctx, c, "server")
	cancel()
	if err != nil {
		r.add("version", statusWarn, "INFO server failed: %s", reason(err))
	} else {
		r.runID = server["run_id"]
		checkVersion(r, server)
	}

	cctx, cancel = call()
	repl, err := infoSection(cctx, c, "replication")
	cancel()
	if err != nil {
		r.add("role", statusWarn, "INFO replication failed: %s", reason(err))
	} else {
		checkRole(r, repl)
	}

	cctx, cancel = call()
	conf, err := configGet(cctx, c, "appendonly", "appendfsync", "maxmemory-policy", "maxmemory")
	cancel()
	if err != nil {
		r.add("persistence", statusWarn, "cannot read the configuration (CONFIG GET: %s); check appendonly/appendfsync by hand", reason(err))
		r.add("eviction", statusWarn, "cannot read the configuration (CONFIG GET: %s); make sure maxmemory-policy is noeviction", reason(err))
	} else {
		checkPersistence(r, conf)
		checkEviction(r, conf)
	}

	checkScripts(ctx, r, c, timeout)
	r.clock, r.clockErr, r.clockOK = clockOffset(ctx, c, timeout)
	return r
}

// pingRTT returns the shortest of three PING round trips.
func pingRTT(ctx context.Context, c *redis.Client, timeout time.Duration) (time.Duration, error) {
	best := time.Duration(-1)
	for range 3 {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		start := time.Now()
		err := c.Ping(cctx).Err()
		d := time.Since(start)
		cancel()
		if err != nil {
			return 0, err
		}
		if best < 0 || d < best {
			best = d
		}
	}
	return best, nil
}

// infoSection returns one INFO section as a map.
func infoSection(ctx context.Context, c *redis.Client, section string) (map[string]string, error) {
	s, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			m[k] = v
		}
	}
	return m, nil
}

// configGet reads configuration parameters.
func configGet(ctx context.Context, c *redis.Client, params ...string) (map[string]string, error) {
	m := map[string]string{}
	for _, p := range params {
		v, err := c.ConfigGet(ctx, p).Result()
		if err != nil {
			return nil, err
		}
		for k, val := range v {
			m[k] = val
		}
	}
	return m, nil
}

// parseVersion parses "7.0.15" into its three numbers.
func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return v, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

// versionLess reports whether version a is older than b.
func versionLess(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// checkVersion adds the version row from INFO server: too old or a
// Sentinel is FAIL; cluster mode or an unmaintained release is WARN.
func checkVersion(r *nodeReport, server map[string]string) {
	ver, mode := server["redis_version"], server["redis_mode"]
	if mode == "" {
		mode = "standalone"
	}
	v, ok := parseVersion(ver)
	switch {
	case mode == "sentinel":
		r.add("version", statusFail, "%s is a Sentinel, not a data node: list the primaries it manages", ver)
	case !ok:
		r.add("version", statusWarn, "unrecognized version %q (%s)", ver, mode)
	case versionLess(v, minVersion):
		r.add("version", statusFail, "Redis %s is older than 2.6.12: no SET NX PX", ver)
	case mode == "cluster":
		r.add("version", statusWarn, "Redis %s in cluster mode: this client speaks to one shard only, so keys on other shards get MOVED errors", ver)
	case versionLess(v, oldVersion):
		r.add("version", statusWarn, "Redis %s (%s) is past its end of life; upgrade to 7", ver, mode)
	default:
		r.add("version", statusOK, "Redis %s (%s)", ver, mode)
	}
}

// checkRole adds the role row from INFO replication: a replica is FAIL,
// a primary with replicas WARN.
func checkRole(r *nodeReport, repl map[string]string) {
	switch role := repl["role"]; role {
	case "master":
		if n, _ := strconv.Atoi(repl["connected_slaves"]); n > 0 {
			r.add("role", statusWarn, "primary with %d replicas: replication is asynchronous, so a failover to a replica can forget recent locks", n)
			return
		}
		r.add("role", statusOK, "primary")
	case "slave":
		r.add("role", statusFail, "replica of %s:%s: it refuses writes, and replicas are not independent nodes; list primaries only",
			repl["master_host"], repl["master_port"])
	default:
		r.add("role", statusWarn, "unknown role %q", role)
	}
}

// checkPersistence adds the persistence row: only appendonly yes with
// appendfsync always is OK.
func checkPersistence(r *nodeReport, conf map[string]string) {
	aof, fsync := conf["appendonly"], conf["appendfsync"]
	switch {
	case aof != "yes":
		r.add("persistence", statusWarn, "appendonly %s: a restart forgets this node's locks and fence counters, so a lock can be granted twice and fencing tokens can repeat; set appendonly yes, appendfsync always (or keep a restarted node out for longer than the longest TTL)", aof)
	case fsync == "always":
		r.add("persistence", statusOK, "appendonly yes, appendfsync always")
	case fsync == "everysec":
		r.add("persistence", statusWarn, "appendfsync everysec: a crash can lose the last second of locks and fence increments; set appendfsync always")
	default:
		r.add("persistence", statusWarn, "appendfsync %s: a crash can lose many seconds of locks and fence increments; set appendfsync always", fsync)
	}
}

// checkEviction adds the eviction row: only maxmemory-policy noeviction
// is OK; policies that can evict lock keys are FAIL.
func checkEviction(r *nodeReport, conf map[string]string) {
	policy, maxmem := conf["maxmemory-policy"], conf["maxmemory"]
	switch {
	case policy == "noeviction":
		r.add("eviction", statusOK, "maxmemory-policy noeviction (maxmemory %s)", maxmem)
	case strings.HasPrefix(policy, "allkeys-"):
		r.add("eviction", statusFail, "maxmemory-policy %s can evict lock and fence keys under memory pressure (a lock vanishes, a fence counter restarts); set noeviction", policy)
	case strings.HasPrefix(policy, "volatile-"):
		r.add("eviction", statusFail, "maxmemory-policy %s can evict lock keys, which have a TTL, under memory pressure; set noeviction", policy)
	default:
		r.add("eviction", statusWarn, "unknown maxmemory-policy %q; noeviction is the safe one", policy)
	}
}

// checkScripts loads every script redlock runs and checks its digest.
func checkScripts(ctx context.Context, r *nodeReport, c *redis.Client, timeout time.Duration) {
	for _, s := range scripts.All {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		sha, err := s.Load(cctx, c).Result()
		cancel()
		if err != nil {
			r.add("scripts", statusFail, "SCRIPT LOAD failed: %s", reason(err))
			return
		}
		if sha != s.Hash() {
			r.add("scripts", statusFail, "SCRIPT LOAD returned digest %s, expected %s", sha, s.Hash())
			return
		}
	}
	r.add("scripts", statusOK, "%d Lua scripts loaded", len(scripts.All))
}

// clockOffset estimates the node's clock minus this host's from three TIME
// calls: each sample assumes the server read its clock halfway through the
// round trip, and the sample with the shortest round trip wins. It returns
// the offset, its uncertainty (half that round trip) and whether it worked.
func clockOffset(ctx context.Context, c *redis.Client, timeout time.Duration) (offset, uncertainty time.Duration, ok bool) {
	best := time.Duration(-1)
	for range 3 {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		start := time.Now()
		t, err := c.Time(cctx).Result()
		rtt := time.Since(start)
		cancel()
		if err != nil {
			continue
		}
		if best < 0 || rtt < best {
			best = rtt
			mid := start.Add(rtt / 2).Round(0) // wall clock only
			offset = t.Sub(mid)
		}
	}
	if best < 0 {
		return 0, 0, false
	}
	return offset, best / 2, true
}
