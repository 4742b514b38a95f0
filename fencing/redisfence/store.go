// Package redisfence is a fenced value store on a Redis server used as the
// protected resource (Store), over a go-redis client: a write carries a
// fencing token (package fencing) and is applied only when the token is not
// below the highest one the key has accepted. It is kept apart from package
// fencing so that fencing, and package redlock, which uses its Token, import
// no Redis client.
package redisfence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/scripts"
)

// ErrInvalidKey is returned (wrapped) by Store for a key whose Redis value
// key would end in ":fence", where it could collide with another key's fence
// key.
var ErrInvalidKey = errors.New("redisfence: invalid key")

// fencedWrite runs scripts.FencedWrite with go-redis's Script.Run (EVALSHA,
// then EVAL when the server's script cache lacks it).
var fencedWrite = redis.NewScript(scripts.FencedWrite.Source())

// fenceSuffix ends every fence key, and no value key.
const fenceSuffix = ":fence"

// Store is a fenced value store on a Redis server used as the protected
// resource: a write carries a fencing token and is applied only when the
// token is not below the highest one the key has accepted. The check and
// the write run in one Lua script (scripts.FencedWrite), atomically on the
// server, so a stale holder can never overwrite a newer holder's value. A
// Store is safe for concurrent use.
//
// For key k and prefix P, Store uses two Redis string keys:
//
//	P+k          the value
//	P+k+":fence" the highest token accepted for k, in decimal; never expires
//
// The fence key is never deleted or expired by Store: it is the memory that
// keeps stale holders out, and costs one small key per key ever written. A
// key for which P+k would itself end in ":fence" is refused with
// ErrInvalidKey, so that no value key can be another key's fence key. On a
// Redis Cluster both keys must fall in one slot: put a hash tag in the key
// or the prefix (for example the key "{orders}:42"); without one, Write
// fails with CROSSSLOT.
type Store struct {
	client redis.UniversalClient
	prefix string
}

// New returns a Store on client (a *redis.Client, *redis.ClusterClient
// or *redis.Ring; it must not be nil) whose keys begin with prefix. An empty
// prefix is allowed and uses the keys as given; "fencing:" is a reasonable
// choice to keep them apart from other data.
func New(client redis.UniversalClient, prefix string) *Store {
	if client == nil {
		panic("redisfence: New with a nil client")
	}
	return &Store{client: client, prefix: prefix}
}

// keys returns key's value key and fence key.
func (s *Store) keys(key string) (value, fence string, err error) {
	value = s.prefix + key
	if strings.HasSuffix(value, fenceSuffix) {
		return "", "", fmt.Errorf("%w %q: its Redis key %q ends in %q, like a fence key", ErrInvalidKey, key, value, fenceSuffix)
	}
	return value, value + fenceSuffix, nil
}

// Write stores value under key if t is not below the highest token accepted
// for key, and records t as the highest; a token equal to the highest is
// accepted again. It runs in one round trip (EVALSHA, falling back to EVAL
// when the server's script cache lacks the script). A lower token is
// refused with a *fencing.StaleError carrying the highest token, and the stored
// value is left unchanged. Token 0 is refused with an error wrapping
// fencing.ErrInvalidToken before anything is sent. An error from Redis (such as
// WRONGTYPE when the fence key holds something other than a token, in which
// case nothing is written) or a reply Write cannot make sense of is returned
// wrapped (a malformed token in the reply does not match
// fencing.ErrInvalidToken); after an unexpected reply, whether the value was
// written is unknown. Any expiry set on the value key by others is removed.
func (s *Store) Write(ctx context.Context, key, value string, t fencing.Token) error {
	if t == 0 {
		return fmt.Errorf("%w: 0 for %q (redlock never issues token 0)", fencing.ErrInvalidToken, key)
	}
	vk, fk, err := s.keys(key)
	if err != nil {
		return err
	}
	reply, err := fencedWrite.Run(ctx, s.client, []string{vk, fk}, t.String(), value).Result()
	if err != nil {
		return fmt.Errorf("fencing: write %q: %w", key, err)
	}
	written, got, err := parseWriteReply(reply)
	if err != nil {
		return fmt.Errorf("fencing: write %q: %w", key, err)
	}
	switch {
	case written && got == t:
		return nil
	case !written && got > t:
		return &fencing.StaleError{Key: key, Token: t, Highest: got}
	case written:
		return fmt.Errorf("fencing: write %q: unexpected reply: wrote with token %d, sent %d", key, got, t)
	default:
		return fmt.Errorf("fencing: write %q: unexpected reply: refused token %d, but highest is %d", key, t, got)
	}
}

// Read returns key's value and the highest token accepted for key, read
// together in one MULTI/EXEC transaction so that they are consistent with
// each other. found reports whether the value key exists; when it does not,
// value is empty. highest is 0 when the fence key does not exist. Both are
// reported separately because someone else may have deleted one of the two
// keys. A fence key holding anything but a token in canonical decimal form
// (or "0") is an error naming the fence key, as is a value key of the wrong
// type; neither matches fencing.ErrInvalidToken, which is kept for a token
// the caller passed.
func (s *Store) Read(ctx context.Context, key string) (value string, highest fencing.Token, found bool, err error) {
	vk, fk, err := s.keys(key)
	if err != nil {
		return "", 0, false, err
	}
	pipe := s.client.TxPipeline()
	vc := pipe.Get(ctx, vk)
	fc := pipe.Get(ctx, fk)
	_, execErr := pipe.Exec(ctx)

	switch err := vc.Err(); {
	case err == nil:
		value, found = vc.Val(), true
	case !errors.Is(err, redis.Nil):
		return "", 0, false, fmt.Errorf("fencing: read %q: value key %q: %w", key, vk, err)
	}
	switch err := fc.Err(); {
	case err == nil:
		h, perr := parseCounter(fc.Val())
		if perr != nil {
			return "", 0, false, fmt.Errorf("fencing: read %q: fence key %q does not hold a fencing token: %w", key, fk, perr)
		}
		highest = h
	case !errors.Is(err, redis.Nil):
		return "", 0, false, fmt.Errorf("fencing: read %q: fence key %q: %w", key, fk, err)
	}
	if execErr != nil && !errors.Is(execErr, redis.Nil) {
		return "", 0, false, fmt.Errorf("fencing: read %q: %w", key, execErr)
	}
	return value, highest, found, nil
}

// parseWriteReply decodes the reply of scripts.FencedWrite: {1, token} when
// the value was written, {0, highest} when the token was stale. A token may
// arrive as an integer or as a canonical decimal string. Anything else is
// an error.
func parseWriteReply(reply any) (written bool, t fencing.Token, err error) {
	a, ok := reply.([]any)
	if !ok || len(a) != 2 {
		return false, 0, fmt.Errorf("unexpected reply %s, want a 2-element array", describeReply(reply))
	}
	status, ok := a[0].(int64)
	if !ok || (status != 0 && status != 1) {
		return false, 0, fmt.Errorf("unexpected reply status %s, want 0 or 1", describeReply(a[0]))
	}
	t, err = tokenFromReply(a[1])
	if err != nil {
		return false, 0, err
	}
	return status == 1, t, nil
}

// tokenFromReply decodes a token from a script reply: a non-negative integer
// or a canonical decimal string.
func tokenFromReply(v any) (fencing.Token, error) {
	switch v := v.(type) {
	case int64:
		if v < 0 {
			return 0, fmt.Errorf("unexpected token %d in reply", v)
		}
		return fencing.Token(v), nil
	case string:
		t, err := parseCounter(v)
		if err != nil {
			return 0, fmt.Errorf("unexpected token in reply: %w", err)
		}
		return t, nil
	default:
		return 0, fmt.Errorf("unexpected token %s in reply", describeReply(v))
	}
}

// describeReply formats a reply value for an error message, briefly.
func describeReply(v any) string {
	s := fmt.Sprintf("%#v", v)
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return fmt.Sprintf("%s (%T)", s, v)
}

// parseCounter parses a fence key's value or a token in a reply: a token in
// fencing's canonical form (fencing.ParseToken), or "0", which a counter
// that has counted nothing may hold. Its error does not wrap
// fencing.ErrInvalidToken: that error is the caller's token refused (Write's
// token 0), while this one is data on the server, or a reply, that is not a
// counter.
func parseCounter(s string) (fencing.Token, error) {
	if s == "0" {
		return 0, nil
	}
	t, err := fencing.ParseToken(s)
	if err != nil {
		return 0, fmt.Errorf("%s is not a counter (canonical decimal: digits only, no sign, spaces or leading zeros, at most 18446744073709551615)", quoteShort(s))
	}
	return t, nil
}

// quoteShort quotes s for an error message, cut to a readable length: s is
// data read from the server.
func quoteShort(s string) string {
	const limit = 40
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + "..."
	}
	return strconv.Quote(s)
}
