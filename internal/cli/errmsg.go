package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
)

// maxMessage caps a message on stderr; node errors can be long.
const maxMessage = 1000

// oneLine returns err's message on one line, without the library's
// repeated "redlock: " prefixes and sentinel chains.
func oneLine(err error) string {
	msg := err.Error()
	for _, s := range []error{redlock.ErrInvalidConfig, redlock.ErrInvalidResource, redlock.ErrNotHeld} {
		msg = strings.ReplaceAll(msg, s.Error()+": ", "")
	}
	msg = strings.ReplaceAll(msg, "redlock: ", "")
	return clip(strings.Join(strings.Fields(msg), " "))
}

// clip shortens s to maxMessage bytes by cutting its middle: the head
// says what failed, the tail what to do about it, and both stay.
func clip(s string) string {
	if len(s) > maxMessage {
		head := maxMessage * 2 / 3
		return s[:head] + " ... " + s[len(s)-(maxMessage-head-5):]
	}
	return s
}

// nodeErrors collects every *redlock.NodeError in err's tree, in order,
// without duplicates.
func nodeErrors(err error) []*redlock.NodeError {
	var out []*redlock.NodeError
	seen := map[*redlock.NodeError]bool{}
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if ne, ok := e.(*redlock.NodeError); ok {
			if !seen[ne] {
				seen[ne] = true
				out = append(out, ne)
			}
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// reason returns a short cause for one node's failure: "connection
// refused", "timed out", a TLS handshake's failure as the library words it
// (with the hint that the server may not speak TLS), or the error's own
// message.
func reason(err error) string {
	if inner := errors.Unwrap(err); inner != nil && strings.HasPrefix(err.Error(), rejoinUnknown) {
		// The library could not learn the node's rejoin state because the
		// call failed: the failure is the reason, not the state.
		return reason(inner)
	}
	lasting := lastingReason(err)
	if lasting == "" || isUnknownMaster(err) {
		return plainReason(err)
	}
	// A failure that will not pass by itself: the server's words, then
	// what to fix.
	var rerr redis.Error
	if errors.As(err, &rerr) {
		if said := strings.TrimSuffix(serverSaid(err), "."); said != "" && !strings.Contains(lasting, said) {
			return said + " - " + lasting
		}
	}
	return lasting
}

// plainReason is reason without what to fix: "connection refused",
// "timed out", or the error's own message.
func plainReason(err error) string {
	var errno syscall.Errno
	var nerr net.Error
	if inner := errors.Unwrap(err); inner != nil && strings.HasPrefix(err.Error(), rejoinUnknown) {
		return plainReason(inner)
	}
	switch {
	case isUnknownMaster(err):
		return unknownMasterReason
	case errors.Is(err, redisnode.ErrTLSHandshake):
		// Its own words: which (failed, timed out) and the hint.
		return strings.Join(strings.Fields(unwrapNode(err).Error()), " ")
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.As(err, &errno):
		return errno.Error()
	case errors.As(err, &nerr) && nerr.Timeout():
		return "timed out"
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// rejoinUnknown starts the library's wrapping of a failure to learn a
// node's rejoin state (its call failed).
const rejoinUnknown = "rejoin state unknown: "

// sentinelsUnreachable starts go-redis's error when no sentinel of a
// Sentinel URL gave the primary's address.
const sentinelsUnreachable = "all sentinels specified in configuration are unreachable:"

// unknownMasterReason is the reason shown for isUnknownMaster.
const unknownMasterReason = "the sentinels answered, but none knows a primary by this master_name: check ?master_name= in the URL (SENTINEL MASTERS lists the names)"

// isUnknownMaster reports whether err is go-redis's "all sentinels ...
// are unreachable" made only of "redis: nil" answers: every sentinel was
// reached and said it knows no primary by that name (a master_name typo),
// which the words "unreachable: redis: nil" hide.
func isUnknownMaster(err error) bool {
	msg := err.Error()
	i := strings.Index(msg, sentinelsUnreachable)
	if i < 0 {
		return false
	}
	rest := strings.ReplaceAll(msg[i+len(sentinelsUnreachable):], "redis: nil", "")
	return strings.TrimSpace(rest) == "" && strings.Contains(msg[i:], "redis: nil")
}

// summarizeNodes formats node errors as "addr: reason; addr: reason", in
// address order.
func summarizeNodes(errs []*redlock.NodeError) string {
	parts := make([]string, len(errs))
	for i, ne := range errs {
		parts[i] = ne.Addr + ": " + reason(ne.Err)
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// noQuorumError describes a failure to reach a majority of total nodes,
// of which answered answered; err holds the per-node errors. When the
// nodes that refused our credentials alone rule out a majority, it is an
// access-denied error (its own exit code) rather than a no-quorum one.
func noQuorumError(err error, answered, total int) *cliError {
	return noQuorumNoted(err, answered, total, "")
}

// noQuorumNoted is noQuorumError with note following "N of M answered"
// (how the count was made).
func noQuorumNoted(err error, answered, total int, note string) *cliError {
	msg := fmt.Sprintf("cannot reach a majority of the nodes: %d of %d answered%s, %d needed", answered, total, note, total/2+1)
	errs := nodeErrors(err)
	if len(errs) > 0 {
		msg += ": " + summarizeNodes(errs)
	}
	e := &cliError{code: exitNoQuorum, kind: kindNoQuorum, msg: msg, err: err,
		extra: map[string]any{"answered": answered, "total": total, "needed": total/2 + 1}}
	if accessDenied(errs, total) {
		e.code, e.kind, e.msg = exitAccessDenied, kindAccessDenied, accessDeniedPrefix+e.msg
		e.msg = clip(e.msg)
		return e
	}
	if ce := scriptsDisabledError(err, errs, total); ce != nil {
		return ce
	}
	if ce := misconfiguredError(err, errs, total); ce != nil {
		return ce
	}
	e.msg = clip(e.msg)
	return e
}

// misconfiguredError is the error (exit 8) when the nodes whose failure
// will not pass by itself (lastingReason: a wrong password, a replica, out
// of memory, scripts disabled, ...) are too many for a majority, whatever
// the other nodes do: they answered, so "cannot reach" and a retry would
// mislead. Each is named with what to fix. nil when they are not too many.
func misconfiguredError(err error, errs []*redlock.NodeError, total int) *cliError {
	var bad, others []*redlock.NodeError
	for _, ne := range errs {
		if lastingReason(ne.Err) != "" {
			bad = append(bad, ne)
		} else {
			others = append(others, ne)
		}
	}
	needed := total/2 + 1
	if len(bad) == 0 || len(bad) <= total-needed {
		return nil
	}
	addrs := make([]string, len(bad))
	for i, ne := range bad {
		addrs[i] = ne.Addr
	}
	slices.Sort(addrs)
	msg := fmt.Sprintf("no majority can grant: %d of %d nodes answered but cannot take part, which leaves %d, %d needed; retrying will not help, fix them (redlock-cli doctor checks each node): %s",
		len(bad), total, total-len(bad), needed, summarizeNodes(bad))
	if len(others) > 0 {
		msg += "; also " + summarizeNodes(others)
	}
	return &cliError{code: exitCannotGrant, kind: kindMisconfigured, msg: clip(msg), err: err,
		extra: map[string]any{"total": total, "needed": needed, "nodes": addrs}}
}

// scriptsDisabledError is the error (exit 8) when the nodes that refuse
// redlock's scripts (EVALSHA or EVAL renamed or disabled) are too many for
// a majority: they answer, so "cannot reach" and "retry may help" would be
// wrong. nil when they are not.
func scriptsDisabledError(err error, errs []*redlock.NodeError, total int) *cliError {
	var addrs []string
	for _, ne := range errs {
		if isScriptsDisabled(ne.Err) {
			addrs = append(addrs, ne.Addr)
		}
	}
	needed := total/2 + 1
	if len(addrs) == 0 || len(addrs) <= total-needed {
		return nil
	}
	slices.Sort(addrs)
	msg := fmt.Sprintf("the nodes cannot run redlock's scripts: %d of %d nodes have EVALSHA or EVAL renamed or disabled (rename-command), too many for the %d needed: %s; every lock operation is a Lua script (see redlock-cli doctor)",
		len(addrs), total, needed, strings.Join(addrs, ", "))
	return &cliError{code: exitCannotGrant, kind: kindScriptsDisabled, msg: clip(msg), err: err,
		extra: map[string]any{"total": total, "needed": needed, "nodes": addrs}}
}

// isScriptsDisabled reports whether err is a server's refusal of EVALSHA or
// EVAL as an unknown command (renamed or disabled with rename-command).
func isScriptsDisabled(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := strings.ToLower(rerr.Error())
	return strings.Contains(msg, "unknown command 'evalsha'") || strings.Contains(msg, "unknown command 'eval'") ||
		strings.Contains(msg, "unknown command `evalsha`") || strings.Contains(msg, "unknown command `eval`")
}

// accessDeniedPrefix starts the message of an access-denied error.
const accessDeniedPrefix = "access denied: check the user and password in the node URLs and the ACL: "

// accessDenied reports whether the nodes among errs that refused our
// credentials or permissions are too many for a majority of total nodes
// to remain, whatever the others did.
func accessDenied(errs []*redlock.NodeError, total int) bool {
	denied := 0
	for _, ne := range errs {
		if isAccessDenied(ne.Err) {
			denied++
		}
	}
	return denied > 0 && denied > total-(total/2+1)
}

// isAccessDenied reports whether err is a Redis server refusing the
// password or user (WRONGPASS, NOAUTH, older servers' "invalid password",
// a password sent to a server without one) or a command (NOPERM).
func isAccessDenied(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	for _, p := range []string{"WRONGPASS", "NOAUTH", "NOPERM"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	msg = strings.ToLower(msg)
	for _, s := range []string{"invalid password", "no password is set", "without any password configured"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// answeredNodes returns how many of total nodes answered: from the
// *redlock.QuorumError of a renew or release, otherwise judging by the node
// errors in err.
func answeredNodes(err error, total int) int {
	var qe *redlock.QuorumError
	if errors.As(err, &qe) {
		return qe.Answered()
	}
	return max(0, total-len(nodeErrors(err)))
}

// busyError describes an *redlock.AcquireError for a busy lock; holder is
// the holder's owner label when known.
func busyError(ae *redlock.AcquireError, holder string) *cliError {
	var b strings.Builder
	fmt.Fprintf(&b, "%q is busy", ae.Resource)
	if holder != "" {
		fmt.Fprintf(&b, ": held by %s", holder)
	}
	if ae.HolderTTL > 0 {
		fmt.Fprintf(&b, " for %s more", roundDur(ae.HolderTTL))
	}
	fmt.Fprintf(&b, " (granted by %d of %d nodes, %d needed", ae.Granted, ae.Total, ae.Needed)
	if ae.Reason != "" {
		b.WriteString("; " + ae.Reason)
	}
	if ae.HolderTTL < 0 {
		// The library's reason: a key without a TTL never frees by itself.
		fmt.Fprintf(&b, "; refused by %s with no expiry: not a redlock lock, it stays until deleted", strings.Join(ae.Refused, ", "))
	}
	b.WriteString(")")
	if errs := nodeErrors(ae); len(errs) > 0 {
		b.WriteString("; " + summarizeNodes(errs))
	}
	extra := map[string]any{"granted": ae.Granted, "needed": ae.Needed, "total": ae.Total}
	if ae.HolderTTL != 0 {
		extra["holder_ttl_ms"] = ttlMillis(ae.HolderTTL)
	}
	if holder != "" {
		extra["holder_owner"] = holder
	}
	return &cliError{code: exitBusy, kind: kindBusy, msg: clip(b.String()), err: ae, extra: extra}
}
