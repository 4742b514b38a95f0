package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/redlock"
)

// Exit codes. They are part of the command's interface: documented in
// --help (exitCodeHelp) and docs/cli.md (section "Exit codes"), and tested end to end.
const (
	exitOK = 0
	// exitFailure: doctor found a FAIL, or an unexpected error.
	exitFailure = 1
	// exitUsage: bad flags, arguments or configuration.
	exitUsage = 2
	// exitNoQuorum: no majority of the nodes could be reached.
	exitNoQuorum = 3
	// exitBusy: the lock is held by someone else (or --wait ran out).
	exitBusy = 4
	// exitNotHeld: renew or release with a token that does not hold the lock.
	exitNotHeld = 5
	// exitLeaseLost: run lost its lease while COMMAND ran; COMMAND was stopped.
	exitLeaseLost = 6
	// exitAccessDenied: enough nodes refused the credentials (a wrong
	// password or user: WRONGPASS, NOAUTH) or a command (ACL: NOPERM) that
	// no majority could be reached. Retrying will not help, unlike
	// exitNoQuorum.
	exitAccessDenied = 7
	// exitCannotGrant: enough nodes answered but cannot grant a lock that
	// no majority can: out of memory (OOM), read-only replicas (READONLY),
	// or the resource's fence counter at its maximum. Waiting will not
	// help, unlike exitBusy.
	exitCannotGrant = 8
	// exitRejoining: the lock is not held by anyone, but nodes that
	// restarted or lost data sit out their rejoin delay and
	// leave no majority that can grant it. Unlike exitBusy, nobody holds
	// it; unlike exitCannotGrant, it passes by itself within the delay.
	exitRejoining = 9
	// exitViolation: verify found a violation of the lock's guarantees or
	// of linearizability.
	exitViolation = 10
	// exitCannotExec and exitNotFound follow the shell's convention for a
	// COMMAND that cannot be run (run only).
	exitCannotExec = 126
	exitNotFound   = 127
	// exitSignalBase plus the signal number is the code of a COMMAND killed
	// by a signal, and of redlock-cli interrupted while waiting.
	exitSignalBase = 128
)

// exitCodeHelp is the exit-code table shown in --help.
const exitCodeHelp = `Exit codes:
  0      success (run: COMMAND exited 0)
  1      doctor found a FAIL, or an unexpected error
  2      usage error: bad flag, argument, node URL, duration or token; renew
         without --ttl that would shorten the lock
  3      cannot reach a majority of the nodes
  4      lock busy (held by another token), or --wait ran out
  5      token does not hold the lock (renew, release)
  6      run: the lease was lost while COMMAND ran; COMMAND was stopped
  7      access denied: a wrong password or user, or an ACL without the needed
         commands, on too many nodes for a majority
  8      the nodes cannot grant the lock: too many for a majority are out of
         memory or read-only replicas, have the fence counter at its maximum,
         or have EVALSHA or EVAL renamed or disabled, or fail for such
         reasons and wrong credentials mixed
  9      unavailable: too many nodes for a majority are rejoining after a
         restart or a loss of data (FLUSHALL, a failover), for up to the
         rejoin delay
  10     verify: the history broke mutual exclusion, lease validity, fencing
         order or linearizability
  126    run: COMMAND cannot be executed
  127    run: COMMAND not found
  128+N  interrupted by signal N while waiting; run: COMMAND killed by signal N
  other  run: COMMAND's own exit code`

// cliError is an error with its exit code and a one-line message for
// stderr. Every error returned by a command's RunE is a *cliError; anything
// else that reaches main comes from cobra's own parsing and is a usage error.
type cliError struct {
	code int
	// kind is the stable name of the error class in --json output.
	kind string
	msg  string
	// extra holds more fields for the --json error object.
	extra map[string]any
	// reported means the command already printed its JSON result, so no
	// JSON error object follows.
	reported bool
	err      error
	// settle, when set, returns the error as it reads once the failed
	// attempt's calls still running have ended (the session closed): see
	// closeFailed.
	settle func() *cliError
}

// Error is the one-line message.
func (e *cliError) Error() string { return e.msg }

// Unwrap returns the error from the library, if any.
func (e *cliError) Unwrap() error { return e.err }

// Error kinds, as printed in the "error" field of --json error objects.
const (
	kindUsage = "usage"
	// kindWouldShorten: renew without --ttl refused to cut the lock short
	// (exit 2, like a usage error: give --ttl).
	kindWouldShorten = "would_shorten"
	kindFailure      = "failure"
	kindNoQuorum     = "no_quorum"
	kindAccessDenied = "access_denied"
	kindNodeFull     = "node_full"
	kindReadOnly     = "read_only"
	kindFenceFull    = "fence_exhausted"
	kindRejoining    = "rejoining"
	// kindScriptsDisabled: EVALSHA or EVAL renamed or disabled on too
	// many nodes (exit 8).
	kindScriptsDisabled = "scripts_disabled"
	// kindMisconfigured: too many nodes for a majority fail for reasons
	// that will not pass by themselves, of more than one kind (a wrong
	// password on one, a replica on another): exit 8.
	kindMisconfigured = "misconfigured"
	kindBusy          = "busy"
	kindTimeout       = "wait_timeout"
	kindNotHeld       = "not_held"
	kindLeaseLost     = "lease_lost"
	kindInterrupt     = "interrupted"
	kindExec          = "cannot_exec"
	// kindViolation: verify found a violation (exit 10).
	kindViolation = "violation"
	// kindPrefixInUse: verify found keys under its prefix (exit 2).
	kindPrefixInUse = "prefix_in_use"
)

// usageErrorf returns a usage error (exit 2).
func usageErrorf(format string, args ...any) *cliError {
	return &cliError{code: exitUsage, kind: kindUsage, msg: fmt.Sprintf(format, args...)}
}

// classify turns an error from the library into a *cliError with its exit
// code and a short message. op names what was being done ("acquire",
// "release", ...), for messages.
func classify(err error) *cliError {
	var ce *cliError
	if errors.As(err, &ce) {
		return ce
	}
	e := &cliError{err: err, msg: oneLine(err)}
	switch {
	case errors.Is(err, redlock.ErrInvalidConfig), errors.Is(err, redlock.ErrInvalidResource):
		e.code, e.kind = exitUsage, kindUsage
	case errors.Is(err, redlock.ErrNoQuorum):
		e.code, e.kind = exitNoQuorum, kindNoQuorum
	case errors.Is(err, redlock.ErrNotAcquired):
		e.code, e.kind = exitBusy, kindBusy
	case errors.Is(err, redlock.ErrNotHeld):
		e.code, e.kind = exitNotHeld, kindNotHeld
	case errors.Is(err, redlock.ErrLeaseLost):
		e.code, e.kind = exitLeaseLost, kindLeaseLost
	case errors.Is(err, redlock.ErrNodeFull):
		e.code, e.kind = exitCannotGrant, kindNodeFull
	case errors.Is(err, redlock.ErrReadOnly):
		e.code, e.kind = exitCannotGrant, kindReadOnly
	case errors.Is(err, redlock.ErrFenceExhausted):
		e.code, e.kind = exitCannotGrant, kindFenceFull
	default:
		e.code, e.kind = exitFailure, kindFailure
	}
	var qe *redlock.QuorumError
	if e.code == exitNotHeld && errors.As(err, &qe) {
		e.msg = clip(e.msg + fmt.Sprintf("; the lock expired (its --ttl passed without a renewal), was released, or is held by another token: see redlock-cli status %s", shellQuote(qe.Resource)))
	}
	var ae *redlock.AcquireError
	if e.code == exitCannotGrant && errors.As(err, &ae) {
		e.extra = map[string]any{"granted": ae.Granted, "needed": ae.Needed, "total": ae.Total}
		e.msg = cannotGrantMessage(ae)
	}
	return e
}

// shellQuote quotes s for a shell command line when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/#@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// cannotGrantKinds are the sentinels of exit 8, and how a message says
// what the nodes are.
var cannotGrantKinds = []struct {
	kind error
	are  string
}{
	{redlock.ErrNodeFull, "are out of memory (free memory or raise maxmemory)"},
	{redlock.ErrReadOnly, "are read-only replicas (every node must be a primary: check the node URLs)"},
	{redlock.ErrFenceExhausted, "have the resource's fence counter at its maximum (lock it under a new name)"},
}

// cannotGrantMessage says once why ae's nodes cannot grant the lock,
// naming them and quoting the server's reply once: the library's own
// message repeats the reason for the error, the attempt and each node.
func cannotGrantMessage(ae *redlock.AcquireError) string {
	for _, k := range cannotGrantKinds {
		if !errors.Is(ae, k.kind) {
			continue
		}
		var addrs []string
		var others []*redlock.NodeError
		reply := ""
		for _, ne := range nodeErrors(ae) {
			if !errors.Is(ne.Err, k.kind) {
				others = append(others, ne)
				continue
			}
			addrs = append(addrs, ne.Addr)
			var rerr redis.Error
			if reply == "" && errors.As(ne.Err, &rerr) {
				reply, _, _ = strings.Cut(rerr.Error(), ". script:")
				reply = strings.TrimPrefix(reply, k.kind.Error()+": ")
			}
		}
		msg := fmt.Sprintf("%q cannot be granted: %d of %d nodes %s, too many for the %d needed: %s",
			ae.Resource, len(addrs), ae.Total, k.are, ae.Needed, strings.Join(addrs, ", "))
		if reply != "" {
			msg += " (" + strings.Join(strings.Fields(reply), " ") + ")"
		}
		if len(others) > 0 {
			msg += "; " + summarizeNodes(others)
		}
		return clip(msg)
	}
	return oneLine(ae)
}
