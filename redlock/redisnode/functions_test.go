package redisnode_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// lockCycles takes and releases resource n times through a Locker over
// node, each time checking that the lock is held on the server.
func lockCycles(t *testing.T, node redlock.Node, s *testutil.RedisServer, resource string, n int) {
	t.Helper()
	ctx := testutil.Context(t)
	l := newLocker(t, []redlock.Node{node}, redlock.Config{})
	for range n {
		lease, err := testutil.TryAcquire(t, l, resource) // the first call loads the scripts: slow on a busy machine
		require.NoError(t, err)
		if s != nil {
			v, err := s.Do(ctx, "GET", l.Key(resource)).Text()
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(v, lease.Token()+" "), "the lock holds the lease's token")
		}
		_, err = l.Renew(ctx, resource, lease.Token())
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
	}
}

// TestScriptsRunAsFunctionsOnRedis7: on redis-server 7 a node loads the
// scripts' library once, on its first call, and then runs every script as
// an FCALL: the server counts no EVALSHA or EVAL at all.
func TestScriptsRunAsFunctionsOnRedis7(t *testing.T) {
	s := testutil.StartRedisServer(t)
	node := s.Node().(*redisnode.Node)
	require.True(t, node.UsesFunctions())
	lockCycles(t, node, s, "f", 5)
	calls := testutil.CommandCalls(t, s)
	require.Equal(t, 1, calls["function|load"])
	require.GreaterOrEqual(t, calls["fcall"], 5*3, "acquire, renew and release each time")
	require.Zero(t, calls["evalsha"]+calls["eval"])
	fcalls, loads, fallbacks := redisnode.FunctionCounts(node)
	require.Equal(t, int64(calls["fcall"]), fcalls)
	require.Equal(t, int64(1), loads)
	require.Zero(t, fallbacks)
	require.True(t, node.UsesFunctions())
	libs, err := s.Client().FunctionList(testutil.Context(t), redis.FunctionListQuery{}).Result()
	require.NoError(t, err)
	require.Len(t, libs, 1)
	require.Equal(t, scripts.Functions.Name(), libs[0].Name)
	require.Len(t, libs[0].Functions, len(scripts.All))
}

// TestFunctionsComeBackAfterAFlush: FUNCTION FLUSH (or a restart without
// the library in its data) makes the next call load the library again, in
// the same round trip as its FCALL; concurrent callers, whose calls go out
// in pipelines, all succeed across the library's deletion. A library of another version
// on the server is left alone and does not stand in for this one.
func TestFunctionsComeBackAfterAFlush(t *testing.T) {
	s := testutil.StartRedisServer(t)
	ctx := testutil.Context(t)
	other, err := scripts.NewLibrary(scripts.All[:4])
	require.NoError(t, err)
	require.NoError(t, s.Client().FunctionLoad(ctx, other.Source()).Err())
	node := s.Node().(*redisnode.Node)
	lockCycles(t, node, s, "f", 2)
	require.NoError(t, s.Client().FunctionFlush(ctx).Err())
	lockCycles(t, node, s, "f", 2)
	_, loads, _ := redisnode.FunctionCounts(node)
	require.Equal(t, int64(2), loads)

	require.NoError(t, s.Client().FunctionLoad(ctx, other.Source()).Err())
	l := newLocker(t, []redlock.Node{node}, redlock.Config{})
	var wg sync.WaitGroup
	errs := make(chan error, 16*10)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				lease, err := l.TryAcquire(ctx, "g"+strconv.Itoa(g))
				if err == nil {
					err = lease.Release(ctx)
				}
				errs <- err
			}
		}()
		if g == 8 {
			require.NoError(t, s.Client().FunctionDelete(ctx, scripts.Functions.Name()).Err())
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	libs, err := s.Client().FunctionList(ctx, redis.FunctionListQuery{}).Result()
	require.NoError(t, err)
	var names []string
	for _, l := range libs {
		names = append(names, l.Name)
	}
	require.ElementsMatch(t, []string{other.Name(), scripts.Functions.Name()}, names, "two versions side by side")
	require.Zero(t, testutil.CommandCalls(t, s)["evalsha"])
}

// TestFunctionsFallBackToEvalsha: where the server has no functions for
// the node, the scripts run by EVALSHA as before, for good, and no lock
// fails because of it: on miniredis (no FCALL), on a server whose FCALL is
// renamed away, for a user whose ACL refuses FCALL or FUNCTION, and for a
// node made WithoutFunctions; with EVALSHA and EVAL renamed away instead,
// the functions alone run the scripts.
func TestFunctionsFallBackToEvalsha(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		m := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		node := redisnode.New(c)
		lockCycles(t, node, nil, "f", 3)
		require.False(t, node.UsesFunctions())
		fcalls, loads, _ := redisnode.FunctionCounts(node)
		require.Equal(t, int64(1), fcalls, "one FCALL tried")
		require.Zero(t, loads)
	})
	t.Run("renamed", func(t *testing.T) {
		s := testutil.StartRedisServer(t, testutil.WithConfig(`rename-command FCALL ""`))
		node := s.Node().(*redisnode.Node)
		lockCycles(t, node, s, "f", 3)
		require.False(t, node.UsesFunctions())
		require.Positive(t, testutil.CommandCalls(t, s)["evalsha"])
	})
	for _, acl := range []string{"-fcall", "-function", "-@scripting +evalsha +eval"} {
		t.Run("acl "+acl, func(t *testing.T) {
			s := testutil.StartRedisServer(t)
			ctx := testutil.Context(t)
			rules := append([]any{"ACL", "SETUSER", "locker", "on", ">pw", "~*", "&*", "+@all"}, toAny(strings.Fields(acl))...)
			require.NoError(t, s.Do(ctx, rules...).Err())
			opts := testutil.FastFailOptions(s.Addr(), "", 2*time.Second)
			opts.Username, opts.Password, opts.Protocol = "locker", "pw", 2
			c := redis.NewClient(opts)
			t.Cleanup(func() { _ = c.Close() })
			node := redisnode.New(c)
			lockCycles(t, node, s, "f", 3)
			require.False(t, node.UsesFunctions())
			calls := testutil.CommandCalls(t, s)
			require.Positive(t, calls["evalsha"])
			require.LessOrEqual(t, calls["fcall"], 2, "FCALL is not tried again")
		})
	}
	t.Run("EVALSHA and EVAL renamed", func(t *testing.T) {
		// the other way round: functions alone run the scripts
		s := testutil.StartRedisServer(t, testutil.WithConfig(`rename-command EVALSHA ""`, `rename-command EVAL ""`))
		node := s.Node().(*redisnode.Node)
		lockCycles(t, node, s, "f", 3)
		require.True(t, node.UsesFunctions())
	})
	t.Run("WithoutFunctions", func(t *testing.T) {
		s := testutil.StartRedisServer(t)
		node := s.Node().(*redisnode.Node).WithoutFunctions()
		require.False(t, node.UsesFunctions())
		lockCycles(t, node, s, "f", 3)
		calls := testutil.CommandCalls(t, s)
		require.Zero(t, calls["fcall"]+calls["function|load"])
		require.Positive(t, calls["evalsha"])
	})
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// acquireKeys are the keys of resource's acquire with the default prefix.
func acquireKeys(resource string) []string {
	k := "redlock:{" + resource + "}"
	return []string{k, k + ":fence", k + ":queue", k + ":queue:exp", testutil.DefaultMarker}
}

// TestFunctionsAnswerAsScriptsOnAReplicaAndAFullNode: where the server
// refuses an FCALL up front but EVAL runs the script and refuses only its
// first write, the node runs that call by EVALSHA, so every script answers
// as it always did: a replica answers acquire with its REPLICA error; a
// full node refuses a grant with OOM and writes nothing, while a lease
// taken before is renewed and released (neither needs memory), and a
// release with a waiter frees the lock and names the head instead of
// handing the lock over. The node tries functions again after a pause.
func TestFunctionsAnswerAsScriptsOnAReplicaAndAFullNode(t *testing.T) {
	ctx := testutil.Context(t)
	c := testutil.StartRedis(t, 2)
	primary, replica := c.Server(0), c.Server(1)
	node := replica.Node().(*redisnode.Node)
	_, err := node.Eval(ctx, scripts.Inspect, acquireKeys("r")[:2])
	require.NoError(t, err, "the library is loaded while a primary")
	require.NoError(t, replica.Do(ctx, "REPLICAOF", "127.0.0.1", primary.Port()).Err())
	_, err = node.Eval(ctx, scripts.Acquire, acquireKeys("r"), "aa01", "me", 10000, "none", "", "alone", "", "", 0, 0, "none", "", "", "", "", -1)
	require.ErrorContains(t, err, "REPLICA redlock: this node is a replica")
	_, _, fallbacks := redisnode.FunctionCounts(node)
	require.Positive(t, fallbacks)

	full := primary.Node().(*redisnode.Node)
	held := acquireKeys("held")
	_, err = full.Eval(ctx, scripts.Acquire, held, "bb02", "me", 60000, "none", "", "alone", "", "", 0, 0, "none", "", "", "", "", -1)
	require.NoError(t, err)
	hand := acquireKeys("hand")
	_, err = full.Eval(ctx, scripts.Acquire, hand, "cc03", "me", 60000, "none", "", "alone", "", "", 0, 0, "none", "", "", "", "", -1)
	require.NoError(t, err)
	_, err = full.Eval(ctx, scripts.Acquire, hand, "dd04", "w", 60000, "none", "", "queue", "w1", "propose", 0, 60000, "handover", 60000, "-", "dd04", "w", -1)
	require.NoError(t, err)
	require.NoError(t, primary.Do(ctx, "DEBUG", "POPULATE", 20000, "filler", 100).Err())
	require.NoError(t, primary.Do(ctx, "CONFIG", "SET", "maxmemory", "1mb").Err())
	require.ErrorContains(t, primary.Do(ctx, "SET", "probe", "x").Err(), "OOM")

	_, err = full.Eval(ctx, scripts.Acquire, acquireKeys("new"), "ee05", "me", 10000, "none", "", "alone", "", "", 0, 0, "none", "", "", "", "", -1)
	require.ErrorContains(t, err, "OOM")
	n, err := primary.Do(ctx, "EXISTS", acquireKeys("new")[0], acquireKeys("new")[1]).Int()
	require.NoError(t, err)
	require.Zero(t, n, "nothing written")
	v, err := full.Eval(ctx, scripts.Renew, held[:2], "bb02", 60000, "")
	require.NoError(t, err)
	require.Equal(t, int64(1), v, "renewed")
	v, err = full.Eval(ctx, scripts.Release, held, "bb02", held[0]+":released", "", "quiet", "none", "", "none", "")
	require.NoError(t, err)
	require.Equal(t, "released", v.([]any)[0])
	reply, err := full.Eval(ctx, scripts.Release, hand, "cc03", hand[0]+":released", "cc03", "announce", "handover", "-1", "none", "")
	require.NoError(t, err)
	require.Equal(t, "released", reply.([]any)[0], "released, not handed over")
	require.Equal(t, "w1", reply.([]any)[2], "the head is named")
	n, err = primary.Do(ctx, "EXISTS", hand[0]).Int()
	require.NoError(t, err)
	require.Zero(t, n, "the lock is free")
	_, _, fallbacks = redisnode.FunctionCounts(full)
	require.Positive(t, fallbacks)
	require.Positive(t, testutil.CommandCalls(t, primary)["evalsha"], "the refused calls ran as EVALSHA")
	require.False(t, full.UsesFunctions(), "EVALSHA at once for a while")
	require.Eventually(t, full.UsesFunctions, 10*time.Second, 20*time.Millisecond, "functions are tried again")
}

// TestAFunctionCallKeepsItsDeadline: a call whose context has ended is not
// sent again after an FCALL the server did not run: it returns the
// server's answer, and the library is not loaded for it.
func TestAFunctionCallKeepsItsDeadline(t *testing.T) {
	s := testutil.StartRedisServer(t)
	node := s.Node().(*redisnode.Node)
	ctx, cancel := context.WithCancel(testutil.Context(t))
	cancel()
	_, err := node.Eval(ctx, scripts.Inspect, acquireKeys("r")[:2])
	require.Error(t, err)
	_, loads, _ := redisnode.FunctionCounts(node)
	require.Zero(t, loads)
	require.Zero(t, testutil.CommandCalls(t, s)["function|load"])
}
