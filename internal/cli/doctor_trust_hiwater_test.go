package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseMarkerWithHighWater: since Safety v4.1 a marker ends with the
// db's high-water (scripts/counter.lua, C6) once a value was counted
// under it; doctor reads it as the same marker, and still refuses a last
// field that is not a number.
func TestParseMarkerWithHighWater(t *testing.T) {
	got, err := parseMarker("v4 abc 1796364035551001 1796364035551001 - 1796364035000007")
	require.NoError(t, err)
	require.Equal(t, marker{replid: "abc", from: 1796364035551001, seen: 1796364035551001, why: "-"}, got)
	for _, in := range []string{"v4 abc 0 1 - 7 8", "v4 abc 0 1 - x", "v4 abc 0 1 -  7", "v4 abc 0 1 - 7 "} {
		_, err := parseMarker(in)
		require.ErrorContains(t, err, "is not a marker", "%q", in)
	}
}
