package redlock

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// handPlace is a waiting Acquire's place that takes a lock handed over to
// it: lease ttl, place ttl, and the channel the hand-over is announced on.
func handPlace(id, token string, lease, ttl time.Duration, ch string) *place {
	return &place{
		id:      id,
		handTTL: nodeTTL(lease),
		channel: ch,
		token:   token,
		owner:   "o",
		ttl:     ttl,
	}
}

// member is the place as the nodes store it (scripts/queue.lua, q_place):
// what a node reports for it.
func (p placeArgs) member() string {
	if p.handTTL <= 0 {
		return p.id
	}
	return p.id + " " + strconv.FormatInt(p.handTTL, 10) + " " + p.channel + " " + p.token + " " + p.owner
}

// list is p as a script's arguments: the id, then the hand-over mode and
// its fields (placeArgs.put).
func (p placeArgs) list() []any {
	a := make([]any, 6)
	a[0] = p.id
	p.put(a[1:])
	return a
}

// member is p's placeArgs.member.
func (p *place) member() string { return p.fields().member() }

var testHandOver = handOver{on: true, delay: -1}

// listen subscribes to channel on q's server and returns its messages
// (miniredis delivers them synchronously: they must be read as they come).
func listen(t *testing.T, q queueNode, channel string) <-chan string {
	t.Helper()
	sub := q.m.NewSubscriber()
	sub.Subscribe(channel)
	out := make(chan string, 16)
	go func() {
		for m := range sub.Messages() {
			out <- m.Message
		}
	}()
	t.Cleanup(sub.Close)
	return out
}

// TestAReleaseHandsTheLockToTheHead: a release by the holder sets the lock
// to the head's token (its place gone, a new holder counted), for the
// head's lease TTL but no longer than its place had left, and announces
// it with the counter on the channel the head named; the head's acquire
// then finds its token holding the lock and is told what it has left.
func TestAReleaseHandsTheLockToTheHead(t *testing.T) {
	const key = "redlock:{hand}"
	now := time.Unix(1_800_000_000, 0)
	q := newQueueNodes(t, 1, now)[0]
	inbox := listen(t, q, "redlock:{~inbox}:released")

	holder := q.acquire(t, key, tokenHolder, nil)
	require.True(t, holder.OK)
	head := handPlace("1111111111111111", tokenX, 10*time.Second, 2*time.Second, "redlock:{~inbox}:released")
	next := handPlace("2222222222222222", tokenY, 10*time.Second, time.Minute, "-")
	require.False(t, q.acquire(t, key, tokenX, head).OK)
	q.m.SetTime(now.Add(500 * time.Millisecond))
	require.False(t, q.acquire(t, key, tokenY, next).OK)

	r, err := release(context.Background(), q.node, releaseArgs{keys: lockKeys(key), token: tokenHolder, handOver: testHandOver, place: placeArgs{}})
	require.NoError(t, err)
	require.True(t, r.released)
	require.Equal(t, head.id, r.head)
	require.Equal(t, holder.Counter+1, r.counter, "the hand-over counts a new holder")

	v, err := q.m.Get(key)
	require.NoError(t, err)
	require.Equal(t, tokenX+" o", v, "the lock holds the head's token")
	require.Equal(t, 1500*time.Millisecond, q.m.TTL(key), "no longer than the head's place had left (2 s, 0.5 s of it gone)")
	require.Equal(t, next.member(), q.head(t, key), "the head's place is gone")
	require.Equal(t, releaseID(tokenHolder)+" "+head.id+" "+r.counter.String()+" "+key, <-inbox)

	// An attempt of the head's Acquire (one that missed the announcement)
	// is told its place holds the lock, with the counter and what it has
	// left; the lock stays the place's.
	g := q.acquire(t, key, tokenZ, head)
	require.False(t, g.OK)
	require.True(t, g.handed)
	require.Equal(t, r.counter, g.Counter)
	require.Equal(t, 1500*time.Millisecond, g.left)
	v, err = q.m.Get(key)
	require.NoError(t, err)
	require.Equal(t, tokenX+" o", v)

	// Its release hands the lock on to the next head, announced on the
	// lock's own channel ("-").
	lockCh := listen(t, q, releaseChannel(key))
	r, err = release(context.Background(), q.node, releaseArgs{keys: lockKeys(key), token: tokenX, handOver: testHandOver, place: placeArgs{}})
	require.NoError(t, err)
	require.Equal(t, next.id, r.head)
	require.Equal(t, g.Counter+1, r.counter)
	require.Equal(t, releaseID(tokenX)+" "+next.id+" "+r.counter.String(), <-lockCh)
	require.Equal(t, 10*time.Second, q.m.TTL(key), "the lease TTL: the place had a minute left")
}

// TestAPlaceWithoutAHandOverIsOnlyNamed: a place that does not say what to
// hand the lock over with (an id alone), or a release that does not ask
// for hand-overs, leaves the lock free and names the head.
func TestAPlaceWithoutAHandOverIsOnlyNamed(t *testing.T) {
	for name, tc := range map[string]struct {
		handTTL int64
		ho      handOver
	}{
		"an id alone":          {handTTL: 0, ho: testHandOver},
		"no hand-over asked":   {handTTL: 10000, ho: handOver{}},
		"the place has lapsed": {handTTL: 10000, ho: testHandOver},
	} {
		t.Run(name, func(t *testing.T) {
			const key = "redlock:{named}"
			now := time.Unix(1_800_000_000, 0)
			q := newQueueNodes(t, 1, now)[0]
			require.True(t, q.acquire(t, key, tokenHolder, nil).OK)
			p := &place{id: "1111111111111111", handTTL: tc.handTTL, channel: "-", token: tokenX, owner: "o", ttl: time.Second}
			if name == "the place has lapsed" {
				require.False(t, q.acquire(t, key, tokenX, p).OK)
				q.m.SetTime(now.Add(time.Second)) // its place lapses
			} else {
				require.False(t, q.acquire(t, key, tokenX, p).OK)
			}
			r, err := release(context.Background(), q.node, releaseArgs{keys: lockKeys(key), token: tokenHolder, handOver: tc.ho, place: placeArgs{}})
			require.NoError(t, err)
			require.True(t, r.released)
			require.Zero(t, r.counter)
			require.False(t, q.m.Exists(key), "the lock is free")
			if name != "the place has lapsed" {
				require.Equal(t, p.id, r.head)
			}
		})
	}
}

// TestAReleaseRemovesTheHoldersOwnPlace: a lease that a fair Acquire took
// on a majority may still have its place on the other nodes; its release
// removes it there, whether or not the lock is held there.
func TestAReleaseRemovesTheHoldersOwnPlace(t *testing.T) {
	const key = "redlock:{own}"
	q := newQueueNodes(t, 1, time.Unix(1_800_000_000, 0))[0]
	require.True(t, q.acquire(t, key, tokenHolder, nil).OK)
	mine := handPlace("1111111111111111", tokenX, 10*time.Second, time.Minute, "-")
	require.False(t, q.acquire(t, key, tokenX, mine).OK)
	r, err := release(context.Background(), q.node, releaseArgs{keys: lockKeys(key), token: tokenX, handOver: testHandOver, place: mine.fields()})
	require.NoError(t, err)
	require.False(t, r.released, "the lock is another's here")
	require.False(t, q.m.Exists(key+":queue"), "the place is gone")
	v, _ := q.m.Get(key)
	require.Equal(t, tokenHolder+" o", v)
}

// TestLeavingGivesBackAHandedOverLock: an Acquire that ends without a
// lease (cancelled) gives back a lock handed over to it meanwhile, and
// the node names the next head.
func TestLeavingGivesBackAHandedOverLock(t *testing.T) {
	const key = "redlock:{leave}"
	q := newQueueNodes(t, 1, time.Unix(1_800_000_000, 0))[0]
	require.True(t, q.acquire(t, key, tokenHolder, nil).OK)
	gone := handPlace("1111111111111111", tokenX, 10*time.Second, time.Minute, "-")
	next := handPlace("2222222222222222", tokenY, 10*time.Second, time.Minute, "-")
	require.False(t, q.acquire(t, key, tokenX, gone).OK)
	require.False(t, q.acquire(t, key, tokenY, next).OK)
	r, err := release(context.Background(), q.node, releaseArgs{keys: lockKeys(key), token: tokenHolder, handOver: testHandOver, place: placeArgs{}})
	require.NoError(t, err)
	require.Equal(t, gone.id, r.head)

	sub := listen(t, q, releaseChannel(key))
	require.NoError(t, leave(context.Background(), q.node, leaveArgs{keys: lockKeys(key), place: gone.fields(), give: true}))
	require.False(t, q.m.Exists(key), "given back")
	require.Equal(t, leaveMark+releaseID(gone.id)+" "+next.id, <-sub)
	require.Equal(t, next.member(), q.head(t, key))
}

// TestAReleasePassesOverTheReleasersOwnPlace: a late call of one of the
// releasing lease's own attempts may have queued its place again; the
// release removes it and hands the lock to the next waiter, never to the
// lease's own (dead) place. A lock held by the place's token (handed over
// after the lease was granted) is the lease's to release too.
func TestAReleasePassesOverTheReleasersOwnPlace(t *testing.T) {
	const key = "redlock:{own-late}"
	q := newQueueNodes(t, 1, time.Unix(1_800_000_000, 0))[0]
	mine := handPlace("1111111111111111", tokenX, 10*time.Second, time.Minute, "-")
	other := handPlace("2222222222222222", tokenY, 10*time.Second, time.Minute, "-")
	require.True(t, q.acquire(t, key, tokenHolder, nil).OK)
	require.False(t, q.acquire(t, key, tokenZ, mine).OK, "a late attempt queues the lease's place")
	require.False(t, q.acquire(t, key, tokenY, other).OK)
	r, err := release(context.Background(), q.node, releaseArgs{keys: lockKeys(key), token: tokenHolder, handOver: testHandOver, place: mine.fields()})
	require.NoError(t, err)
	require.Equal(t, other.id, r.head, "the lease's own place is passed over")
	v, _ := q.m.Get(key)
	require.Equal(t, tokenY+" o", v)
	require.False(t, q.m.Exists(key+":queue"), "both places are gone")

	// A lock held by a place's token is released with that place.
	r, err = release(context.Background(), q.node, releaseArgs{keys: lockKeys(key), token: tokenZ, handOver: testHandOver, place: other.fields()})
	require.NoError(t, err)
	require.True(t, r.released)
	require.False(t, q.m.Exists(key))
}

// TestAHandOverShownGoneStopsCounting: a hand-over announced to a waiter
// counts toward its majority only until a node's answer shows that the
// lock there is not its place's any more (it lapsed, or went to a new
// holder): a waiter must not keep, and keep renewing, a minority it cannot
// use, nor leave it locked for the lease duration if it dies.
func TestAHandOverShownGoneStopsCounting(t *testing.T) {
	ctx := context.Background()
	q := newQueueNodes(t, 1, time.Now())[0] // one node: its answer decides
	l, err := New([]Node{q.node}, Config{LeaseDuration: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	key := l.Key("gone")
	require.True(t, q.acquire(t, key, tokenHolder, nil).OK) // another holder took the lock
	w, err := l.newWaiting(ctx, "gone")
	require.NoError(t, err)
	fw := w.(*fairWait)
	defer fw.done(false)
	fw.w = l.hub.join(key, fw.p.id)
	l.hub.handOver(key, 0, fw.p.id, 7) // announced, then overtaken
	h, _ := l.handed(fw.p, fw.w)
	require.Equal(t, []int{0}, h)

	_, o, err := l.attempt(ctx, l.mutexRequest("gone", fw), fw)
	require.ErrorIs(t, err, ErrNotAcquired)
	handed, _, _ := fw.view(o)
	require.Empty(t, handed)
	h, _ = l.handed(fw.p, fw.w)
	require.Empty(t, h, "the node refused for another holder, yet its hand-over still counts")

	l.hub.handOver(key, 0, fw.p.id, 9) // a hand-over announced after the attempt began counts
	h, _ = l.handed(fw.p, fw.w)
	require.Equal(t, []int{0}, h)
}
