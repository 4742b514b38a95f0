package redlock

import (
	"context"
	"time"

	"github.com/e6344662/go-redlock/fencing"
)

// Node is one independent Redis server (or one Redis Cluster, or one
// Sentinel-managed primary) taking part in the quorum.
//
// Each call is a single attempt. A nil error with a negative answer means the
// node refused; a non-nil error means the outcome on the node is unknown (the
// command may still have been applied). Errors must never hold a lock token:
// they reach logs and Observers. Keys are lock keys as built by the Locker
// (KeyPrefix + "{" + resource + "}"); a node derives the fence key (key +
// ":fence") and the release channel (key + ":released") from it.
// Implementations must be safe for concurrent use.
type Node interface {
	// Addr names the node in errors and logs. It never contains a password.
	Addr() string
	// Acquire sets key to token (with the owner label) for ttl if key is free,
	// and then increments the key's fence counter.
	Acquire(ctx context.Context, key, token, owner string, ttl time.Duration) (Grant, error)
	// Fence raises the key's fence counter to at least f, only if token holds
	// key on this node; it reports whether token holds key.
	Fence(ctx context.Context, key, token string, f fencing.Token) (bool, error)
	// Renew extends key to ttl if token holds it; it never re-creates an
	// expired lock. It reports whether token held key.
	Renew(ctx context.Context, key, token string, ttl time.Duration) (bool, error)
	// Release deletes key if token holds it, and then announces the release
	// to waiters (Notifier) if the node can. It reports whether token held
	// key.
	Release(ctx context.Context, key, token string) (bool, error)
	// Inspect reads the state of key without changing it.
	Inspect(ctx context.Context, key string) (LockInfo, error)
}

// Grant is a node's answer to an acquire.
type Grant struct {
	// OK reports whether the node granted the lock.
	OK bool
	// Counter is the node's fence counter after the grant (when OK).
	Counter fencing.Token
	// HolderTTL is the current holder's remaining time on this node (when not
	// OK); negative when the lock key has no expiry.
	HolderTTL time.Duration
	// Reason says why the node refused when it was not because of a holder:
	// RedisNode sets it when the lock is free but an earlier waiter is next
	// in its wait queue. A node that cannot grant (a read-only replica, a
	// node out of memory) fails with an error wrapping ErrReadOnly or
	// ErrNodeFull instead, so that the Locker can tell it from a busy lock.
	Reason string

	// ticket is the caller's place in the lock's wait queue on this node
	// (0: not queued); headLeft is how long the head's ticket has left
	// (0: the caller is the head, or no queue).
	ticket   int64
	headLeft time.Duration
	// left is what the lock had left when the caller's token already held
	// it (a client-side retry); 0 for a new grant, which lasts the full
	// lease duration. handed reports a refusal because the caller's place
	// holds the lock (a hand-over, counted with Counter).
	left   time.Duration
	handed bool
}

// LockInfo is the state of one resource on one node.
type LockInfo struct {
	// Held reports whether a lock stands on the node.
	Held bool
	// Token is the holder's token (hex), when held.
	Token string
	// Owner is the holder's owner label, when held.
	Owner string
	// TTL is the lock's remaining time to live; negative when it never
	// expires (not a redlock lock), zero when free.
	TTL time.Duration
	// Fence is the node's fence counter for the resource (zero if never
	// locked).
	Fence fencing.Token
	// Waiters counts the live places in the resource's wait queue on the
	// node: Acquire calls waiting their turn (Config.QueueTTL).
	Waiters int
}
