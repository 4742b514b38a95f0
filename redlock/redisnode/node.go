package redisnode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/scripts"
)

// Node is a redlock.Node backed by a go-redis client: the only place where
// the Locker's calls meet go-redis. All access to lock keys goes through
// the Lua scripts of package scripts. It is safe for concurrent use.
type Node struct {
	client  redis.UniversalClient
	addr    string
	bounded bool // the client honours context deadlines
	// failover is set for a Sentinel group built by Dial: its
	// subscriptions follow the primary through failovers.
	failover *redis.FailoverOptions
	rejoin   rejoinState
	batch    *batcher
}

var (
	_ redlock.Node        = (*Node)(nil)
	_ redlock.NodeDB      = (*Node)(nil)
	_ redlock.NodeBounded = (*Node)(nil)
)

// New returns a Node that speaks to the server behind client. The
// client's own options (timeouts, TLS, pool size) apply. Whatever they are,
// a Locker never waits for a call longer than its NodeCallTimeout: each
// call runs on a worker under a context with that deadline, and a call that
// ignores it (a client with ContextTimeoutEnabled false on a dead network)
// counts as failed when the deadline passes, then finishes on its worker by
// the client's own ReadTimeout. Clients built by Dial honour the context,
// never retry a command and dial once per attempt; with go-redis's defaults
// instead, one paused node makes Renew wait up to NodeCallTimeout, Release
// 0.7-2 s and TryAcquire about twice NodeCallTimeout, and a Sentinel client
// reaches a new primary only when its connection fails (docs/library.md:
// set ContextTimeoutEnabled, MaxRetries -1, DialerRetries 1 and Protocol 2). The
// node sends its scripts with the client's Process, the keys of a call as
// *string arguments (go-redis writes them as the strings): a hook of the
// client that reads a command's Args sees them so.
func New(client redis.UniversalClient) *Node {
	n := &Node{client: client, addr: clientAddr(client), bounded: honoursContext(client), batch: newBatcher(client)}
	n.watchDials()
	return n
}

// honoursContext reports whether the client bounds its socket reads and
// writes by the context's deadline (ContextTimeoutEnabled).
func honoursContext(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// BoundedByContext implements redlock.NodeBounded: it reports whether the
// client honours its context's deadline (ContextTimeoutEnabled, set by
// Dial), so that every call returns by it. A Locker with this node alone
// then calls it in the caller's goroutine, without a hand-over to a worker.
func (n *Node) BoundedByContext() bool { return n.bounded }

// unnamedFailovers numbers the Sentinel clients given to New, whose
// options do not say which primary they follow.
var unnamedFailovers atomic.Int64

func clientAddr(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		if a := c.Options().Addr; a != "FailoverClient" {
			return a
		}
		return fmt.Sprintf("sentinel#%d", unnamedFailovers.Add(1))
	case *redis.ClusterClient:
		return "cluster(" + strings.Join(c.Options().Addrs, ",") + ")"
	case *redis.Ring:
		return "ring"
	}
	return fmt.Sprintf("%T", c)
}

// Addr returns the node's name: the server's host:port (or socket path),
// cluster(seed,...) for a Redis Cluster, sentinel(master@sentinel,...) for a
// Sentinel group dialled by Dial, and sentinel#N for a Sentinel client given
// to New (such a client does not say which primary it follows).
func (n *Node) Addr() string { return n.addr }

// Client returns the go-redis client behind the node, for commands of the
// caller's own (the node does not change what the client is sent).
func (n *Node) Client() redis.UniversalClient { return n.client }

// Close closes the underlying client: later calls fail.
func (n *Node) Close() error { return n.client.Close() }

// WithoutFunctions makes n run its scripts with EVALSHA and EVAL only,
// never as Redis Functions (no FUNCTION LOAD, no FCALL), and returns n.
// Call it before n's first use. By default a node whose client is a
// *redis.Client runs the scripts as functions where the server has them
// (Redis 7 and later) and lets the client use them (functions.go).
func (n *Node) WithoutFunctions() *Node {
	n.batch.fn.off.Store(true)
	return n
}

// UsesFunctions reports whether n's next script call goes out as an FCALL
// of the scripts' function library (scripts.Functions) rather than as an
// EVALSHA: false for a node made WithoutFunctions, one whose client is not
// a *redis.Client, one whose server turned out not to have functions
// (or not for this client: an ACL, a renamed command), and for a second
// after its server failed to load the library or refused an FCALL up
// front (a read-only replica, out of memory: functions.go).
func (n *Node) UsesFunctions() bool { return n.batch.fn.active() }

// Eval implements redlock.Node: an FCALL of the script's function in the
// scripts' library where the server has Redis Functions (loading the
// library when the server lacks it), else EVALSHA with the script's
// digest, then EVAL with its source when the server's script cache lacks
// the script (functions.go). Concurrent calls share round trips: while a few calls are in flight on the node, the
// calls that arrive meanwhile go out together as one pipeline, each with
// its own reply or error; a lone call goes out at once. Every call returns by its
// context's end, queued or in a pipeline, and at most a bounded number of
// calls are queued or in flight per node (batch.go). An acquire that fails
// for another reason than the server's error reply (the connection failed:
// the server may be restarting) makes the node learn its server's uptime
// again before the next Uptime.
func (n *Node) Eval(ctx context.Context, script *scripts.Script, keys []string, args ...any) (any, error) {
	reply, err := n.batch.eval(ctx, script, keys, args)
	if err != nil {
		var rerr redis.Error
		if scripts.Grants(script) && !errors.As(err, &rerr) {
			n.rejoin.stale.Store(true)
		}
		return nil, err
	}
	return reply, nil
}
