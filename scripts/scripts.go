// Package scripts holds the Lua scripts through which redlock touches Redis.
//
// Each script is one round trip and runs atomically on its server. Every
// lock script takes its keys in one order, as many as it needs: KEYS[1] =
// the lock key (P{R}), KEYS[2] = the fence key (P{R}:fence), KEYS[3] and
// KEYS[4] = the wait queue's tickets and expiry times (P{R}:queue,
// P{R}:queue:exp), KEYS[5] = the node's marker key (P~trust:db<N> for db
// N, or for a Redis Cluster node P{T}~trust:db0 with a tag T of R's slot:
// trust.lua); all fall in one Redis Cluster slot. A lock key holds
// "<token> <owner>"; the scripts compare the token, never the owner. A
// fence key holds "V U" while a lease it counted is live (U its end on
// the node's clock, no TTL) and "V" for 20 s after (counter.lua).
// Every script that can answer "granted" reads INFO replication and the
// marker (trust.lua): a replica answers an error starting "REPLICA", a
// node that may have lost data refuses for ms, saying why (the verdict
// "sitout"). The marker
// also keeps the db's high-water, the least start of a new counter
// (counter.lua, C6), and a new marker deletes those of its name in the
// server's other dbs (trust.lua, T4); fence and renew take the marker as
// an optional third key.
//
// A script's source is its own file (acquire.lua, ...) after the helpers
// it uses, and only those (assemble.go): when the package loads, each
// helper file (lock.lua, counter.lua, trust.lua, queue.lua, rw.lua) is
// split into its top-level units, a "local function" block or a one-line
// "local" constant with the comment lines directly above it; a script
// takes the units its code names, and those they name, transitively, in
// the helper files' order (lock, counter, trust, queue, rw: a unit is
// defined before those that use it). A helper file of another shape
// stops the package from loading. A Script is a plain value, built once
// when the package loads: its source and the SHA1 digest that names it to
// EVALSHA.
// A transport (redisnode.Node) runs it with EVALSHA and falls back to
// EVAL when the server's script cache does not have it (after a restart or
// SCRIPT FLUSH). docs/design.md §3 and §4 describe the keys and what each
// script guarantees.
package scripts

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
)

// Script is one Lua script: its name, source and digest, fixed when it is
// made (this package's scripts when the package loads). It is compared by
// identity (Grants) and is safe to share between goroutines.
type Script struct {
	name string
	src  string
	hash string
	// body is the script's own file, without the helpers and the KEYS
	// check newScript put in front of it ("" for a script made with New).
	body string
}

// New returns the script named name with Lua source src, its digest
// computed once. The Locker runs only this package's scripts; New is for a
// transport's tests and tools that run a script of their own through a
// Node.
func New(name, src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{name: name, src: src, hash: hex.EncodeToString(sum[:])}
}

// newScript is the script named name: body, the script's own file, after
// the helper units it needs (assemble), after keyCheck (checkkeys_on.go).
func newScript(name, body string) *Script {
	s := New(name, keyCheck+assemble(helpers, body))
	s.body = body
	return s
}

// helpers are the helper files' units, in the order a script defines
// them: lock.lua, counter.lua, trust.lua, queue.lua, rw.lua (each file's
// units use only those of the files before it and its own earlier ones).
// A helper file the split cannot read stops the package from loading
// (assemble_test.go checks each one).
var helpers = mustSplitHelpers()

func mustSplitHelpers() []unit {
	units, err := splitHelpers(helperFiles()...)
	if err != nil {
		panic("scripts: " + err.Error())
	}
	return units
}

// helperFiles are the helper files, name and source, in their order.
func helperFiles() [][2]string {
	return [][2]string{
		{"lock.lua", lockSrc}, {"counter.lua", counterSrc}, {"trust.lua", trustSrc},
		{"queue.lua", queueSrc}, {"rw.lua", rwSrc},
	}
}

// Name is the script's name, its main file's without ".lua" (such as
// "acquire" or "rw_write"), for logs and errors.
func (s *Script) Name() string { return s.name }

// Source is the script's Lua source, as EVAL and SCRIPT LOAD take it.
func (s *Script) Source() string { return s.src }

// Hash is the SHA1 digest of Source in lower-case hex, by which EVALSHA,
// SCRIPT EXISTS and a server's script cache name the script.
func (s *Script) Hash() string { return s.hash }

// String returns the script's name.
func (s *Script) String() string { return s.name }

var (
	//go:embed acquire.lua
	acquireSrc string
	//go:embed fence.lua
	fenceSrc string
	//go:embed renew.lua
	renewSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed inspect.lua
	inspectSrc string
	//go:embed fenced_write.lua
	fencedWriteSrc string
	//go:embed queue.lua
	queueSrc string
	//go:embed leave.lua
	leaveSrc string
	//go:embed rehold.lua
	reholdSrc string
	//go:embed lock.lua
	lockSrc string
	//go:embed counter.lua
	counterSrc string
	//go:embed trust.lua
	trustSrc string
	//go:embed acquire_all.lua
	acquireAllSrc string
	//go:embed rw.lua
	rwSrc string
	//go:embed rw_write.lua
	rwWriteSrc string
	//go:embed rw_read.lua
	rwReadSrc string
	//go:embed rw_withdraw.lua
	rwWithdrawSrc string
	//go:embed rw_inspect.lua
	rwInspectSrc string
)

var (
	// Acquire sets the lock if it is free (and the caller is the head of
	// its wait queue, if it has one) and counts a new holder on the fence
	// counter (acquire.lua): KEYS = lock, fence, (optional) queue and
	// queue expiries, (optional) marker; ARGV = token, owner, ttl ms,
	// floor mode ("floor" or "none"), floor, queue mode ("queue" or
	// "alone"), the caller's place id, ticket mode ("agreed" or
	// "propose"), the ticket or the arrival time in µs, place ttl ms, the
	// place's fields (hand-over mode "handover" or "none", hand-over ttl
	// ms, channel, token, owner: queue.lua, q_place), rejoin delay ms
	// (trust.lua; always last). Replies one array {verdict, counter,
	// ms, ticket, wait, why}, each field always in its place: "granted"
	// with the counter as a decimal string (exact beyond 2^53, unlike a
	// Lua number), "retried" when the token already held it (a retried
	// call) and "handed" when the caller's place did (a hand-over), both
	// with the counter and the lock's pttl in ms; "held" when another token
	// holds it (pttl in ms) and "behind" when it is free but an earlier
	// waiter is next, both with the caller's ticket and the head's ms left
	// from a lock with a queue; "sitout" when the node may have lost data
	// (or the lock key was lost) and sits out for ms, why saying why.
	// Errors REPLICA on a replica, WRONGTYPE when a key holds someone
	// else's data, and FENCEEXHAUSTED, with nothing written, when the
	// counter is at 2^63-1.
	Acquire = newScript("acquire", acquireSrc)
	// Fence raises the fence counter to ARGV[2] where ARGV[1] holds the
	// lock (fence.lua): KEYS = lock (or a read-write lock's reader key),
	// fence, (optional) marker, whose high-water it raises to the counter;
	// ARGV = token, counter, unused. Replies 1 when the caller holds the
	// lock (the counter is now at least ARGV[2]), else 0 with nothing
	// changed; a WRONGTYPE error when a key holds someone else's data.
	Fence = newScript("fence", fenceSrc)
	// Renew extends the caller's own lock and the end of its lease that
	// its fence counter (or a reader's readers index) records (renew.lua):
	// KEYS = lock, (optional) fence, (optional) marker, and a reader's
	// readers index last; ARGV = token, ttl ms, unused. Replies 1 when
	// extended, 0 when not held by the token (or, on a server that keeps
	// markers, when the marker given is missing); an ERR error for a
	// reader whose readers index is not in KEYS, a WRONGTYPE error when
	// the lock key holds someone else's data.
	Renew = newScript("renew", renewSrc)
	// Release deletes the caller's own lock (or hands it over to the head
	// of its wait queue) and, in mode "announce", announces it
	// (release.lua): KEYS = lock, fence, (optional) queue and queue
	// expiries, (optional) marker, and a reader's readers index last;
	// ARGV = token, channel, announcement, announce mode ("announce" or
	// "quiet"), hand-over mode ("handover" or "none"), rejoin delay ms for
	// a hand-over, place mode ("place" or "none"), the caller's own place
	// id and its fields (hand-over mode "handover" or "none", hand-over
	// ttl ms, channel, token, owner: queue.lua, q_place).
	// Replies one array {verdict, heard, head, counter}, each field always
	// in its place: "notheld" when the token does not hold the lock,
	// "released" when it deleted it, "handed" when it handed it over to
	// the head of the wait queue (counter the new holder's); heard the
	// subscribers that heard the announcement, head the head it named (""
	// for none). A WRONGTYPE error when the lock key holds someone else's
	// data.
	Release = newScript("release", releaseSrc)
	// Leave takes a waiter out of the wait queue, announcing the new head
	// if the waiter was the head of a free lock or gave the lock up
	// (leave.lua): KEYS = lock, fence, queue, queue expiries; ARGV =
	// waiter's place id, channel, announcement id, mode: "give" to give
	// up a lock handed over to the place too, "leave" not to, then the
	// place's fields (hand-over mode "handover" or "none", hand-over ttl
	// ms, channel, token, owner: queue.lua, q_place). Replies 1 when the
	// waiter was queued or held the lock, else 0.
	Leave = newScript("leave", leaveSrc)
	// Rehold sets the caller's own lock to a new value for a new TTL
	// (rehold.lua): KEYS = lock, fence, (optional) marker; ARGV = holding
	// token, new value, ttl ms, unused, rejoin delay ms. Replies {verdict,
	// counter, ms, why}: "done" with the counter, "notheld" when the token
	// does not hold the lock, "sitout" for ms, saying why, when the node
	// may not grant (with a marker key only); a REPLICA error on a
	// replica, a WRONGTYPE error when a key holds someone else's data.
	Rehold = newScript("rehold", reholdSrc)
	// Inspect reads a resource without changing it (inspect.lua): KEYS =
	// lock, fence, and optionally the wait queue (tickets, expiries); no
	// ARGV. Replies {verdict ("free", "held" or "foreign": another type),
	// lock key type, value or "", pttl, fence counter (V alone) or "", live
	// places in the queue (0 without its keys)}.
	Inspect = newScript("inspect", inspectSrc)
	// FencedWrite writes a value only for a fencing token not below the
	// key's fence (fenced_write.lua): KEYS = value, fence; ARGV = token,
	// value. Replies {1, token} when written, {0, highest token seen} when
	// stale; a WRONGTYPE error when the fence key holds something else.
	FencedWrite = newScript("fenced_write", fencedWriteSrc)
)

var (
	// AcquireAll takes several locks on one node, all or none
	// (acquire_all.lua): KEYS = four per lock (lock, fence, queue, queue
	// expiries), then (optional) the marker, all in one Redis Cluster slot;
	// ARGV = owner, ttl ms, floor mode ("floor" or "none"), floor, one
	// token per lock, then the rejoin delay ms. Replies the granting
	// scripts' one family {verdict, ms, why, lock, readers}, each field
	// always in its place, followed for "granted" by a counter and a time
	// left per lock (0 for a new grant, what the lock had left for a
	// retry); "held" when the lock-th lock is held (ms its pttl), "behind"
	// when a waiter is next for it, "sitout" when the node sits out for ms
	// after a loss of data (a retried call too) or a free lock's key was
	// lost; errors REPLICA on a replica, WRONGTYPE when a key holds someone
	// else's data, and FENCEEXHAUSTED when a free lock's counter is at
	// 2^63-1.
	AcquireAll = newScript("acquire_all", acquireAllSrc)
	// RWWrite takes a read-write lock exclusively: KEYS = writer lock,
	// fence, readers index, writers' intents, marker; ARGV = token, owner,
	// ttl ms, floor mode ("floor" or "none"), floor, mode ("wait" or
	// "try"), waiting writer's id, intent ttl ms, the rejoin delay ms.
	// Replies AcquireAll's family with lock 1: "granted" with the counter
	// and the time left, "held" when a writer holds it, "readers" when
	// that many readers do, "sitout" when the node sits out.
	RWWrite = newScript("rw_write", rwWriteSrc)
	// RWRead takes a read-write lock shared: KEYS = writer lock, fence,
	// readers index, writers' intents, the reader's own key, marker; ARGV =
	// token, owner, ttl ms, floor mode ("floor" or "none"), floor, the
	// rejoin delay ms. Replies AcquireAll's family with lock 1: "granted"
	// with the counter and the time left, "held" when a writer holds it,
	// "intent" when a writer waits, "sitout" when the node sits out.
	RWRead = newScript("rw_read", rwReadSrc)
	// RWWithdraw takes a waiting writer's intent back: KEYS = writers'
	// intents; ARGV = the writer's id. Replies 1 when it stood, else 0.
	RWWithdraw = newScript("rw_withdraw", rwWithdrawSrc)
	// RWInspect reads a read-write lock: KEYS = writer lock, fence, readers
	// index, writers' intents, then (optional) reader keys whose values to
	// read; no ARGV. Replies {writer's value or nil, its pttl, fence
	// counter or nil, live intents, then a token, ms and value-or-nil per
	// live reader}.
	RWInspect = newScript("rw_inspect", rwInspectSrc)
)

// All lists every script, for preloading with SCRIPT LOAD and for checks
// that a server accepts them.
var All = []*Script{Acquire, Fence, Renew, Release, Leave, Rehold, Inspect, FencedWrite, AcquireAll, RWWrite, RWRead, RWWithdraw, RWInspect}

// Grants reports whether s is a script that grants locks (Acquire,
// AcquireAll, RWWrite, RWRead): a node whose connection failed during one
// may have restarted, and learns its server's uptime again.
func Grants(s *Script) bool {
	return s == Acquire || s == AcquireAll || s == RWWrite || s == RWRead
}
