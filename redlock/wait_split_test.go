package redlock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSplitDelayDoublesWithEachSplit: the random wait after a split vote
// is drawn below twice the attempt's duration, and that bound doubles for
// each split vote in a row before it (up to 2^16 times). After three
// splits of a 10 ms attempt the draws reach past 60 ms, three times what
// an attempt with no split before it could wait (below 20 ms, and a
// little more for the time the draws themselves take); no draw passes its
// bound.
func TestSplitDelayDoublesWithEachSplit(t *testing.T) {
	const took = 10 * time.Millisecond
	var wb waitBase
	draws := func(splits int) (largest, bound time.Duration) {
		wb.splits = splits
		start := time.Now().Add(-took)
		for range 200 {
			largest = max(largest, wb.splitDelay(start))
		}
		return largest, 2 * time.Since(start) << splits
	}
	largest, bound := draws(0)
	require.LessOrEqual(t, largest, bound)
	largest, bound = draws(3)
	require.LessOrEqual(t, largest, bound)
	require.Greater(t, largest, 3*2*took, "three splits in a row widen the draw eightfold")
	wb.splits = 40
	require.LessOrEqual(t, wb.splitDelay(time.Now().Add(-took)), 2*(took+time.Second)<<16, "the doubling stops at 2^16")
}
