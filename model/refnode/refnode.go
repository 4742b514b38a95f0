// Package refnode is a Go reference of one node's steps of redlock's
// protocol under the Safety v4 rules: the steps of model/redlock.pml and
// model/adversary.pml (acquire, release, renew, fence, rehold and the
// trust gate), written from the model, docs/model.md and the rules the
// scripts state in their headers (trust.lua T1-T3, counter.lua C1-C5), not
// from the Lua code. The differential test drives the real scripts on a
// real redis-server and this reference with the same random operations,
// and compares their replies and the keys they leave at every step.
//
// A step is a pure function: it takes the node's keys as they stood when
// the script began (State), the node's clock when the script read it and
// the server's replication identity, and returns the reply and the keys
// after it.
package refnode

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Node-side constants of Safety v4 (docs/design.md §6.2; counter.lua, trust.lua).
// Safety v4.1 adds the db's high-water (counter.lua, C6): the marker's
// sixth field, the largest value counted or fenced in the db since the
// marker was created, and the least start of a new counter.
const (
	// StepUS is a new counter's granularity, in microseconds (C1).
	StepUS = 1_000_000
	// LifeMS is how long a counter lives after its last lease (C4), ms.
	LifeMS = 20_000
	// GraceUS is how far a recorded lease end may lie ahead of the clock
	// when its lock key has expired (C5), µs.
	GraceUS = 1_000
	// TickUS is how far the marker's seen lags the clock before it is
	// rewritten, and how far the clock may step back unnoticed (T2), µs.
	TickUS = 1_000_000
)

// Key is one key's value and absolute expiry (ms on the node's clock; 0:
// none). A missing key is the zero Key with Present false.
type Key struct {
	Present bool
	Val     string
	ExpMS   int64
}

// State is what a step reads and writes: the resource's lock key, its
// fence counter and the node's marker (of the db the step runs in).
type State struct {
	Lock, Fence, Marker Key
	// Other is the key of the marker's name in the server's other db (db
	// 1): this db's marker swapped away, or nothing (T4).
	Other Key
}

// Ident is the server's identity as INFO replication says it.
type Ident struct {
	Replica bool   // role:slave
	ReplID  string // master_replid
}

// Reply is a script's reply: an integer, or an array of integers and
// strings, or an error (its text's first word is its code).
type Reply struct {
	Int   *int64
	Array []any // int64 or string
	Err   string
}

func (r Reply) String() string {
	switch {
	case r.Err != "":
		return "error " + strings.Fields(r.Err)[0]
	case r.Int != nil:
		return strconv.FormatInt(*r.Int, 10)
	}
	return fmt.Sprint(r.Array)
}

func intReply(v int64) Reply { return Reply{Int: &v} }
func arr(v ...any) Reply     { return Reply{Array: v} }

// Call is one script call.
type Call struct {
	Op      string // acquire, release, renew, fence, rehold
	Token   string
	TTLms   int64  // acquire, renew, rehold
	DelayMS int64  // acquire, rehold: the caller's RejoinDelay
	F       string // fence: the counter to raise to
	Marker  bool   // fence, renew: the marker key is given (its high-water, C6; T4)
	NewTok  string // rehold: the new token
}

// Step runs call on st at node time now (µs) on a server of identity id
// (its keys as they stood when the script began) and returns the reply
// and the keys after it.
func Step(st State, c Call, now int64, id Ident) (Reply, State) {
	n := &node{st: st, now: now, id: id}
	r := n.run(c)
	return r, n.st
}

type node struct {
	st  State
	now int64
	id  Ident
	// the marker as the step's gate read or wrote it (C6): marked when
	// there is one, head its text up to the high-water, hi the high-water
	// ("" for none)
	marked   bool
	head, hi string
}

// high raises the db's high-water to v when v is above it (C6): the
// marker is rewritten.
func (n *node) high(v string) {
	if !n.marked || (n.hi != "" && !less(n.hi, v)) {
		return
	}
	n.hi = v
	n.st.Marker = Key{Present: true, Val: n.head + " " + v}
}

// marker is a marker key's fields (T2, C6); why "-" for none.
type marker struct {
	rid, why, hi string
	from, seen   int64
}

// readMarker reads marker key k (the zero marker, why "-", when it is
// missing); ok false when k holds something else.
func readMarker(k Key) (marker, bool) {
	if !k.Present {
		return marker{why: "-"}, true
	}
	f, hi, ok := parseMarker(k.Val)
	if !ok {
		return marker{}, false
	}
	m := marker{rid: f[1], why: f[4], hi: hi}
	m.from, _ = strconv.ParseInt(f[2], 10, 64)
	m.seen, _ = strconv.ParseInt(f[3], 10, 64)
	return m, true
}

// mark records the marker as the gate leaves it (head: its text up to
// the high-water hi) and writes it when write is set.
func (n *node) mark(head, hi string, write bool) {
	n.marked, n.head, n.hi = true, head, hi
	if write {
		val := head
		if hi != "" {
			val += " " + hi
		}
		n.st.Marker = Key{Present: true, Val: val}
	}
}

// isMarker reports whether val is a marker, v4 or older ("<run_id>
// <evicted_keys> <from> <why>").
func isMarker(val string) bool {
	if _, _, ok := parseMarker(val); ok {
		return true
	}
	f := strings.Fields(val)
	if len(f) != 4 {
		return false
	}
	for _, x := range f[1:3] {
		if _, err := strconv.ParseUint(x, 10, 64); err != nil {
			return false
		}
	}
	return true
}

// parseMarker splits a v4 marker: replid, from, seen, why and the
// high-water ("" for none); ok false when it is not one.
func parseMarker(val string) (f []string, hi string, ok bool) {
	f = strings.Fields(val)
	if len(f) == 6 {
		hi, f = f[5], f[:5]
	}
	return f, hi, len(f) == 5 && f[0] == "v4"
}

func (n *node) nowMS() int64 { return n.now / 1000 }

// leftOf is lock.lua's l_left: what a lock the caller holds has left, for
// a reply: its PTTL p, but 1 where p is 0 (a 0 reads as a new grant).
func leftOf(p int64) int64 {
	if p == 0 {
		return 1
	}
	return p
}

// pttl is the lock's time to live in ms, as PTTL says it (-2: none, -1:
// no expiry).
func (n *node) pttl() int64 {
	switch {
	case !n.st.Lock.Present:
		return -2
	case n.st.Lock.ExpMS == 0:
		return -1
	}
	return max(n.st.Lock.ExpMS-n.nowMS(), 0)
}

func (n *node) holds(tok string) bool {
	return n.st.Lock.Present && strings.HasPrefix(n.st.Lock.Val, tok+" ")
}

// counter reads the fence counter: V ("" none) and U (0 none).
func (n *node) counter() (string, int64) {
	if !n.st.Fence.Present {
		return "", 0
	}
	f := strings.Fields(n.st.Fence.Val)
	if len(f) == 2 {
		u, _ := strconv.ParseInt(f[1], 10, 64)
		return f[0], u
	}
	return n.st.Fence.Val, 0
}

// store writes counter v: "v U" without a TTL while a lease runs until
// upto (C3), else "v" for LifeMS (C4).
func (n *node) store(v string, upto int64) {
	if upto > 0 {
		n.st.Fence = Key{Present: true, Val: v + " " + strconv.FormatInt(upto, 10)}
	} else {
		n.st.Fence = Key{Present: true, Val: v, ExpMS: n.nowMS() + LifeMS}
	}
}

func less(a, b string) bool { return len(a) < len(b) || len(a) == len(b) && a < b }

func inc(s string) string {
	b, _ := new(big.Int).SetString(s, 10)
	return b.Add(b, big.NewInt(1)).String()
}

// count counts a new holder (C1, C2, C6): a missing counter starts at the
// clock rounded down to StepUS, or at the db's high-water when that is
// higher; below the floor it counts on from the floor; the value counted
// raises the high-water.
func (n *node) count(v, floor string, upto int64) string {
	if v == "" {
		v = strconv.FormatInt(n.now-n.now%StepUS, 10)
		if n.marked && n.hi != "" && less(v, n.hi) {
			v = n.hi
		}
	}
	if floor != "" && less(v, floor) {
		v = floor
	}
	v = inc(v)
	n.store(v, upto)
	n.high(v)
	return v
}

// trust is the gate of every step that can answer "granted" (T1, T2):
// the floor (the marker's from) when the node may grant, or the reply to
// give instead.
func (n *node) trust(delayMS int64) (string, *Reply) {
	if n.id.Replica {
		return "", &Reply{Err: "REPLICA redlock: a replica is never a vote"}
	}
	d := max(delayMS, 0) * 1000
	later := n.now + d
	if d > 0 && later%StepUS != 0 {
		later += StepUS - later%StepUS // a loss's from rounds up to the step
	}
	m, ok := readMarker(n.st.Marker)
	if !ok {
		return "", &Reply{Err: "WRONGTYPE the marker key holds data that is not a marker"}
	}
	rid, from, seen, why, hi := m.rid, m.from, m.seen, m.why, m.hi
	write := false
	switch {
	case !n.st.Marker.Present: // first use, a flush, a swap, a restart without data
		from, seen, why, hi, write = later, n.now, "no-marker", "", true
		if n.st.Other.Present && isMarker(n.st.Other.Val) {
			n.st.Other = Key{} // the only marker of its name (T4)
		}
	case rid != n.id.ReplID: // a restart, a failover, a failback: never shortened
		from, why, write = max(from, later), "identity", true
	}
	if n.now < seen-TickUS {
		from, why, write = max(from, seen+d), "clock-back", true
	} else if n.now > seen+TickUS {
		seen, write = n.now, true
	}
	if n.now >= from && why != "-" {
		why, write = "-", true
	}
	n.mark(fmt.Sprintf("v4 %s %d %d %s", n.id.ReplID, from, seen, why), hi, write)
	if n.now < from {
		if why == "-" {
			why = "clock-back"
		}
		r := arr(int64(3), ceilDiv(from-n.now, 1000), why)
		return "", &r
	}
	return strconv.FormatInt(from, 10), nil
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func (n *node) run(c Call) Reply {
	switch c.Op {
	case "acquire":
		return n.acquire(c)
	case "release":
		return n.release(c)
	case "renew":
		return n.renew(c)
	case "fence":
		return n.fence(c)
	case "rehold":
		return n.rehold(c)
	}
	panic("refnode: unknown step " + c.Op)
}

// released is the release step's reply {verdict, heard, head, counter}
// (scripts/release.lua's header) for a release that announces nothing
// and names no queue: "released", or "notheld" when held is false.
func released(held bool) Reply {
	if !held {
		return arr("notheld", int64(0), "", "")
	}
	return arr("released", int64(0), "", "")
}

func (n *node) release(c Call) Reply {
	if !n.holds(c.Token) {
		return released(false)
	}
	n.st.Lock = Key{}
	if v, u := n.counter(); v != "" && u > 0 {
		n.store(v, 0) // the lease ended (C4)
	}
	return released(true)
}

// markOf reads the marker for a step without a gate (renew, fence) that
// names it (c.Marker): when it is a v4 marker, its high-water applies to
// what the step counts or raises (C6). It reports whether it did.
func (n *node) markOf(c Call) bool {
	f, hi, ok := parseMarker(n.st.Marker.Val)
	if !c.Marker || !n.st.Marker.Present || !ok {
		return false
	}
	n.marked, n.head, n.hi = true, strings.Join(f, " "), hi
	return true
}

func (n *node) renew(c Call) Reply {
	if !n.holds(c.Token) || c.Marker && !n.st.Marker.Present && n.id.ReplID != "-" {
		return intReply(0) // not held, or on data its db's marker does not vouch for (T4)
	}
	n.st.Lock.ExpMS = n.nowMS() + c.TTLms
	upto := n.now + c.TTLms*1000
	if v, u := n.counter(); v == "" {
		n.markOf(c) // counted again no lower than the high-water (C6)
		n.count("", "", upto)
	} else {
		n.store(v, max(u, upto))
	}
	return intReply(1)
}

func (n *node) fence(c Call) Reply {
	if !n.holds(c.Token) {
		return intReply(0)
	}
	if v, u := n.counter(); v == "" || less(v, c.F) {
		if u == 0 {
			u = n.now + max(n.pttl(), 0)*1000
		}
		n.store(c.F, u)
		if n.markOf(c) {
			n.high(c.F)
		}
	}
	return intReply(1)
}

// rehold is the rehold step, its reply in the script's one family
// {verdict, counter, ms, why} (scripts/rehold.lua's header).
func (n *node) rehold(c Call) Reply {
	if !n.holds(c.Token) {
		return arr("notheld", "", int64(0), "")
	}
	floor, refusal := n.trust(c.DelayMS)
	if refusal != nil {
		if refusal.Err != "" {
			return *refusal
		}
		return arr("sitout", "", refusal.Array[1], refusal.Array[2])
	}
	upto := n.now + c.TTLms*1000
	n.st.Lock = Key{Present: true, Val: c.NewTok + " owner", ExpMS: n.nowMS() + c.TTLms}
	v, _ := n.counter()
	if v == "" {
		v = n.count("", floor, upto)
	} else {
		n.store(v, upto)
	}
	return arr("done", v, int64(0), "")
}

// acquire is the acquire step, its reply in the script's one family
// {verdict, counter, ms, ticket, wait, why} (scripts/acquire.lua's
// header): take's reply, named. This reference has no wait queue, so
// ticket and wait are 0 and no verdict is "handed" or "behind".
func (n *node) acquire(c Call) Reply {
	r := n.take(c)
	named := func(verdict, counter string, ms int64, why string) Reply {
		return arr(verdict, counter, ms, int64(0), int64(0), why)
	}
	switch {
	case r.Err != "":
		return r
	case r.Array[0] == int64(3):
		return named("sitout", "", r.Array[1].(int64), r.Array[2].(string))
	case r.Array[0] == int64(0):
		return named("held", "", r.Array[1].(int64), "")
	case len(r.Array) == 3:
		return named("retried", r.Array[1].(string), r.Array[2].(int64), "")
	}
	return named("granted", r.Array[1].(string), 0, "")
}

// take is a grant of one lock (the acquire step, and a writer's on its
// lock W): {1, counter} granted, {1, counter, pttl} the token already
// held it, {0, pttl} another holds it, {3, ms, why} the node sits out.
func (n *node) take(c Call) Reply {
	if n.st.Lock.Present {
		if !n.holds(c.Token) {
			return arr(int64(0), n.pttl())
		}
		// the retried call: "already held by this token", through the gate
		floor, refusal := n.trust(c.DelayMS)
		if refusal != nil {
			return *refusal
		}
		p := n.pttl()
		v, _ := n.counter()
		if v == "" {
			v = n.count("", floor, n.now+max(p, 0)*1000)
		}
		return arr(int64(1), v, leftOf(p))
	}
	v, u := n.counter()
	floor, refusal := n.trust(c.DelayMS)
	if refusal != nil {
		return *refusal
	}
	if u-n.now > GraceUS { // the lock key was lost while its lease runs (C5)
		return arr(int64(3), ceilDiv(u-n.now, 1000), "key-lost")
	}
	n.st.Lock = Key{Present: true, Val: c.Token + " owner", ExpMS: n.nowMS() + c.TTLms}
	return arr(int64(1), n.count(v, floor, n.now+c.TTLms*1000))
}
