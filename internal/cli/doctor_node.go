package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/internal/nodeurl"
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
	// Trust is set on trust rows (doctor_trust.go).
	Trust *trustState `json:"trust,omitempty"`
}

// nodeReport is what the doctor learned about one server: a standalone
// node, one primary of a cluster, or a Sentinel group's current primary.
type nodeReport struct {
	// addr is the NODE column of the server's rows.
	addr      string
	reachable bool
	runID     string
	checks    []check
	// ident is what INFO says of the server's identity and replication,
	// for the node set's independent check (doctor_topology.go).
	ident serverIdentity
	// clock is the server's clock minus this host's at the same instant
	// (RTT-compensated); clockErr is half the round trip of that sample.
	// clockVia says where the clock was read when not from TIME; clockFail
	// why it could not be read.
	clock, clockErr     time.Duration
	clockOK             bool
	clockVia, clockFail string
	// clusterInfo is the primary's CLUSTER INFO (cluster nodes only), or
	// clusterErr why it is missing.
	clusterInfo map[string]string
	clusterErr  error
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

// target is one server to examine and how to read it.
type target struct {
	client *redis.Client
	// label is the NODE column of its rows: the server's address, or its
	// node's name ("cluster(seeds)/host:port", "sentinel(name@sentinels)").
	label string
	// kind is the kind of node URL the server was reached through.
	kind nodeurl.Kind
	// key is a lock key under --prefix that this server holds (for a
	// cluster primary, one in a slot it serves), for the scripts check;
	// "" when there is none.
	key string
	// note is added to the reachable row (a Sentinel group's primary's
	// address).
	note string
	// rejoin is the rejoin delay in effect (negative: off).
	rejoin time.Duration
	// prefix is --prefix, under which the marker key lies.
	prefix string
}

// examine runs every per-server check on one server; each call is bounded
// by timeout.
func examine(ctx context.Context, t target, timeout time.Duration) *nodeReport {
	r := &nodeReport{addr: t.label}
	c := t.client
	r.ident = serverIdentity{label: t.label, dialled: c.Options().Addr}
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, timeout) }

	rtt, err := pingRTT(ctx, c, timeout)
	if err != nil {
		r.add("reachable", statusFail, "%s", reason(err))
		return r
	}
	r.reachable = true
	r.add("reachable", statusOK, "PING round trip %s%s", fmtDuration(rtt), t.note)

	cctx, cancel := call()
	server, err := infoSection(cctx, c, "server")
	cancel()
	if err != nil {
		r.add("version", statusWarn, "INFO server failed: %s", reason(err))
	} else {
		r.runID = server["run_id"]
		r.ident.runID, r.ident.port = server["run_id"], server["tcp_port"]
		checkVersion(r, t.kind, server)
	}

	cctx, cancel = call()
	repl, err := infoSection(cctx, c, "replication")
	cancel()
	if err != nil {
		r.add("role", statusWarn, "INFO replication failed: %s", reason(err))
	} else {
		r.ident.replication(repl)
		checkRole(r, t.kind, repl)
	}

	cctx, cancel = call()
	conf, err := configGet(cctx, c, "appendonly", "appendfsync", "maxmemory-policy", "maxmemory")
	cancel()
	if err != nil {
		r.add("persistence", statusWarn, "cannot read the configuration (CONFIG GET: %s); check appendonly/appendfsync by hand", reason(err))
		r.add("eviction", statusWarn, "cannot read the configuration (CONFIG GET: %s); make sure maxmemory-policy is noeviction", reason(err))
	} else {
		checkPersistence(r, conf)
		checkEviction(r, conf, t.rejoin)
	}
	cctx, cancel = call()
	mem, err := infoSection(cctx, c, "memory")
	cancel()
	if err != nil {
		r.add("memory", statusWarn, "INFO memory failed: %s", reason(err))
	} else {
		checkMemory(r, mem)
	}
	var leases *leaseScan
	if t.rejoin > 0 {
		ls := scanLeases(ctx, c, t.prefix, timeout)
		leases = &ls
	}
	checkRejoin(r, server, conf, t.rejoin, leases)
	checkTrust(ctx, r, t, conf, timeout)

	if t.key == "" {
		r.add("scripts", statusWarn, "no key under --prefix hashes to a slot of this shard (does --prefix hold a {hash tag}?): EVALSHA and EVAL not checked here")
	} else {
		checkScripts(ctx, r, c, t.key, timeout)
	}
	if t.kind == nodeurl.Cluster {
		cctx, cancel = call()
		r.clusterInfo, r.clusterErr = clusterInfo(cctx, c)
		cancel()
	}
	clockOffset(ctx, r, c, timeout)
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
	return infoMap(s), nil
}

// infoMap parses the "field:value" lines of an INFO or CLUSTER INFO reply.
func infoMap(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			m[k] = v
		}
	}
	return m
}

// clusterInfo returns a cluster node's CLUSTER INFO as a map.
func clusterInfo(ctx context.Context, c *redis.Client) (map[string]string, error) {
	s, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return nil, err
	}
	return infoMap(s), nil
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

// checkVersion adds the version row from INFO server: too old, a
// Sentinel, or a cluster member reached through a standalone URL is FAIL;
// an unmaintained release is WARN. Cluster mode is what a cluster node
// (kind Cluster) is made of.
func checkVersion(r *nodeReport, kind nodeurl.Kind, server map[string]string) {
	ver, mode := server["redis_version"], server["redis_mode"]
	if mode == "" {
		mode = "standalone"
	}
	v, ok := parseVersion(ver)
	switch {
	case mode == "sentinel":
		r.add("version", statusFail, "%s is a Sentinel, not a data node: name the group it watches with redis+sentinel://%s?master_name=NAME", ver, r.addr)
	case mode == "cluster" && kind != nodeurl.Cluster:
		r.add("version", statusFail, "Redis %s in cluster mode: a redis:// URL reaches this one shard only (keys on other shards get MOVED errors); name the whole cluster as one node with redis+cluster://%s", ver, r.addr)
	case !ok:
		r.add("version", statusWarn, "unrecognized version %q (%s)", ver, mode)
	case versionLess(v, minVersion):
		r.add("version", statusFail, "Redis %s is older than 2.6.12: no SET NX PX", ver)
	case versionLess(v, oldVersion):
		r.add("version", statusWarn, "Redis %s (%s) is past its end of life; upgrade to 7", ver, mode)
	default:
		r.add("version", statusOK, "Redis %s (%s)", ver, mode)
	}
}

// checkRole adds the role row from INFO replication: a replica is FAIL, a
// primary with replicas WARN (replication is asynchronous). A Sentinel
// group's primary has replicas by design; its WARN says what a failover
// costs.
func checkRole(r *nodeReport, kind nodeurl.Kind, repl map[string]string) {
	switch role := repl["role"]; role {
	case "master":
		n, _ := strconv.Atoi(repl["connected_slaves"])
		switch {
		case kind == nodeurl.Sentinel && n > 0:
			r.add("role", statusWarn, "the group's current primary, with %s: replication is asynchronous, so a failover can lose the last writes (locks just granted, fence increments); the promoted replica notices (its marker names another server) and grants nothing for the rejoin delay", plural(n, "replica"))
		case kind == nodeurl.Sentinel:
			r.add("role", statusOK, "the group's current primary (no replica connected: Sentinel cannot fail it over)")
		case n > 0:
			r.add("role", statusWarn, "primary with %s: replication is asynchronous, so a failover to a replica can forget recent locks", plural(n, "replica"))
		default:
			r.add("role", statusOK, "primary")
		}
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

// checkRejoin adds the rejoin row (Safety v4): every restart, durable or
// not, every failover and every loss of data makes the node sit out the
// rejoin delay (Config.RejoinDelay), counted from when a lock first
// notices it (the trust row says whether the node sits out now); with the
// rule off (--rejoin-delay 0) such a node grants at once: WARN. server
// and conf may be nil (INFO or CONFIG GET refused). leases, when not nil,
// is what a scan under --prefix saw of the live leases: one with more time
// left than the delay is WARN (a client's leases outlast the delay).
func checkRejoin(r *nodeReport, server, conf map[string]string, delay time.Duration, leases *leaseScan) {
	up := "uptime unknown"
	if s, err := strconv.ParseInt(server["uptime_in_seconds"], 10, 64); err == nil {
		up = "up " + fmtDuration(time.Duration(s)*time.Second)
	}
	if delay < 0 {
		r.add("rejoin", statusWarn, "%s; --rejoin-delay 0: after a restart, a failover or a loss of data it grants at once", up)
		return
	}
	durable := ""
	if conf != nil && conf["appendonly"] == "yes" && conf["appendfsync"] == "always" {
		durable = " (appendfsync always keeps the data, not the vote: a durable restart sits out too)"
	}
	status, note := statusOK, ""
	if leases != nil {
		var warn bool
		if note, warn = leases.note(delay); warn {
			status = statusWarn
		}
	}
	r.add("rejoin", status, "%s; after any restart%s, failover or loss of data the node grants nothing for the %s rejoin delay, from when a lock first notices it (see the trust row)%s%s",
		up, durable, delay, configNote(conf), note)
}

// configNote notes a configuration that could not be read.
func configNote(conf map[string]string) string {
	if conf == nil {
		return "; CONFIG GET refused"
	}
	return ""
}

// checkEviction adds the eviction row (Safety v4, rule 4): a lock's
// evidence (its fence counter, holding the lease's end while the lease is
// live) has no TTL, so neither noeviction nor a volatile-* policy can
// evict it, and a lock key evicted under volatile-* is noticed (the node
// refuses the lock until the lease's end). Under allkeys-* with a
// maxmemory nothing of ours is safe: the Locker refuses the node
// (redlock.ErrEvictsLocks), FAIL. allkeys-* without a maxmemory evicts
// nothing yet: WARN. rejoin is unused since v4 (the lost-key check applies
// with the data-loss rule off too).
func checkEviction(r *nodeReport, conf map[string]string, _ time.Duration) {
	policy, maxmem := conf["maxmemory-policy"], conf["maxmemory"]
	switch {
	case policy == "noeviction":
		r.add("eviction", statusOK, "maxmemory-policy noeviction (maxmemory %s)", maxmem)
	case strings.HasPrefix(policy, "volatile-"):
		r.add("eviction", statusOK, "maxmemory-policy %s (maxmemory %s): it evicts only keys with a TTL; a live lease's evidence (its fence counter) has none, and a lock key evicted is noticed (the node refuses the lock until the lease's end)", policy, maxmem)
	case strings.HasPrefix(policy, "allkeys-") && maxmem != "0":
		r.add("eviction", statusFail, "maxmemory-policy %s with maxmemory %s can evict any key, a live lease's evidence included: the library refuses this node (it grants no lock); set noeviction or a volatile-* policy", policy, maxmem)
	case strings.HasPrefix(policy, "allkeys-"):
		r.add("eviction", statusWarn, "maxmemory-policy %s, but no maxmemory: nothing is evicted now; with a maxmemory the library refuses this node, and a switch to allkeys-* while a lease is live is the one eviction the contract does not cover: set noeviction or a volatile-* policy", policy)
	default:
		r.add("eviction", statusWarn, "unknown maxmemory-policy %q; noeviction is the safe one", policy)
	}
}

// memoryWarnShare is the share of maxmemory in use above which the memory
// row is WARN.
const memoryWarnShare = 0.9

// checkMemory adds the memory row from INFO memory: used memory at or
// above maxmemory is FAIL (with noeviction the server answers every write
// that needs memory with OOM, so it grants no new lock: acquire's exit 8),
// above 90% of it WARN, and no maxmemory OK.
func checkMemory(r *nodeReport, mem map[string]string) {
	used, err1 := strconv.ParseUint(mem["used_memory"], 10, 64)
	limit, err2 := strconv.ParseUint(mem["maxmemory"], 10, 64)
	switch {
	case err1 != nil || err2 != nil:
		r.add("memory", statusWarn, "INFO memory has no used_memory or maxmemory")
	case limit == 0:
		r.add("memory", statusOK, "%s used, no maxmemory limit", fmtBytes(used))
	case used >= limit:
		r.add("memory", statusFail, "out of memory: %s used, maxmemory %s: the node refuses every new lock (OOM); free memory or raise maxmemory", fmtBytes(used), fmtBytes(limit))
	case float64(used) >= memoryWarnShare*float64(limit):
		r.add("memory", statusWarn, "%s used of maxmemory %s (%.0f%%): near the point where the node refuses new locks (OOM)", fmtBytes(used), fmtBytes(limit), 100*float64(used)/float64(limit))
	default:
		r.add("memory", statusOK, "%s used of maxmemory %s", fmtBytes(used), fmtBytes(limit))
	}
}

// fmtBytes formats a byte count for people: 812 B, 1.5 MiB, 2.0 GiB.
func fmtBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// clockOffset estimates the server's clock minus this host's from three
// samples: each assumes the server read its clock halfway through the round
// trip, and the sample with the shortest round trip wins. The clock is
// TIME, or, when the server refuses TIME (an ACL user without it), INFO
// server's server_time_usec. It sets r's clock fields.
func clockOffset(ctx context.Context, r *nodeReport, c *redis.Client, timeout time.Duration) {
	read := func(ctx context.Context) (time.Time, error) { return c.Time(ctx).Result() }
	best := time.Duration(-1)
	var lastErr error
	for i := 0; i < 3; i++ {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		start := time.Now()
		t, err := read(cctx)
		rtt := time.Since(start)
		cancel()
		var rerr redis.Error
		if err != nil && r.clockVia == "" && errors.As(err, &rerr) {
			// Refused (NOPERM, unknown command): INFO for every sample.
			r.clockVia = "from INFO server_time_usec: TIME refused"
			read = func(ctx context.Context) (time.Time, error) { return infoTime(ctx, c) }
			i--
			continue
		}
		if err != nil {
			lastErr = err
			continue
		}
		if best < 0 || rtt < best {
			best = rtt
			mid := start.Add(rtt / 2).Round(0) // wall clock only
			r.clock = t.Sub(mid)
		}
	}
	if best < 0 {
		r.clockVia = ""
		r.clockFail = "no answer"
		if lastErr != nil {
			r.clockFail = reason(lastErr)
		}
		return
	}
	r.clockErr, r.clockOK = best/2, true
}

// infoTime reads the server's clock from INFO server (server_time_usec,
// Redis 5 and later).
func infoTime(ctx context.Context, c *redis.Client) (time.Time, error) {
	server, err := infoSection(ctx, c, "server")
	if err != nil {
		return time.Time{}, err
	}
	us, err := strconv.ParseInt(server["server_time_usec"], 10, 64)
	if err != nil {
		return time.Time{}, errors.New("INFO server has no server_time_usec")
	}
	return time.UnixMicro(us), nil
}
