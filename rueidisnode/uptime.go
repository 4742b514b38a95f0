package rueidisnode

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/e6344662/go-redlock/redlock"
)

// relearnAfter is how long a Node trusts what it learned of its server: a
// maxmemory-policy changed to allkeys-* at runtime is noticed this soon.
const relearnAfter = 5 * time.Second

// upCache is what a Node last learned of its server (Uptime).
type upCache struct {
	stale atomic.Bool // a granting call failed: learn again
	mu    sync.Mutex  // one refresh at a time
	last  atomic.Pointer[upState]
	// configRefused is set once CONFIG GET was refused (an ACL): the
	// server then counts as not durable and as evicting.
	configRefused atomic.Bool
}

type upState struct {
	u   redlock.Uptime
	err error
	at  time.Time
}

// Uptime implements redlock.Node from INFO server (uptime_in_seconds,
// server_time_usec, run_id) and CONFIG GET append* and maxmemory*, learned
// once and again after the client opened a connection, a granting call
// failed on the connection, or 5 s passed. A server that does not report
// its uptime (a stand-in) gives a zero Since. A server with a maxmemory and
// a maxmemory-policy allkeys-* is an error: no key is safe from eviction
// there (Safety v4), so the Locker does not use the node.
func (n *Node) Uptime(ctx context.Context) (redlock.Uptime, error) {
	if st, ok := n.fresh(); ok {
		return st.u, st.err
	}
	n.up.mu.Lock()
	defer n.up.mu.Unlock()
	if st, ok := n.fresh(); ok {
		return st.u, st.err
	}
	n.up.stale.Store(false)
	st := n.learn(ctx)
	n.up.last.Store(&st)
	return st.u, st.err
}

func (n *Node) fresh() (*upState, bool) {
	st := n.up.last.Load()
	if st == nil || st.err != nil || n.up.stale.Load() || st.u.Conns != n.dials.Load() || time.Since(st.at) > relearnAfter {
		return nil, false
	}
	return st, true
}

func (n *Node) learn(ctx context.Context) upState {
	st := upState{at: time.Now(), u: redlock.Uptime{Conns: n.dials.Load()}}
	b := n.client.B()
	info, err := n.do(ctx, b.Info().Section("server").Build())
	answered := time.Now()
	if se, ok := err.(*Error); ok && !isAuthError(se) && !strings.HasPrefix(se.msg, "LOADING") {
		return st // a stand-in without INFO: the rejoin rule does not apply
	}
	if err != nil {
		st.err = fmt.Errorf("rueidisnode: INFO server: %w", err)
		return st
	}
	text, _ := info.(string)
	up, perr := strconv.ParseInt(infoField(text, "uptime_in_seconds"), 10, 64)
	if perr != nil || up < 0 {
		return st
	}
	// uptime_in_seconds is rounded down and read before the answer came
	// back: the server started at the latest up seconds before the answer.
	st.u.Since = answered.Add(-time.Duration(up) * time.Second)
	if now, err := strconv.ParseInt(infoField(text, "server_time_usec"), 10, 64); err == nil {
		st.u.BootMicros = now - up*1e6
	}
	st.u.Servers = infoField(text, "run_id")
	n.learnConfig(ctx, &st)
	return st
}

// learnConfig fills in what the server's configuration says about
// durability and eviction (eviction assumed when it cannot be read); a
// server that refuses CONFIG is not asked again.
func (n *Node) learnConfig(ctx context.Context, st *upState) {
	st.u.MayEvict = true
	if n.up.configRefused.Load() {
		return
	}
	aof, err := n.configGet(ctx, "append*")
	if err == nil {
		var mem map[string]string
		mem, err = n.configGet(ctx, "maxmemory*")
		st.u.Durable = aof["appendonly"] == "yes" && aof["appendfsync"] == "always"
		st.u.MayEvict = err != nil || mem["maxmemory"] != "0" && mem["maxmemory-policy"] != "noeviction"
		if p := mem["maxmemory-policy"]; err == nil && mem["maxmemory"] != "0" && strings.HasPrefix(p, "allkeys-") {
			st.err = fmt.Errorf("rueidisnode: %w: maxmemory %s with maxmemory-policy %s: set noeviction or a volatile-* policy", redlock.ErrEvictsLocks, mem["maxmemory"], p)
		}
	}
	if se, ok := err.(*Error); ok && isAuthError(se) {
		n.up.configRefused.Store(true)
	}
}

// ErrEvictsLocks is redlock.ErrEvictsLocks, which Uptime's error wraps for
// a server that may evict any key (maxmemory with an allkeys-* policy).
//
// Deprecated: use redlock.ErrEvictsLocks. This name is kept so that code
// written against earlier versions of this package still compiles; both
// match the same errors under errors.Is.
var ErrEvictsLocks = redlock.ErrEvictsLocks

// configGet reads CONFIG GET pattern as a map (RESP3 sends a map, RESP2 a
// flat array).
func (n *Node) configGet(ctx context.Context, pattern string) (map[string]string, error) {
	reply, err := n.do(ctx, n.client.B().ConfigGet().Parameter(pattern).Build())
	if err != nil {
		return nil, err
	}
	flat, _ := reply.([]any)
	out := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		out[k] = v
	}
	return out, nil
}

// isAuthError reports whether e is the server refusing our credentials or
// permissions.
func isAuthError(e *Error) bool {
	return strings.HasPrefix(e.msg, "NOPERM") || strings.HasPrefix(e.msg, "NOAUTH") || strings.HasPrefix(e.msg, "WRONGPASS")
}

// infoField returns field's value in an INFO reply ("" if absent).
func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), field+":"); ok {
			return v
		}
	}
	return ""
}
