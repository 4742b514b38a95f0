package testutil

import (
	"context"
	"fmt"
	"net/url"
	"strings"
)

// LockerACL returns the Redis ACL rules (for ACL SETUSER, after the user
// name) of the least-privileged user a redlock Locker needs on a lock node:
// keys and pub/sub channels under keyPrefix only (the lock key P{R}, the
// fence key P{R}:fence and the release channel P{R}:released), and only
// the commands the scripts and the client send:
//
//   - EVALSHA, and EVAL for when the server's script cache is empty; and
//     FCALL, with which a redisnode node runs the scripts as one function
//     library on Redis 7 and later once a trusted administrator has loaded
//     it (docs/security.md). Not FUNCTION LOAD: whoever may load a
//     library can replace the code that every user's FCALL of our library
//     runs, so a user with these rules may not, and where the library is
//     missing its node's one refused FUNCTION LOAD (which the ACL log
//     records) makes it run the scripts by EVALSHA, whose digest binds
//     the code;
//   - the commands the scripts call: GET, SET, TIME, PTTL, PEXPIRE,
//     DEL, TYPE, PUBLISH, INFO, SELECT (a new marker deletes the
//     markers of its name in the server's other dbs: docs/design.md §6.2),
//     for the wait queue EXISTS, ZADD, ZREM, ZRANGE, ZRANGEBYSCORE, ZSCORE,
//     and for the read-write lock's readers ZCOUNT and ZREMRANGEBYSCORE
//     (TestLockerACLAllowsEveryScriptCommand keeps this list true);
//   - SUBSCRIBE and UNSUBSCRIBE, for waiters woken by releases, and PING
//     (Dial's reachability check, idle pub/sub keep-alive);
//   - what go-redis sends when it connects: HELLO (without it the client
//     falls back to AUTH and RESP2, which also works) and CLIENT SETINFO
//     (its failure is ignored).
//
// The rules start with "reset", so applying them again replaces the user.
// Add "on" and a password rule (">secret") to enable the user; see
// SetACLUser. The glob characters * ? [ ] \ in keyPrefix are escaped.
func LockerACL(keyPrefix string) []string {
	p := aclGlob(keyPrefix)
	return []string{
		"reset",
		"~" + p + "*",
		"&" + p + "*",
		"-@all",
		"+fcall", "+evalsha", "+eval",
		"+get", "+set", "+time", "+pttl", "+pexpire", "+del", "+type", "+publish", "+select",
		"+exists", "+zadd", "+zrem", "+zrange", "+zrangebyscore", "+zscore", // the wait queue
		"+zcount", "+zremrangebyscore", // the read-write lock's readers
		"+subscribe", "+unsubscribe", "+ping",
		// Dial reads run_id to catch one server listed twice; the Locker
		// reads uptime and run_id, and the scripts read INFO to judge a
		// loss of data (docs/design.md §6.2).
		"+info",
	}
}

// StoreACL returns the ACL rules of the least-privileged user a
// redisfence.Store needs on the protected resource's Redis server: keys under
// prefix only; EVALSHA and EVAL for the fenced write (which calls GET and
// SET), MULTI, GET and EXEC for reads, PING, and what go-redis sends when it
// connects; no FCALL or FUNCTION, which the Store never sends. Like
// LockerACL, the rules start with "reset".
func StoreACL(prefix string) []string {
	return []string{
		"reset",
		"~" + aclGlob(prefix) + "*",
		"-@all",
		"+evalsha", "+eval",
		"+get", "+set", "+multi", "+exec",
		"+ping",
	}
}

// aclGlob escapes the glob metacharacters of a literal key prefix.
func aclGlob(prefix string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(prefix)
}

// SetACLUser creates or replaces the ACL user name on the server (through
// the server's own administrative connection), enabled, with password and
// then rules (for example LockerACL("redlock:")). A server started with
// WithPassword keeps its default user; the new user is separate.
func (s *RedisServer) SetACLUser(ctx context.Context, name, password string, rules ...string) error {
	args := []any{"ACL", "SETUSER", name}
	for _, r := range rules {
		args = append(args, r)
	}
	args = append(args, "on", ">"+password)
	if err := s.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("testutil: ACL SETUSER %s on %s: %w", name, s.addr, err)
	}
	return nil
}

// UserURL returns the server's URL (redis://, or rediss:// with WithTLS)
// authenticating as user with password.
func (s *RedisServer) UserURL(user, password string) string {
	u := url.URL{Scheme: "redis", Host: s.addr, User: url.UserPassword(user, password)}
	if s.tlsConf != nil {
		u.Scheme = "rediss"
	}
	return u.String()
}
