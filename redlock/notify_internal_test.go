package redlock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// hubWithWaiter is a waitHub over 3 nodes (quorum 2) with one waiter on k.
func hubWithWaiter() (*waitHub, *waiter) {
	h := &waitHub{l: &Locker{quorum: 2}, keys: map[string]*keyWait{}}
	w := &waiter{wake: make(chan struct{}, 1)}
	h.keys["k"] = &keyWait{queue: []*waiter{w}}
	return h, w
}

func woken(w *waiter) bool {
	select {
	case <-w.wake:
		return true
	default:
		return false
	}
}

// TestWaiterHearsTheReleaseAfterItsLockersOwn: the announcements of this
// Locker's own release arrive in any order relative to Release returning,
// and from any number of nodes; none of that may hide the next release,
// by another process, from the waiter.
func TestWaiterHearsTheReleaseAfterItsLockersOwn(t *testing.T) {
	cases := map[string]func(h *waitHub){
		"own announcements before Release returns": func(h *waitHub) {
			for range 3 {
				h.notify(0, "k", "aaaaaaaa")
			}
			h.released("k", "aaaaaaaa")
		},
		"own announcements after Release returned": func(h *waitHub) {
			h.released("k", "aaaaaaaa")
			for range 3 {
				h.notify(0, "k", "aaaaaaaa")
			}
		},
		"Release returned at quorum, the third node later": func(h *waitHub) {
			h.notify(0, "k", "aaaaaaaa")
			h.released("k", "aaaaaaaa")
			h.notify(0, "k", "aaaaaaaa")
			h.notify(0, "k", "aaaaaaaa")
		},
		"twenty own releases": func(h *waitHub) {
			for i := range 20 {
				id := string(rune('a'+i%26)) + "0000000"
				h.notify(0, "k", id)
				h.released("k", id)
				h.notify(0, "k", id)
				h.notify(0, "k", id)
			}
		},
	}
	for name, own := range cases {
		t.Run(name, func(t *testing.T) {
			h, w := hubWithWaiter()
			own(h)
			require.True(t, woken(w), "an own release wakes the next waiter at once")
			require.False(t, woken(w))

			h.notify(0, "k", "bbbbbbbb")
			require.False(t, woken(w), "one node of three is not a majority")
			h.notify(0, "k", "bbbbbbbb")
			require.True(t, woken(w), "a release announced by a majority wakes the waiter")
			h.notify(0, "k", "bbbbbbbb")
			require.False(t, woken(w), "one release wakes one waiter")
		})
	}
}

// TestHeardReleasesStayBounded: a hot key with waiters that never empty
// remembers only the last few releases.
func TestHeardReleasesStayBounded(t *testing.T) {
	h, _ := hubWithWaiter()
	for i := range 1000 {
		h.notify(0, "k", string(rune(0x4e00+i)))
	}
	require.LessOrEqual(t, len(h.keys["k"].heard), maxHeard)
}

// TestSubscriptionsForgetKeysWithoutWaiters: after waiters of many
// resources have come and gone, no subscription keeps any of their keys.
func TestSubscriptionsForgetKeysWithoutWaiters(t *testing.T) {
	var nodes []Node
	for range 3 {
		m := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		nodes = append(nodes, NewRedisNode(c))
	}
	l, err := New(nodes, Config{LeaseDuration: 10 * time.Second})
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 50 {
		resource := fmt.Sprintf("r%d", i)
		held, err := l.TryAcquire(ctx, resource)
		require.NoError(t, err)
		w := l.hub.join(l.Key(resource), "")
		require.NotNil(t, w)
		require.NoError(t, held.Release(ctx))
		l.hub.leave(l.Key(resource), w)
	}
	l.hub.syncs.Wait()
	for i, s := range l.hub.subs {
		s.mu.Lock()
		require.Empty(t, s.watching, "node %d", i)
		s.mu.Unlock()
	}
}

// TestHubAnnouncements: what each announcement wakes. An empty one (a
// node's announcements may have been missed) wakes the first waiter and
// every waiter that queued on the nodes; a release wakes, once a majority
// announced it, the heads it named, or the first waiter when it named
// none, and a head named by a later node too; a hand-over is noted for its
// waiter and wakes nobody else.
func TestHubAnnouncements(t *testing.T) {
	hub := func() (*waitHub, []*waiter) {
		h := &waitHub{l: &Locker{quorum: 2}, keys: map[string]*keyWait{}}
		ws := []*waiter{
			{wake: make(chan struct{}, 1)},           // a plain waiter
			{wake: make(chan struct{}, 1), id: "p1"}, // queued on the nodes
			{wake: make(chan struct{}, 1)},           // a plain waiter behind
			{wake: make(chan struct{}, 1), id: "p2"}, // queued
		}
		h.keys["k"] = &keyWait{queue: ws}
		return h, ws
	}
	wokenOf := func(ws []*waiter) []bool {
		out := make([]bool, len(ws))
		for i, w := range ws {
			out[i] = woken(w)
		}
		return out
	}

	h, ws := hub()
	h.notify(1, "k", "")
	require.Equal(t, []bool{true, true, false, true}, wokenOf(ws), "missed: the first and the queued")

	h, ws = hub()
	h.notify(0, "k", "aaaaaaaa p2")
	require.Equal(t, []bool{false, false, false, false}, wokenOf(ws), "one node of three: not yet")
	h.notify(1, "k", "aaaaaaaa p2")
	require.Equal(t, []bool{false, false, false, true}, wokenOf(ws), "a majority named p2")
	h.notify(2, "k", "aaaaaaaa p1")
	require.Equal(t, []bool{false, true, false, false}, wokenOf(ws), "a later node named another head: it tries too")

	h, ws = hub()
	h.notify(0, "k", "bbbbbbbb")
	h.notify(2, "k", "bbbbbbbb")
	require.Equal(t, []bool{true, false, false, false}, wokenOf(ws), "no head named: the first in line")

	h, ws = hub()
	h.notify(0, "k", "cccccccc p1 7")
	h.notify(1, "k", "cccccccc p1 7")
	require.Equal(t, []bool{false, true, false, false}, wokenOf(ws), "handed over to p1: nobody else")
	require.NotNil(t, ws[1].handed, "the hand-over is noted for its waiter")

	h, ws = hub()
	h.notify(0, "k", "~dddddddd p2")
	require.Equal(t, []bool{false, false, false, true}, wokenOf(ws), "a leaving names the head: woken on one node's word")
	h.notify(0, "unknown", "eeeeeeee")
	require.Equal(t, []bool{false, false, false, false}, wokenOf(ws), "no waiter of that key")
}
