package redlock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/scripts"
)

// A RedisNode's transport batches concurrent script calls: many goroutines
// acquiring, renewing and releasing at once share a round trip to the node
// (one pipeline: one write and one read on one connection) instead of
// paying one each. It is adaptive, so that a lone caller pays nothing: a
// call goes out at once, on its own, while fewer than batchFlushers (2)
// round trips are in flight on the node; only the calls that arrive while
// all of them are busy wait, and the next free flusher sends everything
// that queued meanwhile (up to batchMax calls) as one pipeline.
//
// Every call stays bounded by its own context: a caller waiting in the
// queue or for a pipeline in flight returns when its context ends, a
// queued call whose caller left is taken out of the queue, and a pipeline
// runs under the latest deadline of its calls. A node that hangs holds up
// only its own calls (each node has its own batcher), and at most
// batchPending calls are queued or in flight per node: beyond that, callers
// wait for room, again bounded by their contexts.

const (
	// batchFlushers bounds the round trips in flight on one node at once
	// (single calls and pipelines), hence its connections in use.
	batchFlushers = 2
	// batchMax bounds the calls in one pipeline.
	batchMax = 128
	// batchPending bounds the calls queued or in flight on one node.
	batchPending = 1024
)

// evalCall is one Eval waiting in a batcher's queue or in a pipeline.
type evalCall struct {
	ctx    context.Context
	script *scripts.Script
	keys   []string
	args   []any
	// taken is set, under the batcher's lock, when a flusher took the call
	// out of the queue; reply and err are set before done closes.
	taken bool
	reply any
	err   error
	done  chan struct{}
}

// batcher is one node's queue of script calls and its flushers.
type batcher struct {
	client redis.UniversalClient
	// room holds a token per call queued or in flight (backpressure).
	room chan struct{}

	mu       sync.Mutex
	queue    []*evalCall
	flushing int // round trips in flight: single calls and flushers
}

func newBatcher(client redis.UniversalClient) *batcher {
	return &batcher{client: client, room: make(chan struct{}, batchPending)}
}

// eval runs script on the node (EVALSHA, then EVAL when the server lacks
// the script), alone or in a pipeline with other calls, and returns by
// ctx's end.
func (b *batcher) eval(ctx context.Context, script *scripts.Script, keys []string, args []any) (any, error) {
	select {
	case b.room <- struct{}{}:
	default:
		select {
		case b.room <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	b.mu.Lock()
	if b.flushing < batchFlushers {
		// Nothing queued (calls queue only while every flusher is busy):
		// go at once, alone, under the caller's own context.
		b.flushing++
		b.mu.Unlock()
		reply, err := run(ctx, b.client, script, keys, args)
		<-b.room
		b.mu.Lock()
		if len(b.queue) > 0 {
			go b.flush() // this round trip's place passes to a flusher
		} else {
			b.flushing--
		}
		b.mu.Unlock()
		return reply, err
	}
	c := &evalCall{ctx: ctx, script: script, keys: keys, args: args, done: make(chan struct{})}
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.reply, c.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	if !c.taken {
		// Still queued: leave nothing behind.
		if i := slices.Index(b.queue, c); i >= 0 {
			b.queue = slices.Delete(b.queue, i, i+1)
		}
		b.mu.Unlock()
		<-b.room
		return nil, ctx.Err()
	}
	b.mu.Unlock()
	// In a pipeline: its flusher frees the call's room when it is back.
	select {
	case <-c.done:
		return c.reply, c.err
	default:
		return nil, ctx.Err()
	}
}

// flush sends the queued calls as pipelines until the queue is empty. It
// runs on a goroutine of its own, holding one of the node's flusher places.
func (b *batcher) flush() {
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.flushing--
			b.mu.Unlock()
			return
		}
		n := min(len(b.queue), batchMax)
		batch := slices.Clone(b.queue[:n])
		b.queue = slices.Delete(b.queue, 0, n)
		if len(b.queue) == 0 && cap(b.queue) > 4*batchMax {
			b.queue = nil // after a stall: do not keep its backlog's array
		}
		for _, c := range batch {
			c.taken = true
		}
		b.mu.Unlock()
		b.send(batch)
		for _, c := range batch {
			close(c.done)
			<-b.room
		}
	}
}

// send runs batch as one pipeline of EVALSHAs, then the calls the server
// answered NOSCRIPT as a pipeline of EVALs, and sets each call's reply or
// error. Calls whose callers have left are skipped. The pipelines run under
// the latest deadline of the calls (none if one has none), so that no call
// is cut short by another's; each caller still returns by its own.
func (b *batcher) send(batch []*evalCall) {
	live := batch[:0:0]
	var deadline time.Time
	unbounded := false
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			continue
		}
		live = append(live, c)
		if d, ok := c.ctx.Deadline(); !ok {
			unbounded = true
		} else if d.After(deadline) {
			deadline = d
		}
	}
	if len(live) == 0 {
		return
	}
	ctx := context.WithoutCancel(live[0].ctx)
	if !unbounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	cmds := b.pipeline(ctx, live, func(p redis.Pipeliner, c *evalCall) *redis.Cmd {
		return p.EvalSha(ctx, c.script.Hash(), c.keys, c.args...)
	})
	var again []*evalCall
	for i, c := range live {
		c.reply, c.err = cmds[i].Result()
		if noScript(c.err) {
			again = append(again, c)
		}
	}
	if len(again) == 0 {
		return
	}
	cmds = b.pipeline(ctx, again, func(p redis.Pipeliner, c *evalCall) *redis.Cmd {
		return p.Eval(ctx, c.script.Source(), c.keys, c.args...)
	})
	for i, c := range again {
		c.reply, c.err = cmds[i].Result()
	}
}

// run runs script alone: EVALSHA, then EVAL when the server answers
// NOSCRIPT (its script cache lacks the script: after a restart or SCRIPT
// FLUSH).
func run(ctx context.Context, c redis.Scripter, script *scripts.Script, keys []string, args []any) (any, error) {
	cmd := c.EvalSha(ctx, script.Hash(), keys, args...)
	if noScript(cmd.Err()) {
		cmd = c.Eval(ctx, script.Source(), keys, args...)
	}
	return cmd.Result()
}

// noScript reports whether err is the server's NOSCRIPT reply to an
// EVALSHA, as go-redis reports it (raw or as redis.ErrNoScript).
func noScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

// pipeline queues one command per call with add and runs them as one
// pipeline; each command carries its own reply or error.
func (b *batcher) pipeline(ctx context.Context, calls []*evalCall, add func(redis.Pipeliner, *evalCall) *redis.Cmd) []*redis.Cmd {
	p := b.client.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = add(p, c)
	}
	_, _ = p.Exec(ctx) // the error is each failed command's own
	return cmds
}

// pending reports the calls queued and the round trips in flight, for
// tests.
func (b *batcher) pending() (queued, flushing, room int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue), b.flushing, len(b.room)
}
