package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/e6344662/go-redlock/fencing"
)

// Waiting reports how many of l's Acquire calls wait for resource.
func Waiting(l *Locker, resource string) int {
	l.hub.mu.Lock()
	defer l.hub.mu.Unlock()
	if kw := l.hub.keys[l.Key(resource)]; kw != nil {
		return len(kw.queue)
	}
	return 0
}

// Grant is a node's answer to an acquire, for tests of the scripts.
type Grant = grant

// NodeAcquire runs the acquire script on n, without a place in the queue,
// with the marker of n's db and the data-loss rule's delay off (nothing
// is waited; the rule's checks apply).
func NodeAcquire(ctx context.Context, n Node, key, token, owner string, ttl time.Duration) (Grant, error) {
	g := grantGate{trust: []any{"-1"}, db: nodeDB(n)}
	return acquire(ctx, n, acquireArgs{keys: g.withMarker(lockKeys(key), key), token: token, owner: owner, ttl: ttl, trust: g.trust})
}

// NodeFence runs the fence script on n.
func NodeFence(ctx context.Context, n Node, key, token string, f fencing.Token) (bool, error) {
	return fence(ctx, n, lockKeys(key), token, f, "1000000")
}

// NodeRenew runs the renew script on n.
func NodeRenew(ctx context.Context, n Node, key, token string, ttl time.Duration) (bool, error) {
	return renew(ctx, n, lockKeys(key), token, ttl, "1000000")
}

// NodeRelease runs the release script on n, without a hand-over.
func NodeRelease(ctx context.Context, n Node, key, token string) (bool, error) {
	r, err := release(ctx, n, releaseArgs{keys: lockKeys(key), token: token})
	return r.released, err
}

// NodeInspect runs the inspect script on n.
func NodeInspect(ctx context.Context, n Node, key string) (LockInfo, error) {
	return inspect(ctx, n, lockKeys(key))
}

// NewTestNode returns a Node on the server at addr (a redisnode.Node over a
// go-redis client). The package's internal tests cannot import redisnode,
// which imports redlock: the external tests set it (main_test.go).
var NewTestNode func(addr string) Node

// testNode returns NewTestNode(addr), closed when t ends.
func testNode(t testing.TB, addr string) Node {
	t.Helper()
	if NewTestNode == nil {
		t.Fatal("redlock.NewTestNode is not set (main_test.go sets it)")
	}
	n := NewTestNode(addr)
	t.Cleanup(func() {
		if c, ok := n.(interface{ Close() error }); ok {
			_ = c.Close()
		}
	})
	return n
}
