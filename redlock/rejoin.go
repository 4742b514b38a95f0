package redlock

import (
	"context"
	"strconv"
	"strings"
)

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
}

// learned records u for node i and returns what the Locker now knows of
// the node, reusing the last record while u says the same.
func (l *Locker) learned(i int, u Uptime) *nodeData {
	if d := l.data[i].Load(); d != nil && d.u.Sharded == u.Sharded && d.u.Since.IsZero() == u.Since.IsZero() {
		return d
	}
	delay := "-1"
	if l.cfg.RejoinDelay >= 0 {
		delay = strconv.FormatInt(l.cfg.RejoinDelay.Milliseconds(), 10)
	}
	d := &nodeData{u: u, trust: []any{delay}, db: nodeDB(l.nodes[i])}
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
	return grantGate{trust: d.trust, sharded: d.u.Sharded, db: d.db}
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

// seedStep is the value the Locker passes in the scripts' former seed-step
// argument, which they no longer read: a new counter's start is rounded to
// a node-side constant (scripts/counter.lua, c_step), so that no Config can
// make tokens go back. It stays non-empty: a hand-over (handOver.step)
// needs it set.
func seedStep(c Config) string {
	d := c.RejoinDelay
	if d < 0 {
		d = c.LeaseDuration
	}
	return strconv.FormatInt(max(d.Microseconds()/2, 1), 10)
}
