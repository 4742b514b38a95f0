package testutil

import (
	"context"
	"errors"
	"net"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// ErrCut is what a client behind a cut Gate fails with.
var ErrCut = errors.New("testutil: process cut off")

// Gate is a go-redis hook (client.AddHook(gate)) that cuts one process off
// from its nodes: while cut, every dial and command of the clients it is
// added to fails at once with ErrCut. It stands for a crashed or frozen
// process: its renewals stop, and its locks stay on the nodes until their
// TTL runs out. The zero value is an open gate; it is safe for concurrent
// use.
type Gate struct{ down atomic.Bool }

// Cut makes every call fail from now on.
func (g *Gate) Cut() { g.down.Store(true) }

// Mend lets calls through again.
func (g *Gate) Mend() { g.down.Store(false) }

// DialHook implements redis.Hook.
func (g *Gate) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if g.down.Load() {
			return nil, ErrCut
		}
		return next(ctx, network, addr)
	}
}

// ProcessHook implements redis.Hook.
func (g *Gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if g.down.Load() {
			cmd.SetErr(ErrCut)
			return ErrCut
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (g *Gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if g.down.Load() {
			for _, cmd := range cmds {
				cmd.SetErr(ErrCut)
			}
			return ErrCut
		}
		return next(ctx, cmds)
	}
}
