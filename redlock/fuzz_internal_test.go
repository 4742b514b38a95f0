package redlock

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Fuzz tests of the parsers of the scripts' replies. A reply is outside
// input: it comes from whatever answers on the node's address (another
// version of the scripts, a proxy, a server that is not Redis). The parsers
// must never panic, must say "unexpected script reply" (or wrong type)
// for anything they do not understand, and must never return a Grant or
// LockInfo that contradicts itself.
//
// The fuzz input is decoded into a reply value of the kinds go-redis hands
// to Script.Run callers (int64, string, nil, []any, and with RESP3 also
// bool, float64 and map[any]any), nested a few levels deep.
//
// Run one with: go test -run='^$' -fuzz='^FuzzParseGrant$' -fuzztime=5s ./redlock/

// replyDecoder turns fuzz bytes into a reply value.
type replyDecoder struct{ b []byte }

func (d *replyDecoder) byte() byte {
	if len(d.b) == 0 {
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *replyDecoder) take(n int) []byte {
	n = min(n, len(d.b))
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

func (d *replyDecoder) value(depth int) any {
	switch d.byte() % 9 {
	case 0:
		return nil
	case 1: // small integer
		return int64(int8(d.byte()))
	case 2: // any integer
		var buf [8]byte
		copy(buf[:], d.take(8))
		return int64(binary.LittleEndian.Uint64(buf[:]))
	case 3: // string
		return string(d.take(int(d.byte())))
	case 4, 5: // array
		n := int(d.byte() % 6)
		if depth >= 3 {
			n = 0
		}
		vals := make([]any, n)
		for i := range vals {
			vals[i] = d.value(depth + 1)
		}
		return vals
	case 6:
		return d.byte()%2 == 1
	case 7:
		var buf [8]byte
		copy(buf[:], d.take(8))
		return math.Float64frombits(binary.LittleEndian.Uint64(buf[:]))
	default:
		m := map[any]any{}
		if depth < 3 {
			for range d.byte() % 3 {
				m[string(d.take(int(d.byte()%8)))] = d.value(depth + 1)
			}
		}
		return m
	}
}

func decodeReply(b []byte) any { return (&replyDecoder{b: b}).value(0) }

// Seed encodings (also under testdata/fuzz): tag bytes as in value().
var (
	seedGrantOK      = []byte{4, 2, 1, 1, 3, 1, '7'}                            // {1, "7"}
	seedGrantBig     = append([]byte{4, 2, 1, 1, 3, 16}, "9007199254740995"...) // {1, "9007199254740995"}
	seedGrantInt     = []byte{4, 2, 1, 1, 1, 7}                                 // {1, 7}: a Lua number, refused
	seedGrantRefused = []byte{4, 2, 1, 0, 2, 0xe8, 3, 0, 0}                     // {0, 1000}
	seedGrantNoTTL   = []byte{4, 2, 1, 0, 1, 0xff}                              // {0, -1}
	seedGrantBadFlag = []byte{4, 2, 1, 5, 1, 3}                                 // {5, 3}
	seedGrantString  = []byte{4, 2, 3, 1, '1', 3, 1, '7'}                       // {"1", "7"}
	seedInspectHeld  = append(append([]byte{4, 4, 3, 6}, "string"...),
		append(append([]byte{3, 38}, "0123456789abcdef0123456789abcdef owner"...),
			append([]byte{2, 0x10, 0x27, 0, 0, 0, 0, 0, 0, 3, 2}, "42"...)...)...)
	seedInspectFree  = append(append([]byte{4, 4, 3, 4}, "none"...), 0, 1, 0xfe, 3, 1, '9')
	seedInspectWrong = append(append([]byte{4, 4, 3, 4}, "hash"...), 0, 1, 0xff, 0)
	seedInspectFence = append(append([]byte{4, 4, 3, 4}, "none"...), append([]byte{0, 1, 0xfe, 3, 4}, "0x10"...)...)
)

// TestReplyDecoderSeeds pins the seed encodings to the replies they stand
// for.
func TestReplyDecoderSeeds(t *testing.T) {
	cases := []struct {
		in   []byte
		want any
	}{
		{seedGrantOK, []any{int64(1), "7"}},
		{seedGrantBig, []any{int64(1), "9007199254740995"}},
		{seedGrantInt, []any{int64(1), int64(7)}},
		{seedGrantRefused, []any{int64(0), int64(1000)}},
		{seedGrantNoTTL, []any{int64(0), int64(-1)}},
		{seedGrantString, []any{"1", "7"}},
		{seedInspectHeld, []any{"string", "0123456789abcdef0123456789abcdef owner", int64(10000), "42"}},
		{seedInspectFree, []any{"none", nil, int64(-2), "9"}},
		{seedInspectWrong, []any{"hash", nil, int64(-1), nil}},
		{seedInspectFence, []any{"none", nil, int64(-2), "0x10"}},
	}
	for _, tc := range cases {
		if got := decodeReply(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("decodeReply(%q) = %#v, want %#v", tc.in, got, tc.want)
		}
	}
}

func FuzzParseGrant(f *testing.F) {
	for _, s := range [][]byte{seedGrantOK, seedGrantBig, seedGrantInt, seedGrantRefused, seedGrantNoTTL, seedGrantBadFlag, seedGrantString, {}, {4, 0}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		reply := decodeReply(data)
		g, err := parseGrant(reply)
		if err != nil {
			if !errors.Is(err, errBadReply) {
				t.Fatalf("parseGrant(%#v): error %v does not wrap errBadReply", reply, err)
			}
			if g != (grant{}) {
				t.Fatalf("parseGrant(%#v): error %v with a non-zero Grant %+v", reply, err, g)
			}
			return
		}
		vals, ok := reply.([]any)
		if !ok || (len(vals) != 2 && len(vals) != 4) {
			t.Fatalf("parseGrant accepted %#v, which is not a 2- or 4-element array", reply)
		}
		queued := len(vals) == 4 && vals[1] == int64(0)
		if g.Reason != "" && !(queued && g.Reason == queuedReason) {
			t.Fatalf("parseGrant(%#v) made up a reason %q", reply, g.Reason)
		}
		if len(vals) == 4 && (g.OK || g.ticket != vals[2].(int64) || g.headLeft != time.Duration(vals[3].(int64))*time.Millisecond) {
			t.Fatalf("parseGrant(%#v) = %+v: a refusal from a queue carries the ticket and the head's time left", reply, g)
		}
		if g.OK {
			if g.Counter == 0 || g.HolderTTL != 0 || vals[0] != int64(1) || vals[1] != g.Counter.String() {
				t.Fatalf("parseGrant(%#v) = %+v: a grant must carry the counter it was sent (as a canonical decimal string) and no TTL", reply, g)
			}
			return
		}
		if g.Counter != 0 || vals[0] != int64(0) {
			t.Fatalf("parseGrant(%#v) = %+v: a refusal carries no counter", reply, g)
		}
		if ms := vals[1].(int64); ms >= 0 && g.HolderTTL != time.Duration(ms)*time.Millisecond {
			t.Fatalf("parseGrant(%#v) = %+v: holder TTL is not the PTTL", reply, g)
		}
	})
}

func FuzzParseInspect(f *testing.F) {
	for _, s := range [][]byte{seedInspectHeld, seedInspectFree, seedInspectWrong, seedInspectFence, {}, {4, 4}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		reply := decodeReply(data)
		info, err := parseInspect(reply)
		if err != nil {
			if !errors.Is(err, errBadReply) && !errors.Is(err, ErrWrongType) {
				t.Fatalf("parseInspect(%#v): error %v wraps neither errBadReply nor ErrWrongType", reply, err)
			}
			if info.Held || info.Token != "" || info.Owner != "" {
				t.Fatalf("parseInspect(%#v): error %v with a held lock %+v", reply, err, info)
			}
			return
		}
		vals, ok := reply.([]any)
		if !ok || (len(vals) != 4 && len(vals) != 5) {
			t.Fatalf("parseInspect accepted %#v, which is not a 4- or 5-element array", reply)
		}
		if len(vals) == 5 && int64(info.Waiters) != vals[4].(int64) {
			t.Fatalf("parseInspect(%#v) = %+v: Waiters is not the count of places", reply, info)
		}
		kind, _ := vals[0].(string)
		switch kind {
		case "none":
			if info.Held || info.Token != "" || info.Owner != "" || info.TTL != 0 {
				t.Fatalf("parseInspect(%#v) = %+v: a free lock has no holder", reply, info)
			}
		case "string":
			value, _ := vals[1].(string)
			if !info.Held || strings.Contains(info.Token, " ") || !strings.HasPrefix(value, info.Token) {
				t.Fatalf("parseInspect(%#v) = %+v: the token is the value up to its first space", reply, info)
			}
		default:
			t.Fatalf("parseInspect accepted a lock key of type %q", kind)
		}
		if _, isStr := vals[3].(string); !isStr && info.Fence != 0 {
			t.Fatalf("parseInspect(%#v) = %+v: a fence counter out of nothing", reply, info)
		}
	})
}
