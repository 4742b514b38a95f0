package redlock_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/bits"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/fencing/redisfence"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// Security: least-privileged ACL users, TLS, tokens, and secrets kept out of
// errors and logs. docs/security.md documents what these tests show.

const aclPassword = "acl-pass-9f3b2c71"

// requireCleanACLLog fails if any server denied a command or key (ACL LOG).
// freshServers turns the rejoin check off in tests whose servers have just
// started and whose ACL user may not read CONFIG (so the Locker cannot tell
// that they fsync every write): the rejoin delay is not what they test.
const freshServers = -1

func requireCleanACLLog(t *testing.T, ctx context.Context, servers ...*testutil.RedisServer) {
	t.Helper()
	for _, s := range servers {
		entries, err := s.Do(ctx, "ACL", "LOG").Slice()
		require.NoError(t, err)
		// The refusals expected: CONFIG GET append*, asked once per node
		// to learn whether it fsyncs every write (Config.RejoinDelay), and
		// FUNCTION LOAD of the scripts' library where no administrator has
		// loaded it (the node then runs the scripts by EVALSHA).
		entries = slices.DeleteFunc(entries, func(e any) bool {
			m, ok := e.(map[any]any)
			return ok && (m["object"] == "config|get" || m["object"] == "function|load")
		})
		require.Empty(t, entries, "ACL denials on %s", s.Addr())
	}
}

// requireNamesNodes checks that a failed acquisition has a *NodeError for
// at least a majority of the nodes (the attempt stops once a majority is
// out of reach), each naming a node of the set in the error text.
func requireNamesNodes(t *testing.T, err error, addrs []string) {
	t.Helper()
	var ae *redlock.AcquireError
	require.ErrorAs(t, err, &ae)
	require.GreaterOrEqual(t, len(ae.NodeErrors), len(addrs)/2+1)
	for _, e := range ae.NodeErrors {
		var ne *redlock.NodeError
		require.ErrorAs(t, e, &ne)
		require.Contains(t, addrs, ne.Addr)
		require.Contains(t, err.Error(), "node "+ne.Addr+": ")
	}
}

// TestMinimalACLUserRunsEverything: a user with testutil.LockerACL (keys
// and channels under the prefix, only the commands the scripts need) can
// acquire, wait for a release (pub/sub), renew, take the fence step,
// recover from an empty script cache, inspect and release, with no ACL
// denial logged but its node's FUNCTION LOAD (it runs the scripts by
// EVALSHA: no administrator loaded the library); and a user with testutil.StoreACL can use redisfence.Store.
func TestMinimalACLUserRunsEverything(t *testing.T) {
	t.Parallel() // bound by the wall clock (servers starting, failing over, delays passing)
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := ctxFor(t)
	c := testutil.StartRedis(t, 4)
	locks, resource := c.Servers()[:3], c.Server(3)
	var urls []string
	for _, s := range locks {
		require.NoError(t, s.SetACLUser(ctx, "locker", aclPassword, testutil.LockerACL(redlock.DefaultKeyPrefix)...))
		urls = append(urls, s.UserURL("locker", aclPassword))
		// The ACL user creates the marker (testutil's servers start
		// vouched): its db 0 marker is moved to db 1, as a SWAPDB would
		// leave it, so the new marker's search of the other dbs (SELECT)
		// runs under the ACL too and must delete it.
		require.NoError(t, s.Do(ctx, "MOVE", testutil.DefaultMarker, 1).Err())
	}
	nodes, err := redisnode.Dial(ctx, urls...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = nodes.Close() })
	slowPoll := func() backoff.BackOff { return backoff.NewConstantBackOff(time.Minute) }
	l1 := newLocker(t, nodes, redlock.Config{LeaseDuration: time.Second})
	l2 := newLocker(t, nodes, redlock.Config{LeaseDuration: time.Second, NewBackOff: slowPoll})

	a, err := l1.Acquire(ctx, "acl") // after the new markers' sit-out (1 s)
	require.NoError(t, err)
	const inDB1 = "redis.call('SELECT', 1) return redis.call('EXISTS', KEYS[1])"
	for _, s := range locks {
		n, err := s.Do(ctx, "EVAL", inDB1, 1, testutil.DefaultMarker).Int()
		require.NoError(t, err)
		require.Zero(t, n, "the marker moved to db 1 was deleted by the new one in db 0")
	}
	first := a.ValidUntil()
	require.Eventually(t, func() bool { return a.ValidUntil().After(first) }, 2*time.Second, 10*time.Millisecond,
		"renewed under the ACL")

	// A waiter in another Locker is woken by the release announcement, long
	// before its one-minute backoff.
	got := make(chan error, 1)
	var b *redlock.Lease
	go func() {
		var err error
		b, err = l2.Acquire(ctx, "acl")
		got <- err
	}()
	require.Eventually(t, func() bool { return redlock.Waiting(l2, "acl") == 1 }, 10*time.Second, 5*time.Millisecond)
	testutil.WaitSubscribed(t, locks, l2.Key("acl")+":released", 1)
	require.NoError(t, a.Release(ctx))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter was not woken by the release announcement (its backoff is a minute)")
	}
	require.Greater(t, b.Fence(), a.Fence())
	require.NoError(t, b.Release(ctx))

	// Disagreeing counters make the next acquisition take the fence step;
	// an empty script cache makes go-redis fall back from EVALSHA to EVAL.
	for _, s := range locks {
		require.NoError(t, s.Do(ctx, "SCRIPT", "FLUSH").Err())
	}
	// (Counters above the nodes' clocks: a user that may not read CONFIG
	// counts as not fsyncing every write, whose older counters are raised
	// to the node's start plus the rejoin delay.)
	const high = 3_000_000_000_000_000
	for i, v := range []int{high + 100, high + 50, high + 10} {
		require.NoError(t, locks[i].Do(ctx, "SET", l1.Key("acl")+":fence", v).Err())
	}
	f, err := l1.TryAcquire(ctx, "acl")
	require.NoError(t, err)
	require.Contains(t, []fencing.Token{high + 101, high + 51}, f.Fence(), "the largest counter of two granting nodes")
	raised := 0
	for _, s := range locks {
		raw, err := s.Do(ctx, "GET", l1.Key("acl")+":fence").Text()
		require.NoError(t, err)
		v, err := strconv.ParseInt(counterValue(raw), 10, 64)
		require.NoError(t, err)
		if fencing.Token(v) >= f.Fence() {
			raised++
		}
	}
	require.GreaterOrEqual(t, raised, 2, "the fence step raised a majority of counters")
	st, err := l1.Inspect(ctx, "acl")
	require.NoError(t, err)
	require.Equal(t, redlock.Held, st.State)
	require.NoError(t, f.Release(ctx))
	requireCleanACLLog(t, ctx, locks...)

	// The resource side with its own least-privileged user.
	require.NoError(t, resource.SetACLUser(ctx, "writer", aclPassword, testutil.StoreACL("fencing:")...))
	opts, err := redis.ParseURL(resource.UserURL("writer", aclPassword))
	require.NoError(t, err)
	rc := redis.NewClient(opts)
	t.Cleanup(func() { _ = rc.Close() })
	store := redisfence.New(rc, "fencing:")
	require.NoError(t, resource.Do(ctx, "SCRIPT", "FLUSH").Err())
	require.NoError(t, store.Write(ctx, "k", "v1", 5))
	require.ErrorIs(t, store.Write(ctx, "k", "v0", 4), fencing.ErrStaleToken)
	v, hi, found, err := store.Read(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "v1", v)
	require.Equal(t, fencing.Token(5), hi)
	require.True(t, found)
	requireCleanACLLog(t, ctx, resource)
}

// TestMinimalACLUserCannotPlantTheLibrary: a user with testutil.LockerACL
// (a tenant with its own prefix) is refused FUNCTION LOAD, with or without
// REPLACE, so it cannot register code under the scripts' library name that
// every other user's FCALL would then run (an acquire that always grants),
// nor FUNCTION DELETE it; nothing is loaded. A Locker over a redisnode.Node
// under that user still acquires and releases, running the scripts by
// EVALSHA; once an administrator has loaded the library, a node under the
// same user runs them as FCALLs.
func TestMinimalACLUserCannotPlantTheLibrary(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := ctxFor(t)
	s := testutil.StartRedisServer(t)
	require.NoError(t, s.SetACLUser(ctx, "tenant", aclPassword, testutil.LockerACL("tenant:")...))
	require.NoError(t, s.SetACLUser(ctx, "locker", aclPassword, testutil.LockerACL(redlock.DefaultKeyPrefix)...))

	opts, err := redis.ParseURL(s.UserURL("tenant", aclPassword))
	require.NoError(t, err)
	tenant := redis.NewClient(opts)
	t.Cleanup(func() { _ = tenant.Close() })
	acquireFn, ok := scripts.Functions.Function(scripts.Acquire)
	require.True(t, ok)
	planted := "#!lua name=" + scripts.Functions.Name() + "\n" +
		"redis.register_function('" + acquireFn + "', function(keys, args) return {'granted', 1, 0, 0, 0, ''} end)\n"
	for _, cmd := range [][]any{
		{"FUNCTION", "LOAD", "REPLACE", planted},
		{"FUNCTION", "LOAD", planted},
		{"FUNCTION", "DELETE", scripts.Functions.Name()},
	} {
		err := tenant.Do(ctx, cmd...).Err()
		require.ErrorContains(t, err, "NOPERM", "%s %s", cmd[0], cmd[1])
	}
	libs, err := s.Client().FunctionList(ctx, redis.FunctionListQuery{}).Result()
	require.NoError(t, err)
	require.Empty(t, libs, "nothing was loaded")

	lockCycle := func(t *testing.T, wantFunctions bool) {
		t.Helper()
		nodes, err := redisnode.Dial(ctx, s.UserURL("locker", aclPassword))
		require.NoError(t, err)
		t.Cleanup(func() { _ = nodes.Close() })
		l := newLocker(t, nodes, redlock.Config{RejoinDelay: freshServers})
		lease, err := l.TryAcquire(ctx, "r")
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
		require.Equal(t, wantFunctions, nodes[0].(*redisnode.Node).UsesFunctions())
	}
	evalshas := func() int { return testutil.CommandCalls(t, s)["evalsha"] }
	t.Run("without the library: EVALSHA", func(t *testing.T) {
		before := evalshas()
		lockCycle(t, false)
		require.Greater(t, evalshas(), before, "the scripts ran by EVALSHA")
		libs, err := s.Client().FunctionList(ctx, redis.FunctionListQuery{}).Result()
		require.NoError(t, err)
		require.Empty(t, libs, "the Locker's user did not load the library either")
	})
	t.Run("an administrator loaded the library: FCALL", func(t *testing.T) {
		require.NoError(t, s.Do(ctx, "FUNCTION", "LOAD", scripts.Functions.Source()).Err())
		lockCycle(t, true)
	})
	// The Locker's user was refused nothing but its node's FUNCTION LOAD
	// (and CONFIG GET): the tenant's refusals are the only others.
	entries, err := s.Do(ctx, "ACL", "LOG").Slice()
	require.NoError(t, err)
	for _, e := range entries {
		m, ok := e.(map[any]any)
		require.True(t, ok, "%#v", e)
		if m["username"] == "locker" {
			require.Contains(t, []any{"function|load", "config|get"}, m["object"], "%v", m)
		}
	}
}

// TestACLUserIsConfinedToItsPrefix: the same user cannot reach other keys,
// other prefixes or administrative commands; a Locker configured with a
// prefix the user may not use fails with a clear error naming each node,
// without the password.
func TestACLUserIsConfinedToItsPrefix(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := ctxFor(t)
	c := testutil.StartRedis(t, 3)
	var urls []string
	for _, s := range c.Servers() {
		require.NoError(t, s.SetACLUser(ctx, "locker", aclPassword, testutil.LockerACL("app:locks:")...))
		require.NoError(t, s.Do(ctx, "SET", "secret", "x").Err())
		urls = append(urls, s.UserURL("locker", aclPassword))
	}
	opts, err := redis.ParseURL(urls[0])
	require.NoError(t, err)
	user := redis.NewClient(opts)
	t.Cleanup(func() { _ = user.Close() })
	for _, cmd := range [][]any{
		{"GET", "secret"},
		{"GET", "app:lockz"},
		{"FLUSHALL"},
		{"CONFIG", "GET", "*"},
		{"KEYS", "*"},
		{"SCRIPT", "FLUSH"},
		{"EVAL", "return redis.call('GET', KEYS[1])", 1, "secret"},
		{"SUBSCRIBE", "other"},
	} {
		err := user.Do(ctx, cmd...).Err()
		require.ErrorContains(t, err, "NOPERM", "%v", cmd)
	}

	nodes, err := redisnode.Dial(ctx, urls...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = nodes.Close() })
	ok := newLocker(t, nodes, redlock.Config{KeyPrefix: "app:locks:", RejoinDelay: freshServers})
	lease, err := ok.TryAcquire(ctx, "r")
	require.NoError(t, err)
	require.NoError(t, lease.Release(ctx))

	wrong := newLocker(t, nodes, redlock.Config{KeyPrefix: "other:", RejoinDelay: freshServers})
	_, err = wrong.TryAcquire(ctx, "r")
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.Contains(t, err.Error(), "NOPERM")
	requireNamesNodes(t, err, c.Addrs())
	require.NotContains(t, err.Error(), aclPassword)
}

// TestMissingACLPermissionNamesTheNode: a user that may not run scripts
// gets an error per node naming it and the missing permission.
func TestMissingACLPermissionNamesTheNode(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := ctxFor(t)
	c := testutil.StartRedis(t, 3)
	var urls []string
	for _, s := range c.Servers() {
		rules := []string{}
		for _, r := range testutil.LockerACL(redlock.DefaultKeyPrefix) {
			if r != "+evalsha" && r != "+eval" && r != "+fcall" && r != "+function|load" {
				rules = append(rules, r)
			}
		}
		require.NoError(t, s.SetACLUser(ctx, "noscripts", aclPassword, rules...))
		urls = append(urls, s.UserURL("noscripts", aclPassword))
	}
	nodes, err := redisnode.Dial(ctx, urls...)
	require.NoError(t, err, "PING is allowed")
	t.Cleanup(func() { _ = nodes.Close() })
	l := newLocker(t, nodes, redlock.Config{RejoinDelay: freshServers})
	_, err = l.TryAcquire(ctx, "r")
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.Contains(t, err.Error(), "NOPERM")
	require.Contains(t, err.Error(), "'evalsha' command")
	requireNamesNodes(t, err, c.Addrs())
	require.NotContains(t, err.Error(), aclPassword)
}

// TestWrongCredentialsNameTheNodeNotThePassword: a wrong password for an
// ACL user, by Dial or by a client of one's own, fails naming the node and
// never printing either password.
func TestWrongCredentialsNameTheNodeNotThePassword(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := ctxFor(t)
	s := testutil.StartRedisServer(t)
	require.NoError(t, s.SetACLUser(ctx, "locker", aclPassword, testutil.LockerACL(redlock.DefaultKeyPrefix)...))
	const wrong = "wrong-pass-5e1d"

	_, err := redisnode.Dial(ctx, s.UserURL("locker", wrong))
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.Contains(t, err.Error(), s.Addr())
	require.Contains(t, err.Error(), "WRONGPASS")
	require.NotContains(t, err.Error(), wrong)
	require.NotContains(t, err.Error(), aclPassword)

	cl := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "locker", Password: wrong, MaxRetries: -1})
	t.Cleanup(func() { _ = cl.Close() })
	l := newLocker(t, []redlock.Node{redisnode.New(cl)}, redlock.Config{})
	_, err = l.TryAcquire(ctx, "r")
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.Contains(t, err.Error(), "node "+s.Addr()+": ")
	require.NotContains(t, err.Error(), wrong)
}

// TestTLS: rediss:// to real redis-servers that speak only TLS, with a CA
// and certificate generated for the test. A client that trusts the CA
// works; one that trusts another CA, or the system roots, is refused, as is
// plain TCP.
func TestTLS(t *testing.T) {
	t.Parallel() // bound by the wall clock (servers starting, failing over, delays passing)
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := ctxFor(t)
	certs := testutil.NewTLSCerts(t)
	c := testutil.StartRedis(t, 3, testutil.WithTLS(certs))
	for _, u := range c.URLs() {
		require.True(t, strings.HasPrefix(u, "rediss://"), u)
	}

	t.Run("trusted CA", func(t *testing.T) {
		l := newLocker(t, c.Nodes(), redlock.Config{})
		lease, err := l.TryAcquire(ctx, "tls")
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
	})

	refused := func(t *testing.T, opts *redis.Options, want string) {
		t.Helper()
		var nodes []redlock.Node
		for _, a := range c.Addrs() {
			o := *opts
			o.Addr, o.MaxRetries, o.DialTimeout = a, -1, time.Second
			if o.TLSConfig != nil {
				o.TLSConfig = o.TLSConfig.Clone()
			}
			cl := redis.NewClient(&o)
			t.Cleanup(func() { _ = cl.Close() })
			nodes = append(nodes, redisnode.New(cl))
		}
		l := newLocker(t, nodes, redlock.Config{})
		_, err := l.TryAcquire(ctx, "tls")
		require.ErrorIs(t, err, redlock.ErrNoQuorum)
		require.Contains(t, err.Error(), want)
		requireNamesNodes(t, err, c.Addrs())
	}
	t.Run("wrong CA", func(t *testing.T) {
		refused(t, &redis.Options{TLSConfig: testutil.NewTLSCerts(t).ClientConfig()}, "certificate signed by unknown authority")
	})
	t.Run("plain TCP to a TLS port", func(t *testing.T) {
		refused(t, &redis.Options{}, "")
	})
	t.Run("Dial with the system roots", func(t *testing.T) {
		_, err := redisnode.Dial(ctx, c.URLs()...)
		require.ErrorIs(t, err, redlock.ErrNoQuorum)
		require.Contains(t, err.Error(), "certificate signed by unknown authority")
		for _, a := range c.Addrs() { // Dial waits for every node
			require.Contains(t, err.Error(), a)
		}
	})
	t.Run("Dial trusting the CA through SSL_CERT_FILE", func(t *testing.T) {
		// Dial cannot be given a CA; on Linux the system roots can be, by
		// SSL_CERT_FILE, read once per process: run a child test process.
		cmd := exec.Command(os.Args[0], "-test.run=^TestTLSDialChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+certs.CAFile, tlsChildEnv+"="+strings.Join(c.URLs(), " "))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "--- PASS: TestTLSDialChild")
	})
}

const tlsChildEnv = "REDLOCK_TEST_TLS_CHILD_URLS"

// TestTLSDialChild runs only as TestTLS's child process.
func TestTLSDialChild(t *testing.T) {
	urls := os.Getenv(tlsChildEnv)
	if urls == "" {
		t.Skip("run by TestTLS")
	}
	ctx := ctxFor(t)
	nodes, err := redisnode.Dial(ctx, strings.Fields(urls)...)
	require.NoError(t, err)
	defer nodes.Close()
	l := newLocker(t, nodes, redlock.Config{})
	lease, err := l.TryAcquire(ctx, "tls-dial")
	require.NoError(t, err)
	require.NoError(t, lease.Release(ctx))
}

// TestTokensAre128RandomBits: every lease token is 32 hex digits (16 bytes),
// all distinct, and each of the 128 bit positions is set about half the
// time (a sanity check of the source, which is crypto/rand).
func TestTokensAre128RandomBits(t *testing.T) {
	c := testutil.NewMiniCluster(t, 1)
	l := newLocker(t, c.Nodes(), redlock.Config{})
	ctx := testutil.Context(t)
	const n = 2000
	seen := make(map[string]bool, n)
	var ones [128]int
	total := 0
	for range n {
		lease, err := l.TryAcquire(ctx, "tokens")
		require.NoError(t, err)
		tok := lease.Token()
		require.Len(t, tok, 32)
		b, err := hex.DecodeString(tok)
		require.NoError(t, err)
		require.False(t, seen[tok], "token repeated")
		seen[tok] = true
		for i, x := range b {
			total += bits.OnesCount8(x)
			for j := range 8 {
				ones[i*8+j] += int(x >> j & 1)
			}
		}
		require.NoError(t, lease.Release(ctx))
	}
	// Binomial(n, 1/2) per position: sd ≈ 22; allow 6 sd.
	for i, k := range ones {
		require.InDelta(t, n/2, k, 135, "bit %d set %d times in %d tokens", i, k, n)
	}
	require.InDelta(t, n*64, total, 1500)
}

// TestLogsAndErrorsNeverShowTokensOrPasswords drives a lease through
// acquisition, renewal, contention, wrong tokens, node failures and loss,
// with a debug Logger and an Observer attached, and checks that no log
// line, event or error contains a lease's token or a node's password.
func TestLogsAndErrorsNeverShowTokensOrPasswords(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := ctxFor(t)
	const pw = "node-pass-77c0a1"
	c := testutil.StartRedis(t, 3, testutil.WithPassword(pw))

	var mu sync.Mutex
	var logs bytes.Buffer
	var seen []string
	logger := slog.New(slog.NewTextHandler(guardedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	observer := redlock.ObserverFunc(func(e redlock.Event) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%+v %v", e, e.Err))
	})
	nodes, err := redisnode.Dial(ctx, c.URLs()...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = nodes.Close() })
	cfg := redlock.Config{LeaseDuration: 300 * time.Millisecond, Logger: logger, Observer: observer}
	l := newLocker(t, nodes, cfg)
	other := newLocker(t, nodes, cfg)

	var tokens []string
	note := func(err error) {
		if err != nil {
			mu.Lock()
			seen = append(seen, err.Error())
			mu.Unlock()
		}
	}
	// held notes a lease that a step may have been granted (when a loaded
	// machine let the first lease lapse) and gives it back.
	held := func(lease *redlock.Lease, err error) {
		note(err)
		if err == nil {
			tokens = append(tokens, lease.Token())
			note(lease.Release(ctx))
		}
	}
	a, err := l.Acquire(ctx, "secret")
	require.NoError(t, err)
	tokens = append(tokens, a.Token())
	first := a.ValidUntil()
	require.Eventually(t, func() bool { // a renewal (or the lease lost on a busy machine)
		return a.ValidUntil().After(first) || a.Context().Err() != nil
	}, 10*time.Second, time.Millisecond)
	held(other.TryAcquire(ctx, "secret"))
	foreign := strings.Repeat("5e", 16)
	tokens = append(tokens, foreign)
	note(l.Release(ctx, "secret", foreign))
	_, err = l.Renew(ctx, "secret", foreign)
	note(err)
	note(l.Release(ctx, "secret", "not-a-token-"+foreign))

	// Lose the lease: a majority of nodes dies.
	require.NoError(t, c.Server(0).Kill())
	require.NoError(t, c.Server(1).Kill())
	waitDone(t, a.Context(), 2*time.Second)
	note(a.Release(ctx))
	held(other.TryAcquire(ctx, "secret"))
	st, err := l.Inspect(ctx, "secret")
	require.NoError(t, err)
	for _, ns := range st.Nodes {
		note(ns.Err)
	}
	require.NoError(t, c.Server(0).Restart())
	require.NoError(t, c.Server(1).Restart())
	_, err = redisnode.Dial(ctx, strings.Replace(c.URLs()[0], pw, "wrong-"+pw, 1))
	note(err)

	mu.Lock()
	defer mu.Unlock()
	all := logs.String() + "\n" + strings.Join(seen, "\n")
	require.Contains(t, all, "lost", "the loss was logged")
	require.Contains(t, all, c.Addrs()[0], "nodes are named")
	for _, tok := range tokens {
		require.NotContains(t, all, tok, "a token appears in logs, events or errors")
	}
	require.NotContains(t, all, pw, "a password appears in logs, events or errors")
}

// guardedWriter serializes writes to a buffer shared with the test.
type guardedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w guardedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}
