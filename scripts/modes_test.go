package scripts_test

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// TestGrantingScriptsRefuseAnUnknownFloorMode: each granting script names
// its floor mode ("floor" or "none"); another name is an ERR that says
// which script and which mode, before anything is read or written.
func TestGrantingScriptsRefuseAnUnknownFloorMode(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	ctx := testutil.Context(t)
	keys := []string{"p{r}", "p{r}:fence", "p{r}:queue", "p{r}:queue:exp", "p{r}:rw", "p~trust:db0"}
	for _, tc := range []struct {
		s    *scripts.Script
		args []any // the floor mode "bogus" in its place
	}{
		{scripts.Acquire, []any{"tok", "me", 1000, "bogus", ""}},
		{scripts.AcquireAll, []any{"tok", 1000, "bogus", ""}},
		{scripts.RWWrite, []any{"tok", "me", 1000, "bogus", "", "try"}},
		{scripts.RWRead, []any{"tok", "me", 1000, "bogus", ""}},
	} {
		t.Run(tc.s.Name(), func(t *testing.T) {
			err := c.Eval(ctx, tc.s.Source(), keys, tc.args...).Err()
			require.ErrorContains(t, err, "redlock "+tc.s.Name()+": floor mode bogus is neither floor nor none")
			require.Empty(t, m.Keys(), "nothing written")
		})
	}
}

// TestScriptsRefuseAModeOrAModesValueTheyDoNotKnow: every named mode of
// acquire, release and leave, and each value a mode needs (a floor that is
// a counter, a place, a ticket above 0, a time to keep the place, an
// announcement, a rejoin delay), is checked before anything is read: a
// wrong one is an ERR saying which, and nothing is written.
func TestScriptsRefuseAModeOrAModesValueTheyDoNotKnow(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	ctx := testutil.Context(t)
	keys := []string{"p{r}", "p{r}:fence", "p{r}:queue", "p{r}:queue:exp", "p~trust:db0"}
	// acquire's ARGV: token, owner, TTL, floor mode, floor, queue mode,
	// place, ticket mode, ticket or time, place TTL, rejoin delay.
	acq := func(floorMode, floor, queueMode, place, ticketMode string, ticket, ttl any) []any {
		return []any{"tok", "me", 1000, floorMode, floor, queueMode, place, ticketMode, ticket, ttl, -1}
	}
	// release's ARGV: token, channel, announcement, announce mode,
	// hand-over mode, delay, place mode, place.
	rel := func(announce, id, handover, delay, placed, place string) []any {
		return []any{"tok", "p{r}:released", id, announce, handover, delay, placed, place}
	}
	for _, tc := range []struct {
		name string
		s    *scripts.Script
		args []any
		err  string
	}{
		{"acquire: a floor that is not a counter", scripts.Acquire, acq("floor", "zzz", "alone", "", "", 0, 0), "acquire: floor zzz is not a counter"},
		{"acquire: an empty floor", scripts.Acquire, acq("floor", "", "alone", "", "", 0, 0), "acquire: floor  is not a counter"},
		{"acquire: a floor above 2^63-1", scripts.Acquire, acq("floor", "9223372036854775808", "alone", "", "", 0, 0), "is not a counter"},
		{"acquire_all: a floor that is not a counter", scripts.AcquireAll, []any{"me", 1000, "floor", "-1", "tok", -1}, "acquire_all: floor -1 is not a counter"},
		{"rw_write: a floor that is not a counter", scripts.RWWrite, []any{"tok", "me", 1000, "floor", "01", "try", "", 0, -1}, "rw_write: floor 01 is not a counter"},
		{"rw_read: a floor that is not a counter", scripts.RWRead, []any{"tok", "me", 1000, "floor", "1.5", -1}, "rw_read: floor 1.5 is not a counter"},
		{"acquire: an unknown queue mode", scripts.Acquire, acq("none", "", "line", "", "", 0, 0), "acquire: queue mode line is neither queue nor alone"},
		{"acquire: an unknown ticket mode", scripts.Acquire, acq("none", "", "queue", "w1", "mine", 5, 1000), "acquire: ticket mode mine is neither agreed nor propose"},
		{"acquire: a queue without a place", scripts.Acquire, acq("none", "", "queue", "", "agreed", 5, 1000), "acquire: queue mode queue needs a place"},
		{"acquire: an agreed ticket of 0", scripts.Acquire, acq("none", "", "queue", "w1", "agreed", 0, 1000), "needs a ticket above 0 (agreed)"},
		{"acquire: an agreed ticket that is no number", scripts.Acquire, acq("none", "", "queue", "w1", "agreed", "x", 1000), "needs a ticket above 0 (agreed)"},
		{"acquire: a negative proposed time", scripts.Acquire, acq("none", "", "queue", "w1", "propose", -3, 1000), "or a time not below 0 (propose)"},
		{"acquire: a place that lasts 0 ms", scripts.Acquire, acq("none", "", "queue", "w1", "agreed", 5, 0), "needs how long the place lasts"},
		{"release: an unknown announce mode", scripts.Release, rel("shout", "id", "none", "", "none", ""), "release: announce mode shout is neither announce nor quiet"},
		{"release: an unknown hand-over mode", scripts.Release, rel("quiet", "", "give", "", "none", ""), "release: hand-over mode give is neither handover nor none"},
		{"release: an unknown place mode", scripts.Release, rel("quiet", "", "none", "", "seat", ""), "release: place mode seat is neither place nor none"},
		{"release: an announcement without its id", scripts.Release, rel("announce", "", "none", "", "none", ""), "release: mode announce needs an announcement"},
		{"release: a place mode without a place", scripts.Release, rel("quiet", "", "none", "", "place", ""), "release: mode place needs a place"},
		{"release: a hand-over without a delay", scripts.Release, rel("announce", "id", "handover", "", "none", ""), "release: mode handover needs a rejoin delay"},
		{"leave: an unknown mode", scripts.Leave, []any{"w1", "p{r}:released", "id", "drop"}, "leave: mode drop is neither give nor leave"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m.FlushAll() // what an earlier case wrote (on scripts without the check)
			k := keys
			if tc.s == scripts.Leave {
				k = keys[:4]
			}
			err := c.Eval(ctx, tc.s.Source(), k, tc.args...).Err()
			require.ErrorContains(t, err, "ERR redlock ")
			require.ErrorContains(t, err, tc.err)
			require.Empty(t, m.Keys(), "nothing written")
		})
	}
}
