package redlock_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// seqHoldProxy is a TCP proxy in front of one node that holds back, in
// order, the first client chunk containing triggers[0], then the first
// later chunk containing triggers[1], ... (each never forwarded until
// flush), as TCP segments stuck in retransmission would be. The
// connection of a held chunk carries nothing more until the flush, and
// after it only with keep.
type seqHoldProxy struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	triggers [][]byte
	stage    int
	armed    bool
	keep     bool // flush keeps the held connections going
	held     [][]byte
	conns    []net.Conn
	resume   chan struct{} // closed by flush
}

func newSeqHoldProxy(t *testing.T, upstream string, triggers ...[]byte) *seqHoldProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &seqHoldProxy{ln: ln, upstream: upstream, triggers: triggers, resume: make(chan struct{})}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *seqHoldProxy) serve(c net.Conn) {
	u, err := net.Dial("tcp", p.upstream)
	if err != nil {
		_ = c.Close()
		return
	}
	go func() { _, _ = io.Copy(c, u); _ = c.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			chunk := append([]byte(nil), buf[:n]...)
			p.mu.Lock()
			if p.armed && p.stage < len(p.triggers) && bytes.Contains(chunk, p.triggers[p.stage]) {
				p.stage++
				p.held = append(p.held, chunk)
				p.conns = append(p.conns, u)
				p.mu.Unlock()
				<-p.resume
				if !p.keep {
					_, _ = io.Copy(io.Discard, c)
					return
				}
				continue
			}
			p.mu.Unlock()
			if _, err := u.Write(chunk); err != nil {
				return
			}
		}
		if err != nil {
			_ = u.Close()
			return
		}
	}
}

// arm starts holding back the trigger chunks.
func (p *seqHoldProxy) arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
}

// deliver is flush keeping the held connections going (keep).
func (p *seqHoldProxy) deliver() {
	p.mu.Lock()
	p.keep = true
	p.mu.Unlock()
	p.flush()
}

// acquireAsync runs l.Acquire(ctx, resource) in the background; the lease
// arrives on the channel (an error fails the test).
func acquireAsync(t *testing.T, ctx context.Context, l *redlock.Locker, resource string) <-chan *redlock.Lease {
	done := make(chan *redlock.Lease, 1)
	go func() {
		ls, err := l.Acquire(ctx, resource)
		if assertNoError(t, err) {
			done <- ls
		}
	}()
	return done
}

func (p *seqHoldProxy) heldCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.held)
}

func (p *seqHoldProxy) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.held {
		_, _ = p.conns[i].Write(p.held[i])
		time.Sleep(50 * time.Millisecond)
	}
	if !p.keep {
		for _, c := range p.conns {
			_ = c.Close()
		}
	}
	close(p.resume)
}

// callTrigger loads the scripts' function library on c's servers and
// returns what a call of s carries on the wire: a redisnode node runs it
// as one FCALL of its function (the name as a RESP bulk string, so that
// acquire's does not match acquire_all's).
func callTrigger(t *testing.T, c *testutil.RedisCluster, s *scripts.Script) []byte {
	t.Helper()
	for _, srv := range c.Servers() {
		err := srv.Client().FunctionLoad(testutil.Context(t), scripts.Functions.Source()).Err()
		if err != nil {
			require.ErrorContains(t, err, "already exists")
		}
	}
	fn, ok := scripts.Functions.Function(s)
	require.True(t, ok)
	return []byte(fn + "\r\n")
}

// behindProxy returns a Locker with cfg over c's servers, the last of
// them reached through a seqHoldProxy that holds back, in order, the first
// call of each of the scripts held (the function library loaded on every
// server first, so that a call is one FCALL naming the script's function).
func behindProxy(t *testing.T, c *testutil.RedisCluster, cfg redlock.Config, held ...*scripts.Script) (*redlock.Locker, *seqHoldProxy) {
	t.Helper()
	ctx := testutil.Context(t)
	triggers := make([][]byte, len(held))
	for i, s := range held {
		triggers[i] = callTrigger(t, c, s)
	}
	last := c.Len() - 1
	proxy := newSeqHoldProxy(t, c.Server(last).Addr(), triggers...)
	urls := make([]string, 0, c.Len())
	for i := range last {
		urls = append(urls, c.Server(i).URL())
	}
	nodes, err := redisnode.Dial(ctx, append(urls, "redis://"+proxy.ln.Addr().String())...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = nodes.Close() })
	return newLocker(t, nodes, cfg), proxy
}

func tokenOn(t *testing.T, c *testutil.RedisCluster, i int, key string) string {
	v, _ := c.Server(i).Client().Get(context.Background(), key).Result()
	tok, _, _ := strings.Cut(v, " ")
	return tok
}

// TestALateAttemptCannotTakeOverACountedHandOver: attempt 1's call to node
// 2 is held back; attempt 2 answers from every node, which clears
// handState.lateNodes; the holder's release hands nodes 1 and 2 over to the
// waiter's place token H and the waiter counts both. Attempt 1's call then
// lands on node 2 and takes H's lock over (acquire.lua), and its clean-up
// release hands node 2 to the next waiter Q. The waiter's lease is valid
// while H stands on 1 node of 3, and Q then gets a majority (nodes 0 and 2)
// while the waiter's lease is still valid.
func TestALateAttemptCannotTakeOverACountedHandOver(t *testing.T) {
	c := testutil.StartRedis(t, 3)
	ctx := testutil.Context(t)
	base := redlock.Config{
		LeaseDuration:   6 * time.Second,
		NodeCallTimeout: 500 * time.Millisecond,
		QueueTTL:        3 * time.Second,
		RejoinDelay:     -1,
	}
	wcfg := base
	wcfg.NewBackOff = func() backoff.BackOff { return backoff.NewConstantBackOff(200 * time.Millisecond) }
	qcfg := base
	qcfg.NewBackOff = func() backoff.BackOff { return backoff.NewConstantBackOff(50 * time.Millisecond) }

	x := processLocker(t, c, base)
	key := x.Key("r")
	require.NoError(t, c.Server(0).Client().Set(ctx, key, foreignLock, 2*time.Second).Err())
	xl, err := x.TryAcquire(ctx, "r")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return tokenOn(t, c, 1, key) == xl.Token() && tokenOn(t, c, 2, key) == xl.Token() }, time.Second, time.Millisecond)

	w, proxy := behindProxy(t, c, wcfg, scripts.Acquire, scripts.Release)
	q := processLocker(t, c, qcfg)

	proxy.arm()
	S := time.Now()
	wDone := acquireAsync(t, ctx, w, "r")
	time.Sleep(300 * time.Millisecond)
	qDone := make(chan *redlock.Lease, 1)
	qctx, qcancel := context.WithCancel(ctx)
	qEnded := make(chan struct{})
	defer func() { qcancel(); <-qEnded }()
	go func() {
		defer close(qEnded)
		ls, err := q.Acquire(qctx, "r")
		if qctx.Err() == nil && assertNoError(t, err) {
			qDone <- ls
		} else if err == nil {
			_ = ls.Release(context.Background())
		}
	}()
	time.Sleep(400 * time.Millisecond)
	require.NoError(t, xl.Release(ctx))
	var wl *redlock.Lease
	select {
	case wl = <-wDone:
	case <-time.After(3 * time.Second):
		t.Fatal("W got no lease")
	}
	t.Logf("W lease at +%v, valid until +%v, token on nodes: %v %v %v (lease %s)", time.Since(S).Round(time.Millisecond),
		wl.ValidUntil().Sub(S).Round(time.Millisecond), tokenOn(t, c, 0, key)[:8], tokenOn(t, c, 1, key)[:8], tokenOn(t, c, 2, key)[:8], wl.Token()[:8])
	require.Equal(t, wl.Token(), tokenOn(t, c, 2, key), "W's lease came from the hand-over (its place token holds node 2)")
	require.Eventually(t, func() bool { return proxy.heldCount() == 2 }, time.Second, time.Millisecond, "attempt 1's acquire and its clean-up release were held")
	// Let W's first renewal pass, then deliver the held calls.
	time.Sleep(time.Until(S.Add(1300 * time.Millisecond)))
	proxy.flush()
	t.Logf("after flush (+%v): node tokens %v %v %v; W valid until +%v ctx err %v", time.Since(S).Round(time.Millisecond),
		tokenOn(t, c, 0, key), tokenOn(t, c, 1, key), tokenOn(t, c, 2, key), wl.ValidUntil().Sub(S).Round(time.Millisecond), wl.Context().Err())
	held := 0
	for i := range 3 {
		if tokenOn(t, c, i, key) == wl.Token() {
			held++
		}
	}
	minority := held < 2 && wl.Context().Err() == nil && time.Now().Before(wl.ValidUntil())
	require.False(t, minority, "W's lease is valid for %v more while its lock stands on %d of 3 nodes", time.Until(wl.ValidUntil()).Round(time.Millisecond), held)
	select {
	case ql := <-qDone:
		now := time.Now()
		wValid := wl.Context().Err() == nil && now.Before(wl.ValidUntil())
		t.Logf("Q lease at +%v (fence %d), W fence %d, W valid: %v (until +%v)", now.Sub(S).Round(time.Millisecond), ql.Fence(), wl.Fence(), wValid, wl.ValidUntil().Sub(S).Round(time.Millisecond))
		require.False(t, wValid, "two leases valid at once: W until +%v, Q from +%v", wl.ValidUntil().Sub(S).Round(time.Millisecond), now.Sub(S).Round(time.Millisecond))
		_ = ql.Release(context.Background())
	case <-time.After(2 * time.Second):
		// Q waits behind W's valid lease, as it should.
	}
	_ = wl.Release(context.Background())
}

// TestALeaseReleaseNeverHandsTheLockToItsOwnPlace: attempt 1's call to node 2
// is held back; attempt 2 gets the lease on every node. The held call then
// lands: node 2 holds the lease's token, so it queues the place again; the
// lease's release on node 2 hands the lock over to that place (release.lua
// assumes the place is gone where the token holds the lock), and node 2
// stays locked by nobody for the place's remaining QueueTTL.
func TestALeaseReleaseNeverHandsTheLockToItsOwnPlace(t *testing.T) {
	c := testutil.StartRedis(t, 3)
	ctx := testutil.Context(t)
	cfg := redlock.Config{LeaseDuration: 6 * time.Second, NodeCallTimeout: 300 * time.Millisecond, QueueTTL: 4 * time.Second, RejoinDelay: -1,
		NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(100 * time.Millisecond) }}
	w, proxy := behindProxy(t, c, cfg, scripts.Acquire)
	key := w.Key("r")
	require.NoError(t, c.Server(0).Client().Set(ctx, key, foreignLock, 150*time.Millisecond).Err())
	require.NoError(t, c.Server(1).Client().Set(ctx, key, foreignLock, 150*time.Millisecond).Err())
	proxy.arm()
	lease, err := w.Acquire(ctx, "r")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return tokenOn(t, c, 2, key) == lease.Token() }, time.Second, time.Millisecond)
	proxy.flush()
	n, _ := c.Server(2).Client().ZCard(ctx, key+":queue").Result()
	t.Logf("places on node 2 after the late call: %d", n)
	require.NoError(t, lease.Release(ctx))
	v, _ := c.Server(2).Client().Get(ctx, key).Result()
	ms, _ := c.Server(2).Client().PTTL(ctx, key).Result()
	require.Empty(t, v, "after the lease's release node 2 is locked for %v (the lease's own place)", ms)
	require.Zero(t, c.Server(2).Client().Exists(ctx, key+":queue").Val(), "the place is gone")
}

// TestALeaseReleaseNeverHandsTheLockToItsOwnPlaceOnOneNode (from a
// review): with one node the lease holds every node, and still its place
// may be queued again by a late call of an earlier attempt; the release
// passes it over.
func TestALeaseReleaseNeverHandsTheLockToItsOwnPlaceOnOneNode(t *testing.T) {
	c := testutil.StartRedis(t, 1)
	ctx := testutil.Context(t)
	cfg := redlock.Config{LeaseDuration: 6 * time.Second, NodeCallTimeout: 300 * time.Millisecond, QueueTTL: 4 * time.Second, RejoinDelay: -1,
		NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(100 * time.Millisecond) }}
	w, proxy := behindProxy(t, c, cfg, scripts.Acquire)
	key := w.Key("r")
	proxy.arm()
	lease, err := w.Acquire(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, 1, proxy.heldCount())
	proxy.flush()
	time.Sleep(100 * time.Millisecond)
	n, _ := c.Server(0).Client().ZCard(ctx, key+":queue").Result()
	t.Logf("places after the late call: %d", n)
	require.NoError(t, lease.Release(ctx))
	v, _ := c.Server(0).Client().Get(ctx, key).Result()
	ms, _ := c.Server(0).Client().PTTL(ctx, key).Result()
	require.Empty(t, v, "after the lease's release the node is locked for %v (the lease's own place)", ms)
}

// TestGrantsAndHandOversMakeAMajorityTogether (from a review): the
// holder's release fails on one node (node 1 stays held) and hands node 0
// over to the waiter's place, while node 2 is free with the waiter at its
// head. One hand-over and one grant are a majority: the waiter moves its
// grant under its place's token and holds the lock at once, rather than
// cleaning the grant up on every attempt until a lock expires.
func TestGrantsAndHandOversMakeAMajorityTogether(t *testing.T) {
	c := testutil.StartRedis(t, 3)
	ctx := testutil.Context(t)
	cfg := redlock.Config{LeaseDuration: 6 * time.Second, NodeCallTimeout: 300 * time.Millisecond, QueueTTL: 4 * time.Second, RejoinDelay: -1,
		NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(100 * time.Millisecond) }}
	x := processLocker(t, c, cfg)
	key := x.Key("r")
	require.NoError(t, c.Server(2).Client().Set(ctx, key, foreignLock, 1500*time.Millisecond).Err())
	xl, err := x.TryAcquire(ctx, "r")
	require.NoError(t, err)
	p := processLocker(t, c, cfg)
	done := make(chan *redlock.Lease, 1)
	go func() {
		ls, err := p.Acquire(ctx, "r")
		if assertNoError(t, err) {
			done <- ls
		}
	}()
	time.Sleep(2500 * time.Millisecond) // node 2 free now, P at its head
	require.NoError(t, c.Server(1).Client().Set(ctx, key, foreignLock, 10*time.Second).Err())
	rel := time.Now()
	require.ErrorIs(t, xl.Release(ctx), redlock.ErrLeaseLost, "released on node 0 only")
	select {
	case ls := <-done:
		t.Logf("the waiter's lease %v after the release", time.Since(rel).Round(time.Millisecond))
		require.Less(t, time.Since(rel), 2*time.Second, "not after a lock expired (QueueTTL 4 s)")
		require.Greater(t, ls.Fence(), xl.Fence())
		require.NoError(t, ls.Release(ctx))
	case <-time.After(8 * time.Second):
		t.Fatal("no lease")
	}
}

// handedOverWithALateCall sets up the late-call scenarios: node 2 holds a
// foreign lock, X holds resource "r" on nodes 0 and 1; waiter W, reaching
// node 2 through a seqHoldProxy, queues with its first attempt's call to
// node 2 held there; X releases and W takes the lease from the hand-overs
// of nodes 0 and 1. It returns the servers, X's Locker, W's lease and the
// proxy (still holding the call).
func handedOverWithALateCall(t *testing.T, cfg redlock.Config) (*testutil.RedisCluster, *redlock.Locker, *redlock.Lease, *seqHoldProxy) {
	t.Helper()
	c := testutil.StartRedis(t, 3)
	ctx := testutil.Context(t)
	x := processLocker(t, c, cfg)
	key := x.Key("r")
	require.NoError(t, c.Server(2).Client().Set(ctx, key, foreignLock, 30*time.Second).Err())
	xl, err := x.TryAcquire(ctx, "r")
	require.NoError(t, err)

	w, proxy := behindProxy(t, c, cfg, scripts.Acquire)
	proxy.arm()
	wDone := acquireAsync(t, ctx, w, "r")
	require.Eventually(t, func() bool { return proxy.heldCount() == 1 && c.Server(0).Client().ZCard(ctx, key+":queue").Val() == 1 },
		time.Second, time.Millisecond, "W queued on node 0 with its call to node 2 held")
	require.NoError(t, xl.Release(ctx))
	select {
	case wl := <-wDone:
		return c, x, wl, proxy
	case <-time.After(time.Second):
		t.Fatal("W got no lease from the hand-over")
		return nil, nil, nil, nil
	}
}

// TestALeaseLeavesTheQueueAfterItsAcquiresLateCalls: the waiter's first
// attempt's call to node 2 is held back (still within NodeCallTimeout)
// while the holder's release hands nodes 0 and 1 over and the waiter takes
// its lease and releases it at once. The held call then queues the place
// on node 2 (busy), where a later release would hand the lock to a place
// nobody waits in; found by the elector test on miniredis, where such a
// lock never expired. The release does not wait for the call; the lease
// leaves the queue once more after it has ended.
func TestALeaseLeavesTheQueueAfterItsAcquiresLateCalls(t *testing.T) {
	cfg := redlock.Config{LeaseDuration: 6 * time.Second, NodeCallTimeout: 2 * time.Second, QueueTTL: 5 * time.Second, RejoinDelay: -1}
	c, x, wl, proxy := handedOverWithALateCall(t, cfg)
	ctx, key := testutil.Context(t), x.Key("r")
	released := make(chan error, 1)
	go func() { released <- wl.Release(context.Background()) }()
	time.Sleep(300 * time.Millisecond)
	proxy.deliver()
	require.NoError(t, <-released)
	require.Eventually(t, func() bool { return c.Server(2).Client().ZCard(ctx, key+":queue").Val() == 0 },
		time.Second, time.Millisecond, "the released lease's place stands on node 2")
}

// TestARequestLateBeyondItsTimeoutHoldsOneNodeWithinItsBound (from a
// review): as above, but the held call reaches node 2 only after the
// client gave up on it (past NodeCallTimeout), as a segment stuck in
// retransmission or a paused server would. Nothing on the client's side
// can see it: the place of an Acquire that is over stands on node 2 again,
// and node 2's next release hands its lock to it. The bound
// (docs/design.md §11.2, late messages): that lock lasts no longer than
// the lease duration and the place's QueueTTL, it holds one node only, and
// others still take the lock on the other two at once.
func TestARequestLateBeyondItsTimeoutHoldsOneNodeWithinItsBound(t *testing.T) {
	cfg := redlock.Config{LeaseDuration: 6 * time.Second, NodeCallTimeout: 300 * time.Millisecond, QueueTTL: 5 * time.Second, RejoinDelay: -1}
	c, x, wl, proxy := handedOverWithALateCall(t, cfg)
	ctx, key := testutil.Context(t), x.Key("r")
	require.NoError(t, wl.Release(context.Background()))
	time.Sleep(500 * time.Millisecond) // the held call timed out on the client's side
	proxy.flush()                      // and reaches node 2 now
	late := time.Now()                 // it has landed (flush waits 50 ms after writing it)

	foreign, _, _ := strings.Cut(foreignLock, " ")
	require.ErrorIs(t, x.Release(ctx, "r", foreign), redlock.ErrNotHeld) // node 2's holder releases
	if v := c.Server(2).Client().Get(ctx, key).Val(); v != "" {
		// Read before the PTTL, so a pause in between cannot shorten it;
		// the node counts in whole milliseconds.
		limit := time.Until(late.Add(min(cfg.LeaseDuration, cfg.QueueTTL) + time.Millisecond))
		ms := c.Server(2).Client().PTTL(ctx, key).Val()
		t.Logf("node 2 handed its lock to the late place for %v", ms)
		require.LessOrEqual(t, ms, limit, "longer than the bound")
	}
	start := time.Now()
	ls, err := x.Acquire(ctx, "r")
	require.NoError(t, err)
	require.Less(t, time.Since(start), time.Second, "the other two nodes are free")
	require.NoError(t, ls.Release(ctx))
}

// TestALateCallThatEndsDuringTheReleaseIsFollowedByALeave (from a review): the
// waiter's first attempt's call to node 2 is held back; the holder's
// release hands nodes 0 and 1 over and the waiter takes its lease. The
// lease's release reaches nodes 0 and 2 at once (node 2 removes nothing:
// the place is not there yet) but its call to node 1 is held. Meanwhile the
// held acquire lands on node 2 (busy) and queues the place again, and its
// reply arrives well within NodeCallTimeout. Then node 1's release lands
// and Release returns. The calls that may land late are those still
// running when the release starts, not when it ends: the leave must follow
// this one too, or the place of an Acquire that is over stands on node 2
// (its next release hands the lock to nobody).
func TestALateCallThatEndsDuringTheReleaseIsFollowedByALeave(t *testing.T) {
	c := testutil.StartRedis(t, 3)
	ctx := testutil.Context(t)
	cfg := redlock.Config{LeaseDuration: 6 * time.Second, NodeCallTimeout: 2 * time.Second, QueueTTL: 5 * time.Second, RejoinDelay: -1}
	x := processLocker(t, c, cfg)
	key := x.Key("r")
	require.NoError(t, c.Server(2).Client().Set(ctx, key, foreignLock, 30*time.Second).Err())
	xl, err := x.TryAcquire(ctx, "r")
	require.NoError(t, err)

	relProxy := newSeqHoldProxy(t, c.Server(1).Addr(), callTrigger(t, c, scripts.Release))
	acqProxy := newSeqHoldProxy(t, c.Server(2).Addr(), callTrigger(t, c, scripts.Acquire))
	nodes, err := redisnode.Dial(ctx, c.Server(0).URL(), "redis://"+relProxy.ln.Addr().String(), "redis://"+acqProxy.ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = nodes.Close() })
	w := newLocker(t, nodes, cfg)

	acqProxy.arm()
	wDone := acquireAsync(t, ctx, w, "r")
	require.Eventually(t, func() bool {
		return acqProxy.heldCount() == 1 && c.Server(0).Client().ZCard(ctx, key+":queue").Val() == 1 &&
			c.Server(1).Client().ZCard(ctx, key+":queue").Val() == 1
	}, time.Second, time.Millisecond, "W queued on nodes 0 and 1 with its call to node 2 held")
	require.NoError(t, xl.Release(ctx))
	var wl *redlock.Lease
	select {
	case wl = <-wDone:
	case <-time.After(time.Second):
		t.Fatal("W got no lease from the hand-over")
	}

	relProxy.arm()
	released := make(chan error, 1)
	go func() { released <- wl.Release(context.Background()) }()
	require.Eventually(t, func() bool { return relProxy.heldCount() == 1 }, time.Second, time.Millisecond, "release to node 1 held")
	time.Sleep(100 * time.Millisecond) // nodes 0 and 2 have answered the release

	acqProxy.deliver() // the acquire lands on node 2 after its release, and is answered at once
	require.Equal(t, int64(1), c.Server(2).Client().ZCard(ctx, key+":queue").Val(), "the late call queued the place again")
	time.Sleep(100 * time.Millisecond) // its reply has arrived: the call has ended

	relProxy.deliver()
	require.NoError(t, <-released)
	require.Eventually(t, func() bool { return c.Server(2).Client().ZCard(ctx, key+":queue").Val() == 0 },
		3*time.Second, 5*time.Millisecond, "the released lease's place stands on node 2")
}
