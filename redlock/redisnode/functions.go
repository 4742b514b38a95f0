package redisnode

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/scripts"
)

// A Node runs its scripts as Redis Functions where its server has them
// (Redis 7 and later): the scripts' library (scripts.Functions, one
// library whose name carries a digest of its text) is loaded once per
// server with FUNCTION LOAD, and each call is an FCALL of its script's
// function, which spares the server the EVAL's re-definition of the
// helpers at every call. The library is loaded lazily: an FCALL that the
// server answers "Function not found" (first use, FUNCTION FLUSH, a
// restart without the library in its data) is sent again in one pipeline
// behind a FUNCTION LOAD, without REPLACE ("already exists": another client
// of the same version loaded it first). A version of the scripts never
// replaces another's library, so clients of two versions share a server
// during a rolling upgrade.
//
// A call runs as EVALSHA (then EVAL on NOSCRIPT), exactly as before
// functions, when:
//   - the server has no functions, or the node may not use them: an FCALL
//     or FUNCTION LOAD answered "unknown command" (Redis 6, miniredis, a
//     renamed command) or NOPERM for the command itself (an ACL): for good,
//     on this node;
//   - FUNCTION LOAD failed otherwise (a replica, a full node, a lost
//     connection): for loadPause, on this node;
//   - the server refused the FCALL before running it where EVAL would run
//     the script and refuse only its first write (functionRefusal): the
//     functions carry no flags, so a write function is refused up front on
//     a read-only replica, out of memory, and so on. That call is sent
//     again as EVALSHA, so that every script answers as it always did
//     there (a replica's REPLICA error, a full node's refused grant, a
//     release that needs no memory), and so are the node's calls for
//     loadPause (the node is likely to stay so);
//   - the client is not a *redis.Client (a Cluster or Ring client: FUNCTION
//     LOAD would reach one shard only), the script is not one of the
//     library's (scripts.New), or the node was made WithoutFunctions.
//
// No call is ever sent again after its caller's deadline, and a call sent
// again is one the server certainly did not run: "Function not found",
// "unknown command", NOPERM for FCALL and the up-front refusals all come
// before the function runs.

// loadPause is how long a node runs its scripts by EVALSHA after a
// FUNCTION LOAD failed, or an FCALL was refused, for a reason that may
// pass.
const loadPause = time.Second

// functions is a node's state of its use of the scripts' library.
type functions struct {
	lib *scripts.Library // nil: never
	// names are the library's function names, boxed once.
	names map[*scripts.Script]any
	// off is set when the server has no functions for this client.
	off atomic.Bool
	// pausedUntil is when, in nanoseconds since epoch (on the monotonic
	// clock), functions are tried again after a failed load.
	pausedUntil atomic.Int64
	epoch       time.Time
	// fcalls, loads and fallbacks count the FCALLs sent, the FUNCTION
	// LOADs sent and the calls an FCALL refusal sent to EVALSHA.
	fcalls, loads, fallbacks atomic.Int64
}

func newFunctions(client redis.UniversalClient) *functions {
	f := &functions{epoch: time.Now()}
	if _, ok := client.(*redis.Client); ok {
		f.lib = scripts.Functions
		f.names = map[*scripts.Script]any{}
		for _, s := range scripts.All {
			if name, ok := f.lib.Function(s); ok {
				f.names[s] = name
			}
		}
	}
	return f
}

// name returns the function to FCALL for script (boxed), or false when
// the call goes by EVALSHA.
func (f *functions) name(script *scripts.Script) (any, bool) {
	if f.lib == nil || f.off.Load() {
		return nil, false
	}
	if p := f.pausedUntil.Load(); p != 0 && time.Since(f.epoch).Nanoseconds() < p {
		return nil, false
	}
	name, ok := f.names[script]
	return name, ok
}

// active reports whether the node currently runs its scripts as FCALLs.
func (f *functions) active() bool {
	_, ok := f.name(scripts.Acquire)
	return ok
}

// A stage is how a call is sent next.
type stage uint8

const (
	stFcall     stage = iota // FCALL
	stLoadFcall              // FUNCTION LOAD, then FCALL, in one pipeline
	stEvalSha                // EVALSHA
	stEval                   // EVAL (after NOSCRIPT)
	stDone                   // the reply stands
)

// first is the stage a call of script starts at.
func (f *functions) first(script *scripts.Script) stage {
	if _, ok := f.name(script); ok {
		return stFcall
	}
	return stEvalSha
}

// next is the stage that follows a call sent at st and answered err; a
// load answered loadErr (stLoadFcall only).
func (f *functions) next(st stage, err, loadErr error) stage {
	switch st {
	case stEvalSha:
		if noScript(err) {
			return stEval
		}
		return stDone
	case stEval:
		return stDone
	case stLoadFcall:
		f.loaded(loadErr)
	}
	switch {
	case err == nil:
		return stDone
	case unavailable(err, "'fcall'"):
		f.off.Store(true)
		return stEvalSha
	case functionRefusal(err):
		// A replica or a full node stays so for a while: its next calls
		// go by EVALSHA at once, one round trip each.
		f.fallbacks.Add(1)
		f.pause()
		return stEvalSha
	case notFound(err) && st == stFcall && !f.off.Load():
		return stLoadFcall
	case notFound(err):
		return stEvalSha // the load failed, or the library went at once
	}
	return stDone
}

// loaded records the outcome of a FUNCTION LOAD.
func (f *functions) loaded(err error) {
	switch {
	case err == nil || replyContains(err, "already exists"):
	case unavailable(err, "'function"):
		f.off.Store(true)
	default:
		f.pause()
	}
}

// pause sends the node's calls by EVALSHA for loadPause.
func (f *functions) pause() {
	f.pausedUntil.Store((time.Since(f.epoch) + loadPause).Nanoseconds())
}

// unavailable reports whether err says the server does not run the
// command (named as in a NOPERM reply, such as "'fcall'") for this client:
// it does not know it (Redis before 7, miniredis, a renamed command) or an
// ACL refuses it.
func unavailable(err error, command string) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := strings.ToLower(rerr.Error())
	return strings.HasPrefix(msg, "err unknown command") ||
		strings.HasPrefix(msg, "noperm") && strings.Contains(msg, command)
}

// notFound reports whether err is the server's answer to an FCALL of a
// function it does not have.
func notFound(err error) bool { return replyContains(err, "Function not found") }

// replyContains reports whether err is a server's error reply whose text
// contains s.
func replyContains(err error, s string) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.Contains(rerr.Error(), s)
}

// functionRefusal reports whether err is one of the refusals a server
// gives a function without flags before running it, where EVAL runs the
// script and refuses only its first write: a read-only replica
// (READONLY), out of memory (OOM), writes stopped by a failed save
// (MISCONF), too few replicas (NOREPLICAS), a replica's link down with
// stale data refused (MASTERDOWN). A function that passed these checks
// cannot meet them inside: the server's state does not change while it
// runs.
func functionRefusal(err error) bool {
	for _, p := range []string{"READONLY", "OOM", "MISCONF", "NOREPLICAS", "MASTERDOWN"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// The command names, boxed once.
var fcall, functionCmd, loadArg any = "fcall", "function", "load"

// loadCmd is a FUNCTION LOAD of the node's library.
func (f *functions) loadCmd(ctx context.Context) *redis.Cmd {
	f.loads.Add(1)
	return redis.NewCmd(ctx, functionCmd, loadArg, f.lib.Source())
}

// command builds the command that sends script at st (stLoadFcall: its
// FCALL).
func (f *functions) command(ctx context.Context, st stage, script *scripts.Script, keys []string, args []any) *redis.Cmd {
	switch st {
	case stFcall, stLoadFcall:
		name := f.names[script]
		f.fcalls.Add(1)
		return command(ctx, fcall, name, keys, args)
	case stEval:
		return command(ctx, eval, script.Source(), keys, args)
	}
	return command(ctx, evalSha, shaArg(script), keys, args)
}
