package rueidisnode

import (
	"maps"
	"slices"
	"strings"

	"github.com/redis/rueidis"
)

// Error is a server's error reply ("WRONGTYPE ...", "NOSCRIPT ...",
// "FENCEEXHAUSTED ..."), with the server's full text (rueidis's own error
// drops a leading "ERR "; this one keeps it, as the Node contract asks). Its
// RedisError method is how the Locker tells a refusal from a lost
// connection.
type Error struct{ msg string }

// Error returns the server's text.
func (e *Error) Error() string { return e.msg }

// RedisError marks e as the server's reply (the Node contract).
func (e *Error) RedisError() {}

// NoScript reports whether the server lacks the script (EVALSHA's NOSCRIPT).
func (e *Error) NoScript() bool { return strings.HasPrefix(e.msg, "NOSCRIPT") }

// convert returns a reply as the Node contract names it: int64 for an
// integer, string for a bulk, status, verbatim string or a big number, []any
// for an array or a set (its elements converted the same way, nil for a nil),
// nil for a nil, and an *Error for an error reply (as an element of an
// array, the *Error is the element's value; at the top, it is the error).
// RESP3 types that RESP2 does not have come back as RESP2 would send them:
// a boolean as 1 (true) or nil (false), a double as its text, a map as the
// flat array of its keys and values (keys sorted).
func convert(m *rueidis.RedisMessage) (any, error) {
	v := value(m)
	if e, ok := v.(*Error); ok {
		return nil, e
	}
	return v, nil
}

func value(m *rueidis.RedisMessage) any {
	switch {
	case m.IsNil():
		return nil
	case m.IsInt64():
		v, _ := m.AsInt64()
		return v
	case m.IsArray():
		elems, _ := m.ToArray()
		return values(elems)
	case m.IsMap():
		return mapValues(m)
	case m.IsBool():
		if b, _ := m.AsBool(); b {
			return int64(1)
		}
		return nil
	}
	// A string of any kind (blob, simple, verbatim, a double's or a big
	// number's text) or an error: ToString returns the raw text of both,
	// and the error reply's error beside it.
	s, err := m.ToString()
	if err != nil {
		return &Error{msg: s}
	}
	return s
}

func values(elems []rueidis.RedisMessage) []any {
	out := make([]any, len(elems))
	for i := range elems {
		out[i] = value(&elems[i])
	}
	return out
}

// mapValues flattens a RESP3 map into [k1, v1, k2, v2, ...], as RESP2
// sends it, in the order of its keys (rueidis does not keep the server's
// order; no lock script returns a map).
func mapValues(m *rueidis.RedisMessage) []any {
	kv, _ := m.ToMap()
	out := make([]any, 0, 2*len(kv))
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		v := kv[k]
		out = append(out, k, value(&v))
	}
	return out
}
