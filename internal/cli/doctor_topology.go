package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/e6344662/go-redlock/internal/nodeurl"
)

// doctorResource is the resource whose keys the scripts check reads
// (PREFIX{redlock-doctor}, PREFIX{redlock-doctor}:fence). It never writes.
const doctorResource = "redlock-doctor"

// maxShardKeyTries bounds the search for a key in each shard's slots.
const maxShardKeyTries = 1 << 16

// examine examines the servers behind the node: the server of a
// standalone URL, every primary of a cluster, or the current primary of a
// Sentinel group.
func (n *doctorNode) examine(ctx context.Context, prefix string, timeout, rejoin time.Duration) *nodeResult {
	key := prefix + "{" + doctorResource + "}"
	switch n.spec.Kind {
	case nodeurl.Cluster:
		return examineCluster(ctx, n.spec.Name, n.client.(*redis.ClusterClient), prefix, timeout, rejoin)
	case nodeurl.Sentinel:
		t := target{client: n.client.(*redis.Client), label: n.spec.Name, kind: nodeurl.Sentinel, key: key, rejoin: rejoin, prefix: prefix}
		if addr := sentinelPrimary(ctx, n.spec.FailoverOptions, timeout); addr != "" {
			t.note = " (current primary " + addr + ", as the sentinels name it)"
		}
		r := examine(ctx, t, timeout)
		return &nodeResult{servers: []*nodeReport{r}, up: r.reachable}
	}
	r := examine(ctx, target{client: n.client.(*redis.Client), label: n.spec.Name, kind: nodeurl.Standalone, key: key, rejoin: rejoin, prefix: prefix}, timeout)
	return &nodeResult{servers: []*nodeReport{r}, up: r.reachable}
}

// examineCluster examines every primary of the cluster named name, in
// parallel, each through its own client (the cluster's credentials and
// TLS) and with a key of a slot it serves for the scripts check. Their rows
// are labelled name/host:port, after a cluster_state row for the whole
// cluster. The cluster counts as reachable when every primary answered.
func examineCluster(ctx context.Context, name string, cc *redis.ClusterClient, prefix string, timeout, rejoin time.Duration) *nodeResult {
	nr := &nodeResult{}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	var mu sync.Mutex
	var masters []*redis.Client
	err := cc.ForEachMaster(cctx, func(_ context.Context, m *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters = append(masters, m)
		return nil
	})
	cancel()
	if err == nil && len(masters) == 0 {
		err = errors.New("no primary serves a hash slot")
	}
	if err != nil {
		detail := "no seed answered with the cluster's slot map: " + reason(err)
		if strings.Contains(err.Error(), "cluster support disabled") {
			detail = "not a Redis Cluster (cluster support disabled): name a standalone server with redis://"
		}
		nr.head = append(nr.head, check{Node: name, Check: "reachable", Status: statusFail, Detail: detail})
		return nr
	}
	slices.SortFunc(masters, func(a, b *redis.Client) int { return strings.Compare(a.Options().Addr, b.Options().Addr) })
	keys := shardKeys(ctx, cc, prefix, len(masters), timeout)

	nr.servers = make([]*nodeReport, len(masters))
	var wg sync.WaitGroup
	for i, m := range masters {
		addr := m.Options().Addr
		t := target{client: m, label: name + "/" + addr, kind: nodeurl.Cluster, key: keys[addr], rejoin: rejoin, prefix: prefix}
		wg.Go(func() { nr.servers[i] = examine(ctx, t, timeout) })
	}
	wg.Wait()
	nr.up = true
	for _, r := range nr.servers {
		nr.up = nr.up && r.reachable
	}
	nr.head = append(nr.head, clusterStateRow(name, nr.servers))
	return nr
}

// shardKeys finds, for each of the cluster's n primaries, a key under
// prefix (PREFIX{redlock-doctor-N}) in a hash slot the primary serves, as
// go-redis's slot map says, keyed by the primary's address.
func shardKeys(ctx context.Context, cc *redis.ClusterClient, prefix string, n int, timeout time.Duration) map[string]string {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	keys := map[string]string{}
	for i := 0; len(keys) < n && i < maxShardKeyTries; i++ {
		key := prefix + "{" + doctorResource + "-" + strconv.Itoa(i) + "}"
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			break
		}
		if addr := m.Options().Addr; keys[addr] == "" {
			keys[addr] = key
		}
	}
	return keys
}

// clusterStateRow is the cluster_state row of a cluster: what CLUSTER INFO
// says on each primary that answered. A state other than ok is FAIL (the
// cluster refuses commands); unassigned slots are WARN (locks whose keys
// hash there fail on this node); CLUSTER INFO refused everywhere is WARN.
func clusterStateRow(name string, reports []*nodeReport) check {
	row := check{Node: name, Check: "cluster_state"}
	var bad []string
	var refused error
	asked, primaries := 0, len(reports)
	assigned := -1
	for _, r := range reports {
		switch {
		case !r.reachable:
			continue
		case r.clusterErr != nil:
			refused = r.clusterErr
			continue
		}
		asked++
		if st := r.clusterInfo["cluster_state"]; st != "ok" {
			bad = append(bad, fmt.Sprintf("%s says %q", strings.TrimPrefix(r.addr, name+"/"), st))
		}
		if n, err := strconv.Atoi(r.clusterInfo["cluster_slots_assigned"]); err == nil && (assigned < 0 || n < assigned) {
			assigned = n
		}
	}
	switch {
	case len(bad) > 0:
		row.Status = statusFail
		row.Detail = fmt.Sprintf("cluster_state not ok (%s): the cluster refuses commands, so this node grants no lock", strings.Join(bad, ", "))
	case asked == 0 && refused != nil:
		row.Status = statusWarn
		row.Detail = fmt.Sprintf("CLUSTER INFO failed (%s): check cluster_state by hand", reason(refused))
	case asked == 0:
		row.Status = statusFail
		row.Detail = fmt.Sprintf("none of the %d primaries answered", primaries)
	case assigned >= 0 && assigned < clusterSlots:
		row.Status = statusWarn
		row.Detail = fmt.Sprintf("cluster_state ok, but only %d of %d hash slots are assigned: locks whose keys hash to the others fail on this node", assigned, clusterSlots)
	default:
		row.Status = statusOK
		row.Detail = fmt.Sprintf("cluster_state ok on %d of %d primaries, %d hash slots assigned", asked, primaries, assigned)
	}
	return row
}

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// sentinelPrimary asks the group's sentinels, in the URL's order, for the
// address of its current primary, for display; "" if none answers.
func sentinelPrimary(ctx context.Context, o *redis.FailoverOptions, timeout time.Duration) string {
	for _, addr := range o.SentinelAddrs {
		sc := redis.NewSentinelClient(&redis.Options{
			Addr:                     addr,
			Dialer:                   o.Dialer,
			Protocol:                 o.Protocol,
			Username:                 o.SentinelUsername,
			Password:                 o.SentinelPassword,
			TLSConfig:                o.TLSConfig,
			DialTimeout:              o.DialTimeout,
			ContextTimeoutEnabled:    true,
			MaxRetries:               -1,
			DialerRetries:            1,
			DisableIdentity:          true,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		})
		cctx, cancel := context.WithTimeout(ctx, timeout)
		a, err := sc.GetMasterAddrByName(cctx, o.MasterName).Result()
		cancel()
		_ = sc.Close()
		if err == nil && len(a) == 2 {
			return net.JoinHostPort(a[0], a[1])
		}
	}
	return ""
}

// serverIdentity is what INFO says of one server's identity and place in
// replication, for telling whether two listed nodes are independent: a
// node that replicates another listed node, or two addresses of one
// server, hold one copy of the data and would count twice toward a quorum
// (Safety v4, rule 1: a replica is never a vote).
type serverIdentity struct {
	// label names the server in details; dialled is the address it was
	// reached at; port is INFO's tcp_port.
	label, dialled, port string
	// runID is INFO's run_id (the process), replid its master_replid
	// (the data's history: a replica takes its primary's).
	runID, replid string
	// role is INFO's role; master the master_host:master_port of a
	// replica; replicas the ip:port of each replica connected to it.
	role, master string
	replicas     []string
}

// replication fills the identity's fields from INFO replication.
func (id *serverIdentity) replication(repl map[string]string) {
	id.role, id.replid = repl["role"], repl["master_replid"]
	if h, p := repl["master_host"], repl["master_port"]; h != "" && p != "" {
		id.master = net.JoinHostPort(h, p)
	}
	id.replicas = id.replicas[:0]
	for k, v := range repl {
		if n, ok := strings.CutPrefix(k, "slave"); !ok || n == "" || strings.Trim(n, "0123456789") != "" {
			continue
		}
		f := map[string]string{}
		for _, kv := range strings.Split(v, ",") {
			if a, b, ok := strings.Cut(kv, "="); ok {
				f[a] = b
			}
		}
		if f["ip"] != "" && f["port"] != "" {
			id.replicas = append(id.replicas, net.JoinHostPort(f["ip"], f["port"]))
		}
	}
	slices.Sort(id.replicas)
}

// isAt reports whether addr (host:port, as a replica names its master or
// a primary its replica) names this server: the address it was reached at,
// or its own port on that host; loopback names (localhost, 127.0.0.1, ::1)
// are one host.
func (id serverIdentity) isAt(addr string) bool {
	h, p, err := net.SplitHostPort(addr)
	if err != nil || addr == "" {
		return false
	}
	dh, dp, err := net.SplitHostPort(id.dialled)
	if err != nil {
		return false
	}
	return sameHost(h, dh) && (p == dp || p == id.port)
}

// sameHost reports whether two host names are the same host, taking the
// loopback names for one.
func sameHost(a, b string) bool {
	loop := func(h string) bool {
		if h == "localhost" {
			return true
		}
		ip := net.ParseIP(h)
		return ip != nil && ip.IsLoopback()
	}
	return strings.EqualFold(a, b) || loop(a) && loop(b)
}

// dependence says how two servers reached through different nodes share
// their data, "" when INFO shows no link: one server twice (run_id), one
// replicating the other (its master, or the other's list of replicas), or
// one replication history (master_replid: one replicates the other, or both
// replicate one primary).
func dependence(a, b serverIdentity) string {
	switch {
	case a.runID != "" && a.runID == b.runID:
		return fmt.Sprintf("%s and %s are one server (run_id %s)", a.label, b.label, shortID(a.runID))
	case a.role == "slave" && b.isAt(a.master):
		return fmt.Sprintf("%s is a replica of %s (its master is %s)", a.label, b.label, a.master)
	case b.role == "slave" && a.isAt(b.master):
		return fmt.Sprintf("%s is a replica of %s (its master is %s)", b.label, a.label, b.master)
	case slices.ContainsFunc(a.replicas, b.isAt):
		return fmt.Sprintf("%s is a replica of %s (among its connected replicas)", b.label, a.label)
	case slices.ContainsFunc(b.replicas, a.isAt):
		return fmt.Sprintf("%s is a replica of %s (among its connected replicas)", a.label, b.label)
	case a.replid != "" && a.replid == b.replid:
		return fmt.Sprintf("%s and %s hold one replication history (master_replid %s): one replicates the other, or both replicate one primary", a.label, b.label, shortID(a.replid))
	}
	return ""
}

// dependences lists the links between servers of different nodes; ids
// holds, per node, the identities of the servers behind it that answered.
func dependences(ids [][]serverIdentity) []string {
	var out []string
	for i := range ids {
		for j := i + 1; j < len(ids); j++ {
			for _, a := range ids[i] {
				for _, b := range ids[j] {
					if d := dependence(a, b); d != "" {
						out = append(out, d)
					}
				}
			}
		}
	}
	return out
}

// independentHint is what to do about nodes that are not independent.
const independentHint = "a primary and its replica, or one server listed twice, hold one copy of the data: " +
	"they would count twice toward a quorum, and one failure takes both votes (a replica is never a vote); " +
	"list independent primaries only, each on its own machine"

// independentCheck is the node set's independent row: FAIL when a server
// behind one node is another listed node's server, its replica or its
// primary (INFO server and replication), OK otherwise.
func independentCheck(nodes []*nodeResult) check {
	ids := make([][]serverIdentity, len(nodes))
	servers := 0
	for i, nr := range nodes {
		for _, r := range nr.servers {
			if r.reachable && (r.ident.runID != "" || r.ident.role != "") {
				ids[i] = append(ids[i], r.ident)
				servers++
			}
		}
	}
	row := check{Node: nodeSetNode, Check: "independent"}
	if deps := dependences(ids); len(deps) > 0 {
		row.Status = statusFail
		row.Detail = "the nodes are not independent: " + strings.Join(deps, "; ") + ". Hint: " + independentHint
		return row
	}
	row.Status = statusOK
	row.Detail = fmt.Sprintf("%d servers behind %d nodes; none is another listed server, its replica or its primary (INFO run_id, role, master, replicas, master_replid)", servers, len(nodes))
	return row
}

// Node-side constants of the token rule (Safety v4, rule 3), in the
// scripts: a new fence counter starts from the node clock rounded down to
// counterStep, and a counter outlives its last lease by counterLife.
const (
	counterStep = time.Second
	counterLife = 20 * time.Second
)

// clockBound is how far node clocks may differ under the token rule's
// clock assumption (docs/design.md §6.1): less than (counterLife -
// counterStep)/2 and less than the rejoin delay (when on).
func clockBound(rejoin time.Duration) time.Duration {
	b := (counterLife - counterStep) / 2
	if rejoin > 0 {
		b = min(b, rejoin)
	}
	return b
}

// clocksCheck is the node set's clocks row: FAIL when two servers' clocks
// differ by the token rule's bound or more (tokens may then go back),
// WARN when they differ by more than clockWarn, or when a server's clock
// differs from this host's by the bound or more; OK otherwise. Offsets
// are counted with their measuring error in the servers' favour.
func clocksCheck(reports []*nodeReport, rejoin time.Duration) check {
	row := check{Node: nodeSetNode, Check: "clocks"}
	var lo, hi, far *nodeReport
	n := 0
	for _, r := range reports {
		if !r.reachable || !r.clockOK {
			continue
		}
		n++
		if lo == nil || r.clock < lo.clock {
			lo = r
		}
		if hi == nil || r.clock > hi.clock {
			hi = r
		}
		if far == nil || abs(r.clock) > abs(far.clock) {
			far = r
		}
	}
	if n == 0 {
		row.Status, row.Detail = statusWarn, "no server's clock could be read"
		return row
	}
	bound := clockBound(rejoin)
	spread := max(hi.clock-lo.clock-hi.clockErr-lo.clockErr, 0)
	local := max(abs(far.clock)-far.clockErr, 0)
	spreadText := fmt.Sprintf("node clocks differ by %s at most (%s ahead of %s)", fmtDuration(roundDur(spread)), hi.addr, lo.addr)
	if n == 1 {
		spreadText = "one server's clock read"
	}
	localText := fmt.Sprintf("%s from this host's at most (%s)", fmtDuration(roundDur(local)), far.addr)
	switch {
	case spread >= bound:
		row.Status = statusFail
		row.Detail = fmt.Sprintf("%s: the fencing tokens' clock assumption needs less than %s (min((%s - %s)/2, the rejoin delay)); tokens may go back. Hint: synchronize the nodes' clocks (NTP, slewing, not stepping)",
			spreadText, fmtDuration(bound), counterLife, counterStep)
	case local >= bound:
		row.Status = statusWarn
		row.Detail = fmt.Sprintf("%s; a node clock is %s: is this host's clock (or the node's) synchronized (NTP)?", spreadText, localText)
	case spread > clockWarn:
		row.Status = statusWarn
		row.Detail = fmt.Sprintf("%s: within the tokens' bound %s, but over %s: are the clocks synchronized (NTP)?", spreadText, fmtDuration(bound), clockWarn)
	default:
		row.Status = statusOK
		row.Detail = fmt.Sprintf("%s, within the tokens' bound %s; %s", spreadText, fmtDuration(bound), localText)
	}
	return row
}

// abs is |d|.
func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// identify reads one server's identity (INFO server and replication),
// bounded by timeout; label names it in details.
func identify(ctx context.Context, c *redis.Client, label string, timeout time.Duration) (serverIdentity, error) {
	id := serverIdentity{label: label, dialled: c.Options().Addr}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	info, err := c.Info(cctx, "server", "replication").Result()
	if err != nil {
		return id, err
	}
	m := infoMap(info)
	id.runID, id.port = m["run_id"], m["tcp_port"]
	id.replication(m)
	return id, nil
}
