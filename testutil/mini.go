package testutil

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/proto"
	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/redlock"
)

// DefaultFailMessage is the error every command gets from a miniredis node
// put in failure mode with an empty message.
const DefaultFailMessage = "ERR testutil: injected failure"

// MiniCluster is a set of independent in-process miniredis servers on
// 127.0.0.1, with fault controls. Create one with NewMiniCluster; every
// method is safe for concurrent use.
//
// Miniredis keeps its data in memory whether the server is up or down, so a
// killed node comes back with everything it had (like a real server with
// AOF and appendfsync always), unless it is wiped. Its TTLs do not follow
// the wall clock unless the cluster was built WithWallClock: move them
// with FastForward.
type MiniCluster struct {
	servers []*miniServer
	clients clientSet[*redis.Client]
}

// miniServer is one node of a MiniCluster and the fault state the cluster
// put it in.
type miniServer struct {
	mu      sync.Mutex
	m       *miniredis.Miniredis
	addr    string
	up      bool
	failMsg string
}

// MiniOption configures NewMiniCluster.
type MiniOption func(*miniConfig)

type miniConfig struct {
	wallClock bool
}

// WithWallClock makes key TTLs on every node of the cluster run down with
// the wall clock (as on a real server), in addition to FastForward.
func WithWallClock() MiniOption {
	return func(c *miniConfig) { c.wallClock = true }
}

// NewMiniCluster starts n miniredis servers on free 127.0.0.1 ports and
// registers a cleanup on t that closes every client the cluster handed out
// and stops every server. It fails the test if n < 1 or a server cannot
// start.
func NewMiniCluster(t testing.TB, n int, opts ...MiniOption) *MiniCluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("testutil.NewMiniCluster: need at least one node, got %d", n)
	}
	var cfg miniConfig
	for _, o := range opts {
		o(&cfg)
	}
	c := &MiniCluster{}
	t.Cleanup(c.close)
	for i := 0; i < n; i++ {
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			t.Fatalf("testutil.NewMiniCluster: start node %d: %v", i, err)
		}
		if cfg.wallClock {
			m.ClockTTL(true)
		}
		c.servers = append(c.servers, &miniServer{m: m, addr: m.Addr(), up: true})
	}
	return c
}

// close is the cluster's cleanup: it closes the clients, then the servers.
func (c *MiniCluster) close() {
	c.clients.closeAll()
	for _, s := range c.servers {
		s.mu.Lock()
		s.m.Close()
		s.up = false
		s.mu.Unlock()
	}
}

// server returns node i, panicking with a clear message when i is out of
// range (a bug in the test).
func (c *MiniCluster) server(i int) *miniServer {
	if i < 0 || i >= len(c.servers) {
		panic(fmt.Sprintf("testutil: node %d out of range [0,%d)", i, len(c.servers)))
	}
	return c.servers[i]
}

// Len returns the number of nodes in the cluster.
func (c *MiniCluster) Len() int { return len(c.servers) }

// Server returns the miniredis server behind node i, for direct inspection
// and manipulation of its data. Use the cluster's own fault controls rather
// than the server's Close, Restart or SetError, so the cluster's bookkeeping
// stays right.
func (c *MiniCluster) Server(i int) *miniredis.Miniredis { return c.server(i).m }

// Addrs returns the host:port of every node, in node order. Addresses stay
// the same across Kill, Restart and Wipe.
func (c *MiniCluster) Addrs() []string {
	addrs := make([]string, len(c.servers))
	for i, s := range c.servers {
		addrs[i] = s.addr
	}
	return addrs
}

// URLs returns a redis:// URL for every node, in node order, as accepted by
// redisnode.Dial and the CLI.
func (c *MiniCluster) URLs() []string {
	urls := make([]string, len(c.servers))
	for i, s := range c.servers {
		urls[i] = "redis://" + s.addr
	}
	return urls
}

// Client returns a new go-redis client to node i with short timeouts and no
// retries; the cluster closes it at cleanup.
func (c *MiniCluster) Client(i int) *redis.Client {
	return c.clients.add(redis.NewClient(FastFailOptions(c.server(i).addr, "", miniTimeout)))
}

// Nodes returns one redlock node per server, in node order, each over a new
// client with 200ms dial, read and write timeouts, no retries and RESP2 (as
// redisnode.Dial's clients), so a dead or failing node costs one fast
// error. Each call returns new clients (like
// a separate process would have); the cluster closes them all at cleanup.
//
// A go-redis client that failed PoolSize dials in a row (10 per CPU) stops
// dialing for about a second, so after a long outage it may keep failing
// that long after Restart; fresh nodes from another Nodes call do not.
func (c *MiniCluster) Nodes() []redlock.Node {
	nodes := make([]redlock.Node, len(c.servers))
	for i := range c.servers {
		nodes[i] = newNode(c.clients.add(redis.NewClient(nodeOptions(FastFailOptions(c.server(i).addr, "", miniTimeout)))))
	}
	return nodes
}

// Up reports whether node i is running (not killed).
func (c *MiniCluster) Up(i int) bool {
	s := c.server(i)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.up
}

// Kill stops node i: its connections are closed and new ones are refused
// until Restart or Wipe. Its data is kept. Killing a dead node does nothing.
func (c *MiniCluster) Kill(i int) {
	s := c.server(i)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
}

func (s *miniServer) killLocked() {
	if !s.up {
		return
	}
	s.m.Close()
	s.up = false
}

// Restart starts node i again on the same address with its data preserved,
// like a real server reloading its AOF. A running node is killed first.
// The restarted node's script cache is empty (as on a real restart), so
// clients must fall back from EVALSHA to EVAL; a failure set with Fail
// stays in force. It returns an error only if the address cannot be bound
// again.
func (c *MiniCluster) Restart(i int) error {
	s := c.server(i)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
	return s.startLocked()
}

// Wipe makes node i lose everything, like a restart without persistence: it
// is killed if running, all its keys and its script cache are dropped, and
// it is started again on the same address. A failure set with Fail stays in
// force.
func (c *MiniCluster) Wipe(i int) error {
	s := c.server(i)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
	s.m.FlushAll()
	return s.startLocked()
}

// startLocked starts a stopped server on its old address, with an empty
// script cache and the failure mode already in force when the first client
// connects.
func (s *miniServer) startLocked() error {
	// With no server running, Dial starts one without a listener, so the
	// script cache is flushed before any client can reach the node.
	if err := flushScripts(s.m); err != nil {
		return fmt.Errorf("testutil: restart miniredis on %s: %w", s.addr, err)
	}
	s.m.Close()
	// Close cancels the server's context, which miniredis never renews;
	// blocking commands would return at once after a restart without this.
	s.m.Lock()
	s.m.Ctx, s.m.CtxCancel = context.WithCancel(context.Background())
	s.m.Unlock()
	// On a stopped server SetError is kept for the next start ("" clears).
	s.m.SetError(s.failMsg)
	if err := s.m.StartAddr(s.addr); err != nil {
		return fmt.Errorf("testutil: restart miniredis on %s: %w", s.addr, err)
	}
	s.up = true
	return nil
}

// flushScripts empties m's script cache through an in-memory connection.
func flushScripts(m *miniredis.Miniredis) error {
	conn, err := m.Dial()
	if err != nil {
		return err
	}
	cl := proto.NewClient(conn)
	defer func() { _ = cl.Close() }()
	if _, err := cl.Do("SCRIPT", "FLUSH"); err != nil {
		return fmt.Errorf("script flush: %w", err)
	}
	return nil
}

// Fail makes every command on node i fail with the error msg (for example
// "LOADING Redis is loading the dataset in memory"; an empty msg means
// DefaultFailMessage) until Heal, across restarts. Connections stay open.
func (c *MiniCluster) Fail(i int, msg string) {
	if msg == "" {
		msg = DefaultFailMessage
	}
	s := c.server(i)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failMsg = msg
	s.m.SetError(msg)
}

// Heal ends the failure mode set on node i with Fail.
func (c *MiniCluster) Heal(i int) {
	s := c.server(i)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failMsg = ""
	s.m.SetError("")
}

// FastForward moves time forward by d on every node, expiring keys whose
// TTL runs out. Killed nodes move too, as a real server's expiry times are
// absolute and keep running while it is down. miniredis's TIME does not
// move with it: a fence counter that expires in a fast-forward (twice the
// rejoin delay after its last grant) starts again from a clock that did
// not move, below the tokens it counted, which a real server never does.
// Keep fast-forwards past a counter's life for tests that do not compare
// tokens across them.
func (c *MiniCluster) FastForward(d time.Duration) {
	for _, s := range c.servers {
		s.mu.Lock()
		s.m.FastForward(d)
		s.mu.Unlock()
	}
}

// SetCounter sets key on node i to the decimal integer v, with no expiry,
// whether the node is up or not; for example a fence counter key such as
// "redlock:{res}:fence". It returns an error if key holds a non-string.
func (c *MiniCluster) SetCounter(i int, key string, v int64) error {
	return c.Set(i, key, strconv.FormatInt(v, 10))
}

// Set sets key on node i to the string value, with no expiry, whether the
// node is up or not. It returns an error if key holds a non-string.
func (c *MiniCluster) Set(i int, key, value string) error {
	s := c.server(i)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.Set(key, value)
}

// Get returns the string value of key on node i, whether the node is up or
// not; it returns miniredis.ErrKeyNotFound if there is no such key.
func (c *MiniCluster) Get(i int, key string) (string, error) {
	s := c.server(i)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.Get(key)
}
