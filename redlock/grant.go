package redlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// grantGate is the rejoin rule (docs/design.md §6.1, §6.2) as a granting
// script on one node takes it: the floor of the node's fence counters, the
// data-loss rule's arguments, and whether the node keeps a marker per
// hash slot.
type grantGate struct {
	// floor raises older counters to it ("" for none): a node that may
	// have lost increments in its last restart.
	floor string
	// trust are the arguments of t_trust (scripts/trust.lua): the delay,
	// the servers' run_ids, flags; nil when the rule is off.
	trust   []any
	sharded bool
}

// marker is the node's marker key for lock key (a key "P{R}..."), or ""
// when the rule is off: on a sharded node, the one of the key's hash slot.
func (g grantGate) marker(key string) string {
	if g.trust == nil {
		return ""
	}
	p := key[:strings.IndexByte(key, '{')]
	if g.sharded {
		return p + "{" + slotTags()[keySlot(key)] + "}" + markerName
	}
	return p + markerName
}

// withMarker returns keys followed by the node's marker for lock key, in a
// new slice; keys alone when the rule is off.
func (g grantGate) withMarker(keys []string, key string) []string {
	m := g.marker(key)
	if m == "" {
		return keys
	}
	return append(keys[:len(keys):len(keys)], m)
}

// grantOn applies the rejoin rule to any granting script on node i: try
// runs the script with the gate and says whether it granted; a node
// sitting out its rejoin delay after a restart refuses (refuse makes the
// refusal from the reason and the time left) without being asked; the
// script itself refuses where the node's marker shows a loss of data. A
// grant made while the node opened a connection (its server may have
// restarted, or been replaced, just before it) is checked again and given
// back (giveBack) when the node turns out to be rejoining or another
// server. A give-back the node did not confirm is an error (outcome
// unknown), never a refusal, so that the attempt's clean-up releases it
// again.
func grantOn[G any](l *Locker, ctx context.Context, i int, try func(grantGate) (G, bool, error), refuse func(why string, left time.Duration) G, giveBack func() error) (G, error) {
	var zero G
	node := l.nodes[i]
	if l.cfg.RejoinDelay < 0 {
		g, _, err := try(grantGate{})
		return g, err
	}
	u, err := node.Uptime(ctx)
	if err != nil {
		return zero, fmt.Errorf("rejoin state unknown: %w", err) // an error, not a refusal
	}
	d := l.learned(i, u)
	if r := rejoining(u, l.cfg.RejoinDelay); r.Reason != "" {
		return refuse(r.Reason, r.HolderTTL), nil
	}
	gate := grantGate{trust: d.trust, sharded: u.Sharded}
	// A node that may have lost increments in its last restart raises
	// older counters to its start plus the rejoin delay: above every token
	// issued before the restart, while node clocks differ by less than half
	// the delay (docs/design.md, section 6.1).
	if !u.Durable && u.BootMicros > 0 {
		gate.floor = strconv.FormatInt(u.BootMicros+l.cfg.RejoinDelay.Microseconds(), 10)
	}
	g, ok, err := try(gate)
	if err != nil || !ok {
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
	if err := giveBack(); err != nil {
		return zero, fmt.Errorf("%s; giving its grant back failed: %w", why, err)
	}
	return refuse(why, 0), nil
}
