package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// NodeDB is an optional interface of a Node: DB reports the logical
// database (SELECT index) that the node's keys live in. The data-loss
// rule's marker key carries it in its name (docs/design.md §6.2), so that
// SWAPDB, which moves a whole db's keys, leaves a db without its own
// marker. redisnode.Node implements it (the client's Options().DB; 0 for a
// Redis Cluster). A Node that does not implement it counts as db 0: a
// wrapper around a redisnode.Node that uses another db must forward DB, or a
// SWAPDB of that db goes unnoticed.
type NodeDB interface {
	DB() int
}

// nodeDB returns the db node n says it uses (NodeDB), else 0.
func nodeDB(n Node) int {
	if d, ok := n.(NodeDB); ok {
		return d.DB()
	}
	return 0
}

// grantGate is what a granting script on one node takes for the data-loss
// rule (docs/design.md §6.2, scripts/trust.lua): the rule's arguments, the
// node's db and whether it keeps a marker per hash slot.
type grantGate struct {
	// floor is a counter floor given by the caller ("": none). The node's
	// own floor (its marker's from) always applies; the Locker gives none.
	floor string
	// trust are the script's arguments of the rule: the rejoin delay in
	// milliseconds ("0" with the rule off: the checks apply, nothing is
	// waited); nil when the node's state is unknown (no marker: the node
	// hands nothing over).
	trust   []any
	sharded bool
	db      int
	// mark is the node's marker for keys under the Locker's prefix on an
	// unsharded node (nodeData.mark), built once; "" when not built.
	mark, prefix string
}

// marker is the node's marker key for lock key (a key "P{R}..."), or ""
// when the gate is unknown: "P~trust:db<N>", or on a sharded node
// "P{T}~trust:db0" with T a tag of the key's hash slot.
func (g grantGate) marker(key string) string {
	if g.trust == nil {
		return ""
	}
	if g.mark != "" && len(key) > len(g.prefix) && key[len(g.prefix)] == '{' && key[:len(g.prefix)] == g.prefix {
		return g.mark
	}
	p := key[:strings.IndexByte(key, '{')]
	db := ":db" + strconv.Itoa(g.db)
	if g.sharded {
		return p + "{" + slotTags()[keySlot(key)] + "}" + markerName + db
	}
	return p + markerName + db
}

// withMarker returns keys followed by the node's marker for lock key, in a
// new slice; keys alone when the gate is unknown.
func (g grantGate) withMarker(keys []string, key string) []string {
	m := g.marker(key)
	if m == "" {
		return keys
	}
	return append(keys[:len(keys):len(keys)], m)
}

// grantOn runs a granting script on node i under the data-loss rule: try
// runs it with the node's gate and says whether it granted. Every check of
// the rule runs in the script, on the node (scripts/trust.lua): a replica
// answers an error, a node that may have lost data refuses ("sitout").
// The Locker adds one check of its own: a node whose maxmemory-policy it
// last read as allkeys-* fails with ErrEvictsLocks (no key of ours is safe
// from eviction there). The last two arguments are unused since Safety v4
// (the out-of-band refusal and the give-back of a grant made on a new
// connection): the callers may drop them.
func grantOn[G any](l *Locker, ctx context.Context, i int, try func(grantGate) (G, bool, error), _ func(why string, left time.Duration) G, _ func() error) (G, error) {
	var zero G
	gate, err := l.gate(ctx, i)
	if err != nil {
		return zero, err
	}
	g, _, err := try(gate)
	return g, err
}

// gate returns node i's gate, reading the node's state (Node.Uptime, which
// redisnode.Node keeps for a few seconds) for its sharding and its eviction
// policy. An unknown state is an error, never a refusal.
func (l *Locker) gate(ctx context.Context, i int) (grantGate, error) {
	u, err := l.nodes[i].Uptime(ctx)
	if errors.Is(err, ErrEvictsLocks) {
		return grantGate{}, err
	}
	if err != nil {
		return grantGate{}, fmt.Errorf("node state unknown: %w", err)
	}
	d := l.learned(i, u)
	return d.gate(l), nil
}

// MarkerKeys returns the data-loss rule's marker keys (docs/design.md
// §6.2) that a Locker with key prefix prefix uses on a node in db db: one,
// "prefix~trust:db<N>", or on a sharded node (a Redis Cluster, db 0) one
// per hash slot, "prefix{T}~trust:db0" with T a tag of the slot, indexed
// by slot. For tools that read the markers (doctor) and tests that write
// them.
func MarkerKeys(prefix string, db int, sharded bool) []string {
	suffix := markerName + ":db" + strconv.Itoa(db)
	if !sharded {
		return []string{prefix + suffix}
	}
	tags := slotTags()
	keys := make([]string, len(tags))
	for s, tag := range tags {
		keys[s] = prefix + "{" + tag + "}" + suffix
	}
	return keys
}

// The data-loss rule (Config.RejoinDelay, docs/design.md §6.2) runs in the
// scripts, on the node (scripts/trust.lua): every script that can answer
// "granted" reads the server's identity (INFO replication) and the node's
// marker, so it holds for every Node, wrapped or not, and for every
// Config. The Locker passes its rejoin delay and names the marker key.

// rejoiningReason starts the reason of a refusal by a node that sits out
// after a loss of data (or whose lock key was lost): it passes with time.
const rejoiningReason = "rejoining"

// rejoiningRefusal reports whether a refusal's reason is a rejoining
// node's.
func rejoiningRefusal(reason string) bool { return strings.HasPrefix(reason, rejoiningReason) }

// nodeData is what the Locker last learned of a node (Node.Uptime) and the
// arguments it gives the node's data-loss rule.
type nodeData struct {
	u Uptime
	// trust are the granting scripts' arguments of the rule (t_trust).
	trust []any
	// db is the db the node says it uses (NodeDB).
	db int
	// mark is the node's marker for the Locker's keys when it is not
	// sharded (one per db), built once: the hot path names it on every
	// granting call.
	mark string
}

// gate is the grantGate of what the Locker learned of the node.
func (d *nodeData) gate(l *Locker) grantGate {
	return grantGate{trust: d.trust, sharded: d.u.Sharded, db: d.db, mark: d.mark, prefix: l.cfg.KeyPrefix}
}

// learned records u for node i and returns what the Locker now knows of
// the node, reusing the last record while u says the same.
func (l *Locker) learned(i int, u Uptime) *nodeData {
	if d := l.data[i].Load(); d != nil && d.u.Sharded == u.Sharded && d.u.Since.IsZero() == u.Since.IsZero() {
		return d
	}
	// The rule off (a negative RejoinDelay) waits nothing: the scripts
	// count a delay of 0 (their checks still apply).
	d := &nodeData{u: u, trust: []any{l.delayArg}, db: nodeDB(l.nodes[i])}
	if !u.Sharded {
		d.mark = l.cfg.KeyPrefix + markerName + ":db" + strconv.Itoa(d.db)
	}
	l.data[i].Store(d)
	return d
}

// gateFor returns node i's gate (grantGate) as far as the Locker knows:
// a node not used yet is asked; one whose state is unknown gets the zero
// gate (no marker: a release hands nothing over there).
func (l *Locker) gateFor(ctx context.Context, i int) grantGate {
	d := l.data[i].Load()
	if d == nil {
		if u, err := l.nodes[i].Uptime(ctx); err == nil {
			d = l.learned(i, u)
		}
	}
	if d == nil {
		return grantGate{}
	}
	return d.gate(l)
}

// acquireOn asks node i for the lock under the data-loss rule (grantOn).
func (l *Locker) acquireOn(ctx context.Context, i int, a acquireArgs) (grant, error) {
	node := l.nodes[i]
	return grantOn(l, ctx, i, func(g grantGate) (grant, bool, error) {
		a.floor, a.trust = g.floor, g.trust
		a.keys = g.withMarker(a.keys, a.keys[0])
		gr, err := acquire(ctx, node, a)
		return gr, gr.OK, err
	}, nil, nil)
}

// seedStep is the value the Locker passes in the seed-step argument that
// fence, renew and rehold still take and no longer read: a new counter's
// start is rounded to a node-side constant (scripts/counter.lua, c_step),
// so that no Config can make tokens go back.
func seedStep(c Config) string {
	d := c.RejoinDelay
	if d < 0 {
		d = c.LeaseDuration
	}
	return strconv.FormatInt(max(d.Microseconds()/2, 1), 10)
}
