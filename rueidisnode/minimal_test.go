package rueidisnode_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// The smallest Node over a client other than go-redis, as docs/library.md
// shows it ("A Node over another client"): keep the two in step.

// minimalNode is a redlock.Node over a rueidis client.
type minimalNode struct {
	client rueidis.Client
	addr   string
}

// serverError is a server's error reply, as the Locker recognises one.
type serverError struct{ msg string }

func (e serverError) Error() string { return e.msg }
func (serverError) RedisError()     {}

func (n minimalNode) Addr() string { return n.addr }

func (n minimalNode) Eval(ctx context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	argv := make([]string, len(args))
	for i, a := range args {
		argv[i] = fmt.Sprint(a) // strings, ints and int64s: their text
	}
	b := n.client.B()
	res := n.client.Do(ctx, b.Evalsha().Sha1(s.Hash()).Numkeys(int64(len(keys))).Key(keys...).Arg(argv...).Build())
	var rerr *rueidis.RedisError
	if errors.As(res.Error(), &rerr) && rerr.IsNoScript() {
		res = n.client.Do(ctx, b.Eval().Script(s.Source()).Numkeys(int64(len(keys))).Key(keys...).Arg(argv...).Build())
	}
	reply, err := res.ToAny() // int64, string, []any (nil for a nil element)
	switch {
	case rueidis.IsRedisNil(err):
		return nil, nil
	case errors.As(err, &rerr):
		return nil, serverError{rerr.Error()} // "WRONGTYPE ...", "READONLY ...", ...
	}
	return reply, err
}

// Uptime says nothing of the server: the Locker's scripts still check its
// data themselves (docs/design.md §6).
func (n minimalNode) Uptime(context.Context) (redlock.Uptime, error) { return redlock.Uptime{}, nil }

// Subscribe announces nothing: waiters retry on their backoff.
func (n minimalNode) Subscribe(func(key, msg string)) redlock.Subscription { return nil }

// TestAMinimalNodeOverAnotherClient: the minimal Node above, over rueidis,
// takes a lock on real servers that an ordinary go-redis Locker sees held,
// with the same fence on every server, releases it, and takes it again
// with a higher fence.
func TestAMinimalNodeOverAnotherClient(t *testing.T) {
	c := testutil.StartRedis(t, 3)
	var nodes []redlock.Node
	for _, s := range c.Servers() {
		client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr()}, DisableCache: true})
		require.NoError(t, err)
		t.Cleanup(client.Close)
		nodes = append(nodes, minimalNode{client: client, addr: s.Addr()})
	}
	l := newLocker(t, nodes, testConfig())
	other := newLocker(t, c.Nodes(), testConfig())
	ctx := context.Background()

	first, err := l.TryAcquire(ctx, "minimal")
	require.NoError(t, err)
	// TryAcquire returns at a majority: the third node's call may still be
	// on its way; it is awaited before the other Locker tries (a try that
	// reached it first would hold it for a moment).
	var st *redlock.Status
	require.Eventually(t, func() bool {
		st, err = other.Inspect(ctx, "minimal")
		return err == nil && !slices.ContainsFunc(st.Nodes, func(ns redlock.NodeStatus) bool { return ns.Info.Token != first.Token() })
	}, 10*time.Second, 5*time.Millisecond, "every node holds the lock")
	for _, ns := range st.Nodes {
		require.Equal(t, first.Fence(), ns.Info.Fence, "%s", ns.Addr)
	}
	_, err = other.TryAcquire(ctx, "minimal")
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "the lock stands on the servers")

	require.NoError(t, first.Release(ctx))
	next, err := l.Acquire(ctx, "minimal")
	require.NoError(t, err)
	require.Greater(t, next.Fence(), first.Fence(), "the fence grows from one lease to the next")
	require.NoError(t, next.Release(ctx))

	free, err := other.TryAcquire(ctx, "minimal")
	require.NoError(t, err, "released on every server")
	require.NoError(t, free.Release(ctx))
}

// TestTheDocsShowTheMinimalNode: docs/library.md shows minimalNode as it is
// written above, from its type to its Subscribe method.
func TestTheDocsShowTheMinimalNode(t *testing.T) {
	src, err := os.ReadFile("minimal_test.go")
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join("..", "docs", "library.md"))
	require.NoError(t, err)
	code := string(src)
	from := strings.Index(code, "type minimalNode struct")
	end := "redlock.Subscription { return nil }\n"
	to := strings.Index(code, end)
	require.True(t, from >= 0 && to > from, "minimal_test.go lost its markers")
	require.Contains(t, string(doc), code[from:to+len(end)], "docs/library.md shows another minimalNode")
}
