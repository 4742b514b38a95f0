package redlock

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/e6344662/go-redlock/fencing"
)

// waitHub lets a Locker's waiters sleep until a release of their key has
// been announced by a majority of nodes (a release heard from fewer nodes
// would send a waiter to nodes that still hold the old lock). Waiters of one
// key queue in arrival order and one is woken per release, so that they
// take turns instead of splitting the nodes' votes among themselves.
// Subscriptions open lazily, one per node, and watch exactly the keys that
// have waiters.
type waitHub struct {
	l *Locker

	mu      sync.Mutex
	opened  bool
	closed  bool
	inboxed bool      // the Locker's inbox is watched (Locker.inbox)
	subs    []*hubSub // nil entries for nodes that announce nothing
	keys    map[string]*keyWait
	syncs   sync.WaitGroup
}

// keyWait is the queue of one key's waiters and the releases of the key
// heard lately, each counted on its own: announcements of one release can
// arrive after those of the next, and a Locker's own release is announced
// to it too.
type keyWait struct {
	heard []heardRelease // the most recent last; at most maxHeard
	queue []*waiter
}

// heardRelease counts the nodes that announced one release; done is set
// once it woke a waiter (or was this Locker's own release). heads are the
// heads of the lock's wait queue the nodes named without handing the lock
// over to them (Config.QueueTTL).
type heardRelease struct {
	id     string
	nodes  int
	done   bool
	handed bool // a node handed the lock over to a waiter
	heads  []string
}

// maxHeard bounds the releases a keyWait remembers. Releases of one key
// follow each other (one holder at a time), so only the last few can still
// be arriving.
const maxHeard = 8

// release returns the entry of release id, adding it if new.
func (kw *keyWait) release(id string) *heardRelease {
	for i := range kw.heard {
		if kw.heard[i].id == id {
			return &kw.heard[i]
		}
	}
	if len(kw.heard) == maxHeard {
		kw.heard = append(kw.heard[:0], kw.heard[1:]...)
	}
	kw.heard = append(kw.heard, heardRelease{id: id})
	return &kw.heard[len(kw.heard)-1]
}

// waiter is one Acquire call waiting for its turn; wake holds at most one
// pending wake-up. id is its waiter id in the nodes' wait queue ("" when
// it does not queue there); handed holds, by node index, the highest fence
// counter with which a node announced handing the lock over to it (guarded
// by the hub's lock).
type waiter struct {
	wake   chan struct{}
	id     string
	handed map[int]fencing.Token
	// notes counts the hand-overs noted for the waiter; notedAt holds, by
	// node index, the count when the node's was noted; seen the highest
	// counter heard from the node, kept when the hand-over is forgotten, so
	// that a late copy of its announcement does not bring it back.
	notes   uint64
	notedAt map[int]uint64
	seen    map[int]fencing.Token
}

// hubSub is one node's subscription and the keys it watches now.
type hubSub struct {
	sub      Subscription
	mu       sync.Mutex // serializes Watch/Unwatch; guards watching
	watching map[string]bool
}

// join queues a waiter for key, with its waiter id in the nodes' wait
// queue ("" for none); it returns nil when no node can announce releases
// (the caller then relies on backoff alone).
func (h *waitHub) join(key, id string) *waiter {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	if !h.opened {
		h.opened = true
		h.subs = make([]*hubSub, len(h.l.nodes))
		for i, n := range h.l.nodes {
			if sub := n.Subscribe(func(key, msg string) { h.notify(i, key, msg) }); sub != nil {
				h.subs[i] = &hubSub{sub: sub, watching: make(map[string]bool)}
			}
		}
	}
	if !slices.ContainsFunc(h.subs, func(s *hubSub) bool { return s != nil }) {
		return nil
	}
	if id != "" && h.l.inbox != "" && !h.inboxed {
		h.inboxed = true // watched from the first queued waiter on
		h.syncLocked(h.l.inbox)
	}
	kw := h.keys[key]
	if kw == nil {
		kw = &keyWait{}
		h.keys[key] = kw
		h.syncLocked(key)
	}
	w := &waiter{wake: make(chan struct{}, 1), id: id}
	kw.queue = append(kw.queue, w)
	return w
}

// joinAll queues one waiter for every key (a semaphore's slots): a release
// of any of them wakes it. It returns nil when no node can announce
// releases.
func (h *waitHub) joinAll(keys []string) *waiter {
	w := h.join(keys[0], "")
	if w == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, key := range keys[1:] {
		if h.closed {
			break
		}
		kw := h.keys[key]
		if kw == nil {
			kw = &keyWait{}
			h.keys[key] = kw
			h.syncLocked(key)
		}
		kw.queue = append(kw.queue, w)
	}
	return w
}

// leaveAll takes w out of every key's queue.
func (h *waitHub) leaveAll(keys []string, w *waiter) {
	for _, key := range keys {
		h.leave(key, w)
	}
}

// leave takes w out of key's queue. A wake-up w did not use passes to the
// next waiter, unless w queued on the nodes: wake-ups there are addressed
// to the head of the nodes' queue, and a stray one (a release announced
// after w's own hand-off woke it) would only cost another waiter an
// attempt.
func (h *waitHub) leave(key string, w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	kw := h.keys[key]
	if kw == nil {
		return
	}
	kw.queue = slices.DeleteFunc(kw.queue, func(x *waiter) bool { return x == w })
	if len(kw.queue) == 0 {
		delete(h.keys, key)
		if !h.closed {
			h.syncLocked(key)
		}
		return
	}
	if w.id != "" {
		return
	}
	select {
	case <-w.wake:
		kw.queue[0].signal()
	default:
	}
}

func (w *waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// queued reports whether this Locker already has waiters for key: a new
// Acquire then takes its place behind them instead of trying first.
func (h *waitHub) queued(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	kw := h.keys[key]
	return kw != nil && len(kw.queue) > 0
}

// released is called when this Locker itself released key (release id):
// the first local waiter is woken at once, and the release's own
// announcements, still on their way, wake no one else.
func (h *waitHub) released(key, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	kw := h.keys[key]
	if kw == nil || len(kw.queue) == 0 {
		return
	}
	kw.release(id).done = true
	kw.queue[0].signal()
}

// notify is called by node's subscription for every announcement msg of
// key: "<release id>", "<release id> <head>" when the lock has a wait
// queue on the node, or "<release id> <head> <counter>" when the node
// handed the lock over to the head. Once a majority of nodes announced the
// same release, the waiters the nodes named as the head are woken, or,
// when none was named, the first waiter in line; once per release. A
// hand-over is noted for its waiter (handOver), which is woken at once.
//
// An empty msg says that a node's announcements of key may have been
// missed (its subscription was cut and is back): the first waiter tries
// again, and so does every waiter that queued on the nodes (any of them
// may be the head there). A head announced by a waiter's leaving (an id starting with "~")
// is woken at once: the node's lock was free, and a wasted attempt is the
// worst a minority's word can cost.
func (h *waitHub) notify(node int, key, msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if key == h.l.inbox {
		h.fromInbox(node, msg)
		return
	}
	kw := h.keys[key]
	if kw == nil {
		return
	}
	id, head, handed := kw.announced(node, msg)
	switch {
	case id == "":
		kw.missed()
	case strings.HasPrefix(id, leaveMark):
		kw.wake([]string{head})
	default:
		kw.announcedBy(id, head, handed, h.l.quorum)
	}
}

// announced decodes one node's announcement, "id", "id head" or "id head
// counter" (the node handed the lock over to head, its fence counter
// there being counter), and notes a hand-over for its waiter (handOver),
// who is woken now and for whom nobody else need try. It returns the
// release's (or leaving's) id, the head still to wake ("" after a
// hand-over) and whether the lock was handed over.
func (kw *keyWait) announced(node int, msg string) (id, head string, handed bool) {
	id, head, _ = strings.Cut(msg, " ")
	head, counter, _ := strings.Cut(head, " ")
	if c, err := fencing.ParseToken(counter); err == nil && head != "" {
		kw.handOver(node, head, c)
		return id, "", true
	}
	return id, head, false
}

// missed wakes, after a node's announcements of the key may have been
// missed, the first waiter and every waiter that queued on the nodes (the
// head of the nodes' queue may be any of them).
func (kw *keyWait) missed() {
	kw.queue[0].signal()
	for _, w := range kw.queue[1:] {
		if w.id != "" {
			w.signal()
		}
	}
}

// announcedBy counts one node's announcement of release id, which named head
// (or none) or handed the lock over. Once a quorum of nodes announced it,
// the heads named are woken or, when none was named and nothing was
// handed over, the first waiter in line; a head named by a node after
// that is woken too (it may be the head there: let it try).
func (kw *keyWait) announcedBy(id, head string, handed bool, quorum int) {
	r := kw.release(id)
	r.nodes++
	r.handed = r.handed || handed
	added := head != "" && !slices.Contains(r.heads, head)
	if added && len(r.heads) < maxHeard {
		r.heads = append(r.heads, head)
	}
	switch {
	case !r.done && r.nodes >= quorum:
		r.done = true
		switch {
		case len(r.heads) == 0 && !r.handed:
			kw.queue[0].signal()
		case len(r.heads) > 0:
			kw.wake(r.heads)
		}
	case r.done && added:
		kw.wake([]string{head})
	}
}

// wakeHeads wakes this Locker's waiters of key whose ids are in heads
// (named by the nodes that released key).
func (h *waitHub) wakeHeads(key string, heads []string) {
	if len(heads) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if kw := h.keys[key]; kw != nil {
		kw.wake(heads)
	}
}

// handOver notes that node handed key over to the waiter with id, its
// fence counter there being c, and wakes that waiter.
func (h *waitHub) handOver(key string, node int, id string, c fencing.Token) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if kw := h.keys[key]; kw != nil && node >= 0 {
		kw.handOver(node, id, c)
	}
}

func (kw *keyWait) handOver(node int, id string, c fencing.Token) {
	for _, w := range kw.queue {
		if w.id == id && w.id != "" {
			if w.handed == nil {
				w.handed = make(map[int]fencing.Token)
			}
			if c > w.seen[node] { // not the same hand-over heard twice
				if w.notedAt == nil {
					w.notedAt, w.seen = make(map[int]uint64), make(map[int]fencing.Token)
				}
				w.notes++
				w.handed[node], w.notedAt[node], w.seen[node] = c, w.notes, c
				w.signal()
			}
		}
	}
}

// fromInbox handles an announcement on the Locker's inbox (Locker.inbox):
// "<release id> <waiter id> <counter> <lock key>", a hand-over to one of
// its waiters, or an empty msg when hand-overs may have been missed (the
// subscription was cut and is back): every waiter that queued on the nodes
// then tries again. Its caller holds h.mu.
func (h *waitHub) fromInbox(node int, msg string) {
	if msg == "" {
		for _, kw := range h.keys {
			for _, w := range kw.queue {
				if w.id != "" {
					w.signal()
				}
			}
		}
		return
	}
	f := strings.SplitN(msg, " ", 4)
	if len(f) < 4 {
		return
	}
	c, err := fencing.ParseToken(f[2])
	if kw := h.keys[f[3]]; kw != nil && err == nil {
		kw.handOver(node, f[1], c)
	}
}

// rename gives w a new waiter id and forgets the hand-overs noted for it.
func (h *waitHub) rename(w *waiter, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.id, w.handed, w.notedAt, w.seen = id, nil, nil, nil
}

// notes returns how many hand-overs have been noted for w (0 for nil).
func (h *waitHub) notes(w *waiter) uint64 {
	if w == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return w.notes
}

// forgetHandOver forgets the hand-over noted for w from node when it was
// noted by the time w's notes were upTo: a later answer of the node showed
// that the lock is not w's place's any more.
func (h *waitHub) forgetHandOver(w *waiter, node int, upTo uint64) {
	if w == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := w.handed[node]; ok && w.notedAt[node] <= upTo {
		delete(w.handed, node)
	}
}

// handovers returns a copy of the hand-overs noted for w.
func (h *waitHub) handovers(w *waiter) map[int]fencing.Token {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(w.handed)
}

// wake signals the waiters whose ids are in heads.
func (kw *keyWait) wake(heads []string) {
	for _, w := range kw.queue {
		if w.id != "" && slices.Contains(heads, w.id) {
			w.signal()
		}
	}
}

// leaveMark starts the id of a waiter's leaving in an announcement.
const leaveMark = "~"

// syncLocked makes every subscription watch key exactly when it has
// waiters, in the background (a node that is down must not hold up a
// waiter). Each sync reads the wanted state when it runs, so the last one
// wins whatever order they run in.
func (h *waitHub) syncLocked(key string) {
	for _, s := range h.subs {
		if s == nil {
			continue
		}
		h.syncs.Add(1)
		go func() {
			defer h.syncs.Done()
			s.mu.Lock()
			defer s.mu.Unlock()
			h.mu.Lock()
			want := (h.keys[key] != nil || key == h.l.inbox) && !h.closed
			h.mu.Unlock()
			if want == s.watching[key] {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), h.l.cfg.NodeCallTimeout)
			defer cancel()
			var err error
			if want {
				err = s.sub.Watch(ctx, key)
			} else {
				err = s.sub.Unwatch(ctx, key)
			}
			switch {
			case want && err == nil:
				s.watching[key] = true
			case !want && err == nil:
				delete(s.watching, key) // the map holds only watched keys
			}
			// A failed Watch is not recorded as watching, but go-redis
			// resubscribes on reconnect; a failed Unwatch is retried by the
			// next sync of the key.
		}()
	}
}

// close ends every subscription and waits for pending syncs. Every waiter
// is woken, to find the Locker closed (and leave the nodes' queues).
func (h *waitHub) close() error {
	h.mu.Lock()
	h.closed = true
	subs := h.subs
	for _, kw := range h.keys {
		for _, w := range kw.queue {
			w.signal()
		}
	}
	h.mu.Unlock()
	h.syncs.Wait()
	var errs []error
	for _, s := range subs {
		if s != nil {
			if err := s.sub.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
