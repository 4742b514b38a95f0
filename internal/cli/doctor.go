package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/spf13/cobra"

	"github.com/e6344662/go-redlock/internal/nodeurl"
)

// clockWarn is the clock offset between a node and the median of the nodes
// above which doctor warns.
const clockWarn = 250 * time.Millisecond

// nodeSetNode is the node column of the checks on the node set as a whole.
const nodeSetNode = "*"

// doctorResult is the --json output of doctor.
type doctorResult struct {
	OK     bool    `json:"ok"`
	Nodes  int     `json:"nodes"`
	Quorum int     `json:"quorum"`
	Fail   int     `json:"fail"`
	Warn   int     `json:"warn"`
	Checks []check `json:"checks"`
}

// doctorCmd builds doctor.
func (a *App) doctorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check the nodes for what Redlock's safety depends on",
		Long: `Check every node and print a table with OK, WARN or FAIL per check and server:
  reachable    PING answered, with the round-trip time
  version      server version and mode (a Sentinel is FAIL; so is a redis://
               URL naming a cluster member: use redis+cluster://)
  role         a replica is FAIL; a primary with replicas is WARN
  persistence  appendonly yes + appendfsync always is OK; anything less is
               WARN (a restarted node forgets locks and fence counters)
  eviction     maxmemory-policy noeviction or volatile-* is OK (a live
               lease's evidence has no TTL); allkeys-* with a maxmemory is
               FAIL (the library refuses the node), without one WARN
  memory       used memory at or above maxmemory is FAIL (the node refuses
               every new lock: OOM), above 90% of it WARN
  rejoin       every restart (durable or not), failover or loss of data
               makes the node sit out --rejoin-delay (default --ttl);
               WARN with the rule off (--rejoin-delay 0), or when a live
               lock under --prefix has more time left than the delay (a
               client's leases outlast it: SCAN and PTTL of the first
               ` + fmt.Sprint(leaseScanCap) + ` keys)
  trust        the node's marker (PREFIX~trust:dbN; on a cluster, per
               slot): "trusted since" a time, "sitting out for" how long
               and why, no marker or one for another replication id (the
               next lock sits out) (WARN); FAIL when the node's user may
               not run INFO in a script (every granting script reads the
               server's identity so) or the marker holds foreign data
  scripts      EVALSHA and EVAL both run redlock's read-only inspect script
               on a key under --prefix; a renamed, disabled or refused
               EVALSHA or EVAL is FAIL
  clock        the node's TIME (or INFO's server_time_usec when TIME is
               refused) against the median of the nodes, corrected for half
               the round trip; WARN above ` + clockWarn.String() + `
A Redis Cluster (redis+cluster://) is one node: every primary is checked
(rows "cluster(seeds)/host:port"), a shard that does not answer is FAIL
and makes the whole cluster count as unreachable, and a cluster_state row
reports CLUSTER INFO (FAIL when not ok). A Sentinel group
(redis+sentinel://) is one node: its current primary is checked (rows
"sentinel(name@sentinels)"); its replicas make the role WARN, since a
failover can lose the last writes. The node set (node "*"): node_count
(WARN when even or below 3), quorum (FAIL when no majority of the nodes is
reachable), distinct (FAIL when two URLs reach the same server, by the
run_id of every server behind them), independent (FAIL when a node's
server is another listed node's server, its replica or its primary, by
INFO replication: a replica is never a vote), clocks (FAIL when two node
clocks differ by the fencing tokens' bound, min(9.5s, the rejoin delay),
or more; WARN above ` + clockWarn.String() + `, or when a node clock is that far from
this host's). Exits 1 when any check is FAIL.
Works with the minimal ACL user of docs/security.md (CONFIG is then WARN).

` + exitCodeHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.prepare(cmd); err != nil {
				return err
			}
			urls, err := a.g.nodeURLs(a.Getenv)
			if err != nil {
				return err
			}
			nodes, err := doctorNodes(urls)
			if err != nil {
				return err
			}
			defer closeDoctorNodes(nodes)
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			res := diagnose(ctx, nodes, a.g.prefix, a.g.callTimeout(), a.g.rejoinDelay())
			if ie := interrupted(ctx); ie != nil {
				return ie
			}
			for i := range res.Checks {
				res.Checks[i].Detail = a.redact(res.Checks[i].Detail)
			}
			a.report(res, func() { a.printDoctor(res) })
			if !res.OK {
				return &cliError{code: exitFailure, kind: kindFailure, reported: true, msg: failSummary(res.Fail)}
			}
			return nil
		},
	}
}

// failSummary is doctor's error line for n failed checks: "doctor: 1
// check FAILs", "doctor: 2 checks FAIL".
func failSummary(n int) string {
	if n == 1 {
		return "doctor: 1 check FAILs"
	}
	return fmt.Sprintf("doctor: %d checks FAIL", n)
}

// doctorNode is one node URL: its parsed form and a client for it (a
// *redis.Client for a server or a Sentinel group, a *redis.ClusterClient
// for a cluster).
type doctorNode struct {
	spec   *nodeurl.Spec
	client redis.UniversalClient
}

// doctorNodes parses every URL with nodeurl.Parse, the parser redisnode.Dial
// uses, and builds its client without connecting. A URL it rejects is a
// usage error; its password never appears.
func doctorNodes(urls []string) ([]*doctorNode, error) {
	nodes := make([]*doctorNode, 0, len(urls))
	for _, raw := range urls {
		spec, err := nodeurl.Parse(raw)
		if err != nil {
			closeDoctorNodes(nodes)
			return nil, usageErrorf("%s", err.Error())
		}
		tuneDoctor(spec)
		nodes = append(nodes, &doctorNode{spec: spec, client: spec.NewClient()})
	}
	return nodes, nil
}

// closeDoctorNodes closes the nodes' clients.
func closeDoctorNodes(nodes []*doctorNode) {
	for _, n := range nodes {
		_ = n.client.Close()
	}
}

// tuneDoctor sets the client options of the doctor: those of a Redlock
// node (Tune), one attempt per check whatever the URL says (the doctor
// measures), and nothing sent on connecting beyond HELLO and AUTH (no
// CLIENT SETINFO, no maintenance notifications), which a minimal ACL user
// may not run.
func tuneDoctor(s *nodeurl.Spec) {
	s.Tune()
	off := func() *maintnotifications.Config {
		return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	}
	switch s.Kind {
	case nodeurl.Cluster:
		o := s.ClusterOptions
		o.MaxRetries, o.DisableIdentity, o.MaintNotificationsConfig = -1, true, off()
	case nodeurl.Sentinel:
		o := s.FailoverOptions
		o.MaxRetries, o.DisableIdentity = -1, true
	default:
		o := s.Options
		o.MaxRetries, o.DisableIdentity, o.MaintNotificationsConfig = -1, true, off()
	}
}

// nodeResult is what the doctor learned about one node (one URL): rows
// about the node as a whole, then the reports of the servers behind it
// (a standalone server, every primary of a cluster, a Sentinel group's
// current primary).
type nodeResult struct {
	head    []check
	servers []*nodeReport
	// up is whether the node counts as reachable for the quorum: it was
	// found, and every server behind it answered.
	up bool
}

// rows returns the node's rows in order: its own, then each server's.
func (nr *nodeResult) rows() []check {
	out := slices.Clone(nr.head)
	for _, r := range nr.servers {
		out = append(out, r.checks...)
	}
	return out
}

// diagnose examines every node in parallel, then the node set. prefix is
// the key prefix of the lock keys (the scripts check reads a key under it);
// rejoin is the rejoin delay in effect (negative: off).
func diagnose(ctx context.Context, nodes []*doctorNode, prefix string, timeout, rejoin time.Duration) doctorResult {
	results := make([]*nodeResult, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { results[i] = n.examine(ctx, prefix, timeout, rejoin) })
	}
	wg.Wait()
	var servers []*nodeReport
	for _, nr := range results {
		servers = append(servers, nr.servers...)
	}
	checkClocks(servers)

	n := len(nodes)
	res := doctorResult{Nodes: n, Quorum: n/2 + 1}
	for _, nr := range results {
		res.Checks = append(res.Checks, nr.rows()...)
	}
	res.Checks = append(append(res.Checks, nodeSetChecks(results)...), independentCheck(results), clocksCheck(servers, rejoin))
	for _, c := range res.Checks {
		switch c.Status {
		case statusFail:
			res.Fail++
		case statusWarn:
			res.Warn++
		}
	}
	res.OK = res.Fail == 0
	return res
}

// checkClocks adds a clock row to every reachable server: its offset from
// the median of the servers' offsets.
func checkClocks(reports []*nodeReport) {
	var offsets []time.Duration
	for _, r := range reports {
		if r.clockOK {
			offsets = append(offsets, r.clock)
		}
	}
	if len(offsets) == 0 {
		return
	}
	slices.Sort(offsets)
	median := offsets[len(offsets)/2]
	for _, r := range reports {
		switch {
		case !r.reachable:
		case !r.clockOK:
			r.add("clock", statusWarn, "cannot read the server's clock (TIME, then INFO server_time_usec): %s", r.clockFail)
		default:
			rel := r.clock - median
			detail := fmt.Sprintf("%s from the nodes' median (±%s); %s from this host", signed(rel), fmtDuration(r.clockErr), signed(r.clock))
			if r.clockVia != "" {
				detail += " (" + r.clockVia + ")"
			}
			status := statusOK
			if rel > clockWarn || rel < -clockWarn {
				status = statusWarn
				detail += fmt.Sprintf("; over %s: are the clocks synchronized (NTP)? a clock that jumps expires locks early", clockWarn)
			}
			r.add("clock", status, "%s", detail)
		}
	}
}

// signed formats d with an explicit sign.
func signed(d time.Duration) string {
	d = roundDur(d)
	if d < 0 {
		return "-" + (-d).String()
	}
	return "+" + d.String()
}

// nodeSetChecks are the checks on the node set as a whole: the number of
// nodes (URLs), how many are reachable, and whether two of them reach one
// server (by the run_id of every server behind every node).
func nodeSetChecks(nodes []*nodeResult) []check {
	n := len(nodes)
	q := n/2 + 1
	var out []check
	add := func(name, status, format string, args ...any) {
		out = append(out, check{Node: nodeSetNode, Check: name, Status: status, Detail: fmt.Sprintf(format, args...)})
	}
	switch {
	case n == 1:
		add("node_count", statusWarn, "a single node: no fault tolerance; use 3 or 5 independent servers")
	case n == 2:
		add("node_count", statusWarn, "2 nodes need both (quorum 2): no fault tolerance; use 3 or 5")
	case n%2 == 0:
		add("node_count", statusWarn, "%d nodes tolerate %d down, as %d would (quorum %d); use an odd number", n, n-q, n-1, q)
	default:
		add("node_count", statusOK, "%d nodes, quorum %d: tolerates %d down", n, q, n-q)
	}

	up := 0
	for _, nr := range nodes {
		if nr.up {
			up++
		}
	}
	if up >= q {
		add("quorum", statusOK, "%d of %d nodes reachable, %d needed", up, n, q)
	} else {
		add("quorum", statusFail, "only %d of %d nodes reachable, %d needed: no lock can be taken", up, n, q)
	}

	byID := map[string][]string{}
	for _, nr := range nodes {
		for _, r := range nr.servers {
			if r.runID != "" {
				byID[r.runID] = append(byID[r.runID], r.addr)
			}
		}
	}
	var dups []string
	for _, addrs := range byID {
		if len(addrs) > 1 {
			dups = append(dups, strings.Join(addrs, " = "))
		}
	}
	slices.Sort(dups)
	if len(dups) > 0 {
		add("distinct", statusFail, "the same server is listed more than once (%s): it would count twice toward a quorum", strings.Join(dups, "; "))
	} else {
		add("distinct", statusOK, "%d distinct servers (by run_id)", len(byID))
	}
	return out
}

// printDoctor prints doctor's table and verdict.
func (a *App) printDoctor(res doctorResult) {
	tw := a.table()
	fmt.Fprintln(tw, "NODE\tCHECK\tSTATUS\tDETAIL")
	for _, c := range res.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Node, c.Check, c.Status, c.Detail)
	}
	_ = tw.Flush()
	verdict := "no FAIL"
	if !res.OK {
		verdict = "NOT SAFE for Redlock"
	}
	a.printf("doctor: %d FAIL, %d WARN, %d OK: %s\n", res.Fail, res.Warn, len(res.Checks)-res.Fail-res.Warn, verdict)
}
