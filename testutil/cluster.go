package testutil

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

const (
	// clusterSlots is the number of hash slots of a Redis Cluster.
	clusterSlots = 16384
	// clusterNodeTimeout is the cluster-node-timeout, in milliseconds, of
	// the nodes StartCluster starts: a node silent this long is suspected
	// (PFAIL), and a majority of suspicions makes it failed (FAIL).
	clusterNodeTimeout = 2000
	// settleTimeout bounds every wait for a cluster or sentinel group to
	// reach the state a call promises.
	settleTimeout = DefaultTestTimeout
	// pollInterval is the pause between two checks of such a wait.
	pollInterval = 20 * time.Millisecond
	// checkTimeout bounds one check of such a wait.
	checkTimeout = 5 * time.Second
)

// WithReplicas gives every shard of a cluster started by StartCluster n
// replicas (default 0), made with CLUSTER REPLICATE, so that a shard's
// master can fail over (see Cluster.Failover). Other starters ignore it.
func WithReplicas(n int) Option {
	return func(o *redisOptions) { o.replicas = n }
}

// Cluster is a Redis Cluster of real redis-server processes started by
// StartCluster: a number of shards, each a master owning an even share of
// the 16384 hash slots and optionally replicas. Every method is safe for
// concurrent use.
type Cluster struct {
	password string
	shards   []*clusterShard
	all      []*RedisServer          // every node, masters first
	ids      map[*RedisServer]string // cluster node IDs, which survive restarts

	mu      sync.Mutex // guards the roles recorded in shards
	clients clientSet[*redis.ClusterClient]
}

// clusterShard is one shard: its slot range and its servers, the first of
// which is the master as last recorded.
type clusterShard struct {
	lo, hi  int // slots lo..hi, inclusive
	servers []*RedisServer
}

// StartCluster starts a Redis Cluster of shards masters on free 127.0.0.1
// ports and waits until it is fully formed. Each node runs as
// StartRedisServer's do (own directory, AOF with appendfsync always, the
// options' extra config lines and password) plus cluster-enabled yes, its
// nodes.conf in its directory, a cluster-node-timeout of 2s and
// cluster-require-full-coverage no, so a dead shard fails only its own
// keys. The slots are split evenly in ranges (shard 0 owns the lowest);
// with WithReplicas every master gets that many replicas. StartCluster
// returns once every node reports cluster_state:ok with all 16384 slots
// assigned and served, every node knows every other, and every replica's
// link to its master is up; it fails the test if that takes more than 30s,
// with the log tail of the node that was not ready. WithTLS is not
// supported. It skips the test if redis-server is missing (see
// RedisServerPath); the test's cleanup closes the clients and kills every
// node.
func StartCluster(t testing.TB, shards int, opts ...Option) *Cluster {
	t.Helper()
	if shards < 1 {
		t.Fatalf("testutil.StartCluster: need at least one shard, got %d", shards)
	}
	bin := RedisServerPath(t)
	o := buildOptions(opts)
	replicas := o.replicas
	if replicas < 0 {
		t.Fatalf("testutil.StartCluster: replicas per shard must be 0 or more, got %d", replicas)
	}
	if o.tls != nil {
		t.Fatal("testutil.StartCluster: WithTLS is not supported")
	}
	c, err := startCluster(t, bin, o, shards, replicas)
	if err != nil {
		t.Fatalf("testutil.StartCluster: %v", err)
	}
	return c
}

func startCluster(t testing.TB, bin string, o redisOptions, shards, replicas int) (*Cluster, error) {
	c := &Cluster{password: o.password, ids: map[*RedisServer]string{}}
	n := shards * (1 + replicas)
	servers := make([]*RedisServer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { servers[i], errs[i] = startClusterNode(t, bin, o) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Registered after the servers' own cleanups, so it runs before them.
	t.Cleanup(c.clients.closeAll)

	c.all = servers
	for i := range shards {
		sh := &clusterShard{
			lo:      i * clusterSlots / shards,
			hi:      (i+1)*clusterSlots/shards - 1,
			servers: []*RedisServer{servers[i]},
		}
		for r := range replicas {
			sh.servers = append(sh.servers, servers[shards+i*replicas+r])
		}
		c.shards = append(c.shards, sh)
	}

	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	for i, s := range servers {
		id, err := s.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return nil, fmt.Errorf("CLUSTER MYID on %s: %w", s.Addr(), err)
		}
		c.ids[s] = id
		// Distinct epochs from the start, as redis-cli --cluster create
		// does, rather than collisions the nodes resolve over time.
		if err := s.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return nil, fmt.Errorf("CLUSTER SET-CONFIG-EPOCH on %s: %w", s.Addr(), err)
		}
	}
	for _, sh := range c.shards {
		m := sh.servers[0]
		if err := m.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", sh.lo, sh.hi).Err(); err != nil {
			return nil, fmt.Errorf("CLUSTER ADDSLOTSRANGE %d %d on %s: %w", sh.lo, sh.hi, m.Addr(), err)
		}
	}
	for _, s := range servers[1:] {
		bus, err := s.admin.ConfigGet(ctx, "cluster-port").Result()
		if err != nil {
			return nil, fmt.Errorf("CONFIG GET cluster-port on %s: %w", s.Addr(), err)
		}
		err = servers[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", s.Port(), bus["cluster-port"]).Err()
		if err != nil {
			return nil, fmt.Errorf("CLUSTER MEET %s: %w", s.Addr(), err)
		}
	}

	// A replica can only follow a master it has heard of (by its real ID,
	// which a node in handshake does not have yet).
	err := awaitSettled(ctx, "every node to know every other", func(ctx context.Context) (*RedisServer, error) {
		for _, s := range servers {
			reply, err := s.Do(ctx, "CLUSTER", "NODES").Text()
			if err != nil {
				return s, fmt.Errorf("CLUSTER NODES on %s: %w", s.Addr(), err)
			}
			view := parseClusterNodes(reply)
			if len(view) != n {
				return s, fmt.Errorf("%s knows %d nodes of %d", s.Addr(), len(view), n)
			}
			for _, o := range servers {
				if e, ok := view[c.ids[o]]; !ok || e.has("handshake") || e.has("noaddr") {
					return s, fmt.Errorf("%s does not know %s yet", s.Addr(), o.Addr())
				}
			}
		}
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	for _, sh := range c.shards {
		for _, r := range sh.servers[1:] {
			err := r.Do(ctx, "CLUSTER", "REPLICATE", c.ids[sh.servers[0]]).Err()
			if err != nil {
				return nil, fmt.Errorf("CLUSTER REPLICATE on %s: %w", r.Addr(), err)
			}
		}
	}
	if err := awaitSettled(ctx, "the cluster to form", c.healthCheck(nil)); err != nil {
		return nil, err
	}
	return c, c.Vouch(ctx) // operator.go
}

// startClusterNode starts one cluster node. Its cluster bus gets a port of
// its own (the default, port+10000, may not exist); if that port is taken
// before the node binds it, the start is retried with a fresh one.
func startClusterNode(t testing.TB, bin string, o redisOptions) (*RedisServer, error) {
	base := []string{
		"cluster-enabled yes",
		"cluster-config-file nodes.conf",
		"cluster-node-timeout " + strconv.Itoa(clusterNodeTimeout),
		"cluster-require-full-coverage no",
		"cluster-allow-replica-migration no",
		// A replica syncs at once rather than waiting 5s for others.
		"repl-diskless-sync-delay 0",
	}
	if o.password != "" {
		base = append(base, "masterauth "+confQuote(o.password))
	}
	var err error
	for range startAttempts {
		var bus int
		if bus, err = freePort(); err != nil {
			return nil, err
		}
		no := o
		no.lines = slices.Concat(base, []string{"cluster-port " + strconv.Itoa(bus)}, o.lines)
		var s *RedisServer
		if s, err = startServer(t, bin, no); err == nil {
			return s, nil
		}
		if !errors.Is(err, errBind) {
			return nil, err
		}
	}
	return nil, err
}

// awaitSettled polls check until it reports success (a nil error), ctx ends or
// settleTimeout passes. On failure the error names what was awaited, the
// last complaint and the log tail of the server check blamed.
func awaitSettled(ctx context.Context, what string, check func(context.Context) (*RedisServer, error)) error {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	start := time.Now()
	for {
		callCtx, callCancel := context.WithTimeout(ctx, checkTimeout)
		s, err := check(callCtx)
		callCancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("testutil: waited %v for %s: %v", time.Since(start).Round(time.Millisecond), what, err)
			if s != nil {
				msg += "; log tail of " + s.Addr() + ":\n" + s.logTail()
			}
			return errors.New(msg)
		case <-time.After(pollInterval):
		}
	}
}

// clusterNodeEntry is one line of CLUSTER NODES.
type clusterNodeEntry struct {
	id     string
	flags  []string
	master string   // the master's ID for a replica, "-" for a master
	slots  []string // slot ranges as listed, such as "0-5460" or "7"
}

func (e clusterNodeEntry) has(flag string) bool { return slices.Contains(e.flags, flag) }

// parseClusterNodes parses a CLUSTER NODES reply, by node ID.
func parseClusterNodes(reply string) map[string]clusterNodeEntry {
	nodes := map[string]clusterNodeEntry{}
	for _, l := range strings.Split(reply, "\n") {
		f := strings.Fields(l)
		if len(f) < 8 {
			continue
		}
		nodes[f[0]] = clusterNodeEntry{
			id:     f[0],
			flags:  strings.Split(f[2], ","),
			master: f[3],
			slots:  f[8:],
		}
	}
	return nodes
}

// slotRange renders lo..hi as CLUSTER NODES lists it.
func slotRange(lo, hi int) string {
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return strconv.Itoa(lo) + "-" + strconv.Itoa(hi)
}

// healthCheck returns an awaitSettled check that the cluster is healthy as seen
// by every running node that is not paused: cluster_state:ok with all
// slots assigned and served, every node known and none of the running ones
// suspected, each shard's slots owned by one of its own servers (want[i],
// if set) in every node's view, and every other running server of the
// shard a replica of that owner with its link up. Once it is, the check
// records the owners as the shards' masters.
func (c *Cluster) healthCheck(want map[int]*RedisServer) func(context.Context) (*RedisServer, error) {
	return func(ctx context.Context) (*RedisServer, error) {
		owners, err := c.checkHealthy(ctx, want)
		if err != nil {
			return blame(err)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, sh := range c.shards {
			j := slices.Index(sh.servers, owners[i])
			sh.servers[0], sh.servers[j] = sh.servers[j], sh.servers[0]
		}
		return nil, nil
	}
}

// nodeError is a complaint about one node, nil for none.
type nodeError struct {
	s   *RedisServer
	err error
}

func (e *nodeError) Error() string { return e.err.Error() }

// blame splits err into an awaitSettled check's results: the server a
// *nodeError names, and the error.
func blame(err error) (*RedisServer, error) {
	var ne *nodeError
	if errors.As(err, &ne) {
		return ne.s, err
	}
	return nil, err
}

func complain(s *RedisServer, format string, args ...any) error {
	return &nodeError{s: s, err: fmt.Errorf(format, args...)}
}

// checkHealthy checks once what healthCheck checks and returns each
// shard's owner. Its error, if not nil, is a *nodeError.
func (c *Cluster) checkHealthy(ctx context.Context, want map[int]*RedisServer) ([]*RedisServer, error) {
	var live []*RedisServer
	for _, s := range c.all {
		if s.Running() && !s.Paused() {
			live = append(live, s)
		}
	}
	owners := make([]*RedisServer, len(c.shards))
	for _, s := range live {
		info, err := s.Do(ctx, "CLUSTER", "INFO").Text()
		if err != nil {
			return nil, complain(s, "CLUSTER INFO on %s: %w", s.Addr(), err)
		}
		for field, v := range map[string]string{
			"cluster_state":          "ok",
			"cluster_slots_assigned": strconv.Itoa(clusterSlots),
			"cluster_slots_ok":       strconv.Itoa(clusterSlots),
			"cluster_known_nodes":    strconv.Itoa(len(c.all)),
		} {
			if got, _ := infoField(info, field); got != v {
				return nil, complain(s, "%s reports %s:%s, want %s", s.Addr(), field, got, v)
			}
		}
		reply, err := s.Do(ctx, "CLUSTER", "NODES").Text()
		if err != nil {
			return nil, complain(s, "CLUSTER NODES on %s: %w", s.Addr(), err)
		}
		view := parseClusterNodes(reply)
		for _, o := range live {
			e := view[c.ids[o]]
			if e.has("fail") || e.has("fail?") {
				return nil, complain(o, "%s sees %s as %s", s.Addr(), o.Addr(), strings.Join(e.flags, ","))
			}
		}
		for i, sh := range c.shards {
			var owner *RedisServer
			for _, o := range sh.servers {
				if e := view[c.ids[o]]; e.has("master") && slices.Contains(e.slots, slotRange(sh.lo, sh.hi)) {
					owner = o
				}
			}
			switch {
			case owner == nil:
				return nil, complain(s, "%s sees no server of shard %d owning slots %s", s.Addr(), i, slotRange(sh.lo, sh.hi))
			case want[i] != nil && owner != want[i]:
				return nil, complain(want[i], "%s sees %s, not %s, owning shard %d", s.Addr(), owner.Addr(), want[i].Addr(), i)
			case owners[i] != nil && owner != owners[i]:
				return nil, complain(s, "nodes disagree on the owner of shard %d: %s or %s", i, owners[i].Addr(), owner.Addr())
			}
			owners[i] = owner
			for _, r := range sh.servers {
				if r == owner || !slices.Contains(live, r) {
					continue
				}
				if e := view[c.ids[r]]; !e.has("slave") || e.master != c.ids[owner] {
					return nil, complain(r, "%s does not see %s as a replica of %s", s.Addr(), r.Addr(), owner.Addr())
				}
			}
		}
	}
	for i, sh := range c.shards {
		for _, s := range sh.servers {
			if !slices.Contains(live, s) {
				continue
			}
			info, err := s.Do(ctx, "INFO", "replication").Text()
			if err != nil {
				return nil, complain(s, "INFO replication on %s: %w", s.Addr(), err)
			}
			role, _ := infoField(info, "role")
			if s == owners[i] {
				if role != "master" {
					return nil, complain(s, "%s owns shard %d but reports role:%s", s.Addr(), i, role)
				}
				continue
			}
			link, _ := infoField(info, "master_link_status")
			port, _ := infoField(info, "master_port")
			if role != "slave" || port != strconv.Itoa(owners[i].Port()) || link != "up" {
				return nil, complain(s, "%s reports role:%s master_port:%s master_link_status:%s, want a replica of %s with its link up",
					s.Addr(), role, port, link, owners[i].Addr())
			}
		}
	}
	return owners, nil
}

// Len returns the number of shards.
func (c *Cluster) Len() int { return len(c.shards) }

// shard returns shard i; it panics if i is out of range.
func (c *Cluster) shard(i int) *clusterShard {
	if i < 0 || i >= len(c.shards) {
		panic(fmt.Sprintf("testutil: shard %d out of range [0,%d)", i, len(c.shards)))
	}
	return c.shards[i]
}

// Shard returns the master of shard i as last recorded: the one StartCluster
// made, or the one a later Failover or RestartShard of that shard found
// owning its slots. A failover the cluster makes on its own (after
// KillShard of a shard with a replica) is recorded by the next Failover or
// RestartShard of the shard. Shard panics if i is out of range.
func (c *Cluster) Shard(i int) *RedisServer {
	sh := c.shard(i)
	c.mu.Lock()
	defer c.mu.Unlock()
	return sh.servers[0]
}

// Replica returns a replica of shard i as last recorded (the first one,
// with several), or nil if the shard has none. It panics if i is out of
// range.
func (c *Cluster) Replica(i int) *RedisServer {
	sh := c.shard(i)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(sh.servers) < 2 {
		return nil
	}
	return sh.servers[1]
}

// Servers returns every node of the cluster, masters and replicas, in a
// new slice: first the shards' original masters in shard order, then their
// original replicas.
func (c *Cluster) Servers() []*RedisServer { return slices.Clone(c.all) }

// Seeds returns the host:port of every shard's master (see Shard), in
// shard order.
func (c *Cluster) Seeds() []string {
	seeds := make([]string, len(c.shards))
	for i := range c.shards {
		seeds[i] = c.Shard(i).Addr()
	}
	return seeds
}

// URL returns the cluster's redis+cluster:// URL: the first seed as host,
// the others as addr query parameters, and the password (WithPassword) in
// the user info, as in
// redis+cluster://:pw@127.0.0.1:P1?addr=127.0.0.1:P2&addr=127.0.0.1:P3.
func (c *Cluster) URL() string {
	seeds := c.Seeds()
	u := url.URL{Scheme: "redis+cluster", Host: seeds[0]}
	if c.password != "" {
		u.User = url.UserPassword("", c.password)
	}
	q := make([]string, 0, len(seeds)-1)
	for _, a := range seeds[1:] {
		q = append(q, "addr="+a)
	}
	u.RawQuery = strings.Join(q, "&")
	return u.String()
}

// Client returns a new go-redis cluster client seeded with every node, with
// 500ms dial, read and write timeouts, one dial attempt and no retries
// beyond following MOVED and ASK redirections (up to 3), so a dead shard
// costs a fast error; the cluster closes it at cleanup. Failover and
// RestartShard ask every such client to reload its slot map.
func (c *Cluster) Client() *redis.ClusterClient {
	addrs := make([]string, len(c.all))
	for i, s := range c.all {
		addrs[i] = s.Addr()
	}
	cl := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 addrs,
		Password:              c.password,
		DialTimeout:           redisTimeout,
		ReadTimeout:           redisTimeout,
		WriteTimeout:          redisTimeout,
		PoolTimeout:           redisTimeout,
		DialerRetries:         1,
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
		MaintNotificationsConfig: &maintnotifications.Config{
			Mode: maintnotifications.ModeDisabled,
		},
	})
	return c.clients.add(cl)
}

// reloadClients asks every client handed out to reload its slot map.
func (c *Cluster) reloadClients(ctx context.Context) {
	for _, cl := range c.clients.all() {
		cl.ReloadState(ctx)
	}
}

// KillShard SIGKILLs the master of shard i (see Shard) and waits until the
// process is gone. The shard's keys then fail, unless the shard has a
// replica and fails over (by itself, after about two node timeouts, or at
// once with Failover). It panics if i is out of range.
func (c *Cluster) KillShard(i int) error {
	return c.Shard(i).Kill()
}

// RestartShard brings shard i back after KillShard: it restarts every
// server of the shard that is not running (whichever role the shard
// recorded for it), or, if all are running, crashes and restarts its
// master. A server restarts on the same port and directory, so it comes back
// with its data and its cluster identity. RestartShard then waits until the
// cluster is healthy again as StartCluster's return promises (at most 30s)
// and records the roles it finds: if a replica took over the shard
// meanwhile, the restarted server has rejoined as its replica. Clients from
// Client reload their slot maps. It panics if i is out of range.
func (c *Cluster) RestartShard(i int) error {
	sh := c.shard(i)
	c.mu.Lock()
	servers := slices.Clone(sh.servers)
	c.mu.Unlock()
	var down []*RedisServer
	for _, s := range servers {
		if !s.Running() {
			down = append(down, s)
		}
	}
	if len(down) == 0 {
		down = servers[:1]
	}
	for _, s := range down {
		if err := s.Restart(); err != nil {
			return err
		}
	}
	ctx := context.Background()
	if err := awaitSettled(ctx, fmt.Sprintf("the cluster to heal after restarting shard %d", i), c.healthCheck(nil)); err != nil {
		return err
	}
	c.reloadClients(ctx)
	return nil
}

// Failover promotes Replica(i) to master of shard i: CLUSTER FAILOVER on
// the replica, or CLUSTER FAILOVER FORCE if the master is not running or is
// paused (or a graceful failover has not completed within 10s). If the
// replica is already master (the cluster failed over by itself), no command
// is sent. Failover returns once the replica reports role:master and the
// cluster is healthy with it owning the shard's slots (see StartCluster),
// so the old master, if running, is then its replica; Shard(i) and
// Replica(i) swap, and clients from Client reload their slot maps. The wait
// ends with an error after 30s or when ctx ends. Failover fails at once if
// the shard has no replica, and panics if i is out of range.
func (c *Cluster) Failover(ctx context.Context, i int) error {
	master, rep := c.Shard(i), c.Replica(i)
	if rep == nil {
		return fmt.Errorf("testutil: shard %d has no replica to fail over to", i)
	}
	if !rep.Running() || rep.Paused() {
		return fmt.Errorf("testutil: shard %d's replica %s is not running or is paused", i, rep.Addr())
	}
	force := !master.Running() || master.Paused()
	var sent time.Time
	err := awaitSettled(ctx, fmt.Sprintf("%s to become master of shard %d", rep.Addr(), i), func(ctx context.Context) (*RedisServer, error) {
		info, err := rep.Do(ctx, "INFO", "replication").Text()
		if err != nil {
			return rep, err
		}
		if role, _ := infoField(info, "role"); role == "master" {
			return nil, nil
		}
		switch {
		case sent.IsZero():
		case !force && time.Since(sent) > 10*time.Second:
			force = true
		default:
			return rep, fmt.Errorf("%s still reports role:slave", rep.Addr())
		}
		args := []any{"CLUSTER", "FAILOVER"}
		if force {
			args = append(args, "FORCE")
		}
		// A replica promoted meanwhile refuses; the next check sees it. A
		// replica that sees its master failed asks for FORCE.
		if err := rep.Do(ctx, args...).Err(); err != nil && !strings.Contains(err.Error(), "replica") {
			if strings.Contains(err.Error(), "FORCE") {
				force = true
			}
			return rep, fmt.Errorf("%v on %s: %w", args, rep.Addr(), err)
		}
		sent = time.Now()
		return rep, fmt.Errorf("%v sent to %s", args, rep.Addr())
	})
	if err != nil {
		return err
	}
	what := fmt.Sprintf("the cluster to settle with %s as master of shard %d", rep.Addr(), i)
	if err := awaitSettled(ctx, what, c.healthCheck(map[int]*RedisServer{i: rep})); err != nil {
		return err
	}
	c.reloadClients(ctx)
	return nil
}

// ShardForKey returns the shard that owns key's hash slot, which Redis
// Cluster computes as CRC16 (XMODEM) of the key, or of its hash tag (the
// part between the first "{" and the next "}", if not empty), modulo 16384.
func (c *Cluster) ShardForKey(key string) int {
	slot := KeySlot(key)
	for i, sh := range c.shards {
		if slot >= sh.lo && slot <= sh.hi {
			return i
		}
	}
	panic("testutil: slot " + strconv.Itoa(slot) + " has no shard")
}

// KeySlot returns the Redis Cluster hash slot of key, as CLUSTER KEYSLOT
// does: CRC16 (XMODEM) of the key, or of its hash tag when it has one,
// modulo 16384.
func KeySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16XMODEM([]byte(key)) % clusterSlots)
}

// crc16XMODEM is CRC-16 with polynomial 0x1021, initial value 0 and no
// reflection, computed bit by bit.
func crc16XMODEM(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
