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
