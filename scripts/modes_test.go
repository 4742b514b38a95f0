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
