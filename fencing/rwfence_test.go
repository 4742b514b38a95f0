package fencing_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
)

// TestRWFence: readers' tokens are accepted in any order among themselves
// while no later writer was seen; a writer must not be below any token
// seen, reads included; a reader below the last writer is stale.
func TestRWFence(t *testing.T) {
	var f fencing.RWFence
	steps := []struct {
		name  string
		write bool
		token fencing.Token
		stale bool
	}{
		{"a writer", true, 10, false},
		{"the same writer again", true, 10, false},
		{"a reader after it", false, 12, false},
		{"a concurrent reader with a lower token", false, 11, false},
		{"the stale writer, paused past its lease", true, 10, true},
		{"a reader from before the writer", false, 9, true},
		{"a new writer", true, 13, false},
		{"a reader from before the new writer", false, 12, true},
		{"a reader after the new writer", false, 14, false},
		{"a writer below that reader", true, 13, true},
	}
	for _, s := range steps {
		var err error
		if s.write {
			err = f.CheckWrite("doc", s.token)
		} else {
			err = f.CheckRead("doc", s.token)
		}
		if s.stale {
			var se *fencing.StaleError
			require.True(t, errors.As(err, &se), "%s: %v", s.name, err)
		} else {
			require.NoError(t, err, s.name)
		}
	}
	require.ErrorIs(t, f.CheckRead("doc", 0), fencing.ErrInvalidToken)
	require.ErrorIs(t, f.CheckWrite("other", 0), fencing.ErrInvalidToken)
	require.NoError(t, f.CheckRead("other", 1), "keys are independent")
}
