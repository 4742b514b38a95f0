package redisnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/redlock"
)

// upState is what a Node learned of its server's data: since when it
// has held it (on this process's monotonic clock) and whether it survives a
// restart.
type upState struct {
	// checked is false for a server that does not report its uptime (a
	// stand-in): the rejoin rule does not apply to it.
	checked bool
	// err is why the state is unknown (the node is then not yet safe).
	err error
	// since is when the server started, as learned from its uptime (whole
	// seconds, rounded so that it is never earlier than the real start).
	since time.Time
	// durable reports appendonly yes with appendfsync always.
	durable bool
	// bootUS is when the server (the latest started primary of a cluster)
	// started, in microseconds on its own clock; 0 if unknown.
	bootUS int64
	// servers are the run_ids of the servers (every primary of a cluster),
	// space-separated; mayEvict reports that one of them may evict keys.
	servers  string
	mayEvict bool
	sharded  bool
	// allKeys names a server whose maxmemory-policy is allkeys-* with a
	// maxmemory set ("" for none): Uptime then fails with ErrEvictsLocks.
	allKeys string
	// dials is the dial count when the state was learned, and at the time
	// (monotonic).
	dials uint64
	at    time.Time
}

// relearnAfter is how long a node trusts what it learned of its servers'
// configuration: a maxmemory policy changed at runtime to allkeys-* is
// noticed this soon (the one eviction case the data-loss rule does not
// cover while a lease is live: docs/design.md §6.2).
const relearnAfter = 5 * time.Second

// rejoinState is a Node's knowledge of its server's uptime.
type rejoinState struct {
	dials atomic.Uint64
	stale atomic.Bool
	mu    sync.Mutex // one refresh at a time
	last  atomic.Pointer[upState]
	// configRefused is set once CONFIG GET was refused (ACL).
	configRefused atomic.Bool
}

// dialHook counts the connections a client opens.
type dialHook struct{ n *atomic.Uint64 }

func (h dialHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err == nil {
			h.n.Add(1)
		}
		return c, err
	}
}
func (h dialHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h dialHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// watchDials makes the node count the connections its client opens.
func (n *Node) watchDials() {
	h := dialHook{&n.rejoin.dials}
	switch c := n.client.(type) {
	case *redis.Client:
		c.AddHook(h)
	case *redis.ClusterClient:
		c.OnNewNode(func(c *redis.Client) { c.AddHook(h) })
	}
}

// fresh returns the state last learned, if no connection was opened and
// nothing went wrong since.
func (r *rejoinState) fresh() (upState, bool) {
	st := r.last.Load()
	if st == nil || st.err != nil || st.dials != r.dials.Load() || r.stale.Load() || time.Since(st.at) > relearnAfter {
		return upState{}, false
	}
	return *st, true
}

// Uptime implements redlock.Node: INFO server (on every primary of a cluster) and
// CONFIG GET append* and maxmemory*, learned once and again after the node
// opened a connection, a call failed, or 5 seconds passed (relearnAfter). A server
// that does not implement INFO server (a stand-in) reports a zero Since;
// an ACL that refuses INFO is an error, and so is a server with a
// maxmemory and a maxmemory-policy allkeys-* (redlock.ErrEvictsLocks). The
// data-loss rule itself runs in the scripts (scripts/trust.lua); the rest
// is for diagnostics and the marker's sharding.
func (n *Node) Uptime(ctx context.Context) (redlock.Uptime, error) {
	st := n.upState(ctx)
	if st.allKeys != "" {
		return redlock.Uptime{}, fmt.Errorf("%w: %s", redlock.ErrEvictsLocks, st.allKeys)
	}
	if !st.checked {
		return redlock.Uptime{Conns: st.dials}, nil
	}
	if st.err != nil {
		return redlock.Uptime{}, st.err
	}
	return redlock.Uptime{Since: st.since, BootMicros: st.bootUS, Durable: st.durable, Conns: st.dials,
		Servers: st.servers, Sharded: st.sharded, MayEvict: st.mayEvict}, nil
}

func (n *Node) upState(ctx context.Context) upState {
	r := &n.rejoin
	if st, ok := r.fresh(); ok {
		return st
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, ok := r.fresh(); ok {
		return st // learned by another caller meanwhile
	}
	r.stale.Store(false)
	st := upState{checked: true, dials: r.dials.Load(), at: time.Now()}
	servers := n.servers(ctx, &st)
	st.durable = len(servers) > 0
	answered := 0
	var failed error
	var runIDs []string
	for _, c := range servers {
		s, err := learnServer(ctx, c, &r.configRefused)
		switch {
		case err != nil && !isAuthError(err):
			failed = err // a primary down or loading cannot grant anyway
			continue
		case err != nil:
			st.err = err
		case !s.checked:
			st.checked = false
		}
		answered++
		st.add(s)
		if s.runID != "" {
			runIDs = append(runIDs, s.runID)
		}
	}
	if len(runIDs) == len(servers) {
		st.servers = strings.Join(runIDs, " ")
	}
	if answered == 0 && st.err == nil {
		st.err = failed
	}
	r.last.Store(&st)
	return st
}

// servers returns the servers holding the node's data: its client's, or
// every primary of a cluster (st is then sharded, and fails when none
// answered).
func (n *Node) servers(ctx context.Context, st *upState) []redis.Cmdable {
	cc, ok := n.client.(*redis.ClusterClient)
	if !ok {
		return []redis.Cmdable{n.client}
	}
	st.sharded = true
	var servers []redis.Cmdable
	var mu sync.Mutex
	_ = cc.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
		mu.Lock()
		servers = append(servers, m)
		mu.Unlock()
		return nil
	})
	if len(servers) == 0 {
		st.err = errors.New("no cluster primary answered")
	}
	return servers
}

// add merges what one more server of the node said: the latest start, the
// least durability, any eviction.
func (st *upState) add(s serverState) {
	if s.since.After(st.since) {
		st.since = s.since
	}
	st.bootUS = max(st.bootUS, s.bootUS)
	st.durable = st.durable && s.durable
	st.mayEvict = st.mayEvict || s.mayEvict
	if s.allKeys != "" && st.allKeys == "" {
		st.allKeys = s.allKeys
	}
}

// serverState is what one server says of its data: learnServer.
type serverState struct {
	// checked is false when the server does not implement INFO server (a
	// stand-in).
	checked bool
	since   time.Time
	bootUS  int64
	// durable reports appendonly yes with appendfsync always; mayEvict a
	// maxmemory with an evicting policy (or a configuration we may not
	// read).
	durable, mayEvict bool
	runID             string
	// allKeys describes a maxmemory-policy allkeys-* with a maxmemory set
	// ("" otherwise, or when the configuration may not be read).
	allKeys string
}

// learnServer reads one server's uptime and run_id (INFO server) and
// configuration (CONFIG GET append* and maxmemory*, which an ACL may
// refuse: the server then counts as not durable and as evicting). A node
// asks for the configuration until it was refused once (refused).
func learnServer(ctx context.Context, c redis.Cmdable, refused *atomic.Bool) (serverState, error) {
	info, err := c.Info(ctx, "server").Result()
	answered := time.Now()
	var rerr redis.Error
	if errors.As(err, &rerr) && !isAuthError(err) && !strings.HasPrefix(rerr.Error(), "LOADING") {
		return serverState{}, nil
	}
	if err != nil {
		return serverState{checked: true}, err
	}
	up, perr := strconv.ParseInt(infoField(info, "uptime_in_seconds"), 10, 64)
	if perr != nil || up < 0 {
		return serverState{}, nil
	}
	s := serverState{checked: true, runID: infoField(info, "run_id"), mayEvict: true}
	if now, err := strconv.ParseInt(infoField(info, "server_time_usec"), 10, 64); err == nil {
		s.bootUS = now - up*1e6 // rounded up to the second with uptime: not earlier than the start
	}
	// uptime_in_seconds is whole seconds, rounded down, read before the
	// answer came back: the server started at the latest up seconds before
	// the answer, which is what the delay is counted from.
	s.since = answered.Add(-time.Duration(up) * time.Second)
	if !refused.Load() {
		learnConfig(ctx, c, refused, &s)
	}
	return s, nil
}

// learnConfig reads a server's persistence and eviction configuration
// (CONFIG GET append* and maxmemory*) into s; an ACL that refuses it sets
// refused, and s stays not durable and evicting.
func learnConfig(ctx context.Context, c redis.Cmdable, refused *atomic.Bool, s *serverState) {
	aof, err := c.ConfigGet(ctx, "append*").Result()
	if err == nil {
		var mem map[string]string
		mem, err = c.ConfigGet(ctx, "maxmemory*").Result()
		s.durable = aof["appendonly"] == "yes" && aof["appendfsync"] == "always"
		s.mayEvict = err != nil || mem["maxmemory"] != "0" && mem["maxmemory-policy"] != "noeviction"
		if p := mem["maxmemory-policy"]; err == nil && mem["maxmemory"] != "0" && strings.HasPrefix(p, "allkeys-") {
			s.allKeys = fmt.Sprintf("maxmemory %s with maxmemory-policy %s: set noeviction or a volatile-* policy", mem["maxmemory"], p)
		}
	}
	if isAuthError(err) {
		refused.Store(true)
	}
}

// DB implements redlock.NodeDB: the db the node's client selects (0 for a Redis
// Cluster or a client that does not say), which the data-loss rule's
// marker key names.
func (n *Node) DB() int {
	switch c := n.client.(type) {
	case *redis.Client:
		return c.Options().DB
	case *redis.Ring:
		return c.Options().DB
	}
	return 0
}

// isAuthError reports whether err is the server refusing our credentials or
// permissions (NOPERM, WRONGPASS, NOAUTH): retrying will not help.
func isAuthError(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	return strings.HasPrefix(msg, "NOPERM") || strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, "NOAUTH")
}
