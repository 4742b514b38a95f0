package etcdfence_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/fencing/etcdfence"
	"github.com/e6344662/go-redlock/fencing/fencetest"
	"github.com/e6344662/go-redlock/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testutil.LeakOptions()...)
}

// resource is the kit's view of etcd: the value of key is in "data/"+key,
// fenced on the resource key.
type resource struct {
	f  *etcdfence.Fencer
	kv clientv3.KV
}

func (r resource) Write(ctx context.Context, key, value string, t fencing.Token) error {
	return r.f.Put(ctx, key, t, "data/"+key, value)
}

func (r resource) Read(ctx context.Context, key string) (string, bool, error) {
	resp, err := r.kv.Get(ctx, "data/"+key)
	if err != nil || len(resp.Kvs) == 0 {
		return "", false, err
	}
	return string(resp.Kvs[0].Value), true, nil
}

// TestEtcd runs everything on one real etcd server.
func TestEtcd(t *testing.T) {
	srv := testutil.StartEtcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	f := etcdfence.New(cli, "")
	locker := fencetest.NewLocker(t)

	t.Run("Conforms", func(t *testing.T) { fencetest.Run(t, locker, resource{f, cli}) })

	t.Run("FenceKeyLayout", func(t *testing.T) {
		ctx := testutil.Context(t)
		require.NoError(t, f.Put(ctx, "layout", 42, "data/layout", "v"))
		resp, err := cli.Get(ctx, "redlock-fence/layout")
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1)
		require.Equal(t, "00000000000000000042", string(resp.Kvs[0].Value))
		h, err := f.Highest(ctx, "layout")
		require.NoError(t, err)
		require.Equal(t, fencing.Token(42), h)
		h, err = f.Highest(ctx, "never written")
		require.NoError(t, err)
		require.Zero(t, h)
	})

	t.Run("NumericOrderAcrossWidths", func(t *testing.T) {
		// 9 < 10 as numbers though "9" > "10" as text: the padding keeps
		// etcd's byte compare numeric.
		ctx := testutil.Context(t)
		require.NoError(t, f.Put(ctx, "widths", 9, "data/widths", "nine"))
		require.NoError(t, f.Put(ctx, "widths", 10, "data/widths", "ten"))
		err := f.Put(ctx, "widths", 9, "data/widths", "nine again")
		require.ErrorIs(t, err, fencing.ErrStaleToken)
		require.NoError(t, f.Put(ctx, "widths", ^fencing.Token(0), "data/widths", "max"))
		err = f.Put(ctx, "widths", 10, "data/widths", "ten again")
		var st *fencing.StaleError
		require.ErrorAs(t, err, &st)
		require.Equal(t, ^fencing.Token(0), st.Highest)
	})

	t.Run("ManyOpsOneStep", func(t *testing.T) {
		ctx := testutil.Context(t)
		resp, err := f.Do(ctx, "config", 7, clientv3.OpPut("config/a", "1"), clientv3.OpPut("config/b", "2"), clientv3.OpDelete("config/c"))
		require.NoError(t, err)
		require.Len(t, resp.Responses, 4, "the fence key's Put, then one per op")
		_, err = f.Do(ctx, "config", 6, clientv3.OpPut("config/a", "stale"), clientv3.OpPut("config/b", "stale"))
		require.ErrorIs(t, err, fencing.ErrStaleToken)
		got, err := cli.Get(ctx, "config/", clientv3.WithPrefix())
		require.NoError(t, err)
		require.Len(t, got.Kvs, 2)
		for _, kv := range got.Kvs {
			require.NotEqual(t, "stale", string(kv.Value), "no op of a stale transaction applies")
		}
	})

	t.Run("InvalidToken", func(t *testing.T) {
		ctx := testutil.Context(t)
		err := f.Put(ctx, "zero", 0, "data/zero", "v")
		require.ErrorIs(t, err, fencing.ErrInvalidToken)
		resp, err := cli.Get(ctx, "data/zero")
		require.NoError(t, err)
		require.Empty(t, resp.Kvs)
	})

	t.Run("ForeignFenceValue", func(t *testing.T) {
		ctx := testutil.Context(t)
		_, err := cli.Put(ctx, "redlock-fence/foreign", "not a token but longer")
		require.NoError(t, err)
		err = f.Put(ctx, "foreign", 5, "data/foreign", "v")
		require.ErrorContains(t, err, "not a 20-digit token")
		require.NotErrorIs(t, err, fencing.ErrStaleToken)
		_, err = f.Highest(ctx, "foreign")
		require.Error(t, err)
	})

	t.Run("OwnPrefix", func(t *testing.T) {
		ctx := testutil.Context(t)
		g := etcdfence.New(cli, "app/fences/")
		require.Equal(t, "app/fences/x", g.FenceKey("x"))
		require.NoError(t, g.Put(ctx, "x", 3, "data/x", "v"))
		h, err := f.Highest(ctx, "x")
		require.NoError(t, err)
		require.Zero(t, h, "fences under another prefix are separate")
	})
}
