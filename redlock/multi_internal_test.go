package redlock

import (
	"testing"

	"github.com/stretchr/testify/require"
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
