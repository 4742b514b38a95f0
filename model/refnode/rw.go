package refnode

import (
	"sort"
	"strings"
)

// RWState is what the read-write lock's steps read and write (docs/design.md
// §14): the writer's lock W, the shared fence counter and the marker (as
// State's Lock, Fence and Marker), the readers index (token -> the end of
// the reader's lease, ms on the node's clock) with its expiry (ms; 0 for
// none), each reader's own key, and the writers' intents (id -> when it
// lapses, ms) with the intent set's expiry.
type RWState struct {
	State
	Readers      map[string]int64
	ReadersExpMS int64
	ReaderKeys   map[string]Key
	Intents      map[string]int64
	IntentExpMS  int64
}

// RWCall is one call of a read-write lock's step: rw_read, rw_write,
// rw_withdraw, rw_inspect, or a reader's renew and release and a writer's
// release (the mutex's scripts on the lease's own key).
type RWCall struct {
	Op       string // read, write, withdraw, inspect, renew-reader, release-reader, release-writer
	Token    string
	TTLms    int64
	DelayMS  int64
	Wait     bool     // write: mode "wait" (records an intent when refused)
	ID       string   // write (Wait), withdraw: the waiting writer's id
	IntentMS int64    // write (Wait): how long the intent lasts
	Named    []string // inspect: the readers whose keys the caller declares
}

// RWStep runs c on st at node time now (µs) on a server of identity id and
// returns the reply and the keys after it. The rules, from the scripts'
// headers (rw.lua, rw_read.lua, rw_write.lua, rw_inspect.lua,
// rw_withdraw.lua) and docs/design.md §14: a reader is live while its
// index score is ahead of the clock, whether or not its key stands; a
// writer is granted only where W is free, no reader is live and the
// counter records no live lease (C5); a reader where W is free, no intent
// is live and the counter's live lease, if any, is the index's latest live
// reader's; the counter records the readers' latest end, which a reader's
// release lowers to the index's latest live end where its entry stood;
// the index's TTL reaches its latest end; each rw_read and rw_write call
// removes the readers whose end has passed.
func RWStep(st RWState, c RWCall, now int64, id Ident) (Reply, RWState) {
	n := &rwNode{st: clone(st), now: now, id: id}
	r := n.run(c)
	return r, n.st
}

func clone(st RWState) RWState {
	out := st
	out.Readers, out.ReaderKeys, out.Intents = map[string]int64{}, map[string]Key{}, map[string]int64{}
	for k, v := range st.Readers {
		out.Readers[k] = v
	}
	for k, v := range st.ReaderKeys {
		out.ReaderKeys[k] = v
	}
	for k, v := range st.Intents {
		out.Intents[k] = v
	}
	return out
}

type rwNode struct {
	st  RWState
	now int64
	id  Ident
}

func (n *rwNode) ms() int64 { return n.now / 1000 }

// on runs f on a mutex node whose lock key is k, with the shared counter
// and marker, and keeps what f did to them.
func (n *rwNode) on(k Key, f func(m *node)) Key {
	m := &node{st: State{Lock: k, Fence: n.st.Fence, Marker: n.st.Marker}, now: n.now, id: n.id}
	f(m)
	n.st.Fence, n.st.Marker = m.st.Fence, m.st.Marker
	return m.st.Lock
}

// live counts the live readers and the most ms one has left.
func (n *rwNode) live() (int64, int64) {
	var cnt, most int64
	for _, end := range n.st.Readers {
		if end >= n.ms() {
			cnt++
			most = max(most, end-n.ms())
		}
	}
	return cnt, most
}

// sweep removes the readers whose end has passed; the last takes the
// index with it.
func (n *rwNode) sweep() {
	for tok, end := range n.st.Readers {
		if end < n.ms() {
			delete(n.st.Readers, tok)
		}
	}
	if len(n.st.Readers) == 0 {
		n.st.ReadersExpMS = 0
	}
}

// top is the latest end in the readers index (0 for an empty one).
func (n *rwNode) top() int64 {
	var top int64
	for _, end := range n.st.Readers {
		top = max(top, end)
	}
	return top
}

// span gives the readers index a TTL that reaches its latest end
// (counter.lua, c_span).
func (n *rwNode) span() {
	if len(n.st.Readers) > 0 {
		n.st.ReadersExpMS = n.ms() + max(n.top()-n.ms(), 0) + 1
	}
}

// counter runs f on the shared counter (a mutex node without a lock).
func (n *rwNode) counter(f func(m *node)) {
	lock := n.st.Lock
	n.on(Key{}, f)
	n.st.Lock = lock
}

// intent counts the live intents and the most ms one has left.
func (n *rwNode) intent() (int64, int64) {
	var cnt, most int64
	for _, end := range n.st.Intents {
		if end > n.ms() {
			cnt++
			most = max(most, end-n.ms())
		}
	}
	return cnt, most
}

func pttlOf(k Key, nowMS int64) int64 {
	switch {
	case !k.Present:
		return -2
	case k.ExpMS == 0:
		return -1
	}
	return max(k.ExpMS-nowMS, 0)
}

func holdsKey(k Key, tok string) bool { return k.Present && strings.HasPrefix(k.Val, tok+" ") }

func (n *rwNode) run(c RWCall) Reply {
	switch c.Op {
	case "read":
		return named(n.read(c))
	case "write":
		return named(n.write(c))
	case "withdraw":
		return n.withdraw(c)
	case "inspect":
		return n.inspect(c)
	case "renew-reader":
		return n.renewReader(c)
	case "release-reader":
		return n.releaseReader(c)
	case "release-writer":
		var r Reply
		n.st.Lock = n.on(n.st.Lock, func(m *node) { r = m.run(Call{Op: "release", Token: c.Token}) })
		return r
	}
	panic("refnode: unknown rw step " + c.Op)
}

// withdraw is rw_withdraw.lua: a writer's intent taken back.
func (n *rwNode) withdraw(c RWCall) Reply {
	if _, ok := n.st.Intents[c.ID]; !ok {
		return intReply(0)
	}
	delete(n.st.Intents, c.ID)
	if len(n.st.Intents) == 0 {
		n.st.IntentExpMS = 0
	}
	return intReply(1)
}

// renewReader is a reader's renew (renew.lua on its key): the key, its
// index entry and the counter extended.
func (n *rwNode) renewReader(c RWCall) Reply {
	k := n.st.ReaderKeys[c.Token]
	if !holdsKey(k, c.Token) {
		return intReply(0)
	}
	k.ExpMS = n.ms() + c.TTLms
	n.st.ReaderKeys[c.Token] = k
	end := ceilDiv(n.now+c.TTLms*1000, 1000)
	if _, ok := n.st.Readers[c.Token]; ok { // an index that is gone is not made again
		n.st.Readers[c.Token] = end
	}
	n.span()
	n.counter(func(m *node) { // U never goes down here (renew.lua)
		if v, u := m.counter(); v == "" {
			m.markOf(Call{Marker: true}) // the reader's lease names the marker
			m.count("", "", end*1000)
		} else {
			m.store(v, max(u, end*1000))
		}
	})
	return intReply(1)
}

// releaseReader is a reader's release (release.lua on its key): the key
// and its index entry gone, the counter brought down.
func (n *rwNode) releaseReader(c RWCall) Reply {
	if !holdsKey(n.st.ReaderKeys[c.Token], c.Token) {
		return released(false)
	}
	delete(n.st.ReaderKeys, c.Token)
	if _, ok := n.st.Readers[c.Token]; !ok {
		return released(true) // the index was evicted: U stays (counter.lua, c_end)
	}
	delete(n.st.Readers, c.Token)
	if len(n.st.Readers) == 0 {
		n.st.ReadersExpMS = 0
	}
	n.counter(func(m *node) { // the index holds every live reader: U comes down
		v, u := m.counter()
		switch top := n.top(); {
		case v == "" || u == 0:
		case len(n.st.Readers) > 0 && top >= n.ms():
			m.store(v, min(u, top*1000))
		default:
			m.store(v, 0)
		}
	})
	return released(true)
}

// named gives a reply of read or write in the granting scripts' one
// family {verdict, ms, why, lock, readers, grants...} (scripts/rw_read.lua,
// rw_write.lua): read's and write's own {1, counter} (granted), {1,
// counter, pttl} (the token already held it), {0, pttl} (a writer holds
// it), {0, ms, readers} (readers hold it), {0, ms, 0, 1} (a writer waits)
// and {3, ms, why} (the node sits out), named; an error as it is.
func named(r Reply) Reply {
	if r.Err != "" {
		return r
	}
	a := r.Array
	switch {
	case a[0] == int64(3):
		return arr("sitout", a[1], a[2], int64(0), int64(0))
	case a[0] == int64(1) && len(a) == 2:
		return arr("granted", int64(0), "", int64(1), int64(0), a[1], int64(0))
	case a[0] == int64(1):
		return arr("granted", int64(0), "", int64(1), int64(0), a[1], a[2])
	case len(a) == 2:
		return arr("held", a[1], "", int64(1), int64(0))
	case len(a) == 3:
		return arr("readers", a[1], "", int64(1), a[2])
	}
	return arr("intent", a[1], "", int64(1), int64(0))
}

func (n *rwNode) read(c RWCall) Reply {
	if k := n.st.ReaderKeys[c.Token]; holdsKey(k, c.Token) {
		var r Reply
		n.on(k, func(m *node) {
			floor, refusal := m.trust(c.DelayMS)
			if refusal != nil {
				r = *refusal
				return
			}
			v, _ := m.counter()
			if v == "" {
				v = m.count("", floor, n.now+max(pttlOf(k, n.ms()), 0)*1000)
			}
			r = arr(int64(1), v, leftOf(pttlOf(k, n.ms())))
		})
		return r
	}
	if n.st.Lock.Present {
		n.sweep()
		return arr(int64(0), pttlOf(n.st.Lock, n.ms()))
	}
	if waiting, left := n.intent(); waiting > 0 {
		n.sweep()
		return arr(int64(0), left, int64(0), int64(1))
	}
	var r Reply
	n.on(Key{}, func(m *node) {
		v, u := m.counter()
		floor, refusal := m.trust(c.DelayMS)
		if refusal != nil {
			r = *refusal
			return
		}
		live, most := n.live()
		accounted := u > 0 && live > 0 && u <= (n.ms()+most)*1000
		if !accounted && u-n.now > GraceUS { // W's key, or the readers index, lost while U runs (C5)
			r = arr(int64(3), ceilDiv(u-n.now, 1000), "key-lost")
			return
		}
		n.st.ReaderKeys[c.Token] = Key{Present: true, Val: c.Token + " owner", ExpMS: n.ms() + c.TTLms}
		end := ceilDiv(n.now+c.TTLms*1000, 1000)
		n.st.Readers[c.Token] = end
		n.span()
		n.sweep()
		r = arr(int64(1), m.count(v, floor, max(u, end*1000)))
	})
	return r
}

func (n *rwNode) write(c RWCall) Reply {
	if holdsKey(n.st.Lock, c.Token) {
		var r Reply
		n.on(n.st.Lock, func(m *node) { r = m.take(Call{Op: "acquire", Token: c.Token, TTLms: c.TTLms, DelayMS: c.DelayMS}) })
		return r
	}
	if live, most := n.live(); n.st.Lock.Present || live > 0 {
		if c.Wait {
			n.st.Intents[c.ID] = n.ms() + c.IntentMS
			for id, end := range n.st.Intents {
				if end <= n.ms() {
					delete(n.st.Intents, id)
				}
			}
			n.st.IntentExpMS = n.ms() + c.IntentMS
		}
		n.sweep()
		if n.st.Lock.Present {
			return arr(int64(0), pttlOf(n.st.Lock, n.ms()))
		}
		return arr(int64(0), most, live)
	}
	var r Reply
	n.st.Lock = n.on(n.st.Lock, func(m *node) {
		r = m.take(Call{Op: "acquire", Token: c.Token, TTLms: c.TTLms, DelayMS: c.DelayMS})
	})
	if len(r.Array) == 2 && r.Array[0] == int64(1) {
		if c.Wait {
			delete(n.st.Intents, c.ID)
			if len(n.st.Intents) == 0 {
				n.st.IntentExpMS = 0
			}
		}
		n.sweep()
	}
	return r
}

func (n *rwNode) inspect(c RWCall) Reply {
	var w any
	if n.st.Lock.Present {
		w = n.st.Lock.Val
	}
	var fence any
	if v, _ := (&node{st: n.st.State}).counter(); v != "" {
		fence = v
	}
	waiting, _ := n.intent()
	out := []any{w, pttlOf(n.st.Lock, n.ms()), fence, waiting}
	var toks []string
	for tok, end := range n.st.Readers {
		if end >= n.ms() {
			toks = append(toks, tok)
		}
	}
	sort.Slice(toks, func(i, j int) bool {
		a, b := n.st.Readers[toks[i]], n.st.Readers[toks[j]]
		return a < b || a == b && toks[i] < toks[j]
	})
	named := map[string]bool{}
	for _, tok := range c.Named {
		named[tok] = true
	}
	for _, tok := range toks {
		var v any
		if k := n.st.ReaderKeys[tok]; named[tok] && k.Present {
			v = k.Val
		}
		out = append(out, tok, n.st.Readers[tok]-n.ms(), v)
	}
	return arr(out...)
}
