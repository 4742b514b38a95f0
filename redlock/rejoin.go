package redlock

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

	"github.com/e6344662/go-redlock/fencing"
)

// rejoiner is implemented by nodes that can say how long their server has
// held its current data (RedisNode); the Locker keeps such a node out of
// the quorum while it is rejoining (Config.RejoinDelay).
type rejoiner interface {
	// upState returns what is known of the server's uptime, learning it
	// again if a connection was opened since it was last learned.
	upState(ctx context.Context) upState
	// dialCount counts the connections opened to the server so far.
	dialCount() uint64
	// forget marks the state stale: learn it again before the next grant.
	forget()
	// acquireAbove acquires, raising an existing counter below floor and
	// starting a new one at the node's clock rounded down to step µs; with
	// a place, the caller queues fairly (Config.QueueTTL).
	acquireAbove(ctx context.Context, keys []string, token, owner string, ttl time.Duration, floor, step string, p *place) (Grant, error)
	// leaveQueue takes a place out of key's wait queue and, with give,
	// gives up a lock handed over to it.
	leaveQueue(ctx context.Context, key, member string, give bool) error
	// rehold sets key, held by token from, to value for ttl, and returns
	// the fence counter; ok is false when from does not hold it.
	rehold(ctx context.Context, key, from, value string, ttl time.Duration) (c fencing.Token, ok bool, err error)
}

// upState is what a node knows of its server's data: since when it has
// held it (on this process's monotonic clock) and whether it survives a
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
	// dials is the dial count when the state was learned.
	dials uint64
}

// rejoining returns why the node must not grant yet, or "" when it may.
func (st upState) rejoining(delay time.Duration) string {
	switch {
	case !st.checked || delay < 0 || st.durable:
		return ""
	case st.err != nil:
		return fmt.Sprintf("rejoin state unknown: %v", st.err)
	}
	if up := time.Since(st.since); up < delay {
		return fmt.Sprintf("%s: up %s of the %s rejoin delay, without appendfsync always", rejoiningReason, up.Round(time.Second), delay)
	}
	return ""
}

// acquireOn asks node for the lock, unless the node is rejoining
// (Config.RejoinDelay): then it refuses with the reason. A grant made on
// a connection opened during the call (the server may have restarted just
// before it) is checked again, and given back if the node turns out to be
// rejoining.
func (l *Locker) acquireOn(ctx context.Context, node Node, keys []string, token string, p *place) (Grant, error) {
	key := keys[0]
	r, ok := node.(rejoiner)
	if !ok {
		return node.Acquire(ctx, key, token, l.cfg.Owner, l.cfg.LeaseDuration)
	}
	step := l.seedStep
	if l.cfg.RejoinDelay < 0 {
		return r.acquireAbove(ctx, keys, token, l.cfg.Owner, l.cfg.LeaseDuration, "", step, p)
	}
	dials := r.dialCount()
	st := r.upState(ctx)
	if st.checked && st.err != nil && l.cfg.RejoinDelay >= 0 {
		return Grant{}, st.err // unreachable or refusing us: an error, not a refusal
	}
	if why := st.rejoining(l.cfg.RejoinDelay); why != "" {
		return Grant{Reason: why}, nil
	}
	// A node that may have lost increments in its last restart raises
	// older counters to its start plus the rejoin delay: above every token
	// issued before the restart, while node clocks differ by less than half
	// the delay (docs/design.md, section 6.1).
	floor := ""
	if !st.durable && st.bootUS > 0 {
		floor = strconv.FormatInt(st.bootUS+l.cfg.RejoinDelay.Microseconds(), 10)
	}
	g, err := r.acquireAbove(ctx, keys, token, l.cfg.Owner, l.cfg.LeaseDuration, floor, step, p)
	var rerr redis.Error
	if err != nil && !errors.As(err, &rerr) {
		r.forget() // the connection failed: the server may be restarting
	}
	if err != nil || !g.OK || r.dialCount() == dials {
		return g, err
	}
	if why := r.upState(ctx).rejoining(l.cfg.RejoinDelay); why != "" {
		// Give the grant back. Until the node has answered, our token may
		// still hold the lock there: an error (outcome unknown), so that a
		// failed attempt's clean-up releases it again, never a refusal.
		if _, err := node.Release(ctx, key, token); err != nil {
			return Grant{}, fmt.Errorf("%s; giving its grant back failed: %w", why, err)
		}
		return Grant{Reason: why}, nil
	}
	return g, nil
}

// seedStep is the granularity of a new fence counter's start, in
// microseconds, as the acquire script takes it: half the rejoin delay (half
// the lease when the check is off), at least 1. Nodes whose clocks differ by
// far less start a resource's counters equal (no fence step for a new
// resource), and a restarted node's new counters still start above every
// earlier token while node clocks differ by less than half the delay
// (docs/design.md, section 6.1).
func seedStep(c Config) string {
	d := c.RejoinDelay
	if d < 0 {
		d = c.LeaseDuration
	}
	return strconv.FormatInt(max(d.Microseconds()/2, 1), 10)
}

// rejoiningReason starts the reason of a rejoining node's refusal.
const rejoiningReason = "rejoining"

// rejoinState is a RedisNode's knowledge of its server's uptime.
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
func (n *RedisNode) watchDials() {
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
	if st == nil || st.err != nil || st.dials != r.dials.Load() || r.stale.Load() {
		return upState{}, false
	}
	return *st, true
}

func (n *RedisNode) dialCount() uint64 { return n.rejoin.dials.Load() }

// knownDurable reports whether the server was last seen keeping its data
// through a restart (appendfsync always): the rejoin rule does not apply.
func (n *RedisNode) knownDurable() bool {
	st := n.rejoin.last.Load()
	return st != nil && st.err == nil && st.durable
}
func (n *RedisNode) forget() { n.rejoin.stale.Store(true) }

func (n *RedisNode) upState(ctx context.Context) upState {
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
	st := upState{checked: true, dials: r.dials.Load()}
	servers := []redis.Cmdable{n.client}
	if cc, ok := n.client.(*redis.ClusterClient); ok {
		servers = nil
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
	}
	st.durable = len(servers) > 0
	answered := 0
	var failed error
	for _, c := range servers {
		since, bootUS, durable, checked, err := learnUptime(ctx, c, &r.configRefused)
		switch {
		case err != nil && !isAuthError(err):
			failed = err // a primary down or loading cannot grant anyway
			continue
		case err != nil:
			st.err = err
		case !checked:
			st.checked = false
		}
		answered++
		if since.After(st.since) {
			st.since = since
		}
		st.bootUS = max(st.bootUS, bootUS)
		st.durable = st.durable && durable
	}
	if answered == 0 && st.err == nil {
		st.err = failed
	}
	r.last.Store(&st)
	return st
}

// appendAlways reports whether the server has appendonly yes and
// appendfsync always (CONFIG GET). A server that does not let us read its
// configuration (an ACL without +config|get) counts as not durable; Redis
// records the refusal in ACL LOG.
// A node asks once: after a refusal it no longer asks (refused).
func appendAlways(ctx context.Context, c redis.Cmdable, refused *atomic.Bool) bool {
	if refused.Load() {
		return false
	}
	conf, err := c.ConfigGet(ctx, "append*").Result()
	if isAuthError(err) {
		refused.Store(true)
	}
	return err == nil && conf["appendonly"] == "yes" && conf["appendfsync"] == "always"
}

// learnUptime reads one server's uptime (INFO server) and persistence
// (CONFIG GET append*, which an ACL may refuse: the server then counts as
// not durable). checked is false when the server does not implement INFO
// server.
func learnUptime(ctx context.Context, c redis.Cmdable, refused *atomic.Bool) (since time.Time, bootUS int64, durable, checked bool, err error) {
	info, err := c.Info(ctx, "server").Result()
	answered := time.Now()
	var rerr redis.Error
	if errors.As(err, &rerr) && !isAuthError(err) && !strings.HasPrefix(rerr.Error(), "LOADING") {
		return time.Time{}, 0, false, false, nil
	}
	if err != nil {
		return time.Time{}, 0, false, true, err
	}
	up, perr := strconv.ParseInt(infoField(info, "uptime_in_seconds"), 10, 64)
	if perr != nil || up < 0 {
		return time.Time{}, 0, false, false, nil
	}
	if now, err := strconv.ParseInt(infoField(info, "server_time_usec"), 10, 64); err == nil {
		bootUS = now - up*1e6 // rounded up to the second with uptime: not earlier than the start
	}
	// uptime_in_seconds is whole seconds, rounded down, read before the
	// answer came back: the server started at the latest up seconds before
	// the answer, which is what the delay is counted from.
	since = answered.Add(-time.Duration(up) * time.Second)
	durable = appendAlways(ctx, c, refused)
	return since, bootUS, durable, true, nil
}
