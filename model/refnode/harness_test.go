package refnode

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// The scaffolding both differential tests (the mutex's, refnode_test.go,
// and the read-write lock's, rw_test.go) drive their scripts with: the
// seeds and steps, one redis-server under a fake clock, a harness per
// seed, and the read of a call's keys, reply and clock in one MULTI.

// harness is one seed's run: the server's client, the seed's random
// source and what the run has seen so far.
type harness struct {
	t     *testing.T
	srv   *testutil.RedisServer
	clock *testutil.FakeClock
	c     *redis.Client
	rng   *rand.Rand
	ctx   context.Context
	calls int
	// sent counts the script calls observe sent, fcalls those of them
	// sent as an FCALL (sender).
	sent, fcalls int
	// outcomes counts the calls by what they answered (granted, held,
	// sits out and why...), so that the log shows which paths ran
	outcomes map[string]int
	// trace keeps the last traceLen steps, for a failure's report.
	trace    []string
	traceLen int
}

func (h *harness) pick(xs ...int64) int64 { return xs[h.rng.IntN(len(xs))] }

func (h *harness) note(s string) {
	h.trace = append(h.trace, s)
	if len(h.trace) > h.traceLen {
		h.trace = h.trace[1:]
	}
}

// differential runs a differential test: under -short it skips; else it
// starts one redis-server under a fake clock and, for each seed
// (REDLOCK_REFNODE_SEED, or 1, 2 and 3), runs run on a flushed server
// with REDLOCK_REFNODE_STEPS steps (default 400) and a random source
// seeded (seed, seed*mult). With the default seeds, every outcome of
// want must have been seen at least once: the sequences cover every path.
func differential(t *testing.T, mult uint64, traceLen int, want []string, run func(h *harness, steps int)) {
	if testing.Short() {
		t.Skip("starts redis-server (not under -short)")
	}
	clock := testutil.NewFakeClock(t)
	srv := testutil.StartRedisServer(t, clock.Option())
	seeds := []uint64{1, 2, 3}
	if s := os.Getenv("REDLOCK_REFNODE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seeds = []uint64{v}
	}
	steps := 400
	if s := os.Getenv("REDLOCK_REFNODE_STEPS"); s != "" {
		v, err := strconv.Atoi(s)
		require.NoError(t, err)
		steps = v
	}
	all := map[string]int{}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			// A patient client: the harness times nothing, and a loaded
			// machine can hold a MULTI up for longer than testutil's
			// fail-fast timeouts.
			c := redis.NewClient(testutil.FastFailOptions(srv.Addr(), "", time.Minute))
			t.Cleanup(func() { _ = c.Close() })
			h := &harness{t: t, srv: srv, clock: clock, c: c, rng: rand.New(rand.NewPCG(seed, seed*mult)),
				ctx: testutil.Context(t), outcomes: map[string]int{}, traceLen: traceLen}
			require.NoError(t, h.c.FlushAll(h.ctx).Err())
			run(h, steps)
			for o, n := range h.outcomes {
				all[o] += n
			}
		})
	}
	if len(seeds) > 1 && !t.Failed() {
		for _, o := range want {
			require.Positive(t, all[o], "no call had the outcome %q: the sequences do not cover it", o)
		}
	}
}

// observed is one script call as the server ran it: the clock just
// before and just after (µs), the server's identity, the reply, and
// what read returned before and after the call.
type observed[S any] struct {
	t0, t1        int64
	id            Ident
	reply         Reply
	before, after S
}

// tol is the slack of time-valued fields: slackMS plus the time between
// the two TIME reads around the call.
func (o observed[S]) tol() int64 { return slackMS + (o.t1-o.t0)/1000 }

// observe runs script s with keys and args inside one MULTI, between two
// TIME reads, INFO replication and two reads of the keys (read queues
// them, state decodes them once the MULTI ran).
func observe[C, S any](h *harness, s *scripts.Script, keys []string, args []any,
	read func(p redis.Pipeliner) C, state func(C) S) observed[S] {
	var t0, t1 *redis.TimeCmd
	var info *redis.StringCmd
	var pre, post C
	var ev *redis.Cmd
	send := h.sender(s)
	_, _ = h.c.TxPipelined(h.ctx, func(p redis.Pipeliner) error {
		t0 = p.Time(h.ctx)
		info = p.Info(h.ctx, "replication")
		pre = read(p)
		ev = send(p, keys, args)
		t1 = p.Time(h.ctx)
		post = read(p)
		return nil
	})
	require.NoError(h.t, t0.Err())
	return observed[S]{t0: t0.Val().UnixMicro(), t1: t1.Val().UnixMicro(), id: identOf(info.Val()),
		reply: replyOf(ev), before: state(pre), after: state(post)}
}

// sender returns how the next call of script s is queued in the MULTI:
// every other call as an FCALL of the scripts' function library
// (scripts.Functions, as redisnode runs them on Redis 7; loaded again
// first if a restart lost it), the others as EVAL.
func (h *harness) sender(s *scripts.Script) func(p redis.Pipeliner, keys []string, args []any) *redis.Cmd {
	h.sent++
	fn, ok := scripts.Functions.Function(s)
	if !ok || h.sent%2 == 0 {
		return func(p redis.Pipeliner, keys []string, args []any) *redis.Cmd {
			return p.Eval(h.ctx, s.Source(), keys, args...)
		}
	}
	if err := h.c.FunctionLoad(h.ctx, scripts.Functions.Source()).Err(); err != nil {
		require.ErrorContains(h.t, err, "already exists")
	}
	h.fcalls++
	return func(p redis.Pipeliner, keys []string, args []any) *redis.Cmd {
		return p.FCall(h.ctx, fn, keys, args...)
	}
}

// clockStep moves the server's clock by d (a step forward or back) and
// returns the step as the trace names it.
func (h *harness) clockStep(d time.Duration) string {
	require.NoError(h.t, h.clock.Set(h.clock.Offset()+d))
	if d < 0 {
		return "clock -" + (-d).String()
	}
	return "clock +" + d.String()
}

// keyCmds reads one key's value and absolute expiry inside a MULTI.
type keyCmds struct {
	get *redis.StringCmd
	exp *redis.Cmd
}

func readKey(p redis.Pipeliner, ctx context.Context, k string) keyCmds {
	return keyCmds{get: p.Get(ctx, k), exp: p.Do(ctx, "PEXPIRETIME", k)}
}

func (k keyCmds) key() Key {
	v, err := k.get.Result()
	if err != nil {
		return Key{}
	}
	e, _ := k.exp.Int64()
	if e < 0 {
		e = 0
	}
	return Key{Present: true, Val: v, ExpMS: e}
}

func identOf(info string) Ident {
	var id Ident
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "role:slave":
			id.Replica = true
		case strings.HasPrefix(line, "master_replid:"):
			id.ReplID = strings.TrimPrefix(line, "master_replid:")
		}
	}
	return id
}

func replyOf(c *redis.Cmd) Reply {
	v, err := c.Result()
	if err != nil {
		return Reply{Err: err.Error()}
	}
	switch x := v.(type) {
	case int64:
		return intReply(x)
	case []any:
		return Reply{Array: x}
	}
	return Reply{Err: fmt.Sprintf("unexpected reply %T %v", v, v)}
}
