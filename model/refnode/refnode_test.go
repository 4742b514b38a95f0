package refnode

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/scripts"
)

const (
	kLock   = "ref{r}"
	kFence  = "ref{r}:fence"
	kMarker = "ref~trust:0"
	// slackMS, plus the time between the two TIME reads around the call,
	// is how far a time-valued field may differ between the real script
	// and the reference (which does not know the script's exact TIME).
	slackMS = 5
)

var tokens = []string{"aa01", "bb02", "cc03"}

// TestDifferentialScriptsMatchTheReference drives the real scripts
// (acquire, release, renew, fence, rehold) on a real redis-server and the
// reference steps of this package with the same random operations,
// interleaved with the operator's (a key deleted as eviction would, a
// FLUSHALL, SWAPDB 0 1, CONFIG RESETSTAT, a restart without data, which
// changes the replication id, a restart that keeps its data (an RDB saved
// just before) under a new replication id, and the node clock moved forward or back
// under libfaketime). At every script call it reads, in one MULTI, the
// keys before the call, the call's reply and the keys after it, and
// requires the reply and the keys to be those of the reference from the
// same keys at the script's clock. Seeds: REDLOCK_REFNODE_SEED (default:
// three fixed seeds), REDLOCK_REFNODE_STEPS steps each (default 400).
func TestDifferentialScriptsMatchTheReference(t *testing.T) {
	want := []string{"acquire granted", "acquire held", "acquire refused", "acquire 3 no-marker", "acquire 3 identity", "acquire 3 key-lost", "acquire 3 clock-back", "release released", "release notheld", "renew 1", "renew 0", "fence 1", "fence 0", "rehold done", "rehold notheld", "acquire from the high-water", "renew from the high-water", "a new marker deleted the one swapped away", "renew refused: no marker"}
	differential(t, 7919, 25, want, func(h *harness, steps int) {
		d := &driver{harness: h}
		d.run(steps)
		h.t.Logf("%d script calls compared (%v; %d of them by FCALL), %d operator actions (%v); outcomes %v", d.calls, d.byOp, h.fcalls, d.acts, d.byAct, d.outcomes)
	})
}

// driver is one seed's run of the mutex's scripts.
type driver struct {
	*harness
	acts  int
	byOp  map[string]int
	byAct map[string]int
}

func (d *driver) run(steps int) {
	d.byOp, d.byAct = map[string]int{}, map[string]int{}
	for i := 0; i < steps; i++ {
		switch r := d.rng.IntN(100); {
		case r < 30:
			d.call(Call{Op: "acquire", Token: tokens[d.rng.IntN(3)], TTLms: d.pick(2000, 8000), DelayMS: d.pick(0, 1000, 3000)})
		case r < 45:
			d.call(Call{Op: "release", Token: tokens[d.rng.IntN(3)]})
		case r < 55:
			d.call(Call{Op: "renew", Token: tokens[d.rng.IntN(3)], TTLms: d.pick(2000, 8000), Marker: d.rng.IntN(2) == 0})
		case r < 63:
			d.call(Call{Op: "fence", Token: tokens[d.rng.IntN(3)], Marker: d.rng.IntN(2) == 0}) // F chosen from the counter in call
		case r < 68:
			d.call(Call{Op: "rehold", Token: tokens[d.rng.IntN(3)], NewTok: tokens[d.rng.IntN(3)], TTLms: d.pick(2000, 8000), DelayMS: d.pick(0, 1000)})
		default:
			d.operator()
		}
	}
}

// operator performs one of the operator's actions (no reply compared:
// the next call reads the state it left).
func (d *driver) operator() {
	t := d.t
	var what string
	switch r := d.rng.IntN(100); {
	case r < 12:
		what = "evict the lock key"
		require.NoError(t, d.c.Del(d.ctx, kLock).Err())
	case r < 20:
		what = "evict the counter"
		require.NoError(t, d.c.Del(d.ctx, kFence).Err())
		if d.rng.IntN(2) == 0 {
			// and the lock key, then a grant at once: a new counter in the
			// second of the last one counted starts at the high-water (C6)
			require.NoError(t, d.c.Del(d.ctx, kLock).Err())
			defer d.call(Call{Op: "acquire", Token: tokens[d.rng.IntN(3)], TTLms: 2000, DelayMS: 1000})
		}
	case r < 25:
		what = "flushall"
		require.NoError(t, d.c.FlushAll(d.ctx).Err())
	case r < 33:
		what = "swapdb 0 1"
		require.NoError(t, d.c.Do(d.ctx, "SWAPDB", 0, 1).Err())
	case r < 38:
		what = "config resetstat"
		require.NoError(t, d.c.ConfigResetStat(d.ctx).Err())
	case r < 40:
		what = "restart without data"
		require.NoError(t, d.srv.RestartEmpty())
		d.c = d.srv.Client()
	case r < 43:
		// a durable restart: the data comes back (the RDB just saved),
		// under a new replication id
		what = "restart with its data"
		require.NoError(t, d.c.Save(d.ctx).Err())
		require.NoError(t, d.srv.Restart())
		d.c = d.srv.Client()
	case r < 47:
		// the marker gone under a lock that stands: a db swapped back
		// whose marker a new one deleted (T4), or a deletion by hand
		what = "delete the marker"
		require.NoError(t, d.c.Del(d.ctx, kMarker).Err())
		defer func() {
			// the holder renews next, on the data no marker vouches for
			if v, err := d.c.Get(d.ctx, kLock).Result(); err == nil {
				d.call(Call{Op: "renew", Token: strings.Fields(v)[0], TTLms: d.pick(2000, 8000), Marker: true})
			}
		}()
	case r < 85:
		what = d.clockStep(time.Duration(d.pick(300, 1500, 4000, 21000)) * time.Millisecond)
	default:
		what = d.clockStep(-time.Duration(d.pick(500, 1500, 3000)) * time.Millisecond)
	}
	d.acts++
	d.byAct[strings.Fields(what)[0]]++
	d.note(what)
}

// readMutex queues the reads of the mutex's keys and of the marker's
// name in db 1 (T4), which stateOf decodes.
func readMutex(ctx context.Context) func(p redis.Pipeliner) []keyCmds {
	return func(p redis.Pipeliner) []keyCmds {
		var ks []keyCmds
		for _, k := range []string{kLock, kFence, kMarker} {
			ks = append(ks, readKey(p, ctx, k))
		}
		p.Select(ctx, 1) // the marker's name in db 1 (T4)
		ks = append(ks, readKey(p, ctx, kMarker))
		p.Select(ctx, 0)
		return ks
	}
}

func stateOf(ks []keyCmds) State {
	return State{Lock: ks[0].key(), Fence: ks[1].key(), Marker: ks[2].key(), Other: ks[3].key()}
}

func (d *driver) call(c Call) {
	t := d.t
	if c.Op == "fence" {
		// raise to the counter plus 0, 1 or a second's worth (another
		// node's larger counter)
		v, _ := d.c.Get(d.ctx, kFence).Result()
		if f := strings.Fields(v); len(f) > 0 {
			v = f[0]
		} else {
			v = "1796000000000000"
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		c.F = strconv.FormatInt(n+d.pick(0, 1, 1_000_000), 10)
	}
	s, keys, args := script(c)
	o := observe(d.harness, s, keys, args, readMutex(d.ctx), stateOf)
	id, before, realReply, realAfter := o.id, o.before, o.reply, o.after
	d.calls++
	d.byOp[c.Op]++
	desc := fmt.Sprintf("%s %s (ttl %d, delay %d, F %s, new %s)", c.Op, c.Token, c.TTLms, c.DelayMS, c.F, c.NewTok)
	var diffs []string
	for _, now := range nows(o.t0, o.t1, c, before, realAfter) {
		r, after := Step(before, c, now, id)
		diff := compare(r, after, realReply, realAfter, o.tol())
		if diff == "" {
			d.outcomes[outcome(c, realReply)]++
			if fromHigh(c, before, realReply, o.t0) {
				d.outcomes[c.Op+" from the high-water"]++
			}
			if before.Other.Present && !realAfter.Other.Present {
				d.outcomes["a new marker deleted the one swapped away"]++
			}
			if c.Op == "renew" && c.Marker && !before.Marker.Present && strings.HasPrefix(before.Lock.Val, c.Token+" ") {
				d.outcomes["renew refused: no marker"]++
			}
			d.note(desc + " -> " + realReply.String())
			return
		}
		diffs = append(diffs, fmt.Sprintf("at now=%d: %s", now, diff))
	}
	t.Fatalf("the script and the reference disagree on %s\nkeys before: %+v\nidentity: %+v\nreal reply %s, keys after %+v\n%s\nthe last steps:\n  %s",
		desc, before, id, realReply, realAfter, strings.Join(diffs, "\n"), strings.Join(d.trace, "\n  "))
}

// nows are the clock readings the script may have made: the two TIME
// reads around it and, when the script wrote a time it read (a counter's
// lease end U = now + TTL, the marker's seen), that time, if it lies
// between them.
func nows(t0, t1 int64, c Call, before, after State) []int64 {
	out := []int64{t0, t1}
	in := func(x int64) {
		if x >= t0 && x <= t1 {
			out = append(out, x)
		}
	}
	if f := strings.Fields(after.Fence.Val); len(f) == 2 && after.Fence.Val != before.Fence.Val && c.TTLms > 0 {
		u, _ := strconv.ParseInt(f[1], 10, 64)
		in(u - c.TTLms*1000)
	}
	if f := strings.Fields(after.Marker.Val); len(f) >= 5 && after.Marker.Val != before.Marker.Val {
		seen, _ := strconv.ParseInt(f[3], 10, 64)
		in(seen)
	}
	return out
}

// fromHigh reports whether call c granted a new counter that started at
// the db's high-water rather than at the clock (counter.lua, C6): the
// counter was missing and the marker's high-water was at or above the
// clock's second at t0.
func fromHigh(c Call, before State, r Reply, t0 int64) bool {
	granted := c.Op == "acquire" && len(r.Array) > 0 && r.Array[0] == "granted" ||
		c.Op == "renew" && c.Marker && r.Int != nil && *r.Int == 1
	if !granted || before.Fence.Present {
		return false
	}
	f := strings.Fields(before.Marker.Val)
	if len(f) != 6 {
		return false
	}
	hi, _ := strconv.ParseInt(f[5], 10, 64)
	return hi >= t0-t0%StepUS
}

// outcome names what call c answered: for acquire and rehold their
// verdict (a "sitout" by its why), for the others the integer or first
// element (a refusal {3, ms, why} by its why).
func outcome(c Call, r Reply) string {
	switch {
	case r.Err != "":
		return c.Op + " error"
	case r.Int != nil:
		return fmt.Sprintf("%s %d", c.Op, *r.Int)
	case c.Op == "acquire" && r.Array[0] == "sitout":
		return fmt.Sprintf("acquire 3 %v", r.Array[5])
	case c.Op == "acquire" && r.Array[0] == "retried":
		return "acquire held"
	case c.Op == "acquire" && r.Array[0] == "held":
		return "acquire refused"
	case c.Op == "acquire":
		return fmt.Sprintf("acquire %v", r.Array[0])
	case c.Op == "rehold" && r.Array[0] == "sitout":
		return fmt.Sprintf("rehold 3 %v", r.Array[3])
	case len(r.Array) >= 3 && r.Array[0] == int64(3):
		return fmt.Sprintf("%s 3 %v", c.Op, r.Array[2])
	}
	return fmt.Sprintf("%s %v", c.Op, r.Array[0])
}

// script is the real script of call c, its keys and arguments, as the
// Locker passes them (scripts/scripts.go).
func script(c Call) (*scripts.Script, []string, []any) {
	switch c.Op {
	case "acquire":
		return scripts.Acquire, []string{kLock, kFence, kLock + ":queue", kLock + ":queue:exp", kMarker},
			[]any{c.Token, "owner", c.TTLms, "none", "", "alone", "", "", 0, 0, "none", "", "", "", "", c.DelayMS}
	case "release":
		return scripts.Release, []string{kLock, kFence}, []any{c.Token, kLock + ":released", "", "quiet"}
	case "renew":
		keys := []string{kLock, kFence}
		if c.Marker {
			keys = append(keys, kMarker)
		}
		return scripts.Renew, keys, []any{c.Token, c.TTLms, ""}
	case "fence":
		keys := []string{kLock, kFence}
		if c.Marker {
			keys = append(keys, kMarker)
		}
		return scripts.Fence, keys, []any{c.Token, c.F, ""}
	case "rehold":
		return scripts.Rehold, []string{kLock, kFence, kMarker}, []any{c.Token, c.NewTok + " owner", c.TTLms, "", c.DelayMS}
	}
	panic(c.Op)
}

// compare returns "" when the real reply and keys are the reference's, up
// to tolMS on time-valued fields (pttls and ms in replies, expiries, the
// times a counter and the marker record), or what differs.
func compare(r Reply, after State, rr Reply, ra State, tolMS int64) string {
	if d := compareReply(r, rr, tolMS); d != "" {
		return "reply: " + d
	}
	for _, k := range []struct {
		name     string
		ref, got Key
		times    map[int]bool // fields of the value that are times (µs)
	}{
		{"lock", after.Lock, ra.Lock, nil},
		{"counter", after.Fence, ra.Fence, map[int]bool{1: true}},
		{"marker", after.Marker, ra.Marker, map[int]bool{2: true, 3: true}},
		{"db 1's marker", after.Other, ra.Other, map[int]bool{2: true, 3: true}},
	} {
		if k.ref.Present != k.got.Present {
			return fmt.Sprintf("%s: reference present=%v, real present=%v (%q)", k.name, k.ref.Present, k.got.Present, k.got.Val)
		}
		if !k.ref.Present {
			continue
		}
		if (k.ref.ExpMS == 0) != (k.got.ExpMS == 0) || abs(k.ref.ExpMS-k.got.ExpMS) > tolMS {
			return fmt.Sprintf("%s: reference expires at %d, real at %d", k.name, k.ref.ExpMS, k.got.ExpMS)
		}
		rf, gf := strings.Fields(k.ref.Val), strings.Fields(k.got.Val)
		if len(rf) != len(gf) {
			return fmt.Sprintf("%s: reference %q, real %q", k.name, k.ref.Val, k.got.Val)
		}
		for i := range rf {
			if k.times[i] {
				a, _ := strconv.ParseInt(rf[i], 10, 64)
				b, _ := strconv.ParseInt(gf[i], 10, 64)
				if abs(a-b) <= tolMS*1000 {
					continue
				}
			}
			if rf[i] != gf[i] {
				return fmt.Sprintf("%s: reference %q, real %q", k.name, k.ref.Val, k.got.Val)
			}
		}
	}
	return ""
}

func compareReply(r, rr Reply, tolMS int64) string {
	switch {
	case r.Err != "" || rr.Err != "":
		if r.Err == "" || rr.Err == "" || strings.Fields(r.Err)[0] != strings.Fields(rr.Err)[0] {
			return fmt.Sprintf("reference %s, real %s", r, rr)
		}
		return ""
	case r.Int != nil || rr.Int != nil:
		if r.Int == nil || rr.Int == nil || *r.Int != *rr.Int {
			return fmt.Sprintf("reference %s, real %s", r, rr)
		}
		return ""
	}
	if len(r.Array) != len(rr.Array) {
		return fmt.Sprintf("reference %s, real %s", r, rr)
	}
	for i := range r.Array {
		if !sameElement(i, r.Array[i], rr.Array[i], tolMS) {
			return fmt.Sprintf("reference %s, real %s", r, rr)
		}
	}
	return ""
}

// sameElement reports whether element i of two array replies agree: the
// same string, or integers within tolMS past the first element (times in
// ms).
func sameElement(i int, x, y any, tolMS int64) bool {
	a, aok := x.(int64)
	b, bok := y.(int64)
	switch {
	case aok && bok:
		return a == b || i > 0 && abs(a-b) <= tolMS
	case !aok && !bok:
		return x == y
	}
	return false
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
