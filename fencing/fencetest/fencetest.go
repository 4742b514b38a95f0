// Package fencetest is a conformance kit for fenced resources: any
// resource that checks redlock's fencing tokens, ours (fencing.Fence,
// redisfence.Store, fencing.Middleware, the PostgreSQL and etcd adapters) or
// your own, runs Run against a real redlock Locker to show that it keeps
// a holder whose lease has ended from doing harm.
//
// Run checks, each as a subtest:
//
//   - StaleAfterNewer: once a newer holder has written, a write with an
//     older token is refused with an error that errors.Is(err,
//     fencing.ErrStaleToken) finds, a *fencing.StaleError carrying both
//     tokens, and the newer value stays.
//   - EqualToken: the holder of the highest token may write again (equal
//     tokens are accepted, as every fence in this repository documents),
//     and a lower token is still refused afterwards.
//   - ConcurrentInterleaved: holders with interleaved tokens write at the
//     same time, many times each; every write either succeeds or is
//     refused as stale, the highest token's writes all succeed, and the
//     final state is the highest token's.
//   - PausedHolder: the classic failure. A holder writes, is paused past
//     its lease (its renewals stop: Lease.Orphan), a new holder takes the
//     lock once the old lease has run out and writes, then the old holder
//     resumes and writes with its old token: it must be refused, and the
//     new holder's value must stay.
//
// The tokens come from the Locker, not from the kit: every check takes real
// leases on a resource of its own (the key it writes), so the Resource
// under test may be shared between checks and with other tests. The
// PausedHolder check waits for a lease to run out: give the Locker a short
// LeaseDuration (NewLocker uses 1 s).
//
// This package imports no database client: an adapter's own tests wrap it
// in a Resource.
package fencetest

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// Resource is a fenced resource under test: a key-value store whose
// writes carry a fencing token.
type Resource interface {
	// Write sets key to value if t is not below the highest token the
	// resource has accepted for key, and records t as the highest, in one
	// atomic step. A lower token must be refused, leaving the value
	// unchanged, with an error matching fencing.ErrStaleToken under
	// errors.Is that is, or wraps, a *fencing.StaleError whose Key is key,
	// Token is t and Highest the highest token accepted for key.
	Write(ctx context.Context, key, value string, t fencing.Token) error
	// Read returns the value of key and whether key has one.
	Read(ctx context.Context, key string) (value string, found bool, err error)
}

// Run runs every check of the kit against r as subtests of t, taking
// leases from locker. It may be called several times on one Locker and one
// Resource.
func Run(t *testing.T, locker *redlock.Locker, r Resource) {
	t.Helper()
	require.NotNil(t, locker, "fencetest.Run needs a Locker")
	require.NotNil(t, r, "fencetest.Run needs a Resource")
	for _, c := range []struct {
		name string
		run  func(*testing.T, *redlock.Locker, Resource)
	}{
		{"StaleAfterNewer", staleAfterNewer},
		{"EqualToken", equalToken},
		{"ConcurrentInterleaved", concurrentInterleaved},
		{"PausedHolder", pausedHolder},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, locker, r) })
	}
}

// NewLocker returns a Locker for Run on three in-process miniredis nodes
// whose key TTLs follow the wall clock, with a 1 s lease and the
// rejoin delay off (the nodes are new and in memory). The test's cleanup
// closes it. Any other Locker will do, on real servers too.
func NewLocker(t testing.TB) *redlock.Locker {
	t.Helper()
	c := testutil.NewMiniCluster(t, 3, testutil.WithWallClock())
	l, err := redlock.New(c.Nodes(), redlock.Config{
		LeaseDuration: time.Second,
		RejoinDelay:   -1,
		KeyPrefix:     "fencetest:",
		Owner:         "fencetest",
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// newKey returns a key (and lock resource) of the check's own.
func newKey(t *testing.T) string {
	var b [6]byte
	_, _ = crand.Read(b[:])
	return "fencetest/" + strings.ReplaceAll(t.Name(), "/", ".") + "/" + hex.EncodeToString(b[:])
}

// acquire takes a lease on key, released at cleanup unless the test
// releases (or orphans) it first.
func acquire(ctx context.Context, t *testing.T, locker *redlock.Locker, key string) *redlock.Lease {
	t.Helper()
	lease, err := locker.Acquire(ctx, key)
	require.NoError(t, err, "acquire %q", key)
	t.Cleanup(func() { _ = lease.Release(context.Background()) })
	return lease
}

// tokens takes n successive leases on key and returns their tokens, which
// the Locker promises to strictly increase.
func tokens(ctx context.Context, t *testing.T, locker *redlock.Locker, key string, n int) []fencing.Token {
	t.Helper()
	var ts []fencing.Token
	for range n {
		lease := acquire(ctx, t, locker, key)
		ts = append(ts, lease.Fence())
		release(ctx, lease)
	}
	for i := 1; i < n; i++ {
		require.Greater(t, ts[i], ts[i-1], "the Locker's tokens must increase")
	}
	return ts
}

// requireStale checks that err is the stale refusal of token for key,
// highest accepted being highest.
func requireStale(t *testing.T, err error, key string, token, highest fencing.Token) {
	t.Helper()
	require.Error(t, err, "token %d after %d must be refused", token, highest)
	require.ErrorIs(t, err, fencing.ErrStaleToken, "a stale write's error must match fencing.ErrStaleToken")
	var st *fencing.StaleError
	require.True(t, errors.As(err, &st), "a stale write's error must be (or wrap) a *fencing.StaleError, got %T: %v", err, err)
	require.Equal(t, key, st.Key, "StaleError.Key")
	require.Equal(t, token, st.Token, "StaleError.Token must be the refused token")
	require.Equal(t, highest, st.Highest, "StaleError.Highest must be the highest token accepted")
}

// requireValue checks key's value.
func requireValue(ctx context.Context, t *testing.T, r Resource, key, want string) {
	t.Helper()
	got, found, err := r.Read(ctx, key)
	require.NoError(t, err, "read %q", key)
	require.True(t, found, "%q has no value", key)
	require.Equal(t, want, got, "value of %q", key)
}

func staleAfterNewer(t *testing.T, locker *redlock.Locker, r Resource) {
	ctx := testutil.Context(t)
	key := newKey(t)
	ts := tokens(ctx, t, locker, key, 2)
	older, newer := ts[0], ts[1]

	require.NoError(t, r.Write(ctx, key, "newer", newer))
	requireStale(t, r.Write(ctx, key, "older", older), key, older, newer)
	requireValue(ctx, t, r, key, "newer")
	// Refused again: a refusal records nothing.
	requireStale(t, r.Write(ctx, key, "older again", older), key, older, newer)
	requireValue(ctx, t, r, key, "newer")
}

func equalToken(t *testing.T, locker *redlock.Locker, r Resource) {
	ctx := testutil.Context(t)
	key := newKey(t)
	lease := acquire(ctx, t, locker, key)
	tok := lease.Fence()
	require.NoError(t, r.Write(ctx, key, "first", tok))
	require.NoError(t, r.Write(ctx, key, "second", tok), "the same holder writes again with the same token: accepted")
	requireValue(ctx, t, r, key, "second")
	release(ctx, lease)

	next := acquire(ctx, t, locker, key)
	require.NoError(t, r.Write(ctx, key, "next", next.Fence()))
	requireStale(t, r.Write(ctx, key, "late", tok), key, tok, next.Fence())
	require.NoError(t, r.Write(ctx, key, "next again", next.Fence()))
	requireValue(ctx, t, r, key, "next again")
}

func concurrentInterleaved(t *testing.T, locker *redlock.Locker, r Resource) {
	const writers, rounds = 5, 6
	ctx := testutil.Context(t)
	key := newKey(t)
	ts := tokens(ctx, t, locker, key, writers)
	// Each writer's rounds start in a random order relative to the others'.
	order := rand.Perm(writers)

	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([][]error, writers)
	for _, i := range order {
		wg.Go(func() {
			<-start
			for n := range rounds {
				errs[i] = append(errs[i], r.Write(ctx, key, fmt.Sprintf("w%d-%d", i, n), ts[i]))
			}
		})
	}
	close(start)
	wg.Wait()

	top := writers - 1
	for i, es := range errs {
		for n, err := range es {
			if err == nil {
				continue
			}
			require.NotEqual(t, top, i, "the highest token's write %d was refused: %v", n, err)
			require.ErrorIs(t, err, fencing.ErrStaleToken, "writer %d write %d: only stale refusals are expected", i, n)
			var st *fencing.StaleError
			require.ErrorAs(t, err, &st)
			require.Equal(t, ts[i], st.Token)
			require.Greater(t, st.Highest, ts[i])
		}
	}
	requireValue(ctx, t, r, key, fmt.Sprintf("w%d-%d", top, rounds-1))
	for i := range top {
		requireStale(t, r.Write(ctx, key, "late", ts[i]), key, ts[i], ts[top])
	}
	requireValue(ctx, t, r, key, fmt.Sprintf("w%d-%d", top, rounds-1))
}

func pausedHolder(t *testing.T, locker *redlock.Locker, r Resource) {
	ctx := testutil.Context(t)
	key := newKey(t)
	old := acquire(ctx, t, locker, key)
	oldTok := old.Fence()
	require.NoError(t, r.Write(ctx, key, "old holder, before the pause", oldTok))

	// The pause: the process stops, its renewals with it. The lock stays
	// on the nodes until its TTL runs out.
	old.Orphan()

	// A new holder gets the lock once the old lease has run out, and
	// writes.
	cur := acquire(ctx, t, locker, key)
	require.Greater(t, cur.Fence(), oldTok)
	require.NoError(t, r.Write(ctx, key, "new holder", cur.Fence()))

	// The old holder resumes where it stopped, unaware, and writes.
	requireStale(t, r.Write(ctx, key, "old holder, after the pause", oldTok), key, oldTok, cur.Fence())
	requireValue(ctx, t, r, key, "new holder")
	release(ctx, cur)
}

// release releases lease so the next holder need not wait for its TTL. An
// error is no failure of the resource under test: on a loaded machine a
// short lease may have been lost already, and then it expires on its own.
func release(ctx context.Context, lease *redlock.Lease) { _ = lease.Release(ctx) }
