package redisnode_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// incrScript is a one-command script for the transport tests; it fails
// (a server error reply) on a key that does not hold an integer.
var incrScript = scripts.New("incr", `return redis.call('INCR', KEYS[1])`)

// patientNode returns a Node on s whose socket timeouts are long (a
// minute), so that a call to the paused server ends by its context's
// deadline, or when the server resumes, and not by the client's own
// timeout. The client is closed when the test ends.
func patientNode(t *testing.T, s *testutil.RedisServer) *redisnode.Node {
	t.Helper()
	c := redis.NewClient(testutil.FastFailOptions(s.Addr(), "", time.Minute))
	n := redisnode.New(c)
	t.Cleanup(func() { _ = n.Close() })
	// Open a connection and load the script before the server pauses.
	_, err := n.Eval(testutil.Context(t), incrScript, []string{"warm"})
	require.NoError(t, err)
	return n
}

// awaitPending waits until n's batcher reports what want says.
func awaitPending(t *testing.T, n *redisnode.Node, what string, want func(queued, flushing, room int) bool) {
	t.Helper()
	require.Eventually(t, func() bool { return want(redisnode.Pending(n)) }, time.Minute, time.Millisecond, what)
}

// evalAsync runs Eval on n on its own goroutine under ctx; the answer
// arrives on the returned channel.
func evalAsync(ctx context.Context, n redlock.Node, key string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := n.Eval(ctx, incrScript, []string{key})
		done <- err
	}()
	return done
}

// TestBatchedCallsReturnByTheirDeadlinesOnAHungNode: with a pipeline in
// flight to a hung (paused) server, later calls to that node, queued
// behind it or sent alone, return when their own deadline passes, while
// the pipeline is still in flight (it can end only when the server resumes
// or after a minute); another node's calls are not held up; once the
// server resumes, the pipelined calls get their answers.
func TestBatchedCallsReturnByTheirDeadlinesOnAHungNode(t *testing.T) {
	c := testutil.StartRedis(t, 2)
	hung, other := patientNode(t, c.Server(0)), patientNode(t, c.Server(1))
	require.NoError(t, c.Server(0).Pause())
	t.Cleanup(func() { _ = c.Server(0).Resume() })
	ctx := testutil.Context(t)

	// Fill the node's round trips with single calls held by a hook, and
	// queue long calls behind them: when the hook lets the single calls go
	// (they fail), the long ones go out as one pipeline, which hangs.
	hold := &holdSingles{release: make(chan struct{})}
	hung.Client().AddHook(hold)
	var first []<-chan error
	for i := range redisnode.BatchFlushers {
		first = append(first, evalAsync(ctx, hung, fmt.Sprintf("first:%d", i)))
	}
	awaitPending(t, hung, "single calls in flight", func(_, f, _ int) bool { return f == redisnode.BatchFlushers })
	long, cancelLong := context.WithTimeout(ctx, time.Minute)
	defer cancelLong()
	const batched = 16
	var longDone atomic.Int32
	var longs []<-chan error
	for i := range batched {
		done := make(chan error, 1)
		longs = append(longs, done)
		go func() {
			_, err := hung.Eval(long, incrScript, []string{fmt.Sprintf("long:%d", i)})
			longDone.Add(1)
			done <- err
		}()
	}
	awaitPending(t, hung, "queued long calls", func(q, _, _ int) bool { return q == batched })
	close(hold.release)
	for _, done := range first {
		require.ErrorIs(t, <-done, errHeld)
	}
	awaitPending(t, hung, "the long calls in one pipeline", func(q, f, r int) bool { return q == 0 && f == 1 && r == batched })

	// Calls made now, alone or queued, return by their deadlines; the
	// other node answers meanwhile.
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	var shorts []<-chan error
	for i := range 3 * redisnode.BatchFlushers {
		shorts = append(shorts, evalAsync(short, hung, fmt.Sprintf("short:%d", i)))
	}
	for i := range 8 {
		_, err := other.Eval(ctx, incrScript, []string{fmt.Sprintf("other:%d", i)})
		require.NoError(t, err)
	}
	for _, done := range shorts {
		err := <-done
		require.Error(t, err)
		require.True(t, errors.Is(err, context.DeadlineExceeded) || isTimeout(err), "%v", err)
	}
	require.Zero(t, longDone.Load(), "a call returned before the pipeline it waits for")
	awaitPending(t, hung, "nothing left of the short calls", func(q, f, r int) bool { return q == 0 && r == batched })

	require.NoError(t, c.Server(0).Resume())
	for _, done := range longs {
		require.NoError(t, <-done)
	}
	awaitPending(t, hung, "an idle node", func(q, f, r int) bool { return q == 0 && f == 0 && r == 0 })
}

// errHeld is the error of a call that holdSingles held and let go.
var errHeld = errors.New("held by the test")

// holdSingles is a go-redis hook that holds every command sent alone (not
// in a pipeline) until release closes, then fails it with errHeld; once
// release is closed, it lets them through.
type holdSingles struct{ release chan struct{} }

func (h *holdSingles) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdSingles) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		select {
		case <-h.release:
			return next(ctx, cmd)
		default:
		}
		select {
		case <-h.release:
		case <-ctx.Done():
		}
		cmd.SetErr(errHeld)
		return errHeld
	}
}

func (h *holdSingles) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// isTimeout reports a socket deadline's error (a call sent alone ends by
// the client's read deadline, which its context set).
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// TestCancelledCallersLeaveNothing: with the node's round trips stuck on a
// paused server, callers queue up to the node's bound on pending calls and
// the rest wait for room; when they are cancelled, every one returns, the
// queue is empty and only the stuck calls hold room; when the server
// resumes, the node goes idle (and TestMain checks that no goroutine
// outlives the tests).
func TestCancelledCallersLeaveNothing(t *testing.T) {
	c := testutil.StartRedis(t, 1)
	n := patientNode(t, c.Server(0))
	require.NoError(t, c.Server(0).Pause())
	t.Cleanup(func() { _ = c.Server(0).Resume() })
	ctx := testutil.Context(t)

	stuck, cancelStuck := context.WithTimeout(ctx, time.Minute)
	defer cancelStuck()
	var first []<-chan error
	for i := range redisnode.BatchFlushers {
		first = append(first, evalAsync(stuck, n, fmt.Sprintf("stuck:%d", i)))
	}
	awaitPending(t, n, "single calls in flight", func(_, f, _ int) bool { return f == redisnode.BatchFlushers })

	callers, cancel := context.WithCancel(ctx)
	defer cancel()
	const beyond = 50 // callers waiting for room
	queued := redisnode.BatchPending - redisnode.BatchFlushers
	var wg sync.WaitGroup
	errs := make(chan error, queued+beyond)
	for i := range queued + beyond {
		wg.Go(func() {
			_, err := n.Eval(callers, incrScript, []string{fmt.Sprintf("q:%d", i)})
			errs <- err
		})
	}
	awaitPending(t, n, "a full queue", func(q, _, r int) bool { return q == queued && r == redisnode.BatchPending })
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.ErrorIs(t, err, context.Canceled)
	}
	q, f, r := redisnode.Pending(n)
	require.Equal(t, []int{0, redisnode.BatchFlushers, redisnode.BatchFlushers}, []int{q, f, r}, "queued, in flight, room held")

	require.NoError(t, c.Server(0).Resume())
	for _, done := range first {
		require.NoError(t, <-done)
	}
	awaitPending(t, n, "an idle node", func(q, f, r int) bool { return q == 0 && f == 0 && r == 0 })
}

// TestABatchRunsEachCallOnItsOwn: calls queued behind busy round trips go
// out together, yet each gets its own answer, an error reply included, and
// a script missing from the server's cache (SCRIPT FLUSH) still runs: the
// pipeline's NOSCRIPT answers are sent again as EVAL.
func TestABatchRunsEachCallOnItsOwn(t *testing.T) {
	c := testutil.StartRedis(t, 1)
	n := patientNode(t, c.Server(0))
	ctx := testutil.Context(t)
	const calls = 40
	for i := range calls {
		if i%4 == 0 {
			require.NoError(t, c.Server(0).Do(ctx, "SET", fmt.Sprintf("k:%d", i), "not a number").Err())
		} else {
			require.NoError(t, c.Server(0).Do(ctx, "SET", fmt.Sprintf("k:%d", i), i).Err())
		}
	}
	require.NoError(t, c.Server(0).Do(ctx, "SCRIPT", "FLUSH").Err())
	require.NoError(t, c.Server(0).Pause())
	t.Cleanup(func() { _ = c.Server(0).Resume() })

	type answer struct {
		reply any
		err   error
	}
	answers := make([]answer, calls+redisnode.BatchFlushers)
	var wg sync.WaitGroup
	for i := range redisnode.BatchFlushers {
		wg.Go(func() {
			r, err := n.Eval(ctx, incrScript, []string{fmt.Sprintf("first:%d", i)})
			answers[calls+i] = answer{r, err}
		})
	}
	awaitPending(t, n, "single calls in flight", func(_, f, _ int) bool { return f == redisnode.BatchFlushers })
	for i := range calls {
		wg.Go(func() {
			r, err := n.Eval(ctx, incrScript, []string{fmt.Sprintf("k:%d", i)})
			answers[i] = answer{r, err}
		})
	}
	awaitPending(t, n, "queued calls", func(q, _, _ int) bool { return q == calls })
	require.NoError(t, c.Server(0).Resume())
	wg.Wait()
	for i, a := range answers[:calls] {
		if i%4 == 0 {
			var rerr redis.Error
			require.ErrorAs(t, a.err, &rerr, "call %d", i)
			require.Contains(t, a.err.Error(), "not an integer", "call %d", i)
			continue
		}
		require.NoError(t, a.err, "call %d", i)
		require.Equal(t, int64(i+1), a.reply, "call %d", i)
	}
	for i, a := range answers[calls:] {
		require.NoError(t, a.err, "single call %d", i)
		require.Equal(t, int64(1), a.reply)
	}
	awaitPending(t, n, "an idle node", func(q, f, r int) bool { return q == 0 && f == 0 && r == 0 })
}
