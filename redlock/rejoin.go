package redlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The rejoin rule (Config.RejoinDelay, docs/design.md §6.1): a node whose
// server started less than RejoinDelay ago, without appendfsync always,
// may have lost locks it granted before the restart, so it grants nothing
// until every lease it may have forgotten has expired. The rule reads the
// server's uptime through Node.Uptime, so it holds for every Node, wrapped
// or not.

// rejoining returns the refusal of a node whose server's data is
// described by u and that must not grant yet (its reason, and its
// HolderTTL the time left), or a zero grant when it may.
func rejoining(u Uptime, delay time.Duration) grant {
	if u.Since.IsZero() || delay < 0 || u.Durable {
		return grant{}
	}
	if up := time.Since(u.Since); up < delay {
		return grant{Reason: fmt.Sprintf("%s: up %s of the %s rejoin delay, without appendfsync always", rejoiningReason, up.Round(time.Second), delay),
			HolderTTL: delay - up}
	}
	return grant{}
}

// rejoiningReason starts the reason of a rejoining node's refusal.
const rejoiningReason = "rejoining"

// rejoiningRefusal reports whether a refusal's reason is a rejoining
// node's.
func rejoiningRefusal(reason string) bool { return strings.HasPrefix(reason, rejoiningReason) }

// nodeData is what the Locker last learned of a node's data
// (Node.Uptime) and the arguments it gives the node's data-loss rule.
type nodeData struct {
	u Uptime
	// trust are the acquire script's arguments of the rule (nil: off).
	trust []any
}

// learned records u for node i and returns what the Locker now knows of
// the node, reusing the last record while u says the same.
func (l *Locker) learned(i int, u Uptime) *nodeData {
	if d := l.data[i].Load(); d != nil && d.u.Servers == u.Servers && d.u.Durable == u.Durable &&
		d.u.MayEvict == u.MayEvict && d.u.Sharded == u.Sharded && d.u.Since.IsZero() == u.Since.IsZero() {
		return d
	}
	d := &nodeData{u: u}
	if l.cfg.RejoinDelay >= 0 && !u.Since.IsZero() {
		flags := ""
		if u.Durable {
			flags += "d"
		}
		if u.MayEvict {
			flags += "e"
		}
		d.trust = []any{strconv.FormatInt(l.cfg.RejoinDelay.Milliseconds(), 10), u.Servers, flags}
	}
	l.data[i].Store(d)
	return d
}

// gateFor returns node i's gate (grantGate) as far as the Locker knows:
// a node not used yet is asked.
func (l *Locker) gateFor(ctx context.Context, i int) grantGate {
	d := l.data[i].Load()
	if d == nil && l.cfg.RejoinDelay >= 0 {
		if u, err := l.nodes[i].Uptime(ctx); err == nil {
			d = l.learned(i, u)
		}
	}
	if d == nil {
		return grantGate{}
	}
	return grantGate{trust: d.trust, sharded: d.u.Sharded}
}

// acquireOn asks node i for the lock under the rejoin rule (grantOn).
func (l *Locker) acquireOn(ctx context.Context, i int, a acquireArgs) (grant, error) {
	node := l.nodes[i]
	return grantOn(l, ctx, i, func(g grantGate) (grant, bool, error) {
		a.floor, a.trust = g.floor, g.trust
		a.keys = g.withMarker(a.keys, a.keys[0])
		gr, err := acquire(ctx, node, a)
		return gr, gr.OK, err
	}, func(why string, left time.Duration) grant {
		return grant{Reason: why, HolderTTL: left}
	}, func() error {
		_, err := release(ctx, node, releaseArgs{keys: a.keys, token: a.token})
		return err
	})
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
