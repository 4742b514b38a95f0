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

// keysFor returns keys (lockKeys) as node i takes them: with the marker of
// the lock's slot when the node is sharded. A node not used yet is asked.
func (l *Locker) keysFor(ctx context.Context, i int, keys []string) []string {
	d := l.data[i].Load()
	if d == nil {
		if u, err := l.nodes[i].Uptime(ctx); err == nil {
			d = l.learned(i, u)
		}
	}
	if d != nil && d.u.Sharded {
		return slotKeys(keys)
	}
	return keys
}

// acquireOn asks node i for the lock, unless the node is rejoining: then
// it refuses with the reason. A grant made while the node opened a
// connection (its server may have restarted, or been replaced, just
// before it) is checked again, and given back if the node turns out to be
// rejoining or another server.
func (l *Locker) acquireOn(ctx context.Context, i int, a acquireArgs) (grant, error) {
	node := l.nodes[i]
	if l.cfg.RejoinDelay < 0 {
		return acquire(ctx, node, a)
	}
	u, err := node.Uptime(ctx)
	if err != nil {
		return grant{}, fmt.Errorf("rejoin state unknown: %w", err) // an error, not a refusal
	}
	d := l.learned(i, u)
	if r := rejoining(u, l.cfg.RejoinDelay); r.Reason != "" {
		return r, nil
	}
	// A node that may have lost increments in its last restart raises
	// older counters to its start plus the rejoin delay: above every token
	// issued before the restart, while node clocks differ by less than half
	// the delay (docs/design.md, section 6.1).
	if !u.Durable && u.BootMicros > 0 {
		a.floor = strconv.FormatInt(u.BootMicros+l.cfg.RejoinDelay.Microseconds(), 10)
	}
	a.trust = d.trust
	if u.Sharded {
		a.keys = slotKeys(a.keys)
	}
	g, err := acquire(ctx, node, a)
	if err != nil || !g.OK {
		return g, err
	}
	again, err := node.Uptime(ctx)
	if err == nil && again.Conns == u.Conns {
		return g, nil
	}
	why := rejoining(again, l.cfg.RejoinDelay).Reason
	switch {
	case err != nil:
		why = fmt.Sprintf("rejoin state unknown: %v", err)
	case why == "" && again.Servers != u.Servers:
		why = rejoiningReason + ": the node's server changed during the call"
	}
	if why == "" {
		return g, nil
	}
	// Give the grant back. Until the node has answered, our token may
	// still hold the lock there: an error (outcome unknown), so that a
	// failed attempt's clean-up releases it again, never a refusal.
	if _, err := release(ctx, node, releaseArgs{keys: a.keys, token: a.token}); err != nil {
		return grant{}, fmt.Errorf("%s; giving its grant back failed: %w", why, err)
	}
	return grant{Reason: why}, nil
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
