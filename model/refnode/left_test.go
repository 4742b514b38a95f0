package refnode

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestARetriedGrantInItsLastMillisecondReportsOneMillisecond mirrors
// scripts' TestARetriedGrantInItsLastMillisecondIsNotANewGrant: the token
// that holds the lock, calling again when PTTL says 0, hears 1 ms left
// (lock.lua, l_left), never the 0 of a new grant.
func TestARetriedGrantInItsLastMillisecondReportsOneMillisecond(t *testing.T) {
	id := Ident{ReplID: "r1"}
	c := Call{Op: "acquire", Token: "tok", TTLms: 1000, DelayMS: -1}
	const t0 = int64(1_000_000_000) // µs on the node's clock
	r, st := Step(State{}, c, t0, id)
	require.Equal(t, "granted", r.Array[0], "%v", r)
	require.EqualValues(t, 0, r.Array[2])

	end := st.Lock.ExpMS * 1000 // the lock's last millisecond: PTTL 0
	r, _ = Step(st, c, end, id)
	require.Equal(t, "retried", r.Array[0], "%v", r)
	require.EqualValues(t, 1, r.Array[2], "%v", r)

	r, _ = Step(st, c, end-2000, id) // two ms before: PTTL as it is
	require.EqualValues(t, 2, r.Array[2], "%v", r)
}
