package testutil

import (
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
)

const (
	// miniTimeout bounds dials, reads and writes of clients to miniredis
	// servers, which answer in microseconds when they answer at all.
	miniTimeout = 5 * time.Second
	// redisTimeout bounds dials, reads and writes of clients to real
	// redis-server processes.
	redisTimeout = 500 * time.Millisecond
)

// FastFailOptions returns client options under which a dead, paused or
// failing server costs one short timeout at most: a single dial attempt, no
// command retries, and socket deadlines that follow the caller's context.
// Tests that build their own clients to test servers (through a proxy,
// from another address) start from these.
func FastFailOptions(addr, password string, timeout time.Duration) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		Password:              password,
		DialTimeout:           timeout,
		ReadTimeout:           timeout,
		WriteTimeout:          timeout,
		PoolTimeout:           timeout,
		DialerRetries:         1,
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
		MaintNotificationsConfig: &maintnotifications.Config{
			Mode: maintnotifications.ModeDisabled,
		},
	}
}

// clientSet tracks the clients (of type C) handed out by a cluster or
// server so that the test's cleanup can close them all.
type clientSet[C interface{ Close() error }] struct {
	mu      sync.Mutex
	clients []C
	closed  bool
}

// add registers c for closing at cleanup. After cleanup, c is closed at
// once, so nothing opened late outlives the test.
func (s *clientSet[C]) add(c C) C {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close()
		return c
	}
	s.clients = append(s.clients, c)
	return c
}

// closeAll closes every registered client. Errors are ignored: a client the
// test closed itself reports redis.ErrClosed, which is fine.
func (s *clientSet[C]) closeAll() {
	s.mu.Lock()
	clients := s.clients
	s.clients = nil
	s.closed = true
	s.mu.Unlock()
	for _, c := range clients {
		_ = c.Close()
	}
}

// all returns the clients registered so far.
func (s *clientSet[C]) all() []C {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.clients)
}

// nodeOptions turns a client's options into a redlock node's: RESP2, as
// redisnode.Dial's clients speak unless told otherwise.
func nodeOptions(o *redis.Options) *redis.Options {
	o.Protocol = 2
	return o
}

// newNode wraps c in a redlock node.
func newNode(c *redis.Client) redlock.Node { return redisnode.New(c) }
