package scripts_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// TestARetriedGrantInItsLastMillisecondIsNotANewGrant: a granting script
// called again by the token that already holds the lock (a client-side
// retry of a call that was applied) answers what the lock has left. In the
// lock's last millisecond Redis's PTTL is 0, which is also the time left of
// a new grant, whose validity the client counts from the whole lease; so
// the scripts answer at least 1 (lock.lua, l_left), and the client counts
// the lease as almost over instead of as new.
func TestARetriedGrantInItsLastMillisecondIsNotANewGrant(t *testing.T) {
	const tok = "tok"
	base := []string{"p{r}", "p{r}:fence", "p{r}:queue", "p{r}:queue:exp"}
	marker := "p~trust:db0"
	for _, tc := range []struct {
		name string
		s    *scripts.Script
		keys []string
		held string // the key whose PTTL the reply reports
		args []any
		left func(reply []any) any
	}{
		{"acquire", scripts.Acquire, append(base[:4:4], marker), "p{r}",
			[]any{tok, "me", 1000, "none", "", "alone", "", "", 0, 0, "none", "", "", "", "", -1},
			func(r []any) any { return r[2] }},
		{"acquire_all", scripts.AcquireAll, append(base[:4:4], marker), "p{r}",
			[]any{"me", 1000, "none", "", tok, -1},
			func(r []any) any { return r[6] }},
		{"rw_write", scripts.RWWrite, append(base[:4:4], marker), "p{r}",
			[]any{tok, "me", 1000, "none", "", "try", "", 0, -1},
			func(r []any) any { return r[6] }},
		{"rw_read", scripts.RWRead, append(base[:4:4], "p{r}:reader:"+tok, marker), "p{r}:reader:" + tok,
			[]any{tok, "me", 1000, "none", "", -1},
			func(r []any) any { return r[6] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := miniredis.RunT(t)
			c := redis.NewClient(&redis.Options{Addr: m.Addr()})
			t.Cleanup(func() { _ = c.Close() })
			ctx := testutil.Context(t)

			first, err := c.Eval(ctx, tc.s.Source(), tc.keys, tc.args...).Slice()
			require.NoError(t, err)
			require.Equal(t, "granted", first[0], "the first call grants: %v", first)
			require.EqualValues(t, 0, tc.left(first), "a new grant has no time left to report: %v", first)

			m.SetTTL(tc.held, 500*time.Microsecond) // its last millisecond: PTTL says 0
			require.EqualValues(t, 0, c.PTTL(ctx, tc.held).Val().Milliseconds())

			again, err := c.Eval(ctx, tc.s.Source(), tc.keys, tc.args...).Slice()
			require.NoError(t, err)
			require.Contains(t, []any{"granted", "retried"}, again[0], "the token already holds it: %v", again)
			require.EqualValues(t, 1, tc.left(again), "the retried call reports the lease as almost over, not as new: %v", again)
		})
	}
}
