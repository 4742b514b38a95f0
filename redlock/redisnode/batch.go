package redisnode

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/scripts"
)

// A Node's transport batches concurrent script calls: many goroutines
// acquiring, renewing and releasing at once share a round trip to the node
// (one pipeline: one write and one read on one connection) instead of
// paying one each. It is adaptive, so that a lone caller pays nothing: a
// call goes out at once, on its own, while fewer than batchFlushers (2)
// round trips are in flight on the node; only the calls that arrive while
// all of them are busy wait, and the next free flusher sends everything
// that queued meanwhile (up to batchMax calls) as one pipeline.
//
// Every call stays bounded by its own context: a caller waiting in the
// queue returns when its context ends, and its call is taken out of the
// queue; a caller whose call is in flight returns when its context ends
// too, unless the call can grant (below). A node that hangs holds up only
// its own calls (each node has its own batcher), and at most batchPending
// calls are queued or in flight per node: beyond that, callers wait for
// room, again bounded by their contexts.
//
// Nothing is written after its caller's deadline (Safety v4, rule 5;
// docs/design.md §6): a round trip waits for a connection (or dials one)
// only until the earliest deadline of its calls, a pipeline takes only the
// calls whose deadline has not passed, and so does every retry (EVAL
// after NOSCRIPT, FUNCTION LOAD and FCALL after "Function not found",
// EVALSHA after an FCALL refused up front: functions.go): the others keep
// their reply, a certain "did not run". A call that can grant
// (scripts.Grants, Rehold) and was written may still run on the server after its caller's deadline: its
// connection is read on to its reply (for half as long again as the call
// had, at most: replyBound), and its caller waits for that reply instead of
// leaving at its deadline, so that the Locker's clean-up, which waits for
// its calls to end (attempt.go: cleanup), comes after a late grant and
// releases it. Were the connection closed at the deadline instead (go-redis
// closes a connection whose read timed out), the server would still run
// the call, in an order that no later call on another connection is sure
// to follow.

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
	ctx context.Context
	// until bounds the wait for the call's reply once it is written: its
	// deadline and as long again (zero: no deadline).
	until  time.Time
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
	fn     *functions
	// room holds a token per call queued or in flight (backpressure).
	room chan struct{}

	mu       sync.Mutex
	queue    []*evalCall
	flushing int // round trips in flight: single calls and flushers
}

func newBatcher(client redis.UniversalClient) *batcher {
	return &batcher{client: client, fn: newFunctions(client), room: make(chan struct{}, batchPending)}
}

// eval runs script on the node (FCALL or EVALSHA, functions.go), alone
// or in a pipeline with other calls, and returns by ctx's end.
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
		rctx := ctx
		if waitsForReply(script) {
			if until := replyBound(ctx); !until.IsZero() {
				rctx = readOn{ctx, until}
			}
		}
		reply, err := b.run(rctx, script, keys, args)
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
	// The call outlives its caller when the caller leaves at its deadline
	// while a flusher writes it: it keeps keys of its own.
	c := &evalCall{ctx: ctx, until: replyBound(ctx), script: script, keys: slices.Clone(keys), args: args, done: make(chan struct{})}
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
	// In a pipeline: its flusher frees the call's room when it is back. A
	// call that can grant waits for its reply, which the flusher reads
	// until c.until at the latest.
	if waitsForReply(script) {
		<-c.done
		return c.reply, c.err
	}
	select {
	case <-c.done:
		return c.reply, c.err
	default:
		return nil, ctx.Err()
	}
}

// waitsForReply reports whether a call of script, once written, is read
// to its reply past its caller's deadline: the scripts that can grant a
// lock (a late grant must be seen, so that the caller's clean-up releases
// it after it ran).
func waitsForReply(script *scripts.Script) bool {
	return scripts.Grants(script) || script == scripts.Rehold
}

// replyBound is how long a written call's reply is waited for: ctx's
// deadline, and half as long again as was left of it (zero when ctx has
// none). A reply later still is given up: the call then ends by a closed
// connection, and if the server ran it after all, a grant made so late
// stays, granted to nobody, until its TTL (a lock kept busy, never two
// holders).
func replyBound(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Time{}
	}
	return d.Add(time.Until(d) / 2)
}

// readOn is the context a round trip runs under: it ends (Done, Err) when
// its calls' time to be written ends, so that go-redis stops waiting for a
// connection or dialling one, and nothing is written, after it; its
// Deadline, which go-redis uses only for the socket's read and write
// deadlines, is later, so that a round trip already written is read to
// its reply. (go-redis sets the write deadline from it too: the write
// follows the connection's hand-over at once.)
type readOn struct {
	context.Context
	until time.Time
}

// Deadline implements context.Context: none for a zero until.
func (c readOn) Deadline() (time.Time, bool) { return c.until, !c.until.IsZero() }

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

// send runs batch as pipelines: each call first as an FCALL of its
// script's function or as an EVALSHA (functions.go), then those that need
// it again, one pipeline per round: FCALLs behind one FUNCTION LOAD when
// the server lacked the library, EVALSHAs where it refused the FCALL,
// EVALs where it lacked the script; and sets each call's reply or error.
// Calls whose callers have left, or whose deadlines have passed, are
// not sent (in any round). Each pipeline is written only
// before the earliest deadline of its calls and is read until the latest
// of their reply bounds (none if one has no deadline), so that no call is
// cut short by another's; a caller that cannot grant still returns by its
// own deadline.
func (b *batcher) send(batch []*evalCall) {
	round := make([]stage, len(batch))
	for i, c := range batch {
		round[i] = b.fn.first(c.script)
	}
	for len(batch) > 0 {
		// Those whose deadline passed meanwhile keep their last reply.
		live, stages := batch[:0:0], round[:0:0]
		for i, c := range batch {
			if err := c.ctx.Err(); err != nil {
				if c.err == nil && c.reply == nil {
					c.err = err
				}
				continue
			}
			live, stages = append(live, c), append(stages, round[i])
		}
		if len(live) == 0 {
			return
		}
		load := slices.Contains(stages, stLoadFcall)
		cmds, loadCmd := b.pipeline(live, load, func(ctx context.Context, i int, c *evalCall) *redis.Cmd {
			return b.fn.command(ctx, stages[i], c.script, c.keys, c.args)
		})
		var loadErr error
		if loadCmd != nil {
			loadErr = loadCmd.Err()
		}
		batch, round = nil, nil // not batch[:0]: the flusher's slice
		for i, c := range live {
			c.reply, c.err = cmds[i].Result()
			if nx := b.fn.next(stages[i], c.err, loadErr); nx != stDone {
				batch, round = append(batch, c), append(round, nx)
			}
		}
	}
}

// run runs script alone, first as an FCALL of its function or as an
// EVALSHA (functions.go), then again as the reply requires: behind a
// FUNCTION LOAD, as EVALSHA, as EVAL when the server answers NOSCRIPT (its
// script cache lacks the script: after a restart or SCRIPT FLUSH). Not
// after the deadline: each reply that leads to another round says the
// call did not run.
func (b *batcher) run(ctx context.Context, script *scripts.Script, keys []string, args []any) (any, error) {
	st := b.fn.first(script)
	for {
		cmd := b.fn.command(ctx, st, script, keys, args)
		var loadErr error
		if st == stLoadFcall {
			p := b.client.Pipeline()
			load := b.fn.loadCmd(ctx)
			_ = p.Process(ctx, load)
			_ = p.Process(ctx, cmd)
			_, _ = p.Exec(ctx) // the error is each command's own
			loadErr = load.Err()
		} else {
			_ = b.client.Process(ctx, cmd)
		}
		st = b.fn.next(st, cmd.Err(), loadErr)
		if st == stDone || ctx.Err() != nil {
			return cmd.Result()
		}
	}
}

// The command names, boxed once.
var evalSha, eval any = "evalsha", "eval"

// shaArgs holds each script's digest boxed in an interface once
// (*scripts.Script to any), so that a call does not box it again.
var shaArgs sync.Map

// shaArg returns script's digest as a command argument.
func shaArg(script *scripts.Script) any {
	if v, ok := shaArgs.Load(script); ok {
		return v
	}
	v, _ := shaArgs.LoadOrStore(script, any(script.Hash()))
	return v
}

// command is an EVAL, EVALSHA or FCALL (name) of script (its source, boxed
// digest or function name) with keys and args. It builds
// the argument list once, as go-redis's EvalSha would, but without boxing
// each key in an interface: a key goes as a pointer into keys (go-redis
// writes a *string as the string), so keys must not change until the
// command is written (a hook that prints commands shows the keys as
// pointers). The arguments already are interfaces. The key position is
// given, as EvalSha gives it, for a Redis Cluster's routing.
func command(ctx context.Context, name, script any, keys []string, args []any) *redis.Cmd {
	all := make([]any, 3+len(keys)+len(args))
	all[0], all[1], all[2] = name, script, len(keys)
	for i := range keys {
		all[3+i] = &keys[i]
	}
	copy(all[3+len(keys):], args)
	cmd := redis.NewCmd(ctx, all...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}

// noScript reports whether err is the server's NOSCRIPT reply to an
// EVALSHA, as go-redis reports it (raw or as redis.ErrNoScript).
func noScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

// pipeline queues one command per call with add (behind a FUNCTION LOAD
// of the node's library if load is set: its command is returned too) and
// runs them as one pipeline; each command carries its own reply or error. The pipeline
// waits for a connection only until the earliest deadline of its calls
// (nothing is written after a call's deadline) and is read until the
// latest of their reply bounds.
func (b *batcher) pipeline(calls []*evalCall, load bool, add func(context.Context, int, *evalCall) *redis.Cmd) ([]*redis.Cmd, *redis.Cmd) {
	var first, until time.Time
	unbounded := false
	for _, c := range calls {
		d, ok := c.ctx.Deadline()
		if !ok {
			unbounded = true
			continue
		}
		if first.IsZero() || d.Before(first) {
			first = d
		}
		if c.until.After(until) {
			until = c.until
		}
	}
	var ctx context.Context = context.WithoutCancel(calls[0].ctx)
	if !first.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, first)
		defer cancel()
		if unbounded {
			until = time.Time{}
		}
		ctx = readOn{ctx, until}
	}
	p := b.client.Pipeline()
	var loadCmd *redis.Cmd
	if load {
		loadCmd = b.fn.loadCmd(ctx)
		_ = p.Process(ctx, loadCmd)
	}
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = add(ctx, i, c)
		_ = p.Process(ctx, cmds[i])
	}
	_, _ = p.Exec(ctx) // the error is each failed command's own
	return cmds, loadCmd
}

// pending reports the calls queued and the round trips in flight, for
// tests.
func (b *batcher) pending() (queued, flushing, room int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue), b.flushing, len(b.room)
}
