package redisnode_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// wrappedNode hides a Node's concrete type, so that a Locker over it
// alone calls it on a worker (not inline): a TryAcquire then returns by
// its NodeCallTimeout while its call may still be under way.
type wrappedNode struct{ redlock.Node }

// holdKeys is a go-redis hook that holds every command sent alone whose
// arguments name a key starting with prefix until release closes, then
// fails it with errHeld; other commands pass.
type holdKeys struct {
	prefix  string
	release chan struct{}
}

func (h *holdKeys) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdKeys) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		for _, a := range cmd.Args() {
			// Keys go as *string (process), other arguments as strings.
			s, ok := a.(string)
			if p, isPtr := a.(*string); isPtr {
				s, ok = *p, true
			}
			if ok && strings.HasPrefix(s, h.prefix) {
				select {
				case <-h.release:
				case <-ctx.Done():
				}
				cmd.SetErr(errHeld)
				return errHeld
			}
		}
		return next(ctx, cmd)
	}
}

func (h *holdKeys) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestALateGrantIsAlwaysReleased is issue 30's case 5 (Safety v4, rule
// 5): an acquire call that is written before its deadline but runs on the
// server after it (the server is stopped meanwhile) is granted to nobody;
// the attempt's clean-up must come after it and release it, and a call
// whose deadline passed is never written, the NOSCRIPT retry included.
// Rows: the acquire in a pipeline beside a long call (two long calls held
// both round trips of the node when it was queued), with the script cached
// or not (SCRIPT FLUSH: the pipeline's EVALSHA is answered NOSCRIPT after
// the deadline, and an EVAL retry then would grant), and the acquire sent
// alone. In each, once TryAcquire failed, the server resumed and Close
// returned, nobody holds the lock on the node.
func TestALateGrantIsAlwaysReleased(t *testing.T) {
	for _, tc := range []struct {
		name           string
		batched, flush bool
	}{
		{name: "pipelined, script cached", batched: true},
		{name: "pipelined, NOSCRIPT retry", batched: true, flush: true},
		{name: "alone", batched: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testutil.StartRedis(t, 1)
			s := c.Server(0)
			n := patientNode(t, s)
			ctx := testutil.Context(t)
			hold := &holdKeys{prefix: "hold:", release: make(chan struct{})}
			n.Client().AddHook(hold)
			const callTimeout = 2 * time.Second
			l, err := redlock.New([]redlock.Node{wrappedNode{n}}, redlock.Config{
				LeaseDuration: 20 * time.Second, NodeCallTimeout: callTimeout, RejoinDelay: -1,
			})
			require.NoError(t, err)
			closed := false
			t.Cleanup(func() {
				if !closed {
					_ = l.Close()
				}
			})
			// The acquire and release scripts are cached (and the lock
			// works) before the test starts.
			warm, err := l.TryAcquire(ctx, "warm")
			require.NoError(t, err)
			require.NoError(t, warm.Release(ctx))
			if tc.flush {
				require.NoError(t, s.Do(ctx, "SCRIPT", "FLUSH").Err())
				require.NoError(t, s.Do(ctx, "SCRIPT", "LOAD", scripts.Release.Source()).Err())
			}

			long, cancelLong := context.WithTimeout(ctx, time.Minute)
			defer cancelLong()
			var held []<-chan error
			var beside <-chan error
			if tc.batched {
				// Both round trips busy with long calls, a long call and
				// the acquire queue behind them.
				for _, key := range []string{"hold:0", "hold:1"} {
					held = append(held, evalAsync(long, n, key))
				}
				awaitPending(t, n, "long calls in flight", func(_, f, _ int) bool { return f == redisnode.BatchFlushers })
				beside = evalAsync(long, n, "beside")
				awaitPending(t, n, "a long call queued", func(q, _, _ int) bool { return q == 1 })
			}
			require.NoError(t, s.Pause())
			t.Cleanup(func() { _ = s.Resume() })

			type result struct {
				lease *redlock.Lease
				err   error
				took  time.Duration
			}
			tried := make(chan result, 1)
			start := time.Now()
			go func() {
				lease, err := l.TryAcquire(ctx, "x")
				tried <- result{lease, err, time.Since(start)}
			}()
			if tc.batched {
				awaitPending(t, n, "the acquire queued", func(q, _, _ int) bool { return q == 2 })
				close(hold.release) // the long calls fail; the queue goes out as one pipeline
				for _, done := range held {
					require.ErrorIs(t, <-done, errHeld)
				}
				awaitPending(t, n, "one pipeline in flight", func(q, f, r int) bool { return q == 0 && f == 1 && r == 2 })
			} else {
				awaitPending(t, n, "the acquire in flight", func(q, f, _ int) bool { return q == 0 && f == 1 })
			}

			// The acquire's deadline passes while the server is stopped.
			r := <-tried
			require.Error(t, r.err)
			require.Nil(t, r.lease)
			require.GreaterOrEqual(t, r.took, callTimeout, "TryAcquire failed by its NodeCallTimeout")

			require.NoError(t, s.Resume())
			if beside != nil {
				// Its pipeline (and any retry) has run on the server.
				require.NoError(t, <-beside)
			}
			require.NoError(t, l.Close())
			closed = true
			exists, err := s.Do(ctx, "EXISTS", l.Key("x")).Int()
			require.NoError(t, err)
			require.Zero(t, exists, "the lock is held by nobody after the attempt failed and Close returned")
		})
	}
}
