package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClipKeepsWhatToDo: a message longer than maxMessage loses its
// middle, never its head (what failed) or its tail (what to do).
func TestClipKeepsWhatToDo(t *testing.T) {
	short := "node a: refused"
	require.Equal(t, short, clip(short))
	long := "\"r\" is unavailable: " + strings.Repeat("node x (its marker key is missing); ", 60) + "retry after that, or wait for it with --wait DURATION"
	got := clip(long)
	require.LessOrEqual(t, len(got), maxMessage)
	require.True(t, strings.HasPrefix(got, "\"r\" is unavailable: "), got)
	require.True(t, strings.HasSuffix(got, "retry after that, or wait for it with --wait DURATION"), got)
	require.Contains(t, got, " ... ")
}
