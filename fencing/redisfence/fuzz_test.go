package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/fencing/redisfence"
)

// Fuzz tests of the Store's parsers of outside input: the fenced write
// script's reply, and the fence key's contents as the Store finds them on
// the resource's Redis server. Run one with, for example:
//
//	go test -run='^$' -fuzz='^FuzzStoreWrite$' -fuzztime=5s ./fencing/redisfence/

// canonical matches the canonical decimal form of a token (zero included).
var canonical = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

// replyShape builds a script reply of one of several shapes from fuzz
// values: the expected {status, token} with the token as an integer or a
// string, and malformed variants.
func replyShape(shape uint8, status int64, n int64, s string) any {
	switch shape % 7 {
	case 0:
		return []any{status, n}
	case 1:
		return []any{status, s}
	case 2:
		return []any{status}
	case 3:
		return []any{status, n, s}
	case 4:
		return []any{s, n}
	case 5:
		return s
	default:
		return []any{status, []any{n}}
	}
}

func FuzzParseWriteReply(f *testing.F) {
	f.Add(uint8(0), int64(1), int64(7), "")
	f.Add(uint8(1), int64(0), int64(0), "42")
	f.Add(uint8(1), int64(1), int64(0), "007")
	f.Add(uint8(1), int64(0), int64(0), "18446744073709551616")
	f.Add(uint8(0), int64(2), int64(7), "")
	f.Add(uint8(0), int64(1), int64(-1), "")
	f.Add(uint8(4), int64(1), int64(7), "1")
	f.Add(uint8(6), int64(1), int64(7), "")
	f.Fuzz(func(t *testing.T, shape uint8, status, n int64, s string) {
		reply := replyShape(shape, status, n, s)
		written, tok, err := redisfence.ParseWriteReply(reply)
		if err != nil {
			if written || tok != 0 {
				t.Fatalf("ParseWriteReply(%#v) = %t, %d with error %v", reply, written, tok, err)
			}
			if len(err.Error()) > 300 {
				t.Fatalf("ParseWriteReply(%#v): error of %d bytes", reply, len(err.Error()))
			}
			return
		}
		a := reply.([]any)
		if len(a) != 2 || (a[0] != int64(0) && a[0] != int64(1)) || written != (a[0] == int64(1)) {
			t.Fatalf("ParseWriteReply accepted %#v as written=%t", reply, written)
		}
		switch v := a[1].(type) {
		case int64:
			if v < 0 || tok != fencing.Token(v) {
				t.Fatalf("ParseWriteReply(%#v) = token %d", reply, tok)
			}
		case string:
			if !canonical.MatchString(v) || tok.String() != v {
				t.Fatalf("ParseWriteReply(%#v) = token %d: only canonical decimals parse", reply, tok)
			}
		default:
			t.Fatalf("ParseWriteReply accepted a token of type %T", v)
		}
	})
}

func FuzzTokenFromReply(f *testing.F) {
	f.Add(true, int64(5), "")
	f.Add(false, int64(0), "5")
	f.Add(false, int64(0), "05")
	f.Add(false, int64(0), "-5")
	f.Add(true, int64(-5), "")
	f.Fuzz(func(t *testing.T, isInt bool, n int64, s string) {
		var v any = s
		if isInt {
			v = n
		}
		tok, err := redisfence.TokenFromReply(v)
		switch {
		case err != nil:
			if tok != 0 {
				t.Fatalf("TokenFromReply(%#v) = %d with error %v", v, tok, err)
			}
		case isInt:
			if n < 0 || tok != fencing.Token(n) {
				t.Fatalf("TokenFromReply(%d) = %d", n, tok)
			}
		default:
			if !canonical.MatchString(s) || tok.String() != s {
				t.Fatalf("TokenFromReply(%q) = %d: only canonical decimals parse", s, tok)
			}
		}
	})
}

// FuzzStoreWrite puts arbitrary bytes in the fence key (someone else's
// data, a corrupted key, a counter beyond 64 bits) and writes with an
// arbitrary token. The Store must either apply the write by the fencing
// rule or refuse it, and a refused or failed write must leave the value
// and the fence key exactly as they were.
func FuzzStoreWrite(f *testing.F) {
	mr := miniredis.RunT(f)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	f.Cleanup(func() { _ = client.Close() })
	store := redisfence.New(client, "fz:")
	ctx := context.Background()

	f.Add(true, "7", uint64(8), "new")
	f.Add(true, "7", uint64(7), "same token")
	f.Add(true, "7", uint64(6), "stale")
	f.Add(false, "", uint64(1), "first")
	f.Add(true, "0", uint64(1), "zero fence")
	f.Add(true, "007", uint64(8), "leading zeros")
	f.Add(true, "not-a-token", uint64(8), "text")
	f.Add(true, "18446744073709551616", uint64(18446744073709551615), "beyond 64 bits")
	f.Add(true, "", uint64(3), "empty fence key")
	f.Add(false, "", uint64(0), "token zero")
	f.Fuzz(func(t *testing.T, hasFence bool, fence string, token uint64, value string) {
		mr.FlushAll()
		const old = "old value"
		mr.Set("fz:k", old)
		if !hasFence {
			fence = ""
		} else {
			mr.Set("fz:k:fence", fence)
		}
		err := store.Write(ctx, "k", value, fencing.Token(token))

		got, _ := mr.Get("fz:k")
		gotFence, _ := mr.Get("fz:k:fence")
		unchanged := got == old && gotFence == fence && mr.Exists("fz:k:fence") == hasFence
		if msg := judgeWrite(hasFence, fence, token, value, err, got, gotFence, unchanged); msg != "" {
			t.Fatal(msg)
		}
	})
}

// judgeWrite says what is wrong with a write of value with token over the
// fence key's contents (hasFence, fence), which returned err and left got
// and gotFence (unchanged: exactly as they were); "" when nothing is.
func judgeWrite(hasFence bool, fence string, token uint64, value string, err error, got, gotFence string, unchanged bool) string {
	f64, rangeErr := strconv.ParseUint(fence, 10, 64)
	if !hasFence {
		f64, rangeErr = 0, nil
	}
	// A fence key that is not a canonical counter, or one beyond 64 bits
	// that no token reaches, refuses every write, as token 0 is refused.
	refused := token == 0 || hasFence && !canonical.MatchString(fence) || rangeErr != nil
	var stale *fencing.StaleError
	switch {
	case refused:
		return judgeRefusal(fence, token, err, unchanged)
	case token >= f64:
		if err != nil || got != value || gotFence != strconv.FormatUint(token, 10) {
			return fmt.Sprintf("token %d over fence %q: err %v, value %q, fence %q", token, fence, err, got, gotFence)
		}
	case !errors.As(err, &stale) || stale.Highest != fencing.Token(f64) || stale.Token != fencing.Token(token) || !unchanged:
		return fmt.Sprintf("token %d under fence %q: err %v, unchanged %t", token, fence, err, unchanged)
	}
	return ""
}

// judgeRefusal says what is wrong with a write that must be refused:
// token 0 with ErrInvalidToken, any other with an error; "" when nothing
// is. Either leaves the keys unchanged.
func judgeRefusal(fence string, token uint64, err error, unchanged bool) string {
	switch {
	case token == 0 && (!errors.Is(err, fencing.ErrInvalidToken) || !unchanged):
		return fmt.Sprintf("token 0: err %v, unchanged %t", err, unchanged)
	case err == nil || !unchanged:
		return fmt.Sprintf("fence key %q is not a token below 2^64: err %v, unchanged %t", fence, err, unchanged)
	}
	return ""
}
