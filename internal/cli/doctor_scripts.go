package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/scripts"
)

// checkScripts checks that the server runs redlock's scripts the way the
// library does, with only the commands a minimal ACL user has: the
// read-only inspect script on key (and key:fence), first by EVALSHA (a
// reply, or NOSCRIPT when the script is not cached yet: either proves
// EVALSHA works), then by EVAL with its source (what the library falls
// back to when the cache is empty, after a restart or SCRIPT FLUSH). No
// SCRIPT LOAD: it would need a permission the library does not, and a
// script it cached would hide a renamed EVAL.
func checkScripts(ctx context.Context, r *nodeReport, c *redis.Client, key string, timeout time.Duration) {
	keys := []string{key, key + ":fence"}
	run := func(f func(ctx context.Context) error) error {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return f(cctx)
	}
	var problems []string
	cached := true
	err := run(func(ctx context.Context) error { return c.EvalSha(ctx, scripts.Inspect.Hash(), keys).Err() })
	switch {
	case err == nil || errors.Is(err, redis.Nil):
	case redis.HasErrorPrefix(err, "NOSCRIPT"):
		cached = false
	default:
		problems = append(problems, scriptProblem("EVALSHA", err,
			"every lock operation runs its script with EVALSHA"))
	}
	first := err
	err = run(func(ctx context.Context) error { return c.Eval(ctx, scripts.Inspect.Source(), keys).Err() })
	if err != nil && !errors.Is(err, redis.Nil) && (first == nil || plainReason(first) != plainReason(err)) {
		problems = append(problems, scriptProblem("EVAL", err,
			"after a restart or SCRIPT FLUSH empties the script cache, no script can run"))
	}
	if len(problems) > 0 {
		r.add("scripts", statusFail, "%s", strings.Join(problems, "; "))
		return
	}
	detail := fmt.Sprintf("EVALSHA and EVAL both ran the read-only inspect script on %s", key)
	if !cached {
		detail += " (EVALSHA answered NOSCRIPT before EVAL cached it)"
	}
	r.add("scripts", statusOK, "%s", detail)
}

// scriptProblem says why running a script with cmd (EVALSHA or EVAL)
// failed, and what that costs (why).
func scriptProblem(cmd string, err error, why string) string {
	msg := plainReason(err)
	switch {
	case strings.Contains(strings.ToLower(msg), "unknown command"):
		msg, _, _ = strings.Cut(msg, ", with args") // not the script's source
		return fmt.Sprintf("%s is renamed or disabled (%s): %s", cmd, msg, why)
	case strings.Contains(msg, "access one of the keys"):
		return fmt.Sprintf("%s refused: the ACL does not let this user use keys under --prefix (%s); give it ~PREFIX* (docs/security.md)", cmd, msg)
	case strings.Contains(msg, "can't run this command"):
		return fmt.Sprintf("%s ran, but the ACL refuses a command the script calls (%s); grant the scripts' commands (docs/security.md)", cmd, msg)
	case redis.HasErrorPrefix(err, "NOPERM"):
		return fmt.Sprintf("%s refused by the ACL (%s): grant +%s; %s", cmd, msg, strings.ToLower(cmd), why)
	case redis.HasErrorPrefix(err, "MOVED"), redis.HasErrorPrefix(err, "ASK"):
		return fmt.Sprintf("%s on a key of another shard (%s): this server is a cluster member; name the cluster with redis+cluster://", cmd, msg)
	}
	return fmt.Sprintf("%s failed: %s", cmd, msg)
}
