package redlock

import (
	"context"
	"time"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/scripts"
)

// Node is one independent Redis deployment taking part in the quorum: a
// server, a Redis Cluster, or a Sentinel-managed primary. Package
// redlock/redisnode implements it over go-redis (redisnode.New, and
// redisnode.Dial from URLs); module rueidisnode over rueidis; docs/library.md
// shows how to write one over another client.
//
// The Node is only a transport: it runs the lock scripts of package
// scripts, reports its server's uptime and carries release announcements.
// Every rule of the protocol (the quorum, fencing, the rejoin rule, the
// wait queue) is the Locker's, written once over these methods, so a
// Node wrapped by its user (metrics, tracing, fault injection: a struct that
// embeds Node and overrides some methods) keeps every rule: the Locker sees
// only what the wrapper forwards. The contract names no Redis client's
// types, and package redlock imports no Redis client: a Node can be
// written, or wrapped, over any client (or none). Implementations must be safe for
// concurrent use, and every call must return by its context's deadline or
// soon after (the Locker counts a call that does not as failed).
type Node interface {
	// Addr names the node in errors and logs. It never contains a password.
	Addr() string
	// Eval runs script on the node with keys (KEYS) and args (ARGV), as
	// EVALSHA script.Hash() does, falling back to EVAL script.Source() when
	// the server's script cache lacks the script, and returns its reply.
	// The Locker passes args of the types string, int and int64, to be sent
	// as their text (the integers in decimal). It expects the reply decoded
	// from RESP as follows: int64 for an integer, string for a bulk or
	// status string, []any for an array (its elements decoded the same
	// way, nil for a nil bulk string). A server's error reply must come
	// back as an error with a RedisError() method (go-redis's redis.Error
	// and rueidisnode's Error have one) whose Error() is the server's text
	// ("WRONGTYPE ...", "READONLY ...", "OOM ...", "FENCEEXHAUSTED ...",
	// "NOPERM ..."): by these the Locker tells a refusal from a lost
	// connection, by the text's prefix alone. Any other error means the
	// outcome on the node is unknown: the script may still have run.
	Eval(ctx context.Context, script *scripts.Script, keys []string, args ...any) (any, error)
	// Uptime reports since when the node's server has held its current
	// data and what may make it lose data, for the rejoin rule
	// (Config.RejoinDelay). An error means the state is unknown: the node
	// is then not trusted to grant.
	Uptime(ctx context.Context) (Uptime, error)
	// Subscribe opens a subscription that calls onMessage with the lock key
	// and the message of every announcement on a watched key's release
	// channel (key + ":released"), and with an empty message when
	// announcements of the key may have been missed (the subscription was
	// cut and is back). onMessage must not block. A node that announces
	// nothing returns nil: its waiters then rely on the backoff.
	Subscribe(onMessage func(key, msg string)) Subscription
}

// NodeBounded is an optional interface of a Node: BoundedByContext reports
// that every call returns by its context's deadline (the client bounds its
// reads and writes by it). A Locker whose only node says so calls it in
// the caller's goroutine; any other node is called on a worker, so that a
// call that ignores its deadline never holds the caller up.
type NodeBounded interface {
	BoundedByContext() bool
}

// Uptime is what a node knows of its server's data (Node.Uptime). The
// Locker uses Sharded (where the markers live) and Uptime's error (a node
// that may evict any key is not counted on); the other fields are
// diagnostics (doctor, status). No safety rule rests on them: every script
// that can grant judges the node's data itself, in band (docs/design.md
// §6.2), so a Node that reports Uptime{} keeps every rule.
type Uptime struct {
	// Since is when the server (for a cluster: its latest started primary)
	// started, on this process's clock; zero when the node does not say (a
	// stand-in such as miniredis, or a Node that does not read it).
	Since time.Time
	// BootMicros is the same instant in microseconds on the server's own
	// clock; 0 when unknown.
	BootMicros int64
	// Durable reports appendonly yes with appendfsync always on every
	// server (a restart still sits out the rejoin delay: design §6.2).
	Durable bool
	// Conns counts the connections the node has opened so far: a grant
	// made while it changed may come from a server that restarted.
	Conns uint64
	// Servers names the server processes holding the node's data (INFO
	// run_id; for a cluster, every primary's, separated by spaces); empty
	// when unknown: the node's scripts then read it themselves.
	Servers string
	// Sharded reports that the node spreads keys over several servers by
	// hash slot (Redis Cluster): it keeps one marker per slot instead of
	// one per server (docs/design.md, section 6.2).
	Sharded bool
	// MayEvict reports that a server of the node may evict keys
	// (maxmemory with a policy other than noeviction, or a configuration
	// it does not let us read).
	MayEvict bool
}

// Subscription is a Node's open subscription to release announcements.
type Subscription interface {
	// Watch starts announcing releases of key. A nil error means the key
	// stays watched, across reconnections, until Unwatch.
	Watch(ctx context.Context, key string) error
	// Unwatch stops announcing releases of key.
	Unwatch(ctx context.Context, key string) error
	// Close ends the subscription and waits for its goroutines to stop.
	// Closing it again returns nil.
	Close() error
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
