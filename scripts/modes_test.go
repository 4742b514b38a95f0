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
// announcement, a rejoin delay, a place's hand-over fields: queue.lua,
// q_place), is checked before anything is read: a wrong one is an ERR
// saying which, and nothing is written.
func TestScriptsRefuseAModeOrAModesValueTheyDoNotKnow(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	ctx := testutil.Context(t)
	keys := []string{"p{r}", "p{r}:fence", "p{r}:queue", "p{r}:queue:exp", "p~trust:db0"}
	// acquire's ARGV: token, owner, TTL, floor mode, floor, queue mode,
	// place id, ticket mode, ticket or time, place TTL, the place's
	// hand-over mode, hand-over TTL, channel, token and owner, rejoin
	// delay.
	acq := func(floorMode, floor, queueMode, place, ticketMode string, ticket, ttl any) []any {
		return []any{"tok", "me", 1000, floorMode, floor, queueMode, place, ticketMode, ticket, ttl, "handover", 5000, "-", "ptok", "w", -1}
	}
	// acqPlace is a queued acquire whose place has the given id and
	// hand-over fields.
	acqPlace := func(id, mode string, handTTL any, ch, token, owner string) []any {
		return []any{"tok", "me", 1000, "none", "", "queue", id, "agreed", 5, 1000, mode, handTTL, ch, token, owner, -1}
	}
	// release's ARGV: token, channel, announcement, announce mode,
	// hand-over mode, delay, place mode, place id, then the place's
	// hand-over mode and fields (place, when given).
	rel := func(announce, id, handover, delay, placed, place string, fields ...any) []any {
		return append([]any{"tok", "p{r}:released", id, announce, handover, delay, placed, place}, fields...)
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
		{"acquire: an unknown place hand-over mode", scripts.Acquire, acqPlace("w1", "handed", 5000, "-", "ptok", "w"), "acquire: place hand-over mode handed is neither handover nor none"},
		{"acquire: a place id with a space", scripts.Acquire, acqPlace("w 1", "none", "", "", "", ""), "acquire: the place needs an id without spaces"},
		{"acquire: a hand-over TTL of 0", scripts.Acquire, acqPlace("w1", "handover", 0, "-", "ptok", "w"), "acquire: place hand-over mode handover needs a ttl in ms above 0"},
		{"acquire: a negative hand-over TTL", scripts.Acquire, acqPlace("w1", "handover", -5, "-", "ptok", "w"), "needs a ttl in ms above 0"},
		{"acquire: a hand-over TTL that is no integer", scripts.Acquire, acqPlace("w1", "handover", "1.5", "-", "ptok", "w"), "needs a ttl in ms above 0"},
		{"acquire: a hand-over TTL that is missing", scripts.Acquire, acqPlace("w1", "handover", "", "-", "ptok", "w"), "needs a ttl in ms above 0"},
		{"acquire: a channel with a space", scripts.Acquire, acqPlace("w1", "handover", 5000, "p{r} x", "ptok", "w"), "acquire: place hand-over mode handover needs a channel without spaces"},
		{"acquire: no channel", scripts.Acquire, acqPlace("w1", "handover", 5000, "", "ptok", "w"), "needs a channel without spaces"},
		{"acquire: a place token with a space", scripts.Acquire, acqPlace("w1", "handover", 5000, "-", "p tok", "w"), "acquire: place hand-over mode handover needs a token without spaces"},
		{"acquire: no place token", scripts.Acquire, acqPlace("w1", "handover", 5000, "-", "", "w"), "needs a token without spaces"},
		{"acquire: no place owner", scripts.Acquire, acqPlace("w1", "handover", 5000, "-", "ptok", ""), "acquire: place hand-over mode handover needs an owner"},
		{"release: an unknown place hand-over mode", scripts.Release, rel("quiet", "", "none", "", "place", "w1", "give", 5000, "-", "ptok", "w"), "release: place hand-over mode give is neither handover nor none"},
		{"release: a place id with a space", scripts.Release, rel("quiet", "", "none", "", "place", "w 1", "none"), "release: the place needs an id without spaces"},
		{"release: a hand-over TTL that is no number", scripts.Release, rel("quiet", "", "none", "", "place", "w1", "handover", "x", "-", "ptok", "w"), "release: place hand-over mode handover needs a ttl in ms above 0"},
		{"release: a place token with a space", scripts.Release, rel("quiet", "", "none", "", "place", "w1", "handover", 5000, "-", "p tok", "w"), "release: place hand-over mode handover needs a token without spaces"},
		{"release: no place owner", scripts.Release, rel("quiet", "", "none", "", "place", "w1", "handover", 5000, "-", "ptok", ""), "release: place hand-over mode handover needs an owner"},
		{"leave: an unknown place hand-over mode", scripts.Leave, []any{"w1", "p{r}:released", "id", "give", "hand", 5000, "-", "ptok", "w"}, "leave: place hand-over mode hand is neither handover nor none"},
		{"leave: a place id with a space", scripts.Leave, []any{"w 1", "p{r}:released", "id", "give", "none"}, "leave: the place needs an id without spaces"},
		{"leave: no place id", scripts.Leave, []any{"", "p{r}:released", "id", "leave"}, "leave: the place needs an id without spaces"},
		{"leave: a hand-over TTL of 0", scripts.Leave, []any{"w1", "p{r}:released", "id", "give", "handover", 0, "-", "ptok", "w"}, "leave: place hand-over mode handover needs a ttl in ms above 0"},
		{"leave: a channel with a space", scripts.Leave, []any{"w1", "p{r}:released", "id", "give", "handover", 5000, "a b", "ptok", "w"}, "leave: place hand-over mode handover needs a channel without spaces"},
		{"leave: no place owner", scripts.Leave, []any{"w1", "p{r}:released", "id", "give", "handover", 5000, "-", "ptok", ""}, "leave: place hand-over mode handover needs an owner"},
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

// TestAPlaceIsStoredAsItWasPacked: the scripts build a place's member
// from its named fields (queue.lua, q_place) in the format the nodes
// have always stored (q_member): "<id> <ttl ms> <channel> <token>
// <owner>" for a place that may be handed the lock (an owner may hold
// spaces), the id alone for one that may not; leave and release find the
// place from the same fields.
func TestAPlaceIsStoredAsItWasPacked(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	ctx := testutil.Context(t)
	keys := []string{"p{r}", "p{r}:fence", "p{r}:queue", "p{r}:queue:exp", "p~trust:db0"}
	held, err := c.Eval(ctx, scripts.Acquire.Source(), keys, "hold", "me", 60000, "none", "", "alone", "", "", 0, 0, "none", "", "", "", "", -1).Slice()
	require.NoError(t, err)
	require.Equal(t, "granted", held[0])
	queue := func(id, mode string, handTTL any, ch, token, owner string) {
		t.Helper()
		reply, err := c.Eval(ctx, scripts.Acquire.Source(), keys, "tok-"+id, "me", 60000, "none", "", "queue", id, "propose", 0, 60000,
			mode, handTTL, ch, token, owner, -1).Slice()
		require.NoError(t, err)
		require.Equal(t, "held", reply[0], "queued: %v", reply)
	}
	queue("w1", "handover", 30000, "-", "ptok1", "an owner")
	queue("w2", "handover", 30000, "p{~inbox}:released", "ptok2", "w")
	queue("w3", "none", "", "", "", "")
	members, err := m.ZMembers("p{r}:queue")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"w1 30000 - ptok1 an owner", "w2 30000 p{~inbox}:released ptok2 w", "w3"}, members)

	left, err := c.Eval(ctx, scripts.Leave.Source(), keys[:4], "w1", "p{r}:released", "id", "leave", "handover", 30000, "-", "ptok1", "an owner").Int()
	require.NoError(t, err)
	require.Equal(t, 1, left, "w1 was queued")
	left, err = c.Eval(ctx, scripts.Leave.Source(), keys[:4], "w2", "p{r}:released", "id", "leave", "handover", 30000, "-", "ptok2", "w").Int()
	require.NoError(t, err)
	require.Equal(t, 0, left, "another channel is another place")
	_, err = c.Eval(ctx, scripts.Release.Source(), keys[:4], "hold", "p{r}:released", "", "quiet", "none", "", "place", "w3", "none").Slice()
	require.NoError(t, err)
	members, err = m.ZMembers("p{r}:queue")
	require.NoError(t, err)
	require.Equal(t, []string{"w2 30000 p{~inbox}:released ptok2 w"}, members, "w1 left, w3 removed by the release")
}
