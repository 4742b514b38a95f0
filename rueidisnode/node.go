package rueidisnode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/scripts"
)

// ErrInvalidURL is wrapped by Dial's error for a URL it cannot use.
var ErrInvalidURL = errors.New("rueidisnode: invalid node URL")

// ErrArgument is wrapped by Eval's error for an argument of a type the Node
// contract does not name (string, int and int64, and the other integer
// types, []byte and float64, sent as their text).
var ErrArgument = errors.New("rueidisnode: unsupported script argument")

// Node is a redlock.Node over one rueidis client to one standalone Redis
// server. It is safe for concurrent use: concurrent calls share one
// connection, written by one goroutine and read by another (rueidis's
// auto-pipelining), so that many goroutines locking at once share round
// trips.
type Node struct {
	client rueidis.Client
	addr   string
	db     int
	// dials counts the connections the client opened (Uptime.Conns).
	dials *atomic.Uint64
	up    upCache
}

var (
	_ redlock.Node        = (*Node)(nil)
	_ redlock.NodeDB      = (*Node)(nil)
	_ redlock.NodeBounded = (*Node)(nil)
)

// Dial connects to the standalone server named by url (redis://, rediss://
// or unix://, with rueidis's query options: rueidis.ParseURL) and returns a
// Node over it (New).
func Dial(url string) (*Node, error) {
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	if len(opt.InitAddress) != 1 {
		return nil, fmt.Errorf("%w: a node is one standalone server (got %d addresses); use redisnode.Dial for a Cluster or Sentinel", ErrInvalidURL, len(opt.InitAddress))
	}
	if opt.Sentinel.MasterSet != "" {
		return nil, fmt.Errorf("%w: a Sentinel group (master_set) is not supported; use redisnode.Dial", ErrInvalidURL)
	}
	return New(opt)
}

// New returns a Node over a rueidis client built from opt, with the
// settings the Locker needs whatever opt says:
//
//   - one pipelined connection (PipelineMultiplex 0), so that a script call
//     and the clean-up the Locker sends after it reach the server in the
//     order they were made (Redis runs one connection's commands in order);
//   - no retries (DisableRetry): the Locker retries across nodes itself;
//   - no client-side caching (DisableCache): no CLIENT TRACKING;
//   - a single client (ForceSingleClient), with opt.InitAddress[0] as the
//     server: a Redis Cluster or Sentinel group is not supported.
//
// Dialing is lazy except for the first connection, which New opens to fail
// early on a wrong address or credentials; a failed first connection is an
// error.
func New(opt rueidis.ClientOption) (*Node, error) {
	if len(opt.InitAddress) != 1 {
		return nil, fmt.Errorf("%w: need exactly one server address, got %d", ErrInvalidURL, len(opt.InitAddress))
	}
	opt.PipelineMultiplex = 0
	opt.DisableRetry = true
	opt.DisableCache = true
	opt.ForceSingleClient = true
	dials := new(atomic.Uint64)
	dial := opt.DialCtxFn
	opt.DialCtxFn = func(ctx context.Context, addr string, d *net.Dialer, tc *tls.Config) (net.Conn, error) {
		var (
			c   net.Conn
			err error
		)
		switch {
		case dial != nil:
			c, err = dial(ctx, addr, d, tc)
		case tc != nil:
			td := tls.Dialer{NetDialer: d, Config: tc}
			c, err = td.DialContext(ctx, "tcp", addr)
		default:
			c, err = d.DialContext(ctx, "tcp", addr)
		}
		if err == nil {
			dials.Add(1)
		}
		return c, err
	}
	client, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("rueidisnode: connect to %s: %w", opt.InitAddress[0], err)
	}
	return &Node{client: client, addr: opt.InitAddress[0], db: opt.SelectDB, dials: dials}, nil
}

// Addr returns the server's address (host:port, or a socket path). It never
// contains a password.
func (n *Node) Addr() string { return n.addr }

// DB returns the logical database (SELECT index) the node's keys live in,
// from the URL's path or db= option (0 by default). The Locker's data-loss
// rule names its marker key after it.
func (n *Node) DB() int { return n.db }

// BoundedByContext implements redlock.NodeBounded: it reports true, for
// every call returns by its context's end (Eval). A Locker whose only node
// this is calls it in the caller's goroutine.
func (n *Node) BoundedByContext() bool { return true }

// Client returns the rueidis client behind the node.
func (n *Node) Client() rueidis.Client { return n.client }

// Close closes the client: calls in flight fail, later calls fail at once.
func (n *Node) Close() error {
	n.client.Close()
	return nil
}

// Eval implements redlock.Node: EVALSHA script.Hash() with keys and args,
// then EVAL script.Source() when the server answers NOSCRIPT (its script
// cache lacks the script: after a restart or SCRIPT FLUSH). The reply is
// converted to the contract's types (int64, string, []any, nil), and a
// server's error reply is returned as an *Error (it has RedisError(), and
// the server's full text). Any other error (a connection failure, ctx's
// end) means the outcome is unknown.
//
// The call is bounded by ctx: it returns by ctx's end, and it is not handed
// to the connection once ctx has ended, neither the EVALSHA nor the EVAL
// after NOSCRIPT. One handed over just before ctx ended is written by
// rueidis's writer in order, behind the calls made before it and ahead of
// those made after it (the Locker's clean-up of a failed attempt), on the
// one connection.
func (n *Node) Eval(ctx context.Context, script *scripts.Script, keys []string, args ...any) (any, error) {
	strs, err := argStrings(args)
	if err != nil {
		return nil, err
	}
	b := n.client.B()
	reply, err := n.do(ctx, b.Evalsha().Sha1(script.Hash()).Numkeys(int64(len(keys))).Key(keys...).Arg(strs...).Build())
	if se, ok := err.(*Error); ok && se.NoScript() {
		reply, err = n.do(ctx, b.Eval().Script(script.Source()).Numkeys(int64(len(keys))).Key(keys...).Arg(strs...).Build())
	}
	if err != nil && scripts.Grants(script) {
		if _, ok := err.(*Error); !ok {
			n.up.stale.Store(true) // the server may be restarting: learn its state again
		}
	}
	return reply, err
}

// do sends cmd unless ctx has ended and converts its reply.
func (n *Node) do(ctx context.Context, cmd rueidis.Completed) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	msg, err := n.client.Do(ctx, cmd).ToMessage()
	if err != nil && !isReply(err) {
		return nil, err
	}
	return convert(&msg)
}

// isReply reports whether err came from the server's reply (an error reply
// or a nil), not from the connection or the context.
func isReply(err error) bool {
	var rerr *rueidis.RedisError
	return errors.As(err, &rerr)
}

// argStrings converts a script's arguments to the text Redis receives.
func argStrings(args []any) ([]string, error) {
	out := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = v
		case int:
			out[i] = strconv.Itoa(v)
		case int64:
			out[i] = strconv.FormatInt(v, 10)
		case int32:
			out[i] = strconv.FormatInt(int64(v), 10)
		case uint64:
			out[i] = strconv.FormatUint(v, 10)
		case uint32:
			out[i] = strconv.FormatUint(uint64(v), 10)
		case uint:
			out[i] = strconv.FormatUint(uint64(v), 10)
		case []byte:
			out[i] = string(v)
		case float64:
			out[i] = strconv.FormatFloat(v, 'f', -1, 64)
		default:
			return nil, fmt.Errorf("%w: argument %d is a %T", ErrArgument, i, a)
		}
	}
	return out, nil
}
