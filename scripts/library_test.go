package scripts_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// TestLibraryNamesEveryScript: the library has one function per script,
// named after the library and the script; its name is a digest of its
// text, the same at every build of the same scripts and another for
// other scripts; a script it was not built from has no function.
func TestLibraryNamesEveryScript(t *testing.T) {
	lib := scripts.Functions
	require.Regexp(t, regexp.MustCompile(`^redlock_[0-9a-f]{12}$`), lib.Name())
	require.True(t, strings.HasPrefix(lib.Source(), "#!lua name="+lib.Name()+"\n"))
	names := map[string]bool{}
	for _, s := range scripts.All {
		fn, ok := lib.Function(s)
		require.True(t, ok, s.Name())
		require.Equal(t, lib.Name()+"_"+s.Name(), fn)
		require.Contains(t, lib.Source(), "function_name = '"+fn+"'")
		names[fn] = true
	}
	require.Len(t, names, len(scripts.All))
	if scripts.CheckKeys(scripts.Acquire) == scripts.Acquire { // the build tag redlock_checkkeys
		for _, s := range scripts.All {
			require.Contains(t, lib.Source(), s.Source(), "%s: its whole source, the KEYS check in front", s.Name())
		}
	}
	_, ok := lib.Function(scripts.New("incr", "return 1"))
	require.False(t, ok)

	again, err := scripts.NewLibrary(scripts.All)
	require.NoError(t, err)
	require.Equal(t, lib.Name(), again.Name())
	require.Equal(t, lib.Source(), again.Source())
	fewer, err := scripts.NewLibrary(scripts.All[:3])
	require.NoError(t, err)
	require.NotEqual(t, lib.Name(), fewer.Name(), "other scripts, another version")

	_, err = scripts.NewLibrary([]*scripts.Script{scripts.Acquire, scripts.Acquire})
	require.ErrorContains(t, err, "given twice")
	_, err = scripts.NewLibrary([]*scripts.Script{scripts.New("bad-name", "return 1")})
	require.Error(t, err)
	_, err = scripts.NewLibrary([]*scripts.Script{scripts.New("odd", "local function l_get(k) return k end\n\nreturn l_get(1)")})
	require.Error(t, err, "not its code after the helpers it uses")
}

// TestLibraryRunsLikeEval loads the library on a real redis-server (once:
// a second load of the same version answers "already exists", and a
// library of other scripts loads beside it) and runs fence through FCALL
// and EVAL from the same keys: the same replies and keys. Then a fence
// without the marker key, after one with it: a call starts from the
// helpers' first values (counter.lua's c_mark), so the marker the earlier
// call read is not written again, as with EVAL.
func TestLibraryRunsLikeEval(t *testing.T) {
	srv := testutil.StartRedisServer(t)
	c := srv.Client()
	ctx := testutil.Context(t)
	lib := scripts.Functions
	require.NoError(t, c.FunctionLoad(ctx, lib.Source()).Err())
	require.ErrorContains(t, c.FunctionLoad(ctx, lib.Source()).Err(), "already exists")
	other, err := scripts.NewLibrary(scripts.All[:3])
	require.NoError(t, err)
	require.NoError(t, c.FunctionLoad(ctx, other.Source()).Err(), "two versions side by side")
	id, err := testutil.ReplID(ctx, srv)
	require.NoError(t, err)

	const marker = "lib~trust:db0"
	type run func(s *scripts.Script, keys []string, args ...any) (any, error)
	byFcall := func(s *scripts.Script, keys []string, args ...any) (any, error) {
		fn, _ := lib.Function(s)
		return c.FCall(ctx, fn, keys, args...).Result()
	}
	byEval := func(s *scripts.Script, keys []string, args ...any) (any, error) {
		return c.Eval(ctx, s.Source(), keys, args...).Result()
	}
	state := func() []any {
		vals, err := c.MGet(ctx, "lib{a}", "lib{a}:fence", "lib{b}", "lib{b}:fence", marker).Result()
		require.NoError(t, err)
		for _, i := range []int{1, 3} { // the counter, not its lease's end (the server's clock)
			vals[i] = strings.Fields(vals[i].(string))[0]
		}
		return vals
	}
	replay := func(call run) ([]any, []any) {
		require.NoError(t, c.FlushDB(ctx).Err())
		require.NoError(t, c.MSet(ctx, "lib{a}", "tok o", "lib{a}:fence", "5", "lib{b}", "tok o",
			"lib{b}:fence", "8", marker, "v4 "+id+" 1 1 -").Err())
		var replies []any
		for _, step := range []struct {
			keys []string
			f    string
		}{
			{[]string{"lib{a}", "lib{a}:fence", marker}, "7"},
			{[]string{"lib{b}", "lib{b}:fence"}, "9"},
			{[]string{"lib{a}", "lib{a}:fence", marker}, "6"},
		} {
			v, err := call(scripts.Fence, step.keys, "tok", step.f, "")
			require.NoError(t, err)
			replies = append(replies, v)
		}
		v, err := call(scripts.Fence, []string{"lib{a}", "lib{a}:fence"}, "other", "10", "")
		require.NoError(t, err)
		return append(replies, v), state()
	}
	fReplies, fState := replay(byFcall)
	eReplies, eState := replay(byEval)
	require.Equal(t, eReplies, fReplies)
	require.Equal(t, eState, fState)
	require.Equal(t, []any{int64(1), int64(1), int64(1), int64(0)}, fReplies)
	require.Equal(t, "v4 "+id+" 1 1 - 7", fState[4], "the marker keeps the first call's value only")
	require.Equal(t, "9", fState[3])
}

// TestLibraryLoadsOnlyWithFunctions: a server without Redis Functions
// (miniredis here) refuses FUNCTION LOAD and FCALL as unknown commands,
// which is what a transport falls back to EVALSHA on.
func TestLibraryLoadsOnlyWithFunctions(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	ctx := testutil.Context(t)
	require.ErrorContains(t, c.FunctionLoad(ctx, scripts.Functions.Source()).Err(), "unknown command")
	fn, _ := scripts.Functions.Function(scripts.Inspect)
	require.ErrorContains(t, c.FCall(ctx, fn, []string{"a", "b"}).Err(), "unknown command")
}

// BenchmarkNewLibrary is the cost of building the scripts' library, which
// every process that imports the package pays once at init (Functions).
func BenchmarkNewLibrary(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		if _, err := scripts.NewLibrary(scripts.All); err != nil {
			b.Fatal(err)
		}
	}
}
