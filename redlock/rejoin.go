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

// rejoining returns why a node whose server's data is described by u must
// not grant yet, or "" when it may.
func rejoining(u Uptime, delay time.Duration) string {
	if u.Since.IsZero() || delay < 0 || u.Durable {
		return ""
	}
	if up := time.Since(u.Since); up < delay {
		return fmt.Sprintf("%s: up %s of the %s rejoin delay, without appendfsync always", rejoiningReason, up.Round(time.Second), delay)
	}
	return ""
}

// rejoiningReason starts the reason of a rejoining node's refusal.
const rejoiningReason = "rejoining"

// rejoiningRefusal reports whether a refusal's reason is a rejoining
// node's.
func rejoiningRefusal(reason string) bool { return strings.HasPrefix(reason, rejoiningReason) }

// acquireOn asks node i for the lock, unless the node is rejoining: then
// it refuses with the reason. A grant made while the node opened a
// connection (its server may have restarted just before it) is checked
// again, and given back if the node turns out to be rejoining.
func (l *Locker) acquireOn(ctx context.Context, i int, a acquireArgs) (grant, error) {
	node := l.nodes[i]
	if l.cfg.RejoinDelay < 0 {
		return acquire(ctx, node, a)
	}
	u, err := node.Uptime(ctx)
	if err != nil {
		return grant{}, fmt.Errorf("rejoin state unknown: %w", err) // an error, not a refusal
	}
	l.durable[i].Store(u.Durable)
	if why := rejoining(u, l.cfg.RejoinDelay); why != "" {
		return grant{Reason: why}, nil
	}
	// A node that may have lost increments in its last restart raises
	// older counters to its start plus the rejoin delay: above every token
	// issued before the restart, while node clocks differ by less than half
	// the delay (docs/design.md, section 6.1).
	if !u.Durable && u.BootMicros > 0 {
		a.floor = strconv.FormatInt(u.BootMicros+l.cfg.RejoinDelay.Microseconds(), 10)
	}
	g, err := acquire(ctx, node, a)
	if err != nil || !g.OK {
		return g, err
	}
	again, err := node.Uptime(ctx)
	if err == nil && again.Conns == u.Conns {
		return g, nil
	}
	why := rejoining(again, l.cfg.RejoinDelay)
	if err != nil {
		why = fmt.Sprintf("rejoin state unknown: %v", err)
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
