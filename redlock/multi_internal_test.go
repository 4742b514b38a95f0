package redlock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
)

// TestKeySlotIsRedisClusters: the hash slots CLUSTER KEYSLOT answers.
func TestKeySlotIsRedisClusters(t *testing.T) {
	for key, slot := range map[string]int{
		"foo":                12182,
		"bar":                5061,
		"somekey":            11058,
		"{foo}.following":    12182,
		"redlock:{bar}":      5061,
		"a{}b":               keySlot("a{}b"), // empty tag: the whole key
		"redlock:{foo}x}:rw": 12182,
	} {
		require.Equal(t, slot, keySlot(key), key)
	}
	require.NotEqual(t, keySlot("{}foo"), keySlot("foo"))
}

// TestEverySlotHasATag: the marker of a sharded node's slot is named with
// a tag of that slot (docs/design.md §6.2), for every slot.
func TestEverySlotHasATag(t *testing.T) {
	tags := slotTags()
	require.Len(t, tags, numSlots)
	for s, tag := range tags {
		require.NotEmpty(t, tag, "slot %d", s)
		require.Equal(t, s, keySlot("redlock:{"+tag+"}~trust"), "slot %d", s)
	}
}

// TestParseAllGrant: acquire_all's reply shapes, a grant (one counter and
// TTL pair per lock), a refusal naming the held lock, with or without a
// queue, and every malformed reply rejected with errBadReply.
func TestParseAllGrant(t *testing.T) {
	leases := []*Lease{{resource: "a"}, {resource: "b"}, {resource: "c"}}
	group := []int{2, 0} // the call asked for c, then a
	g, err := parseAllGrant(vrep("granted", 0, "", 0, 0, "7", int64(0), "9", int64(1500)), leases, group)
	require.NoError(t, err)
	require.True(t, g.ok)
	require.Equal(t, []fencing.Token{7, 9}, g.counters)
	require.Equal(t, 1500*time.Millisecond, g.left, "the shortest remainder of a lock granted over one")

	g, err = parseAllGrant(vrep("held", 800, "", 2, 0), leases, group)
	require.NoError(t, err)
	require.False(t, g.ok)
	require.Equal(t, 800*time.Millisecond, g.holderTTL)
	require.Equal(t, `"a" is held`, g.reason, "k counts in the group's order, from 1")

	g, err = parseAllGrant(vrep("behind", 0, "", 1, 0), leases, group)
	require.NoError(t, err)
	require.Equal(t, `"c": `+queuedReason, g.reason)

	for _, bad := range []any{
		nil, "x", []any{"granted"},
		vrep("granted", 0, "", 0, 0, "7", int64(0)),                 // one pair for two locks
		vrep("granted", 0, "", 0, 0, "7", int64(0), "x", int64(0)),  // not a counter
		vrep("granted", 0, "", 0, 0, "7", int64(0), "9", int64(-1)), // negative TTL
		vrep("held", 800, "", 0, 0),                                 // no lock
		vrep("held", 800, "", 3, 0),                                 // lock past the group
		vrep("behind", 40, "", 1, 0),                                // a free lock with a TTL
		vrep("held", 800, "", 1, 0, int64(4)),                       // too long
		vrep("readers", 800, "", 1, 2),                              // not acquire_all's
		[]any{int64(0), int64(800), int64(2)},                       // the old shape
	} {
		g, err := parseAllGrant(bad, leases, group)
		require.ErrorIs(t, err, errBadReply, "%#v", bad)
		require.Equal(t, multiGrant{}, g)
	}
}

// TestMultiGrantMerge: a split call's grants land at their groups'
// positions, and the shortest remainder wins.
func TestMultiGrantMerge(t *testing.T) {
	out := multiGrant{ok: true, counters: make([]fencing.Token, 3)}
	out.merge(multiGrant{ok: true, counters: []fencing.Token{5}, left: time.Second}, []int{1})
	out.merge(multiGrant{ok: true, counters: []fencing.Token{6, 7}}, []int{2, 0})
	require.Equal(t, []fencing.Token{7, 5, 6}, out.counters)
	require.Equal(t, time.Second, out.left)
	require.Equal(t, []int{0, 1, 2}, allPositions(3))
}
