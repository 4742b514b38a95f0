package redlock

import (
	"context"
	"fmt"
	"strconv"
)

// grantOn is the rejoin rule of acquireOn (docs/design.md §6.1) for any
// granting script: the read-write lock's and AcquireAll's. try runs the
// script on node i with the fence counter's floor ("" for none) and says
// whether it granted; a node sitting out its rejoin delay refuses (refuse
// makes the refusal from the reason) without being asked; and a grant made
// while the node opened a connection (its server may have restarted just
// before) is checked again and given back (giveBack) when the node turns
// out to be rejoining. A give-back the node did not confirm is an error
// (outcome unknown), never a refusal, so that the attempt's clean-up
// releases it again.
func grantOn[G any](l *Locker, ctx context.Context, i int, try func(floor string) (G, bool, error), refuse func(why string) G, giveBack func() error) (G, error) {
	var zero G
	node := l.nodes[i]
	if l.cfg.RejoinDelay < 0 {
		g, _, err := try("")
		return g, err
	}
	u, err := node.Uptime(ctx)
	if err != nil {
		return zero, fmt.Errorf("rejoin state unknown: %w", err)
	}
	l.durable[i].Store(u.Durable)
	if why := rejoining(u, l.cfg.RejoinDelay); why != "" {
		return refuse(why), nil
	}
	floor := ""
	if !u.Durable && u.BootMicros > 0 {
		floor = strconv.FormatInt(u.BootMicros+l.cfg.RejoinDelay.Microseconds(), 10)
	}
	g, ok, err := try(floor)
	if err != nil || !ok {
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
	if err := giveBack(); err != nil {
		return zero, fmt.Errorf("%s; giving its grant back failed: %w", why, err)
	}
	return refuse(why), nil
}
