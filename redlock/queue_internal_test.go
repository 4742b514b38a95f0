package redlock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/require"
)

// queueNode is one miniredis server behind a Node (NewTestNode), its clock set by
// hand (the scripts read it with TIME).
type queueNode struct {
	m    *miniredis.Miniredis
	node Node
}

func newQueueNodes(t *testing.T, n int, now time.Time) []queueNode {
	t.Helper()
	nodes := make([]queueNode, n)
	for i := range nodes {
		m := miniredis.RunT(t)
		m.SetTime(now)
		nodes[i] = queueNode{m: m, node: testNode(t, m.Addr())}
	}
	return nodes
}

func (q queueNode) acquire(t *testing.T, key, token string, p *place) grant {
	t.Helper()
	a := acquireArgs{keys: lockKeys(key), token: token, owner: "o", ttl: 10 * time.Second}
	if p != nil {
		a.queue = &queueArgs{place: p.fields(), ticket: p.ticketArg(), ttl: p.ttl}
	}
	g, err := acquire(context.Background(), q.node, a)
	require.NoError(t, err)
	return g
}

func (q queueNode) head(t *testing.T, key string) string {
	t.Helper()
	qt, _ := queueKeys(key)
	ids, err := q.m.ZMembers(qt)
	require.NoError(t, err)
	if len(ids) == 0 {
		return ""
	}
	return ids[0] // ZMembers lists by score, then member
}

// TestWaitersArrivingInDifferentOrdersConvergeOnOneHead: two waiters reach
// two nodes in opposite orders, so each node gives them opposite tickets;
// once each brings the highest ticket it was given, both nodes hold the
// same tickets and name the same head, which alone is granted the free
// lock, on both.
func TestWaitersArrivingInDifferentOrdersConvergeOnOneHead(t *testing.T) {
	const key = "redlock:{conv}"
	nodes := newQueueNodes(t, 2, time.Unix(1_800_000_000, 0))
	a, b := nodes[0], nodes[1]
	x := &place{id: "1111111111111111", ttl: time.Minute}
	y := &place{id: "0000000000000000", ttl: time.Minute}
	for _, q := range nodes {
		require.True(t, q.acquire(t, key, tokenHolder, nil).OK)
	}

	// a sees x then y; b sees y then x.
	ax, by := a.acquire(t, key, tokenX, x), b.acquire(t, key, tokenY, y)
	ay, bx := a.acquire(t, key, tokenY, y), b.acquire(t, key, tokenX, x)
	require.Equal(t, []int64{1, 2}, []int64{ax.ticket, bx.ticket})
	require.Equal(t, []int64{1, 2}, []int64{by.ticket, ay.ticket})
	require.NotEqual(t, a.head(t, key), b.head(t, key), "the nodes disagree before the tickets are brought back")

	// Each brings its highest ticket to both nodes.
	x.ticket, y.ticket = 2, 2
	for _, q := range nodes {
		require.EqualValues(t, 2, q.acquire(t, key, tokenX, x).ticket)
		require.EqualValues(t, 2, q.acquire(t, key, tokenY, y).ticket)
	}
	require.Equal(t, y.id, a.head(t, key), "equal tickets: the lower id is first")
	require.Equal(t, y.id, b.head(t, key))

	// The holder leaves; x is refused on both (y is next), y is granted on both.
	for _, q := range nodes {
		ok, err := releaseFlag(q.node, key, tokenHolder)
		require.NoError(t, err)
		require.True(t, ok)
	}
	for _, q := range nodes {
		g := q.acquire(t, key, tokenX, x)
		require.False(t, g.OK)
		require.Equal(t, queuedReason, g.Reason)
		require.Zero(t, g.HolderTTL)
		require.Equal(t, time.Minute, g.headLeft, "y's place has its whole TTL left")
	}
	for _, q := range nodes {
		require.True(t, q.acquire(t, key, tokenY, y).OK)
		require.Equal(t, x.id, q.head(t, key), "y left the queue when granted")
	}
}

// TestAPlaceLapsesAfterItsTTL: a waiter that stops renewing its place is
// passed over once the place's TTL has run out on the node's clock, and a
// caller that does not queue is refused while a live place stands.
func TestAPlaceLapsesAfterItsTTL(t *testing.T) {
	const key = "redlock:{lapse}"
	now := time.Unix(1_800_000_000, 0)
	q := newQueueNodes(t, 1, now)[0]
	dead := &place{id: "dddddddddddddddd", ttl: 500 * time.Millisecond}
	live := &place{id: "eeeeeeeeeeeeeeee", ttl: time.Minute}
	require.True(t, q.acquire(t, key, tokenHolder, nil).OK)
	require.EqualValues(t, 1, q.acquire(t, key, tokenX, dead).ticket)
	require.EqualValues(t, 2, q.acquire(t, key, tokenY, live).ticket)
	ok, err := releaseFlag(q.node, key, tokenHolder)
	require.NoError(t, err)
	require.True(t, ok)

	q.m.SetTime(now.Add(499 * time.Millisecond))
	g := q.acquire(t, key, tokenY, live)
	require.False(t, g.OK, "the head's place is still alive")
	require.Equal(t, time.Millisecond, g.headLeft)
	g = q.acquire(t, key, tokenZ, nil)
	require.False(t, g.OK, "a caller that does not queue does not jump the queue")
	require.Equal(t, queuedReason, g.Reason)

	q.m.SetTime(now.Add(500 * time.Millisecond))
	require.True(t, q.acquire(t, key, tokenY, live).OK, "the dead waiter's place lapsed")
	qt, qe := queueKeys(key)
	require.False(t, q.m.Exists(qt), "the queue is empty, and gone")
	require.False(t, q.m.Exists(qe))
}

const (
	tokenHolder = "11111111111111111111111111111111"
	tokenX      = "22222222222222222222222222222222"
	tokenY      = "33333333333333333333333333333333"
	tokenZ      = "44444444444444444444444444444444"
)

// TestManyLapsedPlacesDoNotHideTheHead: however many places lapsed before
// the live head, the head is found (a newcomer is refused), and a grant
// removes the winner's place.
func TestManyLapsedPlacesDoNotHideTheHead(t *testing.T) {
	const key = "redlock:{lapsed}"
	now := time.Unix(1_800_000_000, 0)
	q := newQueueNodes(t, 1, now)[0]
	require.True(t, q.acquire(t, key, tokenHolder, nil).OK)
	for i := range 250 {
		g := q.acquire(t, key, tokenX, &place{id: fmt.Sprintf("dead%012d", i), ttl: 100 * time.Millisecond})
		require.False(t, g.OK)
	}
	head := &place{id: "ffffffffffffffff", ttl: time.Hour}
	later := &place{id: "0000000000000000", ttl: time.Hour}
	require.EqualValues(t, 251, q.acquire(t, key, tokenY, head).ticket)
	require.EqualValues(t, 252, q.acquire(t, key, tokenZ, later).ticket)
	ok, err := releaseFlag(q.node, key, tokenHolder)
	require.NoError(t, err)
	require.True(t, ok)

	q.m.SetTime(now.Add(time.Second)) // the 250 places lapse
	g := q.acquire(t, key, tokenZ, later)
	require.False(t, g.OK, "the live head is still first")
	require.Equal(t, queuedReason, g.Reason)
	require.True(t, q.acquire(t, key, tokenY, head).OK)
	require.Equal(t, later.id, q.head(t, key), "the winner's place is gone, the lapsed ones too")
	qt, _ := queueKeys(key)
	n, err := q.m.ZMembers(qt)
	require.NoError(t, err)
	require.Len(t, n, 1)
}

// releaseFlag releases token's lock on node and reports whether it held it.
func releaseFlag(node Node, key, token string) (bool, error) {
	r, err := release(context.Background(), node, releaseArgs{keys: lockKeys(key), token: token})
	return r.released, err
}

// queueKeys are the lock's wait queue: the waiters' tickets and their
// expiry times (lockKeys' last two).
func queueKeys(key string) (tickets, expiries string) {
	k := lockKeys(key)
	return k[2], k[3]
}
