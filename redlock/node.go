package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/internal/redact"
	"github.com/e6344662/go-redlock/scripts"
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
	// Release deletes key if token holds it and, if announce is set,
	// publishes on the release channel. It reports whether token held key,
	// and how many subscribers (waiters) heard the announcement.
	Release(ctx context.Context, key, token string, announce bool) (released bool, listeners int, err error)
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
	// Reason says why the node refused when it was not because of a holder.
	// RedisNode never sets it: a node that cannot grant (a read-only
	// replica, a node out of memory) fails with an error wrapping
	// ErrReadOnly or ErrNodeFull instead, so that the Locker can tell it
	// from a busy lock.
	Reason string
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
}

// RedisNode is a Node backed by a go-redis client. All access to lock keys
// goes through the Lua scripts of package scripts.
type RedisNode struct {
	client redis.UniversalClient
	addr   string
}

var _ Node = (*RedisNode)(nil)

// NewRedisNode returns a Node that speaks to the server behind client. The
// client's own options (timeouts, TLS, pool size) apply; the Locker bounds
// every call with its NodeCallTimeout as well.
func NewRedisNode(client redis.UniversalClient) *RedisNode {
	return &RedisNode{client: client, addr: clientAddr(client)}
}

func clientAddr(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return "cluster(" + strings.Join(c.Options().Addrs, ",") + ")"
	case *redis.Ring:
		return "ring"
	}
	return fmt.Sprintf("%T", c)
}

// Addr returns the server's host:port.
func (n *RedisNode) Addr() string { return n.addr }

// Client returns the go-redis client behind the node.
func (n *RedisNode) Client() redis.UniversalClient { return n.client }

// Close closes the underlying client.
func (n *RedisNode) Close() error { return n.client.Close() }

func fenceKey(key string) string       { return key + ":fence" }
func releaseChannel(key string) string { return key + ":released" }

// Acquire implements Node.
func (n *RedisNode) Acquire(ctx context.Context, key, token, owner string, ttl time.Duration) (Grant, error) {
	reply, err := scripts.Acquire.Run(ctx, n.client, []string{key, fenceKey(key)},
		token, owner, nodeTTL(ttl)).Result()
	if err != nil {
		return Grant{}, scriptErr(err, token)
	}
	return parseGrant(reply)
}

// nodeTTL is ttl in whole milliseconds for PX and PEXPIRE, rounded up: the
// Locker computes the lease's validity from ttl, so the key must never live
// shorter than ttl on the node.
func nodeTTL(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

// parseGrant decodes the acquire script's reply {1, counter} (the counter a
// decimal string, exact at any size) or {0, pttl}.
func parseGrant(reply any) (Grant, error) {
	vals, ok := reply.([]any)
	if !ok || len(vals) != 2 {
		return Grant{}, fmt.Errorf("%w: acquire reply %s", errBadReply, describeReply(reply))
	}
	flag, ok := vals[0].(int64)
	if !ok {
		return Grant{}, fmt.Errorf("%w: acquire reply %s", errBadReply, describeReply(reply))
	}
	switch v := vals[1].(type) {
	case string:
		if flag != 1 {
			break
		}
		c, err := fencing.ParseToken(v)
		if err != nil {
			return Grant{}, fmt.Errorf("%w: fence counter is not a positive canonical decimal (%d bytes)", errBadReply, len(v))
		}
		return Grant{OK: true, Counter: c}, nil
	case int64:
		if flag == 0 && v >= -2 {
			return Grant{HolderTTL: pttl(v)}, nil
		}
	}
	return Grant{}, fmt.Errorf("%w: acquire reply %s", errBadReply, describeReply(reply))
}

// describeReply names a reply's shape for an error without quoting it: a
// reply can hold a holder's token.
func describeReply(reply any) string {
	if vals, ok := reply.([]any); ok {
		kinds := make([]string, len(vals))
		for i, v := range vals {
			kinds[i] = fmt.Sprintf("%T", v)
		}
		return "[" + strings.Join(kinds, " ") + "]"
	}
	return fmt.Sprintf("%T", reply)
}

// pttl converts a PTTL reply: -1 (no expiry) becomes a negative duration,
// -2 (no key) becomes zero.
func pttl(ms int64) time.Duration {
	switch {
	case ms >= 0:
		return time.Duration(ms) * time.Millisecond
	case ms == -1:
		return -1
	}
	return 0
}

// replyKinds maps the prefixes of server error replies to the sentinels
// their node errors wrap.
var replyKinds = []struct {
	prefix string
	kind   error
}{
	{"WRONGTYPE", ErrWrongType},
	{"READONLY", ErrReadOnly},
	{"OOM", ErrNodeFull},
	{"FENCEEXHAUSTED", ErrFenceExhausted},
}

// scriptErr is the error a RedisNode returns for a failed script call
// made with token ("" for none). A server's error reply is marked with its
// sentinel (replyKinds), and the text is cleaned of lock tokens
// (cleanText): a server quotes the arguments of a command it does not know
// ("unknown command 'EVALSHA', with args beginning with: ..." from a
// renamed EVALSHA, or from a Sentinel port given as a node), and the token
// is one of them. A cleaned error keeps what callers test with errors.Is
// and errors.As (the sentinel, a server reply's redis.Error, a context's
// error) but not the original error, whose text still holds the token.
func scriptErr(err error, token string) error {
	var kind error
	var rerr redis.Error
	reply := errors.As(err, &rerr)
	if reply {
		for _, k := range replyKinds {
			if strings.HasPrefix(rerr.Error(), k.prefix) {
				kind = k.kind
				break
			}
		}
	}
	msg := err.Error()
	clean := cleanText(msg, token)
	if clean == msg {
		if kind != nil {
			return fmt.Errorf("%w: %w", kind, err)
		}
		return err
	}
	ce := &cleanError{msg: clean}
	if kind != nil {
		ce.msg = kind.Error() + ": " + clean
		ce.wrapped = append(ce.wrapped, kind)
	}
	for _, e := range []error{context.DeadlineExceeded, context.Canceled} {
		if errors.Is(err, e) {
			ce.wrapped = append(ce.wrapped, e)
		}
	}
	if reply {
		return &cleanReply{*ce}
	}
	return ce
}

// cleanText removes lock tokens from a server's message: every run of 32
// or more hex digits is cut to its first few (redact.String), and so is
// any part of token longer than those few, for a server cuts a quoted
// argument list short (Redis at 128 bytes), possibly inside the token.
func cleanText(msg, token string) string {
	msg = redact.String(msg)
	for k := len(token) - 1; k > redact.TokenPrefixLen; k-- {
		if strings.Contains(msg, token[:k]) {
			msg = strings.ReplaceAll(msg, token[:k], redact.TokenPrefix(token)+"...")
		}
	}
	return msg
}

// cleanError is an error whose text was cleaned of lock tokens. It wraps
// the sentinels of the original, not the original itself.
type cleanError struct {
	msg     string
	wrapped []error
}

func (e *cleanError) Error() string   { return e.msg }
func (e *cleanError) Unwrap() []error { return e.wrapped }

// cleanReply is a cleanError for a server's error reply: it is a
// redis.Error, as the original was.
type cleanReply struct{ cleanError }

// RedisError marks the error as a server's reply (redis.Error).
func (*cleanReply) RedisError() {}

// Fence implements Node.
func (n *RedisNode) Fence(ctx context.Context, key, token string, f fencing.Token) (bool, error) {
	return runFlag(ctx, scripts.Fence, n.client, []string{key, fenceKey(key)}, token, token, f.String())
}

// Renew implements Node.
func (n *RedisNode) Renew(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	return runFlag(ctx, scripts.Renew, n.client, []string{key}, token, token, nodeTTL(ttl))
}

// Release implements Node.
func (n *RedisNode) Release(ctx context.Context, key, token string, announce bool) (bool, int, error) {
	announcement := "" // none
	if announce {
		announcement = releaseID(token)
	}
	v, err := scripts.Release.Run(ctx, n.client, []string{key}, token, releaseChannel(key), announcement).Int64()
	if err != nil {
		return false, 0, scriptErr(err, token)
	}
	if v < 0 {
		return false, 0, fmt.Errorf("%w: release reply %d", errBadReply, v)
	}
	return v > 0, int(max(v-1, 0)), nil
}

// runFlag runs a script that answers 0 or 1, with token among args.
func runFlag(ctx context.Context, s *redis.Script, c redis.Scripter, keys []string, token string, args ...any) (bool, error) {
	v, err := s.Run(ctx, c, keys, args...).Int64()
	if err != nil {
		return false, scriptErr(err, token)
	}
	switch v {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	return false, fmt.Errorf("%w: %d", errBadReply, v)
}

// Inspect implements Node.
func (n *RedisNode) Inspect(ctx context.Context, key string) (LockInfo, error) {
	reply, err := scripts.Inspect.Run(ctx, n.client, []string{key, fenceKey(key)}).Result()
	if err != nil {
		return LockInfo{}, scriptErr(err, "")
	}
	return parseInspect(reply)
}

// parseInspect decodes the inspect script's reply {type, value, pttl, fence}.
func parseInspect(reply any) (LockInfo, error) {
	vals, ok := reply.([]any)
	if !ok || len(vals) != 4 {
		return LockInfo{}, fmt.Errorf("%w: inspect reply %s", errBadReply, describeReply(reply))
	}
	kind, _ := vals[0].(string)
	ms, okTTL := vals[2].(int64)
	if !okTTL {
		return LockInfo{}, fmt.Errorf("%w: inspect reply %s", errBadReply, describeReply(reply))
	}
	var info LockInfo
	if f, ok := vals[3].(string); ok {
		c, err := strconv.ParseUint(f, 10, 64)
		if err != nil || strconv.FormatUint(c, 10) != f {
			return LockInfo{}, fmt.Errorf("%w: fence counter is not a canonical decimal (%d bytes)", errBadReply, len(f))
		}
		info.Fence = fencing.Token(c)
	}
	switch kind {
	case "none":
		return info, nil
	case "string":
	default:
		return info, fmt.Errorf("%w: lock key holds a %s", ErrWrongType, kind)
	}
	value, _ := vals[1].(string)
	info.Held = true
	info.TTL = pttl(ms)
	info.Token, info.Owner, _ = strings.Cut(value, " ")
	return info, nil
}

// Nodes is a set of nodes built by Dial. Close closes their clients.
type Nodes []Node

// Close closes every node that has a Close method and joins their errors.
func (ns Nodes) Close() error {
	var errs []error
	for _, n := range ns {
		if c, ok := n.(interface{ Close() error }); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close %s: %w", n.Addr(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// Dial builds one RedisNode per redis:// or rediss:// URL (go-redis's URL
// syntax: user, password, database, TLS, and query options such as
// dial_timeout). Unless the URL says otherwise (max_retries), the clients do
// not retry commands or redial: the Locker retries across nodes itself. It
// then pings every node in parallel, bounded by ctx, and
// fails only when no majority answers, so a minority that is down at start-up
// does not stop the caller. A malformed or duplicate URL is an error wrapping
// ErrInvalidConfig; passwords never appear in errors.
//
// Dial connects to each node once with the client's own dialer before its
// first command, so that a node that cannot be reached is reported in Dial's
// error only: go-redis's connection pool would also log the failed dial
// through go-redis's process-wide logger (stderr by default). Dial does not
// change that logger. Once Dial has returned, the pool logs the dials that
// fail while a node is down; silence them with redis.SetLogger, as
// redlock-cli does.
func Dial(ctx context.Context, urls ...string) (Nodes, error) {
	if len(urls) == 0 {
		return nil, fmt.Errorf("%w: no node URLs", ErrInvalidConfig)
	}
	nodes := make(Nodes, 0, len(urls))
	seen := make(map[string]bool, len(urls))
	for _, raw := range urls {
		opts, err := redis.ParseURL(strings.TrimSpace(raw))
		if err != nil {
			_ = nodes.Close()
			return nil, fmt.Errorf("%w: node URL %s: %s", ErrInvalidConfig, redact.URL(raw), redact.URLError(raw, err))
		}
		id := fmt.Sprintf("%s/%d", opts.Addr, opts.DB)
		if seen[id] {
			_ = nodes.Close()
			return nil, fmt.Errorf("%w: node %s given twice (one server must not count twice toward a quorum)", ErrInvalidConfig, opts.Addr)
		}
		seen[id] = true
		// The Locker bounds every call with a context deadline; make the
		// client honour it instead of its own ReadTimeout. Retrying is the
		// Locker's job (across nodes, within the lease's validity), so by
		// default a dead node fails at once instead of being redialled.
		opts.ContextTimeoutEnabled = true
		if opts.MaxRetries == 0 {
			opts.MaxRetries = -1
		}
		if opts.DialerRetries == 0 {
			opts.DialerRetries = 1
		}
		nodes = append(nodes, NewRedisNode(redis.NewClient(opts)))
	}

	type answer struct {
		addr, runID string
		err         error
	}
	answers := make(chan answer, len(nodes))
	for _, n := range nodes {
		go func() {
			c := n.(*RedisNode).client
			if err := dialOnce(ctx, c.(*redis.Client).Options()); err != nil {
				answers <- answer{addr: n.Addr(), err: &NodeError{Addr: n.Addr(), Err: err}}
				return
			}
			// INFO server doubles as the ping and names the server process,
			// so that one server reached under two names is caught.
			info, err := c.Info(ctx, "server").Result()
			var rerr redis.Error
			if errors.As(err, &rerr) && !strings.HasPrefix(rerr.Error(), "WRONGPASS") && !strings.HasPrefix(rerr.Error(), "NOAUTH") {
				// A server that refuses INFO (an ACL user without it, a
				// stand-in like miniredis) still counts if it answers PING.
				info, err = "", c.Ping(ctx).Err()
			}
			if err != nil {
				err = &NodeError{Addr: n.Addr(), Err: err}
			}
			answers <- answer{addr: n.Addr(), runID: infoField(info, "run_id"), err: err}
		}()
	}
	var failed []error
	byRunID := make(map[string]string, len(nodes))
	var dup error
	for range nodes {
		a := <-answers
		switch {
		case a.err != nil:
			failed = append(failed, a.err)
		case a.runID == "":
		case byRunID[a.runID] != "":
			dup = fmt.Errorf("%w: %s and %s are the same server (one server must not count twice toward a quorum)", ErrInvalidConfig, byRunID[a.runID], a.addr)
		default:
			byRunID[a.runID] = a.addr
		}
	}
	if dup != nil {
		_ = nodes.Close()
		return nil, dup
	}
	if len(nodes)-len(failed) < len(nodes)/2+1 {
		_ = nodes.Close()
		return nil, fmt.Errorf("%w: %d of %d nodes answered%w", ErrNoQuorum, len(nodes)-len(failed), len(nodes), nodeErrors(failed))
	}
	return nodes, nil
}

// dialOnce opens and closes one connection to the server of opts with the
// client's dialer (TLS included), bounded by DialTimeout as go-redis bounds
// each of its own dials. A failure here is not logged by go-redis.
func dialOnce(ctx context.Context, opts *redis.Options) error {
	if opts.DialTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.DialTimeout)
		defer cancel()
	}
	conn, err := opts.Dialer(ctx, opts.Network, opts.Addr)
	if err != nil {
		return err
	}
	_ = conn.Close()
	return nil
}

// isAuthError reports whether err is the server refusing our credentials or
// permissions: retrying will not help.
func isAuthError(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	for _, p := range []string{"NOPERM", "WRONGPASS", "NOAUTH"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// infoField returns field's value in an INFO reply, or "".
func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), field+":"); ok {
			return v
		}
	}
	return ""
}
