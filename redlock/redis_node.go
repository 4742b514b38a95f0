package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/internal/redact"
	"github.com/e6344662/go-redlock/scripts"
)

// RedisNode is a Node backed by a go-redis client. All access to lock keys
// goes through the Lua scripts of package scripts.
type RedisNode struct {
	client  redis.UniversalClient
	addr    string
	bounded bool // the client honours context deadlines
	// failover is set for a Sentinel group built by Dial: its
	// subscriptions follow the primary through failovers.
	failover *redis.FailoverOptions
	rejoin   rejoinState
}

var _ Node = (*RedisNode)(nil)

// NewRedisNode returns a Node that speaks to the server behind client. The
// client's own options (timeouts, TLS, pool size) apply. Whatever they are,
// a Locker never waits for a call longer than its NodeCallTimeout: each
// call runs on a worker under a context with that deadline, and a call that
// ignores it (a client with ContextTimeoutEnabled false on a dead network)
// counts as failed when the deadline passes, then finishes on its worker by
// the client's own ReadTimeout. Clients built by Dial honour the context.
func NewRedisNode(client redis.UniversalClient) *RedisNode {
	n := &RedisNode{client: client, addr: clientAddr(client), bounded: honoursContext(client)}
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

// boundedByContext reports whether every call returns by its context's
// deadline: a Locker with this node alone calls it inline, without a
// hand-over to a worker.
func (n *RedisNode) boundedByContext() bool { return n.bounded }

// unnamedFailovers numbers the Sentinel clients given to NewRedisNode, whose
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
// to NewRedisNode (such a client does not say which primary it follows).
func (n *RedisNode) Addr() string { return n.addr }

// Client returns the go-redis client behind the node.
func (n *RedisNode) Client() redis.UniversalClient { return n.client }

// Close closes the underlying client.
func (n *RedisNode) Close() error { return n.client.Close() }

func fenceKey(key string) string       { return key + ":fence" }
func releaseChannel(key string) string { return key + ":released" }

// queueKeys are the lock's wait queue: the waiters' tickets and their
// expiry times (docs/design.md, section 11.1).
func queueKeys(key string) (tickets, expiries string) { return key + ":queue", key + ":queue:exp" }

// acquireKeys are the acquire script's keys for lock key: lock, fence,
// queue, queue expiries. Built once per attempt and shared by its calls.
func acquireKeys(key string) []string {
	qt, qe := queueKeys(key)
	return []string{key, fenceKey(key), qt, qe}
}

// releaseKeys are the release script's keys: lock, queue, queue expiries,
// fence (for a hand-over to the head of the queue).
func releaseKeys(key string) []string {
	qt, qe := queueKeys(key)
	return []string{key, qt, qe, fenceKey(key)}
}

// Acquire implements Node.
func (n *RedisNode) Acquire(ctx context.Context, key, token, owner string, ttl time.Duration) (Grant, error) {
	return n.acquireAbove(ctx, acquireKeys(key), token, owner, ttl, "", defaultSeedStep, nil)
}

// defaultSeedStep is the granularity of a new fence counter's start (its
// node's clock) when the caller does not choose one: a second.
const defaultSeedStep = "1000000"

// acquireAbove is Acquire that first raises an existing fence counter
// below floor (a canonical decimal, or "" for none) to floor, and starts a
// new counter at the node's clock rounded down to step microseconds. With
// a place, the caller waits its turn in the lock's queue: a busy lock, or
// a free one with an earlier waiter at the head, gives it (or keeps) a
// ticket instead.
func (n *RedisNode) acquireAbove(ctx context.Context, keys []string, token, owner string, ttl time.Duration, floor, step string, p *place) (Grant, error) {
	var cmd *redis.Cmd
	if p == nil {
		cmd = scripts.Acquire.Run(ctx, n.client, keys, token, owner, nodeTTL(ttl), floor, step)
	} else {
		cmd = scripts.Acquire.Run(ctx, n.client, keys, token, owner, nodeTTL(ttl), floor, step, p.member, p.ticketArg(), nodeTTL(p.ttl))
	}
	reply, err := cmd.Result()
	if err != nil {
		return Grant{}, scriptErr(err, token)
	}
	return parseGrant(reply)
}

// leaveQueue takes the place member out of key's wait queue and, with
// give, gives up a lock handed over to it; when it was the head of a free
// lock, or gave the lock up, the node announces the new head.
func (n *RedisNode) leaveQueue(ctx context.Context, key, member string, give bool) error {
	g := ""
	if give {
		g = "give"
	}
	qt, qe := queueKeys(key)
	return scripts.Leave.Run(ctx, n.client, []string{key, qt, qe}, member, releaseChannel(key), leaveMark+releaseID(member), g).Err()
}

// rehold sets key, held by token from, to value for ttl, and returns the
// fence counter; ok is false when from does not hold it.
func (n *RedisNode) rehold(ctx context.Context, key, from, value string, ttl time.Duration) (c fencing.Token, ok bool, err error) {
	reply, err := scripts.Rehold.Run(ctx, n.client, []string{key, fenceKey(key)}, from, value, nodeTTL(ttl)).Slice()
	if err != nil {
		return 0, false, scriptErr(err, from)
	}
	if len(reply) == 1 && reply[0] == int64(0) {
		return 0, false, nil
	}
	if len(reply) == 2 && reply[0] == int64(1) {
		if s, isStr := reply[1].(string); isStr {
			if c, err := fencing.ParseToken(s); err == nil {
				return c, true, nil
			}
		}
	}
	return 0, false, fmt.Errorf("%w: rehold reply %s", errBadReply, describeReply(reply))
}

// handOver is what a node needs to hand a released lock over to the head
// of its wait queue (scripts/queue.lua, q_give): the rejoin delay in
// milliseconds ("-1" when the rule does not apply, "" for no hand-over)
// and the seed step of a new fence counter.
type handOver struct{ delay, step string }

// nodeTTL is ttl in whole milliseconds for PX and PEXPIRE, rounded up: the
// Locker computes the lease's validity from ttl, so the key must never live
// shorter than ttl on the node.
func nodeTTL(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

// parseGrant decodes the acquire script's reply {1, counter} (the counter a
// decimal string, exact at any size), {1, counter, pttl} when the caller's
// token already held the lock, {2, counter, pttl} when the caller's place
// did (a hand-over), {0, pttl}, or {0, pttl, ticket, ms} from a lock with a
// wait queue.
func parseGrant(reply any) (Grant, error) {
	vals, ok := reply.([]any)
	if !ok || len(vals) < 2 || len(vals) > 4 {
		return Grant{}, fmt.Errorf("%w: acquire reply %s", errBadReply, describeReply(reply))
	}
	flag, ok := vals[0].(int64)
	if !ok {
		return Grant{}, fmt.Errorf("%w: acquire reply %s", errBadReply, describeReply(reply))
	}
	switch v := vals[1].(type) {
	case string:
		if flag != 1 && flag != 2 || len(vals) == 4 || flag == 2 && len(vals) != 3 {
			break
		}
		c, err := fencing.ParseToken(v)
		if err != nil {
			return Grant{}, fmt.Errorf("%w: fence counter is not a positive canonical decimal (%d bytes)", errBadReply, len(v))
		}
		g := Grant{OK: flag == 1, Counter: c, handed: flag == 2}
		if len(vals) == 3 {
			// The token already held the lock: the validity counts from
			// what it has left, at least a millisecond (PX rounds up).
			ms, ok := vals[2].(int64)
			if !ok || ms < 1 {
				break
			}
			g.left = time.Duration(ms) * time.Millisecond
		}
		return g, nil
	case int64:
		if flag != 0 || v < -2 || len(vals) == 3 {
			break
		}
		g := Grant{HolderTTL: pttl(v)}
		if len(vals) == 2 {
			return g, nil
		}
		ticket, ok1 := vals[2].(int64)
		left, ok2 := vals[3].(int64)
		if !ok1 || !ok2 || ticket < 0 || left < 0 {
			break
		}
		g.ticket, g.headLeft = ticket, time.Duration(left)*time.Millisecond
		if v == 0 {
			g.Reason = queuedReason
		}
		return g, nil
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

// Release implements Node: it deletes key if token holds it and publishes
// the release id (releaseID) on the release channel.
func (n *RedisNode) Release(ctx context.Context, key, token string) (bool, error) {
	r, err := n.releaseCounting(ctx, releaseKeys(key), token, handOver{}, "")
	return r.released, err
}

// released is one node's answer to a release: whether the token held the
// lock, how many subscribers (waiters, in any process) heard the
// announcement, the head of the lock's wait queue it named ("" for none)
// and, when the lock was handed over to the head, the fence counter that
// counted it.
type released struct {
	released  bool
	listeners int
	head      string
	counter   fencing.Token
}

// releaseCounting is Release that also reports who heard the announcement
// and whom it named; with ho, the node hands the lock over to the head of
// its wait queue when it can; with place, it removes that place of the
// caller's from the wait queue, whether or not the token held the lock.
func (n *RedisNode) releaseCounting(ctx context.Context, keys []string, token string, ho handOver, place string) (released, error) {
	reply, err := scripts.Release.Run(ctx, n.client, keys, token, releaseChannel(keys[0]), releaseID(token), ho.delay, ho.step, place).Result()
	if err != nil {
		return released{}, scriptErr(err, token)
	}
	v, ok := reply.(int64)
	var r released
	if vals, isArray := reply.([]any); isArray && (len(vals) == 2 || len(vals) == 3) {
		v, ok = vals[0].(int64)
		r.head, _ = vals[1].(string)
		ok = ok && r.head != "" && v > 0
		if len(vals) == 3 {
			c, _ := vals[2].(string)
			r.counter, err = fencing.ParseToken(c)
			ok = ok && err == nil
		}
	}
	if !ok || v < 0 {
		return released{}, fmt.Errorf("%w: release reply %s", errBadReply, describeReply(reply))
	}
	r.released, r.listeners = v > 0, int(max(v-1, 0))
	return r, nil
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
	_, qe := queueKeys(key)
	reply, err := scripts.Inspect.Run(ctx, n.client, []string{key, fenceKey(key), qe}).Result()
	if err != nil {
		return LockInfo{}, scriptErr(err, "")
	}
	return parseInspect(reply)
}

// parseInspect decodes the inspect script's reply {type, value, pttl,
// fence} or {type, value, pttl, fence, waiters}.
func parseInspect(reply any) (LockInfo, error) {
	vals, ok := reply.([]any)
	if !ok || (len(vals) != 4 && len(vals) != 5) {
		return LockInfo{}, fmt.Errorf("%w: inspect reply %s", errBadReply, describeReply(reply))
	}
	waiters := int64(0)
	if len(vals) == 5 {
		w, ok := vals[4].(int64)
		if !ok || w < 0 {
			return LockInfo{}, fmt.Errorf("%w: inspect reply %s", errBadReply, describeReply(reply))
		}
		waiters = w
	}
	kind, _ := vals[0].(string)
	ms, okTTL := vals[2].(int64)
	if !okTTL {
		return LockInfo{}, fmt.Errorf("%w: inspect reply %s", errBadReply, describeReply(reply))
	}
	info := LockInfo{Waiters: int(waiters)}
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
