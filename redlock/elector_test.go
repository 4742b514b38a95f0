package redlock_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/fencing/redisfence"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/testutil"
)

// electionProcess is one process taking part in an election: its own
// clients to every node (behind a gate), Locker and Elector.
type electionProcess struct {
	gate    *testutil.Gate
	locker  *redlock.Locker
	elector *redlock.Elector
}

// newElectionProcess starts a process named owner on c for role.
func newElectionProcess(t *testing.T, c *testutil.MiniCluster, role, owner string, cfg redlock.Config) *electionProcess {
	t.Helper()
	g := &testutil.Gate{}
	nodes := make([]redlock.Node, c.Len())
	for i := range nodes {
		cl := c.Client(i)
		cl.AddHook(g)
		nodes[i] = redisnode.New(cl)
	}
	cfg.Owner = owner
	l := newLocker(t, nodes, cfg)
	e, err := redlock.NewElector(l, role)
	require.NoError(t, err)
	return &electionProcess{gate: g, locker: l, elector: e}
}

// campaignResult is the outcome of a Campaign run in the background.
type campaignResult struct {
	term *redlock.Term
	err  error
	at   time.Time
}

// campaignAsync runs p's Campaign in the background.
func campaignAsync(ctx context.Context, p *electionProcess) <-chan campaignResult {
	ch := make(chan campaignResult, 1)
	go func() {
		term, err := p.elector.Campaign(ctx)
		ch <- campaignResult{term, err, time.Now()}
	}()
	return ch
}

// awaitTerm waits for a background Campaign to win, failing after limit.
func awaitTerm(t *testing.T, ch <-chan campaignResult, limit time.Duration) campaignResult {
	t.Helper()
	select {
	case r := <-ch:
		require.NoError(t, r.err)
		return r
	case <-time.After(limit):
		t.Fatalf("no term won within %s", limit)
	}
	return campaignResult{}
}

// waitForWaiters waits until every node has n subscribers on role's
// release channel: the waiting candidates will hear the next release.
func waitForWaiters(t *testing.T, c *testutil.MiniCluster, l *redlock.Locker, role string, n int) {
	t.Helper()
	ch := l.Key(role) + ":released"
	require.Eventually(t, func() bool {
		for i := range c.Len() {
			if c.Server(i).PubSubNumSub(ch)[ch] != n {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "candidates not waiting on the release channel")
}

// constantRetry sets a constant backoff between attempts.
func constantRetry(cfg redlock.Config, d time.Duration) redlock.Config {
	cfg.NewBackOff = func() backoff.BackOff { return backoff.NewConstantBackOff(d) }
	return cfg
}

func TestNewElectorValidates(t *testing.T) {
	c := testutil.NewMiniCluster(t, 1)
	l := newLocker(t, c.Nodes(), redlock.Config{})

	_, err := redlock.NewElector(nil, "role")
	require.ErrorIs(t, err, redlock.ErrInvalidConfig)
	_, err = redlock.NewElector(l, "")
	require.ErrorIs(t, err, redlock.ErrInvalidResource)
	_, err = redlock.NewElector(l, strings.Repeat("r", redlock.MaxResourceLen+1))
	require.ErrorIs(t, err, redlock.ErrInvalidResource)

	_, err = redlock.NewElector(l, "role")
	require.NoError(t, err)
}

// TestElectorLeaderFromANonCandidate: a process that never campaigns sees
// no leader, then the leader's owner, term fence and TTL, then no leader
// after the resignation, and "unknown" when no majority answers.
func TestElectorLeaderFromANonCandidate(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	cfg := redlock.Config{LeaseDuration: 2 * time.Second}
	leader := newElectionProcess(t, c, "scheduler", "node-a", cfg)
	watcher := newElectionProcess(t, c, "scheduler", "watcher", cfg)
	ctx := testutil.Context(t)

	_, err := watcher.elector.Leader(ctx)
	require.ErrorIs(t, err, redlock.ErrNoLeader)

	term, err := leader.elector.Campaign(ctx)
	require.NoError(t, err)
	got, err := watcher.elector.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "node-a", got.Owner)
	require.Equal(t, term.Fence(), got.Fence)
	require.Greater(t, got.TTL, time.Duration(0))
	require.LessOrEqual(t, got.TTL, cfg.LeaseDuration)

	require.NoError(t, term.Resign(ctx))
	require.ErrorIs(t, context.Cause(term.Context()), redlock.ErrLeaseReleased)
	_, err = watcher.elector.Leader(ctx)
	require.ErrorIs(t, err, redlock.ErrNoLeader)

	// Held by a majority, but only one node answers: not known.
	term, err = leader.elector.Campaign(ctx)
	require.NoError(t, err)
	c.Fail(0, "")
	c.Fail(1, "")
	_, err = watcher.elector.Leader(ctx)
	require.ErrorIs(t, err, redlock.ErrLeaderUnknown)
	c.Heal(0)
	c.Heal(1)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = watcher.elector.Leader(cancelled)
	require.ErrorIs(t, err, context.Canceled)
	_ = term.Resign(ctx)
}

// TestElectorLeaderNeedsAMajorityOnTheFence: the nodes' state is set by
// hand. The leader's fence is the counter a majority of the nodes holding
// its token agree on, and its TTL the time until fewer than a majority hold
// it; with no agreed counter, the leader is unknown rather than guessed.
func TestElectorLeaderNeedsAMajorityOnTheFence(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), redlock.Config{})
	e, err := redlock.NewElector(l, "crafted")
	require.NoError(t, err)
	key := l.Key("crafted")
	const tok, other = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	set := func(i int, holder string, ttl time.Duration, fence int64) {
		require.NoError(t, c.Set(i, key, holder+" someone"))
		c.Server(i).SetTTL(key, ttl)
		require.NoError(t, c.SetCounter(i, key+":fence", fence))
	}
	ctx := testutil.Context(t)

	set(0, tok, time.Second, 7)
	set(1, tok, 3*time.Second, 7)
	set(2, tok, 2*time.Second, 9) // a late grant with a higher counter
	got, err := e.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, redlock.Leader{Owner: "someone", Fence: 7, TTL: 2 * time.Second}, got)

	set(0, tok, time.Second, 5) // counters 5, 7, 9: no majority on one
	_, err = e.Leader(ctx)
	require.ErrorIs(t, err, redlock.ErrLeaderUnknown)

	set(0, other, time.Second, 7) // tokens disagree: only two hold tok
	set(2, tok, 2*time.Second, 7)
	got, err = e.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, redlock.Leader{Owner: "someone", Fence: 7, TTL: 2 * time.Second}, got)

	set(2, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", time.Second, 7) // three holders
	_, err = e.Leader(ctx)
	require.ErrorIs(t, err, redlock.ErrLeaderUnknown)
}

// TestElectorFailoverAfterLeaderCrash: the leader's process stops talking
// to the nodes (a crash: renewal stops, its lock stays until the TTL). A
// waiting candidate takes over within one lease duration plus a retry (and
// scheduling slack, bounded by a second lease on a busy machine), with a
// higher fence, and the crashed leader's term has ended by then.
func TestElectorFailoverAfterLeaderCrash(t *testing.T) {
	t.Parallel() // bound by the wall clock (leases, delays, hung nodes)
	c := testutil.NewMiniCluster(t, 3, testutil.WithWallClock())
	const lease, retry = 300 * time.Millisecond, 20 * time.Millisecond
	cfg := constantRetry(redlock.Config{LeaseDuration: lease}, retry)
	a := newElectionProcess(t, c, "singleton", "a", cfg)
	b := newElectionProcess(t, c, "singleton", "b", cfg)
	ctx := testutil.Context(t)

	ta, err := a.elector.Campaign(ctx)
	require.NoError(t, err)
	won := campaignAsync(ctx, b)
	waitForWaiters(t, c, b.locker, "singleton", 1)

	crashed := time.Now()
	a.gate.Cut()
	tb := awaitTerm(t, won, 10*lease)
	took := tb.at.Sub(crashed)
	t.Logf("failover took %s (lease %s, retry %s)", took, lease, retry)
	require.Less(t, took, 2*lease+retry, "failover slower than a lease plus a retry, with a lease of slack")
	require.Greater(t, tb.term.Fence(), ta.Fence())

	// The crashed leader's term ended (with ErrLeaseLost) before the new
	// one began: it would have known, had it looked.
	require.Error(t, ta.Context().Err())
	require.ErrorIs(t, context.Cause(ta.Context()), redlock.ErrLeaseLost)
	require.NoError(t, tb.term.Context().Err())
	require.NoError(t, tb.term.Resign(ctx))
}

// TestElectorPausedLeaderIsFencedOff: a leader freezes past its term (its
// renewals stop, and it does not look at its Context). A new leader is
// elected and writes to the resource; when the old leader wakes and writes
// with its old fence, the resource refuses it and keeps the new value.
func TestElectorPausedLeaderIsFencedOff(t *testing.T) {
	t.Parallel() // bound by the wall clock (leases, delays, hung nodes)
	c := testutil.NewMiniCluster(t, 3, testutil.WithWallClock())
	res := testutil.NewMiniCluster(t, 1)
	store := redisfence.New(res.Client(0), "app:")
	cfg := constantRetry(redlock.Config{LeaseDuration: 300 * time.Millisecond}, 10*time.Millisecond)
	a := newElectionProcess(t, c, "writer", "a", cfg)
	b := newElectionProcess(t, c, "writer", "b", cfg)
	ctx := testutil.Context(t)

	ta, err := a.elector.Campaign(ctx)
	require.NoError(t, err)
	require.NoError(t, store.Write(ctx, "report", "from a", ta.Fence()))
	won := campaignAsync(ctx, b)

	a.gate.Cut() // a freezes
	tb := awaitTerm(t, won, 2*time.Second)
	require.NoError(t, store.Write(ctx, "report", "from b", tb.term.Fence()))
	a.gate.Mend() // a wakes, still believing it leads

	err = store.Write(ctx, "report", "late write from a", ta.Fence())
	require.ErrorIs(t, err, fencing.ErrStaleToken)
	value, highest, _, err := store.Read(ctx, "report")
	require.NoError(t, err)
	require.Equal(t, "from b", value)
	require.Equal(t, tb.term.Fence(), highest)
	require.ErrorIs(t, context.Cause(ta.Context()), redlock.ErrLeaseLost)
	require.ErrorIs(t, ta.Resign(ctx), redlock.ErrLeaseLost)
	require.NoError(t, tb.term.Resign(ctx))
}

// TestElectorResignHandsOverPromptly: with a long lease and a backoff of an
// hour, a waiting candidate can only take over quickly because Resign
// releases the role and the release wakes it.
func TestElectorResignHandsOverPromptly(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	cfg := constantRetry(redlock.Config{LeaseDuration: 10 * time.Second}, time.Hour)
	a := newElectionProcess(t, c, "handover", "a", cfg)
	b := newElectionProcess(t, c, "handover", "b", cfg)
	ctx := testutil.Context(t)

	ta, err := a.elector.Campaign(ctx)
	require.NoError(t, err)
	won := campaignAsync(ctx, b)
	waitForWaiters(t, c, b.locker, "handover", 1)

	resigned := time.Now()
	require.NoError(t, ta.Resign(ctx))
	tb := awaitTerm(t, won, 5*time.Second)
	took := tb.at.Sub(resigned)
	t.Logf("hand-over took %s", took)
	// Without the wake-up b would wait out a's TTL (the lease, 10s): a
	// fifth of it separates the two even on a busy machine.
	require.Less(t, took, cfg.LeaseDuration/5, "b was not woken by the release")
	require.Greater(t, tb.term.Fence(), ta.Fence())
	require.ErrorIs(t, context.Cause(ta.Context()), redlock.ErrLeaseReleased)

	// And back: a campaigns again and takes over when b resigns. b's
	// subscription, no longer needed, goes first: otherwise the count of
	// subscribers could reach one before a's own is in place.
	waitForWaiters(t, c, b.locker, "handover", 0)
	won = campaignAsync(ctx, a)
	waitForWaiters(t, c, a.locker, "handover", 1)
	require.NoError(t, tb.term.Resign(ctx))
	again := awaitTerm(t, won, 5*time.Second)
	require.Greater(t, again.term.Fence(), tb.term.Fence())
	require.NoError(t, again.term.Resign(ctx))
}

// TestElectorOneLeaderAtATime: five processes campaign over and over; at
// no time do two of them lead, and the terms' fences strictly increase in
// the order the terms were won.
func TestElectorOneLeaderAtATime(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	cfg := fastRetry(redlock.Config{LeaseDuration: time.Second})
	const candidates, terms = 5, 25
	var (
		mu      sync.Mutex
		leading int
		won     int
		fences  []fencing.Token
		owners  = make(map[string]int)
	)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range candidates {
		p := newElectionProcess(t, c, "exclusive", string(rune('a'+i)), cfg)
		wg.Go(func() {
			for {
				term, err := p.elector.Campaign(ctx)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("campaign: %v", err)
					}
					return
				}
				mu.Lock()
				leading++
				if leading != 1 {
					t.Errorf("%d leaders at once", leading)
				}
				won++
				fences = append(fences, term.Fence())
				owners[p.locker.Config().Owner]++
				done := won >= terms
				mu.Unlock()

				if term.Context().Err() != nil {
					t.Errorf("term ended while leading: %v", context.Cause(term.Context()))
				}

				mu.Lock()
				leading--
				mu.Unlock()
				if err := term.Resign(context.Background()); err != nil {
					// A release the nodes did not answer in time (a
					// loaded machine) only leaves the term to its TTL.
					t.Logf("resign: %v", err)
				}
				if done {
					cancel()
				}
			}
		})
	}
	wg.Wait()
	require.GreaterOrEqual(t, len(fences), terms)
	for i := 1; i < len(fences); i++ {
		require.Greater(t, fences[i], fences[i-1], "term fences must strictly increase")
	}
	require.Greater(t, len(owners), 1, "only one candidate ever led")
}

// nextLeader receives the next value from an Observe channel, failing
// after limit.
func nextLeader(t *testing.T, ch <-chan redlock.Leader, limit time.Duration) redlock.Leader {
	t.Helper()
	select {
	case ld, ok := <-ch:
		require.True(t, ok, "Observe channel closed early")
		return ld
	case <-time.After(limit):
		t.Fatalf("no leader change observed within %s", limit)
	}
	return redlock.Leader{}
}

// TestElectorObserveSeesEachTerm: a watcher sees no leader, then each term
// in turn with increasing fences, and "no leader" between them; when its
// context ends, the channel is closed.
func TestElectorObserveSeesEachTerm(t *testing.T) {
	t.Parallel() // bound by the wall clock (servers starting, failing over, delays passing)
	c := testutil.NewMiniCluster(t, 3)
	// A 6 s lease (polls every 1.5 s): a 1 s lease renewed on a loaded
	// machine could lapse between two renewals, and the watcher then
	// rightly reported no leader while the test expected none to change;
	// a 3 s one lapsed once in the KEYS check's run beside two busy loops.
	cfg := redlock.Config{LeaseDuration: 6 * time.Second}
	a := newElectionProcess(t, c, "observed", "a", cfg)
	b := newElectionProcess(t, c, "observed", "b", cfg)
	watcher := newElectionProcess(t, c, "observed", "watcher", cfg)
	ctx := testutil.Context(t)
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	ch := watcher.elector.Observe(watchCtx)
	const limit = 12 * time.Second

	require.Zero(t, nextLeader(t, ch, limit).Fence, "first value: no leader")
	var last fencing.Token
	for _, p := range []*electionProcess{a, b, a} {
		term, err := p.elector.Campaign(ctx)
		require.NoError(t, err)
		ld := nextLeader(t, ch, limit)
		require.Equal(t, p.locker.Config().Owner, ld.Owner)
		require.Equal(t, term.Fence(), ld.Fence)
		require.Greater(t, ld.Fence, last)
		require.Greater(t, ld.TTL, time.Duration(0))
		last = ld.Fence
		// Renewals change only the TTL: nothing is sent for them.
		select {
		case ld := <-ch:
			t.Fatalf("unexpected value while the term stands: %+v", ld)
		case <-time.After(3200 * time.Millisecond): // two polls and more
		}
		require.NoError(t, term.Resign(ctx))
		require.Zero(t, nextLeader(t, ch, limit).Fence, "after a resignation: no leader")
	}

	stop()
	select {
	case _, ok := <-ch:
		require.False(t, ok, "a value after the context ended")
	case <-time.After(limit):
		t.Fatal("Observe channel not closed after its context ended")
	}
}

// TestElectorObserveReportsNoLeaderWhenTheLeaderIsLost: a leader whose
// nodes become unreachable to everyone is not reported any more: the
// watcher gets "no leader" (unknown), not the last leader it saw.
func TestElectorObserveReportsNoLeaderWhenTheLeaderIsLost(t *testing.T) {
	t.Parallel() // bound by the wall clock (leases, delays, hung nodes)
	c := testutil.NewMiniCluster(t, 3)
	cfg := redlock.Config{LeaseDuration: 500 * time.Millisecond}
	a := newElectionProcess(t, c, "partitioned", "a", cfg)
	watcher := newElectionProcess(t, c, "partitioned", "watcher", cfg)
	ctx := testutil.Context(t)
	term, err := a.elector.Campaign(ctx)
	require.NoError(t, err)
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	ch := watcher.elector.Observe(watchCtx)
	require.Equal(t, term.Fence(), nextLeader(t, ch, time.Second).Fence)

	watcher.gate.Cut() // the watcher can reach no node
	require.Zero(t, nextLeader(t, ch, time.Second).Fence)
	watcher.gate.Mend()
	require.Equal(t, term.Fence(), nextLeader(t, ch, time.Second).Fence)
	require.NoError(t, term.Resign(ctx))
}

// TestCampaignEndsWithItsContextOrLocker: a candidate's wait is bounded by
// its context, and a closed Locker cannot campaign.
func TestCampaignEndsWithItsContextOrLocker(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	cfg := fastRetry(redlock.Config{LeaseDuration: 5 * time.Second})
	a := newElectionProcess(t, c, "bounded", "a", cfg)
	b := newElectionProcess(t, c, "bounded", "b", cfg)
	term, err := a.elector.Campaign(testutil.Context(t))
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = b.elector.Campaign(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), time.Second)

	require.NoError(t, b.locker.Close())
	_, err = b.elector.Campaign(testutil.Context(t))
	require.ErrorIs(t, err, redlock.ErrClosed)

	// Closing the leader's Locker ends its term and frees the role.
	require.NoError(t, a.locker.Close())
	require.ErrorIs(t, context.Cause(term.Context()), redlock.ErrLeaseReleased)
	watcher := newElectionProcess(t, c, "bounded", "watcher", cfg)
	_, err = watcher.elector.Leader(context.Background())
	require.ErrorIs(t, err, redlock.ErrNoLeader)
}
