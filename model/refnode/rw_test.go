package refnode

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/scripts"
)

const (
	rwW       = "rw{r}:rw"
	rwFence   = rwW + ":fence"
	rwReaders = rwW + ":readers"
	rwIntent  = rwW + ":intent"
	rwMarker  = "rw~trust:0"
)

var (
	rwReaderToks = []string{"aa01", "bb02", "cc03"}
	rwWriterToks = []string{"ee05", "ff06"}
	rwIDs        = []string{"wr1", "wr2"}
)

func readerKey(tok string) string { return rwW + ":reader:" + tok }

// TestDifferentialRWScriptsMatchTheReference drives the read-write lock's
// real scripts (rw_read, rw_write in both modes, rw_withdraw, rw_inspect
// with and without the readers' keys, and a reader's renew and release
// and a writer's release through the mutex's scripts) on a real
// redis-server and RWStep with the same random operations, interleaved
// with the node's clock moving forward (faketime) and keys deleted as an
// eviction would (a reader's key, the writer's, the readers index). The rw scripts run with
// the KEYS check in front (scripts.CheckKeys): a key they touch that they
// do not declare fails the test. At every call it reads, in one MULTI,
// the keys before, the reply and the keys after, and requires the reply
// and every key (the readers index and its TTL, each reader's key, the
// intents) to be the reference's. Seeds:
// REDLOCK_REFNODE_SEED (default: three fixed seeds),
// REDLOCK_REFNODE_STEPS steps each (default 400).
func TestDifferentialRWScriptsMatchTheReference(t *testing.T) {
	want := []string{"read granted", "read held", "read writer", "read intent", "read 3 key-lost",
		"write granted", "write held", "write writer", "write readers", "write 3 key-lost",
		"withdraw 1", "withdraw 0", "inspect readers", "inspect named", "renew-reader 1", "renew-reader 0",
		"release-reader released", "release-reader notheld", "release-writer released", "swept",
		"read granted beside readers", "release-reader index gone", "release-reader others left"}
	differential(t, 104729, 30, want, func(h *harness, steps int) {
		d := &rwDriver{harness: h}
		d.run(steps)
		h.t.Logf("%d calls compared; outcomes %v", d.calls, d.outcomes)
	})
}

// rwDriver is one seed's run of the read-write lock's scripts.
type rwDriver struct{ *harness }

func (d *rwDriver) reader() string { return rwReaderToks[d.rng.IntN(len(rwReaderToks))] }

func (d *rwDriver) run(steps int) {
	for range steps {
		ttl := d.pick(1000, 3000)
		switch r := d.rng.IntN(100); {
		case r < 25:
			d.call(RWCall{Op: "read", Token: d.reader(), TTLms: ttl, DelayMS: d.pick(0, 0, 0, 1000)})
		case r < 42:
			wait := d.rng.IntN(2) == 0
			c := RWCall{Op: "write", Token: rwWriterToks[d.rng.IntN(2)], TTLms: ttl, DelayMS: d.pick(0, 0, 0, 1000), Wait: wait}
			if wait {
				c.ID, c.IntentMS = rwIDs[d.rng.IntN(2)], d.pick(500, 2500)
			}
			d.call(c)
		case r < 47:
			d.call(RWCall{Op: "withdraw", ID: rwIDs[d.rng.IntN(2)]})
		case r < 55:
			c := RWCall{Op: "inspect"}
			if d.rng.IntN(2) == 0 {
				c.Named = []string{d.reader(), d.reader()}
			}
			d.call(c)
		case r < 63:
			d.call(RWCall{Op: "renew-reader", Token: d.reader(), TTLms: ttl})
		case r < 71:
			d.call(RWCall{Op: "release-reader", Token: d.reader()})
		case r < 76:
			d.call(RWCall{Op: "release-writer", Token: rwWriterToks[d.rng.IntN(2)]})
		default:
			d.operator()
		}
	}
}

func (d *rwDriver) operator() {
	t := d.t
	var what string
	switch r := d.rng.IntN(100); {
	case r < 10:
		tok := d.reader()
		what = "evict reader " + tok
		require.NoError(t, d.c.Del(d.ctx, readerKey(tok)).Err())
	case r < 18:
		what = "evict the writer's key"
		require.NoError(t, d.c.Del(d.ctx, rwW).Err())
	case r < 26:
		what = "evict the readers index"
		require.NoError(t, d.c.Del(d.ctx, rwReaders).Err())
	default:
		what = d.clockStep(time.Duration(d.pick(300, 700, 1500, 4000)) * time.Millisecond)
	}
	d.note(what)
}

// rwCmds reads every key of the read-write lock inside a MULTI.
type rwCmds struct {
	base               []keyCmds
	readers, intents   *redis.ZSliceCmd
	readersExp, intExp *redis.Cmd
	readerKeys         []keyCmds
}

func readRW(p redis.Pipeliner, ctx context.Context) rwCmds {
	var c rwCmds
	for _, k := range []string{rwW, rwFence, rwMarker} {
		c.base = append(c.base, readKey(p, ctx, k))
	}
	c.readers = p.ZRangeWithScores(ctx, rwReaders, 0, -1)
	c.readersExp = p.Do(ctx, "PEXPIRETIME", rwReaders)
	c.intents = p.ZRangeWithScores(ctx, rwIntent, 0, -1)
	c.intExp = p.Do(ctx, "PEXPIRETIME", rwIntent)
	for _, tok := range rwReaderToks {
		c.readerKeys = append(c.readerKeys, readKey(p, ctx, readerKey(tok)))
	}
	return c
}

func (c rwCmds) state(t *testing.T) RWState {
	st := RWState{State: State{Lock: c.base[0].key(), Fence: c.base[1].key(), Marker: c.base[2].key()}, Readers: map[string]int64{}, ReaderKeys: map[string]Key{}, Intents: map[string]int64{}}
	for _, z := range c.readers.Val() {
		st.Readers[z.Member.(string)] = int64(z.Score)
	}
	if e, _ := c.readersExp.Int64(); e > 0 {
		st.ReadersExpMS = e
	}
	for _, z := range c.intents.Val() {
		st.Intents[z.Member.(string)] = int64(z.Score)
	}
	if e, _ := c.intExp.Int64(); e > 0 {
		st.IntentExpMS = e
	}
	for i, tok := range rwReaderToks {
		if k := c.readerKeys[i].key(); k.Present {
			st.ReaderKeys[tok] = k
		}
	}
	return st
}

// rwScript is the real script of call c, its keys and arguments, as the
// Locker passes them (redlock/rwlock.go); the rw scripts with the KEYS
// check in front.
func rwScript(c RWCall) (*scripts.Script, []string, []any) {
	base := []string{rwW, rwFence, rwReaders, rwIntent}
	switch c.Op {
	case "read":
		return scripts.CheckKeys(scripts.RWRead), append(base, readerKey(c.Token), rwMarker),
			[]any{c.Token, "owner", c.TTLms, "none", "", c.DelayMS}
	case "write":
		mode := "try"
		if c.Wait {
			mode = "wait"
		}
		return scripts.CheckKeys(scripts.RWWrite), append(base, rwMarker),
			[]any{c.Token, "owner", c.TTLms, "none", "", mode, c.ID, c.IntentMS, c.DelayMS}
	case "withdraw":
		return scripts.CheckKeys(scripts.RWWithdraw), []string{rwIntent}, []any{c.ID}
	case "inspect":
		keys := base
		for _, tok := range c.Named {
			keys = append(keys, readerKey(tok))
		}
		return scripts.CheckKeys(scripts.RWInspect), keys, nil
	case "renew-reader":
		// a reader's lease declares its readers index last (redlock/calls.go)
		return scripts.CheckKeys(scripts.Renew), []string{readerKey(c.Token), rwFence, rwMarker, rwReaders}, []any{c.Token, c.TTLms, ""}
	case "release-reader":
		rk := readerKey(c.Token)
		return scripts.CheckKeys(scripts.Release), []string{rk, rwFence, rk + ":queue", rk + ":queue:exp", rwReaders}, []any{c.Token, rwW + ":released", "", "quiet"}
	case "release-writer":
		return scripts.Release, []string{rwW, rwFence}, []any{c.Token, rwW + ":released", "", "quiet"}
	}
	panic(c.Op)
}

func (d *rwDriver) call(c RWCall) {
	t := d.t
	s, keys, args := rwScript(c)
	o := observe(d.harness, s, keys, args, func(p redis.Pipeliner) rwCmds { return readRW(p, d.ctx) },
		func(c rwCmds) RWState { return c.state(t) })
	id, before, realAfter, realReply := o.id, o.before, o.after, o.reply
	require.NotContains(t, realReply.Err, "undeclared key", "%s touched a key it does not declare", s.Name())
	d.calls++
	desc := fmt.Sprintf("%+v", c)
	tol := o.tol()
	var diffs []string
	for _, now := range rwNows(o.t0, o.t1, c, before, realAfter) {
		r, after := RWStep(before, c, now, id)
		diff := compare(r, after.State, realReply, realAfter.State, tol)
		if diff == "" {
			diff = compareRW(after, realAfter, tol)
		}
		if diff == "" {
			d.count(c, realReply, before, realAfter)
			d.note(desc + " -> " + realReply.String())
			return
		}
		diffs = append(diffs, fmt.Sprintf("at now=%d: %s", now, diff))
	}
	t.Fatalf("the script and the reference disagree on %s\nkeys before: %+v\nidentity: %+v\nreal reply %s, keys after %+v\n%s\nthe last steps:\n  %s",
		desc, before, id, realReply, realAfter, strings.Join(diffs, "\n"), strings.Join(d.trace, "\n  "))
}

// rwNows adds to nows (the TIME reads around the call, the time a
// counter's lease end was written from) the time a reader's end was
// written from.
func rwNows(t0, t1 int64, c RWCall, before, after RWState) []int64 {
	out := nows(t0, t1, Call{TTLms: c.TTLms}, before.State, after.State)
	if end, ok := after.Readers[c.Token]; ok && end != before.Readers[c.Token] && c.TTLms > 0 {
		if x := end*1000 - c.TTLms*1000; x >= t0-1000 && x <= t1 {
			out = append(out, x)
		}
	}
	return out
}

// compareRW compares what compare does not: the readers index, each
// reader's key, the intents.
func compareRW(ref, got RWState, tolMS int64) string {
	if d := compareScores("readers index", ref.Readers, got.Readers, tolMS); d != "" {
		return d
	}
	if (ref.ReadersExpMS == 0) != (got.ReadersExpMS == 0) || abs(ref.ReadersExpMS-got.ReadersExpMS) > tolMS {
		return fmt.Sprintf("readers index expires: reference %d, real %d", ref.ReadersExpMS, got.ReadersExpMS)
	}
	if d := compareScores("intents", ref.Intents, got.Intents, tolMS); d != "" {
		return d
	}
	if (ref.IntentExpMS == 0) != (got.IntentExpMS == 0) || abs(ref.IntentExpMS-got.IntentExpMS) > tolMS {
		return fmt.Sprintf("intents expire: reference %d, real %d", ref.IntentExpMS, got.IntentExpMS)
	}
	for _, tok := range rwReaderToks {
		r, g := ref.ReaderKeys[tok], got.ReaderKeys[tok]
		if r.Present != g.Present || r.Val != g.Val || abs(r.ExpMS-g.ExpMS) > tolMS {
			return fmt.Sprintf("reader key %s: reference %+v, real %+v", tok, r, g)
		}
	}
	return ""
}

func compareScores(name string, ref, got map[string]int64, tolMS int64) string {
	keys := func(m map[string]int64) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	if fmt.Sprint(keys(ref)) != fmt.Sprint(keys(got)) {
		return fmt.Sprintf("%s: reference %v, real %v", name, ref, got)
	}
	for k, v := range ref {
		if abs(v-got[k]) > tolMS {
			return fmt.Sprintf("%s: reference %v, real %v", name, ref, got)
		}
	}
	return ""
}

// count names what call c answered, so that the log shows which paths ran.
func (d *rwDriver) count(c RWCall, r Reply, before, after RWState) {
	if len(after.Readers) < len(before.Readers) && c.Op != "release-reader" {
		d.outcomes["swept"]++
	}
	o := rwOutcome(c, r)
	d.outcomes[o]++
	// The paths of the readers' end in the counter (counter.lua C5, c_end).
	_, hadEntry := before.Readers[c.Token]
	switch {
	case o == "read granted" && len(before.Readers) > 0 && strings.Contains(before.Fence.Val, " "):
		d.outcomes["read granted beside readers"]++
	case o == "release-reader released" && !hadEntry:
		d.outcomes["release-reader index gone"]++
	case o == "release-reader released" && len(after.Readers) > 0:
		d.outcomes["release-reader others left"]++
	}
}

// rwOutcome names what call c answered.
func rwOutcome(c RWCall, r Reply) string {
	var o string
	switch {
	case r.Err != "":
		o = c.Op + " error " + strings.Fields(r.Err)[0]
	case r.Int != nil:
		o = fmt.Sprintf("%s %d", c.Op, *r.Int)
	case c.Op == "inspect":
		o = "inspect"
		if len(r.Array) > 4 {
			o = map[bool]string{true: "inspect named", false: "inspect readers"}[len(c.Named) > 0]
		}
	case r.Array[0] == "sitout":
		o = fmt.Sprintf("%s 3 %v", c.Op, r.Array[2])
	case r.Array[0] == "granted" && r.Array[6] != int64(0):
		o = c.Op + " held"
	case r.Array[0] == "held":
		o = c.Op + " writer"
	default:
		o = fmt.Sprintf("%s %v", c.Op, r.Array[0])
	}
	return o
}
