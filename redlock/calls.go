package redlock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/scripts"
)

// The protocol's node calls, written once over Node.Eval: each builds a
// script's keys and arguments from plain values and decodes its reply
// (replies.go). They know nothing of the Locker's bookkeeping, and they
// work the same over any Node, wrapped or not. docs/design.md §3 and §4
// describe the keys and scripts.

func releaseChannel(key string) string { return key + ":released" }

// releaseID names one release in its announcements: the first 8 hex digits
// of the released token, which Inspect shows anyway and which distinguish
// successive holders of a key.
func releaseID(token string) string { return token[:min(8, len(token))] }

// lockKeys are a lock's keys in the order every script takes them: lock,
// fence, queue, queue expiries (the scripts that grant take the node's
// marker after them: grantGate.marker). Built once per lease and shared by
// its calls: the last three are cut from one string, key:fence followed by
// key:queue:exp (key:queue is a prefix of key:queue:exp).
func lockKeys(key string) []string {
	s := key + ":fence" + key + ":queue:exp"
	k := len(key)
	return []string{key, s[:k+6], s[k+6 : 2*k+12], s[k+6:]}
}

// markerName ends every marker key. A lock's own keys have a brace right
// after the prefix, so the unsharded marker (prefix + markerName) is none
// of them; a sharded one (prefix, a slot's tag in braces, markerName) ends
// neither in "}" nor in ":fence", ":queue" or ":queue:exp".
const markerName = "~trust"

// nodeTTL is ttl in whole milliseconds for PX and PEXPIRE, rounded up: the
// Locker computes the lease's validity from ttl, so the key must never live
// shorter than ttl on the node.
func nodeTTL(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

// acquireArgs is one acquire call: a lock (keys: lockKeys) for token and
// owner, for ttl. floor raises an existing fence counter below it ("" for
// none; the node's own floor always applies). queue, when set, makes the
// caller wait its turn in the lock's wait queue. trust, set per node, are
// the arguments of the node's data-loss rule (grantGate).
type acquireArgs struct {
	keys         []string
	token, owner string
	ttl          time.Duration
	floor        string
	queue        *queueArgs
	trust        []any
	// delay is the Locker's rejoin-delay argument (Locker.delayArg), which
	// prepare puts in the list: every node's trust argument is the same.
	delay any
	// list holds the script's arguments once built (prepare), shared by
	// the calls of one attempt.
	list []any
}

// The acquire script's modes (scripts/acquire.lua): of its floor, of its
// queue and of the ticket a queued caller brings.
const (
	floorNone     = "none"
	floorRaise    = "floor"
	queueAlone    = "alone"
	queueJoin     = "queue"
	ticketAgreed  = "agreed"
	ticketPropose = "propose"
)

// floorArgs are a granting script's floor mode and floor for floor (""
// for none).
func floorArgs(floor string) (mode, value string) {
	if floor == "" {
		return floorNone, ""
	}
	return floorRaise, floor
}

// prepare builds the script's arguments once, for every node of an
// attempt, but for the node's own (floor, trust).
func (a *acquireArgs) prepare() {
	a.list = append(make([]any, 0, acquireArgc+1), a.token, a.owner, nodeTTL(a.ttl), floorNone, "", queueAlone, "", "", 0, 0,
		placeNone, "", "", "", "")
	if a.delay != nil {
		a.list = append(a.list, a.delay)
	}
	if q := a.queue; q != nil {
		mode, t := ticketAgreed, q.ticket
		if t <= 0 {
			mode, t = ticketPropose, -t
		}
		a.list[5], a.list[6], a.list[7], a.list[8], a.list[9] = queueJoin, q.place.id, mode, t, nodeTTL(q.ttl)
		q.place.put(a.list[10:15])
	}
}

// acquireArgc is how many arguments the acquire script takes before the
// rejoin delay, its last (scripts/acquire.lua).
const acquireArgc = 15

// queueArgs is a waiter's place as an acquire call carries it: the
// place's fields (placeArgs), its ticket (or, before it has one, its
// arrival time negated, as a proposal) and how long a node keeps it.
type queueArgs struct {
	place  placeArgs
	ticket int64
	ttl    time.Duration
}

// placeArgs is a waiter's place as the scripts that take one (acquire,
// release, leave) name it, field by field; each script builds the member
// the nodes store from them (scripts/queue.lua, q_place, q_member): the
// waiter id alone, or, when the place may be handed the lock (handTTL
// above 0), the id followed by handTTL, the channel to announce a
// hand-over on ("-": the lock's own) and the lock's value "<token>
// <owner>".
type placeArgs struct {
	id                    string
	handTTL               int64 // ms; 0: never handed the lock
	channel, token, owner string
}

// The place's hand-over modes (scripts/queue.lua, q_place).
const (
	placeNone     = "none"
	placeHandOver = "handover"
)

// put writes the place's hand-over mode and fields into args, which holds
// five: mode, ttl, channel, token and owner (the id goes elsewhere).
func (p placeArgs) put(args []any) {
	if p.handTTL <= 0 {
		args[0], args[1], args[2], args[3], args[4] = placeNone, "", "", "", ""
		return
	}
	args[0], args[1], args[2], args[3], args[4] = placeHandOver, p.handTTL, p.channel, p.token, p.owner
}

// acquire runs the acquire script (docs/design.md §5, §11.1).
func acquire(ctx context.Context, n Node, a acquireArgs) (grant, error) {
	if a.list == nil {
		a.prepare()
	}
	// The list is sent as it is unless the node's call needs its own
	// floor, or the list lacks the delay (a.delay unset) and the node has
	// its trust argument.
	args := a.list
	withDelay := a.delay != nil // prepare put it in the list
	if a.floor != "" || (a.trust != nil && !withDelay) {
		args = append(make([]any, 0, acquireArgc+1), a.list...)
		if a.floor != "" {
			args[3], args[4] = floorArgs(a.floor)
		}
		if !withDelay {
			args = append(args, a.trust...)
		}
	}
	reply, err := n.Eval(ctx, scripts.Acquire, a.keys, args...)
	if err != nil {
		return grant{}, scriptErr(err, a.token)
	}
	return parseGrant(reply)
}

// fence raises the fence counter of the lock keys to at least f where
// token holds the lock; it reports whether token holds it. It names no
// marker: fenceAt.
func fence(ctx context.Context, n Node, keys []string, token string, f fencing.Token, step string) (bool, error) {
	return fenceAt(ctx, n, keys, token, f, step, "")
}

// fenceAt is fence with the node's marker key (grantGate.marker; "" for
// none), whose high-water the node raises to f (scripts/counter.lua, C6):
// a counter evicted after its lease, or expired, then created again
// starts above f.
func fenceAt(ctx context.Context, n Node, keys []string, token string, f fencing.Token, step, marker string) (bool, error) {
	k := keys[:2]
	if marker != "" {
		k = []string{keys[0], keys[1], marker}
	}
	return evalFlag(ctx, n, scripts.Fence, k, token, f.String(), step)
}

// renew extends token's lock to ttl, and the end of its lease that the
// node records (scripts/counter.lua, C3); it never re-creates an expired
// lock. It reports whether token held the lock. step fills an argument
// the script ignores.
func renew(ctx context.Context, n Node, keys []string, token string, ttl time.Duration, step string) (bool, error) {
	return renewAt(ctx, n, keys, token, ttl, step, "")
}

// renewAt is renew with the node's marker key (grantGate.marker; "" for
// none): where the node keeps markers and that one is missing, the lock
// is not extended (scripts/trust.lua, T4: the lock stands on a db swapped
// back, which its marker no longer vouches for).
func renewAt(ctx context.Context, n Node, keys []string, token string, ttl time.Duration, step, marker string) (bool, error) {
	k := keys[:2]
	if marker != "" {
		k = []string{keys[0], keys[1], marker}
	}
	// A reader's lease names its readers index after its four keys
	// (RWLock.readRequest), which renew.lua then finds declared.
	k = append(k[:len(k):len(k)], keys[min(len(keys), 4):]...)
	return evalFlag(ctx, n, scripts.Renew, k, token, nodeTTL(ttl), step)
}

// evalFlag runs a script that answers 0 or 1, with token its first
// argument.
func evalFlag(ctx context.Context, n Node, s *scripts.Script, keys []string, token string, args ...any) (bool, error) {
	reply, err := n.Eval(ctx, s, keys, append([]any{token}, args...)...)
	if err != nil {
		return false, scriptErr(err, token)
	}
	switch reply {
	case int64(0):
		return false, nil
	case int64(1):
		return true, nil
	}
	return false, fmt.Errorf("%w: %s", errBadReply, describeReply(reply))
}

// releaseArgs is one release call: token's lock (keys: lockKeys). handOver,
// when set, lets the node hand the lock over to the head of its wait queue
// (docs/design.md §11.2); place, when its id is not empty, is the caller's
// own place, which the node removes whether or not token held the lock.
type releaseArgs struct {
	keys     []string
	token    string
	handOver handOver // zero: no hand-over
	// marker is the node's marker key, which a hand-over reads ("": none,
	// the rule is off).
	marker string
	place  placeArgs
	// notify, when set, is the lock key whose release channel announces
	// the release instead of keys[0]'s.
	notify string
	// list holds the script's arguments once built (prepare).
	list []any
}

// prepare builds the script's arguments once, for every node that takes
// the same hand-over.
func (a *releaseArgs) prepare() {
	ch := a.keys[0]
	if a.notify != "" {
		ch = a.notify
	}
	placeMode := "none"
	if a.place.id != "" {
		placeMode = "place"
	}
	a.list = []any{a.token, releaseChannel(ch), releaseID(a.token), "announce", "none", 0, placeMode, a.place.id,
		placeNone, "", "", "", ""}
	a.place.put(a.list[8:])
	a.setHandOver()
}

// withHandOver returns a copy of a, whose arguments are built (prepare),
// for hand-over h.
func (a releaseArgs) withHandOver(h handOver) releaseArgs {
	a.handOver, a.list = h, slices.Clone(a.list)
	a.setHandOver()
	return a
}

// setHandOver writes a.handOver into the built arguments.
func (a *releaseArgs) setHandOver() {
	args := a.handOver.args()
	a.list[4], a.list[5] = args[0], args[1]
}

// noHandOver are the release script's hand-over arguments for none.
var noHandOver = [2]any{"none", 0}

// args are the release script's arguments for h: the hand-over mode and
// the rejoin delay in ms (scripts/release.lua; the rule off counts as 0
// there, as a negative delay would: the checks apply, nothing is waited).
func (h handOver) args() [2]any {
	if h.built[0] != nil {
		return h.built
	}
	if !h.on {
		return noHandOver
	}
	return [2]any{"handover", strconv.FormatInt(max(h.delay, 0).Milliseconds(), 10)}
}

// handOver is what a node needs to hand a released lock over to the head
// of its wait queue (scripts/queue.lua, q_give): whether to (on) and the
// rejoin delay (negative when the rule is off: the checks apply, nothing
// is waited).
type handOver struct {
	on    bool
	delay time.Duration
	// built holds args() once built (Locker.handOver).
	built [2]any
}

// released is one node's answer to a release: whether the token held the
// lock, how many subscribers (waiters, in any process) heard the
// announcement, the head of the lock's wait queue it named ("" for none)
// and, when the lock was handed over to the head, the fence counter that
// counted it.
type released struct {
	released  bool
	listeners int
	head      string
	counter   fencing.Token
}

// release deletes token's lock (or hands it over) and announces it on the
// lock's release channel (releaseID).
func release(ctx context.Context, n Node, a releaseArgs) (released, error) {
	if a.list == nil {
		a.prepare()
	}
	keys := a.keys[:4]
	if a.marker != "" && a.handOver.on {
		keys = append(keys[:4:4], a.marker)
	}
	if len(a.keys) > 4 {
		// A reader's readers index (RWLock.readRequest); a reader is
		// never handed over, so it follows the queue's keys.
		keys = append(keys[:len(keys):len(keys)], a.keys[4:]...)
	}
	reply, err := n.Eval(ctx, scripts.Release, keys, a.list...)
	if err != nil {
		return released{}, scriptErr(err, a.token)
	}
	return parseReleased(reply)
}

// leaveArgs takes a place out of a lock's wait queue (keys: lockKeys).
// With give, a node that had handed the lock over to the place gives it
// up; where the place was the head of a free lock, or gave it up, the node
// announces the next head.
type leaveArgs struct {
	keys  []string
	place placeArgs
	give  bool
}

// leave runs the leave script.
func leave(ctx context.Context, n Node, a leaveArgs) error {
	g := "leave" // the place only leaves (scripts/leave.lua)
	if a.give {
		g = "give"
	}
	args := []any{a.place.id, releaseChannel(a.keys[0]), leaveMark + releaseID(a.place.id), g, placeNone, "", "", "", ""}
	a.place.put(args[4:])
	_, err := n.Eval(ctx, scripts.Leave, a.keys[:4], args...)
	return scriptErr(err, "")
}

// rehold sets the lock, held by token from, to value for ttl, and returns
// the fence counter; ok is false when from does not hold it. gate is the
// node's (Locker.gateFor): the node must be trusted to answer (a replica
// is an error wrapping ErrReadOnly, a node that may have lost data one
// wrapping ErrRejoining).
func rehold(ctx context.Context, n Node, keys []string, from, value string, ttl time.Duration, step string, gate grantGate) (c fencing.Token, ok bool, err error) {
	var delay any = ""
	if len(gate.trust) > 0 {
		delay = gate.trust[0]
	}
	reply, err := n.Eval(ctx, scripts.Rehold, gate.withMarker(keys[:2], keys[0]), from, value, nodeTTL(ttl), step, delay)
	if err != nil {
		return 0, false, scriptErr(err, from)
	}
	return parseRehold(reply)
}

// inspect reads the state of the lock without changing it.
func inspect(ctx context.Context, n Node, keys []string) (LockInfo, error) {
	reply, err := n.Eval(ctx, scripts.Inspect, keys[:4])
	if err != nil {
		return LockInfo{}, scriptErr(err, "")
	}
	return parseInspect(reply)
}
