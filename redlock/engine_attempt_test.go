package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/scripts"
)

// The attempt engine (attempt.go) over fake nodes: one tally, one fence
// step and one clean-up for a request of one lease or many, and the one
// reply family (parseVote). A lease's hooks (leaseHooks) are called as the
// release side of the seam promises.

// replies answers each node's acquire (and acquire_all) with its entry;
// every other script as fakeDefault.
func replies(acquire ...any) func(i int, s *scripts.Script, keys []string, args []any) (any, error) {
	return func(i int, s *scripts.Script, _ []string, _ []any) (any, error) {
		if s != scripts.Acquire && s != scripts.AcquireAll {
			return fakeDefault(s)
		}
		if err, ok := acquire[i].(error); ok {
			return nil, err
		}
		return acquire[i], nil
	}
}

var errLost = errors.New("connection lost")

// TestEngineCleanup: a failed attempt releases its lock, before it
// returns, on the nodes that granted it or whose answer was lost, and not
// on a node that refused.
func TestEngineCleanup(t *testing.T) {
	nodes := newFakeNodes(3, replies(acq("granted", "5", 0, 0, 0, ""), acq("held", "", 1000, 0, 0, ""), errLost))
	l := fakeLocker(t, nodes, Config{})
	_, err := l.TryAcquire(context.Background(), "r")
	var ae *AcquireError
	require.True(t, errors.As(err, &ae))
	// The attempt may decide as soon as a majority is out of reach (one
	// refusal and one lost answer of three): node 0's grant is then a late
	// one, counted or not, and released by the late calls' clean-up.
	require.LessOrEqual(t, ae.Granted, 1)
	require.Len(t, ae.Refused, 1)
	require.Len(t, ae.NodeErrors, 1)
	require.Eventually(t, func() bool { return len(nodes[0].scriptCalls("release")) == 1 }, 10*time.Second, time.Millisecond, "granted: released")
	require.Eventually(t, func() bool { return len(nodes[2].scriptCalls("release")) == 1 }, 10*time.Second, time.Millisecond, "unknown outcome: released")
	require.Empty(t, nodes[1].scriptCalls("release"), "refused: nothing of ours there")
	for _, c := range nodes[0].scriptCalls("release") {
		require.Equal(t, []any{"none", ""}, c.args[6:8], "a clean-up names no place")
		require.Equal(t, "none", c.args[4], "and hands nothing over")
	}
}

// TestEngineFence: the fencing token is the highest counter granted; it
// is used at once when a majority returned exactly it, and otherwise only
// after a majority of the granting nodes raised their counter to it (the
// attempt decides at the first majority: any two of the nodes).
func TestEngineFence(t *testing.T) {
	for name, tc := range map[string]struct {
		counters []string
		want     fencing.Token
		step     bool
	}{
		"they agree": {counters: []string{"6", "6", "6"}, want: 6},
		"all differ": {counters: []string{"5", "6", "7"}, want: 6, step: true},
	} {
		t.Run(name, func(t *testing.T) {
			answers := make([]any, 3)
			for i, c := range tc.counters {
				answers[i] = acq("granted", c, 0, 0, 0, "")
			}
			nodes := newFakeNodes(3, replies(answers...))
			l := fakeLocker(t, nodes, Config{})
			lease, err := l.TryAcquire(context.Background(), "r")
			require.NoError(t, err)
			fenced := 0
			for _, n := range nodes {
				for _, c := range n.scriptCalls("fence") {
					require.Equal(t, lease.Fence().String(), c.args[1], "raised to the fence")
					fenced++
				}
			}
			if tc.step {
				require.GreaterOrEqual(t, lease.Fence(), tc.want, "the highest of two granted counters")
				require.GreaterOrEqual(t, fenced, l.quorum)
			} else {
				require.Equal(t, tc.want, lease.Fence())
				require.Zero(t, fenced)
			}
			require.NoError(t, lease.Release(context.Background()))
		})
	}
}

// TestEngineManyLeases: one request makes several leases in one round
// trip per node, each with its own token, fence and renewal; a node that
// refuses one refuses all, and the clean-up releases every lease where the
// set was granted.
func TestEngineManyLeases(t *testing.T) {
	grantAll := vrep("granted", 0, "", 0, 0, "5", int64(0), "9", int64(0))
	nodes := newFakeNodes(3, replies(grantAll, grantAll, vrep("held", 500, "", 2, 0)))
	l := fakeLocker(t, nodes, Config{})
	leases, err := l.TryAcquireAll(context.Background(), "a", "b")
	require.NoError(t, err)
	require.Len(t, leases, 2)
	require.Equal(t, []fencing.Token{5, 9}, []fencing.Token{leases[0].Fence(), leases[1].Fence()})
	require.NotEqual(t, leases[0].Token(), leases[1].Token())
	for _, n := range nodes {
		n.await(t, "acquire_all") // the lease came at a majority
		require.Len(t, n.scriptCalls("acquire_all"), 1, "one call per node for the set")
	}
	for _, ls := range leases {
		require.NoError(t, ls.Release(context.Background()))
	}

	refuse := vrep("held", 500, "", 2, 0)
	nodes = newFakeNodes(3, replies(grantAll, refuse, refuse))
	l = fakeLocker(t, nodes, Config{})
	_, err = l.TryAcquireAll(context.Background(), "a", "b")
	require.ErrorIs(t, err, ErrNotAcquired)
	require.Contains(t, err.Error(), `"b" is held`)
	require.Len(t, nodes[0].scriptCalls("release"), 2, "both leases released where the set was granted")
	require.Empty(t, nodes[1].scriptCalls("release"))
}

// recordedHooks records what a lease asks of its hooks.
type recordedHooks struct {
	noWait
	args, heard, done, ends chan string
}

func newRecordedHooks() *recordedHooks {
	return &recordedHooks{args: make(chan string, 16), heard: make(chan string, 16), done: make(chan string, 16), ends: make(chan string, 16)}
}

func (h *recordedHooks) granted(ls *Lease) { ls.hooks = h }

func (h *recordedHooks) release(a releaseArgs) releasing {
	a.place = placeArgs{id: "the-waitings-own", handTTL: 5000, channel: "-", token: "the-places-token", owner: "its owner"}
	a.prepare()
	return recordedRelease{h, a}
}

func (h *recordedHooks) ended(orphaned bool) {
	h.ends <- map[bool]string{true: "orphaned", false: "released"}[orphaned]
}

type recordedRelease struct {
	h *recordedHooks
	a releaseArgs
}

func (r recordedRelease) args(_ context.Context, i int) releaseArgs {
	r.h.args <- "args"
	return r.a
}
func (r recordedRelease) heard(i int, rp released) { r.h.heard <- "heard" }
func (r recordedRelease) done(time.Duration)       { r.h.done <- "done" }

// TestEngineLeaseHooks: a lease's release makes each node's call through
// the hooks its waiting gave it (which may add a place), tells them every
// answer, and what follows a confirmed release and the lease's end; an
// orphaned lease releases nothing and says so.
func TestEngineLeaseHooks(t *testing.T) {
	nodes := newFakeNodes(3, nil)
	l := fakeLocker(t, nodes, Config{})
	ctx := context.Background()
	h := newRecordedHooks()
	leases, _, err := l.attempt(ctx, l.mutexRequest("r", h), h)
	require.NoError(t, err)
	require.NoError(t, leases[0].Release(ctx))
	require.Equal(t, "released", <-h.ends)
	require.Equal(t, "done", <-h.done)
	for range nodes {
		require.Equal(t, "args", <-h.args)
		require.Equal(t, "heard", <-h.heard)
	}
	for _, n := range nodes {
		require.Equal(t, []any{"place", "the-waitings-own", "handover", int64(5000), "-", "the-places-token", "its owner"}, n.scriptCalls("release")[0].args[6:13])
	}

	leases, _, err = l.attempt(ctx, l.mutexRequest("o", h), h)
	require.NoError(t, err)
	leases[0].Orphan()
	require.Equal(t, "orphaned", <-h.ends)
	require.Empty(t, h.args, "an orphaned lease releases nothing")
}

// vrep is a reply of the granting scripts' family {verdict, ms, why,
// lock, readers, grants...} (parseVote).
func vrep(verdict string, ms int64, why string, lock, readers int64, grants ...any) []any {
	return append([]any{verdict, ms, why, lock, readers}, grants...)
}

// TestParseVote: the granting scripts' one reply family.
func TestParseVote(t *testing.T) {
	none := func(voteReply) (string, bool) { return "", true }
	for name, tc := range map[string]struct {
		reply any
		k     int
		want  vote
		bad   bool
	}{
		"one new grant":            {reply: vrep("granted", 0, "", 1, 0, "5", int64(0)), k: 1, want: vote{ok: true, counters: []fencing.Token{5}}},
		"one retried grant":        {reply: vrep("granted", 0, "", 1, 0, "5", int64(300)), k: 1, want: vote{ok: true, counters: []fencing.Token{5}, left: 300 * time.Millisecond}},
		"two grants":               {reply: vrep("granted", 0, "", 0, 0, "5", int64(0), "6", int64(200)), k: 2, want: vote{ok: true, counters: []fencing.Token{5, 6}, left: 200 * time.Millisecond}},
		"a refusal":                {reply: vrep("held", 700, "", 1, 0), k: 1, want: vote{holderTTL: 700 * time.Millisecond}},
		"a refusal without expiry": {reply: vrep("held", -1, "", 1, 0), k: 1, want: vote{holderTTL: -1}},
		"a sit-out":                {reply: vrep("sitout", 900, "identity", 0, 0), k: 1, want: vote{holderTTL: 900 * time.Millisecond, reason: "rejoining: " + lossReasons["identity"] + "; it grants again in 900ms"}},
		"a counter without time":   {reply: vrep("granted", 0, "", 1, 0, "5"), k: 1, bad: true},
		"too few grants":           {reply: vrep("granted", 0, "", 0, 0, "5", int64(0)), k: 2, bad: true},
		"a counter not canonical":  {reply: vrep("granted", 0, "", 1, 0, "05", int64(0)), k: 1, bad: true},
		"a negative time left":     {reply: vrep("granted", 0, "", 1, 0, "5", int64(-3)), k: 1, bad: true},
		"a refusal with grants":    {reply: vrep("held", 700, "", 1, 0, "5", int64(0)), k: 1, bad: true},
		"a sit-out with a lock":    {reply: vrep("sitout", 900, "identity", 1, 0), k: 1, bad: true},
		"a field of another type":  {reply: []any{"held", "700", "", int64(1), int64(0)}, k: 1, bad: true},
		"the old shape":            {reply: []any{int64(1), "5"}, k: 1, bad: true},
		"not an array":             {reply: int64(1), k: 1, bad: true},
	} {
		t.Run(name, func(t *testing.T) {
			v, err := parseVote(tc.reply, tc.k, "test", none)
			if tc.bad {
				require.ErrorIs(t, err, errBadReply)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, v)
		})
	}

	v, err := parseRWGrant(vrep("readers", 900, "", 1, 3))
	require.NoError(t, err)
	require.Equal(t, vote{holderTTL: 900 * time.Millisecond, reason: "3 readers hold it"}, v)
	v, err = parseRWGrant(vrep("intent", 900, "", 1, 0))
	require.NoError(t, err)
	require.Equal(t, "a writer waits for it", v.reason)
	for _, bad := range [][]any{vrep("intent", 900, "", 1, 1), vrep("behind", 0, "", 1, 0), vrep("held", 900, "", 2, 0)} {
		_, err = parseRWGrant(bad)
		require.ErrorIs(t, err, errBadReply, "%#v", bad)
	}
}

// TestParseReleased: the release script's one reply family.
func TestParseReleased(t *testing.T) {
	for name, tc := range map[string]struct {
		reply any
		want  released
		bad   bool
	}{
		"not held":            {reply: []any{"notheld", int64(0), "", ""}, want: released{}},
		"released quietly":    {reply: []any{"released", int64(0), "", ""}, want: released{released: true}},
		"released and heard":  {reply: []any{"released", int64(2), "w1", ""}, want: released{released: true, listeners: 2, head: "w1"}},
		"handed over":         {reply: []any{"handed", int64(1), "w1", "7"}, want: released{released: true, listeners: 1, head: "w1", counter: 7}},
		"handed to no head":   {reply: []any{"handed", int64(1), "", "7"}, bad: true},
		"handed, no counter":  {reply: []any{"handed", int64(1), "w1", ""}, bad: true},
		"released, a counter": {reply: []any{"released", int64(1), "w1", "7"}, bad: true},
		"not held, but heard": {reply: []any{"notheld", int64(1), "", ""}, bad: true},
		"heard a negative":    {reply: []any{"released", int64(-1), "", ""}, bad: true},
		"an unknown verdict":  {reply: []any{"gone", int64(0), "", ""}, bad: true},
		"the old integer":     {reply: int64(1), bad: true},
		"a field of bad type": {reply: []any{"released", "0", "", ""}, bad: true},
		"too short":           {reply: []any{"released", int64(0), ""}, bad: true},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := parseReleased(tc.reply)
			if tc.bad {
				require.ErrorIs(t, err, errBadReply)
				require.Equal(t, released{}, r)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, r)
		})
	}
}

// TestParseRehold pins the rehold reply family {verdict, counter, ms, why}:
// each verdict with its fields, and the shapes that are refused.
func TestParseRehold(t *testing.T) {
	for name, tc := range map[string]struct {
		reply   any
		want    fencing.Token
		held    bool
		bad     bool
		sitsOut bool
	}{
		"done":                 {reply: []any{"done", "7", int64(0), ""}, want: 7, held: true},
		"not held":             {reply: []any{"notheld", "", int64(0), ""}},
		"sits out":             {reply: []any{"sitout", "", int64(900), "no-marker"}, sitsOut: true},
		"done without counter": {reply: []any{"done", "", int64(0), ""}, bad: true},
		"done, not canonical":  {reply: []any{"done", "07", int64(0), ""}, bad: true},
		"done with a why":      {reply: []any{"done", "7", int64(0), "identity"}, bad: true},
		"not held, a counter":  {reply: []any{"notheld", "7", int64(0), ""}, bad: true},
		"sits out, a counter":  {reply: []any{"sitout", "7", int64(900), "identity"}, bad: true},
		"sits out negative":    {reply: []any{"sitout", "", int64(-1), "identity"}, bad: true},
		"an unknown verdict":   {reply: []any{"moved", "7", int64(0), ""}, bad: true},
		"the old done":         {reply: []any{int64(1), "7"}, bad: true},
		"the old not held":     {reply: []any{int64(0)}, bad: true},
		"the old sitout":       {reply: []any{int64(3), int64(900), "identity"}, bad: true},
		"a field of bad type":  {reply: []any{"done", int64(7), int64(0), ""}, bad: true},
	} {
		t.Run(name, func(t *testing.T) {
			c, held, err := parseRehold(tc.reply)
			switch {
			case tc.bad:
				require.ErrorIs(t, err, errBadReply)
			case tc.sitsOut:
				require.ErrorIs(t, err, ErrRejoining)
				require.NotErrorIs(t, err, errBadReply)
			default:
				require.NoError(t, err)
			}
			require.Equal(t, tc.want, c)
			require.Equal(t, tc.held, held)
		})
	}
}
