package redlock

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKeySlotIsRedisClusters: the hash slots CLUSTER KEYSLOT answers.
func TestKeySlotIsRedisClusters(t *testing.T) {
	for key, slot := range map[string]uint16{
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
