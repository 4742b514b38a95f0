package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/internal/redact"
)

// Replies and errors of the node calls (calls.go): each script's reply
// decoded into plain values, and a node's error cleaned of lock tokens and
// marked with the sentinel of the server's error reply.

// grant is a node's answer to an acquire.
type grant struct {
	// OK reports whether the node granted the lock.
	OK bool
	// Counter is the node's fence counter after the grant (when OK).
	Counter fencing.Token
	// HolderTTL is the current holder's remaining time on this node (when not
	// OK); negative when the lock key has no expiry.
	HolderTTL time.Duration
	// Reason says why the node refused when it was not because of a holder:
	// redisnode.Node sets it when the lock is free but an earlier waiter is next
	// in its wait queue. A node that cannot grant (a read-only replica, a
	// node out of memory) fails with an error wrapping ErrReadOnly or
	// ErrNodeFull instead, so that the Locker can tell it from a busy lock.
	Reason string

	// ticket is the caller's place in the lock's wait queue on this node
	// (0: not queued); headLeft is how long the head's ticket has left
	// (0: the caller is the head, or no queue).
	ticket   int64
	headLeft time.Duration
	// left is what the lock had left when the caller's token already held
	// it (a client-side retry); 0 for a new grant, which lasts the full
	// lease duration. handed reports a refusal because the caller's place
	// holds the lock (a hand-over, counted with Counter).
	left   time.Duration
	handed bool
}

// The acquire script's verdicts (scripts/acquire.lua): the first field of
// its one reply {verdict, counter, ms, ticket, wait, why}.
const (
	verdictGranted = "granted" // a new holder, counted
	verdictRetried = "retried" // the token already held it: a retried call
	verdictHanded  = "handed"  // the caller's place holds it: a hand-over
	verdictHeld    = "held"    // another token holds it
	verdictBehind  = "behind"  // free, but an earlier waiter is next
	verdictSitOut  = "sitout"  // the node may not grant for ms (why)
)

// acquireReply is the acquire script's reply, its fields read by their
// places and checked for their types (the values are not checked yet).
type acquireReply struct {
	verdict, counter, why string
	ms, ticket, wait      int64
}

// readAcquireReply reads the six fields of reply; ok is false for a reply
// of another shape.
func readAcquireReply(reply any) (r acquireReply, ok bool) {
	vals, isArray := reply.([]any)
	if !isArray || len(vals) != 6 {
		return r, false
	}
	var okV, okC, okM, okT, okW, okY bool
	r.verdict, okV = vals[0].(string)
	r.counter, okC = vals[1].(string)
	r.ms, okM = vals[2].(int64)
	r.ticket, okT = vals[3].(int64)
	r.wait, okW = vals[4].(int64)
	r.why, okY = vals[5].(string)
	return r, okV && okC && okM && okT && okW && okY
}

// parseGrant decodes the acquire script's reply {verdict, counter, ms,
// ticket, wait, why} (scripts/acquire.lua): "granted" with the counter (a
// decimal string, exact at any size), "retried" when the caller's token
// already held the lock and "handed" when the caller's place did (a
// hand-over), each with the counter and the ms the lock has left; "held"
// and "behind" refusals with the holder's PTTL and, from a lock with a
// wait queue, the caller's ticket and what the head's place has left;
// "sitout" with the ms the node sits out and why.
func parseGrant(reply any) (grant, error) {
	r, ok := readAcquireReply(reply)
	if !ok {
		return grant{}, fmt.Errorf("%w: acquire reply %s", errBadReply, describeReply(reply))
	}
	g, ok := grant{}, false
	var err error
	switch r.verdict {
	case verdictSitOut:
		if r.counter != "" || r.ticket != 0 || r.wait != 0 {
			break
		}
		return parseSitOut(reply, r.ms, r.why)
	case verdictGranted, verdictRetried, verdictHanded:
		g, ok, err = parseHeld(r)
	case verdictHeld, verdictBehind:
		g, ok = parseRefusal(r)
	}
	if err != nil {
		return grant{}, err
	}
	if !ok {
		return grant{}, fmt.Errorf("%w: acquire reply %s", errBadReply, describeReply(reply))
	}
	return g, nil
}

// parseSitOut decodes the "sitout" verdict of the granting scripts and of
// rehold: a node that may have lost data refuses for ms more milliseconds,
// for the reason why (scripts/trust.lua). reply is the whole reply, for
// errors.
func parseSitOut(reply any, ms int64, why string) (grant, error) {
	if ms < 0 {
		return grant{}, fmt.Errorf("%w: sitout reply %s", errBadReply, describeReply(reply))
	}
	text, known := lossReasons[why]
	if !known {
		text = why[:min(len(why), 200)] // "data state unknown: <INFO's error>"
	}
	left := time.Duration(ms) * time.Millisecond
	return grant{Reason: fmt.Sprintf("%s: %s; it grants again in %s", rejoiningReason, text, left), HolderTTL: left}, nil
}

// sitOutGrant is parseSitOut for the scripts that grant several
// locks, or a read-write lock (multiGrant).
func sitOutGrant(reply any, ms int64, why string) (multiGrant, error) {
	g, err := parseSitOut(reply, ms, why)
	return multiGrant{reason: g.Reason, holderTTL: g.HolderTTL}, err
}

// lossReasons says, for each reason a node's refusal gives
// (scripts/trust.lua, scripts/counter.lua), why the node sits out.
var lossReasons = map[string]string{
	"no-marker":  "its marker key is missing (first use, FLUSHALL or FLUSHDB, SWAPDB, a restart without data, or the marker deleted)",
	"identity":   "its data's identity changed (a restart with or without AOF, a failover or a failback, a full sync: INFO master_replid)",
	"clock-back": "its clock stepped back behind a time it had already seen",
	"key-lost":   "the lock key is missing while its fence counter records a live lease (evicted or deleted; for a read-write lock, the writer's key or the readers index)",
}

// parseHeld decodes a reply whose lock the caller holds: "granted" (ms
// 0: the grant lasts the full lease), "retried" or "handed" (ms what the
// lock has left, at least a millisecond: PX rounds up). A counter that is
// not a positive canonical decimal is an error of its own.
func parseHeld(r acquireReply) (grant, bool, error) {
	c, err := fencing.ParseToken(r.counter)
	if err != nil {
		return grant{}, false, fmt.Errorf("%w: fence counter is not a positive canonical decimal (%d bytes)", errBadReply, len(r.counter))
	}
	if r.ticket != 0 || r.wait != 0 || r.why != "" || (r.verdict == verdictGranted) != (r.ms == 0) || r.ms < 0 {
		return grant{}, false, nil
	}
	g := grant{OK: r.verdict != verdictHanded, Counter: c, handed: r.verdict == verdictHanded}
	g.left = time.Duration(r.ms) * time.Millisecond
	return g, true, nil
}

// parseRefusal decodes a refusal, "held" (ms the holder's PTTL) or
// "behind" (ms 0), with the caller's ticket and the head's time left
// (both 0 without a queue).
func parseRefusal(r acquireReply) (grant, bool) {
	if r.counter != "" || r.why != "" || r.ms < -2 || r.ticket < 0 || r.wait < 0 || r.verdict == verdictBehind && r.ms != 0 {
		return grant{}, false
	}
	g := grant{HolderTTL: pttl(r.ms), ticket: r.ticket, headLeft: time.Duration(r.wait) * time.Millisecond}
	if r.verdict == verdictBehind {
		g.Reason = queuedReason
	}
	return g, true
}

// describeReply names a reply's shape for an error without quoting it: a
// reply can hold a holder's token.
func describeReply(reply any) string {
	if vals, ok := reply.([]any); ok {
		kinds := make([]string, len(vals))
		for i, v := range vals {
			kinds[i] = fmt.Sprintf("%T", v)
		}
		return "[" + strings.Join(kinds, " ") + "]"
	}
	return fmt.Sprintf("%T", reply)
}

// pttl converts a PTTL reply: -1 (no expiry) becomes a negative duration,
// -2 (no key) becomes zero.
func pttl(ms int64) time.Duration {
	switch {
	case ms >= 0:
		return time.Duration(ms) * time.Millisecond
	case ms == -1:
		return -1
	}
	return 0
}

// replyKinds maps the prefixes of server error replies to the sentinels
// their node errors wrap.
var replyKinds = []struct {
	prefix string
	kind   error
}{
	{"WRONGTYPE", ErrWrongType},
	{"READONLY", ErrReadOnly},
	{"REPLICA", ErrReadOnly},
	{"OOM", ErrNodeFull},
	{"FENCEEXHAUSTED", ErrFenceExhausted},
}

// scriptErr is the error of a failed node call made with token ("" for
// none); nil for nil. A server's error reply is marked with its
// sentinel (replyKinds), and the text is cleaned of lock tokens
// (cleanText): a server quotes the arguments of a command it does not know
// ("unknown command 'EVALSHA', with args beginning with: ..." from a
// renamed EVALSHA, or from a Sentinel port given as a node), and the token
// is one of them. A cleaned error keeps what callers test with errors.Is
// and errors.As (the sentinel, a server reply's redis.Error, a context's
// error) but not the original error, whose text still holds the token.
func scriptErr(err error, token string) error {
	if err == nil {
		return nil
	}
	var kind error
	var rerr serverError
	reply := errors.As(err, &rerr)
	if reply {
		for _, k := range replyKinds {
			if strings.HasPrefix(rerr.Error(), k.prefix) {
				kind = k.kind
				break
			}
		}
	}
	msg := err.Error()
	clean := cleanText(msg, token)
	if clean == msg {
		if kind != nil {
			return fmt.Errorf("%w: %w", kind, err)
		}
		return err
	}
	ce := &cleanError{msg: clean}
	if kind != nil {
		ce.msg = kind.Error() + ": " + clean
		ce.wrapped = append(ce.wrapped, kind)
	}
	for _, e := range []error{context.DeadlineExceeded, context.Canceled} {
		if errors.Is(err, e) {
			ce.wrapped = append(ce.wrapped, e)
		}
	}
	if reply {
		return &cleanReply{*ce}
	}
	return ce
}

// cleanText removes lock tokens from a server's message: every run of 32
// or more hex digits is cut to its first few (redact.String), and so is
// any part of token longer than those few, for a server cuts a quoted
// argument list short (Redis at 128 bytes), possibly inside the token.
func cleanText(msg, token string) string {
	msg = redact.String(msg)
	for k := len(token) - 1; k > redact.TokenPrefixLen; k-- {
		if strings.Contains(msg, token[:k]) {
			msg = strings.ReplaceAll(msg, token[:k], redact.TokenPrefix(token)+"...")
		}
	}
	return msg
}

// cleanError is an error whose text was cleaned of lock tokens. It wraps
// the sentinels of the original, not the original itself.
type cleanError struct {
	msg     string
	wrapped []error
}

func (e *cleanError) Error() string   { return e.msg }
func (e *cleanError) Unwrap() []error { return e.wrapped }

// cleanReply is a cleanError for a server's error reply: it is a
// redis.Error, as the original was.
type cleanReply struct{ cleanError }

// RedisError marks the error as a server's reply (redis.Error).
func (*cleanReply) RedisError() {}

// parseReleased decodes the release script's reply {verdict, heard, head,
// counter} (scripts/release.lua): "notheld" when the token did not hold
// the lock, "released" with the subscribers that heard the announcement
// and the head of the wait queue it named ("" for none), "handed" with
// those and the counter that counted the head as the new holder.
func parseReleased(reply any) (released, error) {
	vals, ok := reply.([]any)
	bad := fmt.Errorf("%w: release reply %s", errBadReply, describeReply(reply))
	if !ok || len(vals) != 4 {
		return released{}, bad
	}
	verdict, okV := vals[0].(string)
	heard, okH := vals[1].(int64)
	head, okD := vals[2].(string)
	counter, okC := vals[3].(string)
	if !okV || !okH || !okD || !okC || heard < 0 {
		return released{}, bad
	}
	r := released{released: verdict != "notheld", listeners: int(heard), head: head}
	if !releaseFields(verdict, heard, head, counter) {
		return released{}, bad
	}
	if verdict == "handed" {
		c, err := fencing.ParseToken(counter)
		if err != nil {
			return released{}, bad
		}
		r.counter = c
	}
	return r, nil
}

// releaseFields reports whether a release reply's fields fit its verdict:
// "notheld" carries none, "released" no counter, "handed" a head (its
// counter is checked by the caller).
func releaseFields(verdict string, heard int64, head, counter string) bool {
	switch verdict {
	case "notheld":
		return heard == 0 && head == "" && counter == ""
	case "released":
		return counter == ""
	case "handed":
		return head != ""
	}
	return false
}

// parseRehold decodes the rehold script's reply {verdict, counter, ms,
// why} (scripts/rehold.lua's header): "done" with the fence counter,
// "notheld" when the holding token does not hold the lock, "sitout" when
// the node may not grant (an error wrapping ErrRejoining).
func parseRehold(reply any) (c fencing.Token, ok bool, err error) {
	bad := fmt.Errorf("%w: rehold reply %s", errBadReply, describeReply(reply))
	verdict, counter, ms, why, ok := readReholdReply(reply)
	if !ok {
		return 0, false, bad
	}
	switch verdict {
	case "notheld":
		if counter == "" && ms == 0 && why == "" {
			return 0, false, nil
		}
	case "sitout":
		if counter == "" {
			g, err := parseSitOut(reply, ms, why)
			if err != nil {
				return 0, false, bad
			}
			return 0, false, fmt.Errorf("%w: %s", ErrRejoining, g.Reason)
		}
	case "done":
		if c, err := fencing.ParseToken(counter); err == nil && ms == 0 && why == "" {
			return c, true, nil
		}
	}
	return 0, false, bad
}

// readReholdReply reads the rehold reply's four fields; ok is false when
// it has another length or a field of another type.
func readReholdReply(reply any) (verdict, counter string, ms int64, why string, ok bool) {
	vals, _ := reply.([]any)
	if len(vals) != 4 {
		return "", "", 0, "", false
	}
	verdict, ok0 := vals[0].(string)
	counter, ok1 := vals[1].(string)
	ms, ok2 := vals[2].(int64)
	why, ok3 := vals[3].(string)
	return verdict, counter, ms, why, ok0 && ok1 && ok2 && ok3
}

// parseInspect decodes the inspect script's reply {verdict, kind, value,
// pttl, counter, waiting} (scripts/inspect.lua's header).
func parseInspect(reply any) (LockInfo, error) {
	r, ok := readInspectReply(reply)
	if !ok {
		return LockInfo{}, fmt.Errorf("%w: inspect reply %s", errBadReply, describeReply(reply))
	}
	info := LockInfo{Waiters: int(r.waiting)}
	if r.counter != "" {
		c, err := strconv.ParseUint(r.counter, 10, 64)
		if err != nil || strconv.FormatUint(c, 10) != r.counter {
			return LockInfo{}, fmt.Errorf("%w: fence counter is not a canonical decimal (%d bytes)", errBadReply, len(r.counter))
		}
		info.Fence = fencing.Token(c)
	}
	switch {
	case r.verdict == "free" && r.kind == "none" && r.value == "":
		return info, nil
	case r.verdict == "foreign" && r.kind != "none" && r.kind != "string" && r.value == "":
		return info, fmt.Errorf("%w: lock key holds a %s", ErrWrongType, r.kind)
	case r.verdict != "held" || r.kind != "string":
		return LockInfo{}, fmt.Errorf("%w: inspect reply %s", errBadReply, describeReply(reply))
	}
	info.Held = true
	info.TTL = pttl(r.pttl)
	info.Token, info.Owner, _ = strings.Cut(r.value, " ")
	return info, nil
}

// inspectReply is the inspect script's reply, its fields by name.
type inspectReply struct {
	verdict, kind, value string
	pttl                 int64
	counter              string
	waiting              int64
}

// readInspectReply reads the inspect reply's six fields; ok is false when
// it has another length, a field of another type or a negative count.
func readInspectReply(reply any) (r inspectReply, ok bool) {
	vals, _ := reply.([]any)
	if len(vals) != 6 {
		return inspectReply{}, false
	}
	var ok0, ok1, ok2, ok3, ok4, ok5 bool
	r.verdict, ok0 = vals[0].(string)
	r.kind, ok1 = vals[1].(string)
	r.value, ok2 = vals[2].(string)
	r.pttl, ok3 = vals[3].(int64)
	r.counter, ok4 = vals[4].(string)
	r.waiting, ok5 = vals[5].(int64)
	return r, ok0 && ok1 && ok2 && ok3 && ok4 && ok5 && r.waiting >= 0
}

// serverError is a server's error reply, as go-redis reports it
// (redis.Error has the same methods).
type serverError interface {
	error
	RedisError()
}

// isScriptsDisabled reports whether err is a server refusing EVALSHA or
// EVAL as an unknown command (renamed or disabled in its configuration):
// no lock script can run there until the configuration changes.
func isScriptsDisabled(err error) bool {
	var rerr serverError
	if !errors.As(err, &rerr) {
		return false
	}
	msg := strings.ToLower(rerr.Error())
	if !strings.Contains(msg, "unknown command") {
		return false
	}
	for _, c := range []string{"'evalsha'", "'eval'", "`evalsha`", "`eval`"} {
		if strings.Contains(msg, c) {
			return true
		}
	}
	return false
}

// isAuthError reports whether err is the server refusing our credentials or
// permissions: retrying will not help.
func isAuthError(err error) bool {
	var rerr serverError
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	for _, p := range []string{"NOPERM", "WRONGPASS", "NOAUTH"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
