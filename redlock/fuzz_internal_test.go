package redlock

import (
	"encoding/binary"
	"errors"
	"fmt"
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
		n := int(d.byte() % 8)
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

// encodeReply is decodeReply's inverse for the kinds the seeds use
// (nil, int64, string, []any of up to 7 elements).
func encodeReply(v any) []byte {
	switch x := v.(type) {
	case nil:
		return []byte{0}
	case int64:
		if x == int64(int8(x)) {
			return []byte{1, byte(int8(x))}
		}
		return binary.LittleEndian.AppendUint64([]byte{2}, uint64(x))
	case string:
		return append([]byte{3, byte(len(x))}, x...)
	case []any:
		out := []byte{4, byte(len(x))}
		for _, e := range x {
			out = append(out, encodeReply(e)...)
		}
		return out
	}
	panic(fmt.Sprintf("encodeReply: %T", v))
}

// acq is an acquire reply {verdict, counter, ms, ticket, wait, why}.
func acq(verdict, counter string, ms, ticket, wait int64, why string) []any {
	return []any{verdict, counter, ms, ticket, wait, why}
}

// Seed replies (their encodings also under testdata/fuzz).
var (
	seedGrants = [][]any{
		acq("granted", "7", 0, 0, 0, ""),
		acq("granted", "9007199254740995", 0, 0, 0, ""), // beyond a double's exact range
		acq("retried", "7", 4000, 0, 0, ""),
		acq("handed", "8", 2500, 0, 0, ""),
		acq("held", "", 1000, 0, 0, ""),
		acq("held", "", -1, 0, 0, ""), // no expiry
		acq("held", "", 1000, 12, 300, ""),
		acq("behind", "", 0, 12, 300, ""),
		acq("sitout", "", 900, 0, 0, "no-marker"),
		acq("granted", "07", 0, 0, 0, ""), // not canonical
		acq("granted", "7", 5, 0, 0, ""),  // a new grant with time left
		acq("retried", "7", 0, 0, 0, ""),  // a retry without it
		acq("behind", "", 50, 1, 1, ""),   // free, with a PTTL
		acq("waiting", "", 0, 0, 0, ""),   // no such verdict
		{int64(1), "7"},                   // the old shape
		{"granted", int64(7), int64(0), int64(0), int64(0), ""},
	}
	seedInspectHeld  = encodeReply([]any{"held", "string", "0123456789abcdef0123456789abcdef owner", int64(10000), "42", int64(2)})
	seedInspectFree  = encodeReply([]any{"free", "none", "", int64(-2), "9", int64(0)})
	seedInspectWrong = encodeReply([]any{"foreign", "hash", "", int64(-1), "", int64(0)})
	seedInspectFence = encodeReply([]any{"free", "none", "", int64(-2), "0x10", int64(0)})
)

// TestReplyDecoderSeeds checks that the seed encodings decode to the
// replies they stand for.
func TestReplyDecoderSeeds(t *testing.T) {
	replies := append(append([][]any(nil), seedGrants...),
		[]any{"string", "0123456789abcdef0123456789abcdef owner", int64(10000), "42"},
		[]any{"none", nil, int64(-2), "9"}, []any{"hash", nil, int64(-1), nil}, []any{"none", nil, int64(-2), "0x10"})
	for _, r := range replies {
		if got := decodeReply(encodeReply(r)); !reflect.DeepEqual(got, any(r)) {
			t.Errorf("decodeReply(encodeReply(%#v)) = %#v", r, got)
		}
	}
}

func FuzzParseGrant(f *testing.F) {
	for _, r := range seedGrants {
		f.Add(encodeReply(r))
	}
	f.Add([]byte{})
	f.Add([]byte{4, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		reply := decodeReply(data)
		g, err := parseGrant(reply)
		if err != nil {
			if !errors.Is(err, errBadReply) {
				t.Fatalf("parseGrant(%#v): error %v does not wrap errBadReply", reply, err)
			}
			if g != (grant{}) {
				t.Fatalf("parseGrant(%#v): error %v with a non-zero grant %+v", reply, err, g)
			}
			return
		}
		r, ok := readAcquireReply(reply)
		if !ok {
			t.Fatalf("parseGrant accepted %#v, which is not {verdict, counter, ms, ticket, wait, why}", reply)
		}
		if msg := checkGrant(r, g); msg != "" {
			t.Fatalf("parseGrant(%#v) = %+v: %s", reply, g, msg)
		}
	})
}

// checkGrant says what is wrong with grant g parsed from reply r ("" when
// nothing is): each verdict carries its own fields and no others.
func checkGrant(r acquireReply, g grant) string {
	ms := time.Duration(r.ms) * time.Millisecond
	switch r.verdict {
	case verdictGranted, verdictRetried, verdictHanded:
		return checkHeld(r, g, ms)
	case verdictHeld, verdictBehind:
		return checkRefusal(r, g, ms)
	case verdictSitOut:
		if g.OK || g.Counter != 0 || g.HolderTTL != ms || !rejoiningRefusal(g.Reason) {
			return "a node that sits out refuses for ms, as rejoining"
		}
	default:
		return "an unknown verdict was accepted"
	}
	return ""
}

// checkRefusal is checkGrant for "held" and "behind".
func checkRefusal(r acquireReply, g grant, ms time.Duration) string {
	switch {
	case g.OK || g.handed || g.Counter != 0:
		return "a refusal carries no counter"
	case g.ticket != r.ticket || g.headLeft != time.Duration(r.wait)*time.Millisecond:
		return "a refusal carries the ticket and the head's time left"
	case r.ms >= 0 && g.HolderTTL != ms:
		return "holder TTL is not the PTTL"
	case (g.Reason == queuedReason) != (r.verdict == verdictBehind) || r.verdict == verdictHeld && g.Reason != "":
		return "only \"behind\" has a reason, that an earlier waiter is next"
	}
	return ""
}

// checkHeld is checkGrant for the verdicts that carry a counter.
func checkHeld(r acquireReply, g grant, ms time.Duration) string {
	switch {
	case g.Counter == 0 || g.Counter.String() != r.counter:
		return "the counter it was sent, as a canonical decimal string"
	case g.HolderTTL != 0 || g.Reason != "":
		return "a holder's reply has no holder TTL and no reason"
	case g.OK == (r.verdict == verdictHanded) || g.handed != (r.verdict == verdictHanded):
		return "granted or retried is OK, a hand-over is not"
	case g.left != ms || (r.verdict == verdictGranted) != (g.left == 0):
		return "a new grant has no time left, a retry or a hand-over the lock's"
	}
	return ""
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
		if !ok || len(vals) != 6 {
			t.Fatalf("parseInspect accepted %#v, which is not a 6-element array", reply)
		}
		if msg := checkInspect(vals, info); msg != "" {
			t.Fatalf("parseInspect(%#v) = %+v: %s", reply, info, msg)
		}
	})
}

// checkInspect says what is wrong with info parsed from the inspect reply
// vals ("" when nothing is).
func checkInspect(vals []any, info LockInfo) string {
	if int64(info.Waiters) != vals[5].(int64) {
		return "Waiters is not the count of places"
	}
	if vals[4] == "" && info.Fence != 0 {
		return "a fence counter out of nothing"
	}
	switch vals[0] {
	case "free":
		if vals[1] != "none" || info.Held || info.Token != "" || info.Owner != "" || info.TTL != 0 {
			return "a free lock has no holder"
		}
	case "held":
		value, _ := vals[2].(string)
		if vals[1] != "string" || !info.Held || strings.Contains(info.Token, " ") || !strings.HasPrefix(value, info.Token) {
			return "the token is the value up to its first space"
		}
	default:
		return fmt.Sprintf("a verdict %q accepted", vals[0])
	}
	return ""
}
