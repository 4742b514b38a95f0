package redlock_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

func TestNewAppliesDefaults(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l, err := redlock.New(c.Nodes(), redlock.Config{})
	require.NoError(t, err)
	cfg := l.Config()
	require.Equal(t, redlock.DefaultLeaseDuration, cfg.LeaseDuration)
	require.Equal(t, 0.01, cfg.ClockDriftFactor)
	require.Equal(t, redlock.DefaultLeaseDuration/3, cfg.NodeCallTimeout)
	require.Equal(t, redlock.DefaultKeyPrefix, cfg.KeyPrefix)
	require.NotNil(t, cfg.NewBackOff)
	require.Contains(t, cfg.Owner, ":")
	require.Equal(t, "redlock:{orders}", l.Key("orders"))

	long, err := redlock.New(c.Nodes(), redlock.Config{LeaseDuration: time.Minute})
	require.NoError(t, err)
	require.Equal(t, redlock.DefaultMaxNodeCallTimeout, long.Config().NodeCallTimeout)
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	cases := []struct {
		name string
		cfg  redlock.Config
		want string
	}{
		{"negative lease", redlock.Config{LeaseDuration: -time.Second}, "LeaseDuration"},
		{"lease below minimum", redlock.Config{LeaseDuration: time.Millisecond}, "LeaseDuration"},
		{"drift factor negative", redlock.Config{ClockDriftFactor: -0.1}, "ClockDriftFactor"},
		{"drift factor one", redlock.Config{ClockDriftFactor: 1}, "ClockDriftFactor"},
		{"drift factor above one", redlock.Config{ClockDriftFactor: 1.5}, "ClockDriftFactor"},
		{"drift factor NaN", redlock.Config{ClockDriftFactor: math.NaN()}, "ClockDriftFactor"},
		{"drift eats the lease", redlock.Config{LeaseDuration: 10 * time.Millisecond, ClockDriftFactor: 0.9}, "validity"},
		{"negative call timeout", redlock.Config{NodeCallTimeout: -time.Millisecond}, "NodeCallTimeout"},
		{"call timeout equals lease", redlock.Config{LeaseDuration: time.Second, NodeCallTimeout: time.Second}, "NodeCallTimeout"},
		{"call timeout above validity", redlock.Config{LeaseDuration: time.Second, NodeCallTimeout: 990 * time.Millisecond}, "NodeCallTimeout"},
		{"owner too long", redlock.Config{Owner: strings.Repeat("o", redlock.MaxOwnerLen+1)}, "Owner"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := redlock.New(c.Nodes(), tc.cfg)
			require.Nil(t, l)
			require.ErrorIs(t, err, redlock.ErrInvalidConfig)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestNewChecksRejoinDelayAgainstTheLease: a positive RejoinDelay must
// cover the Locker's own lease (a node that lost data would otherwise
// grant again while such a lease may still be valid); zero is the lease,
// negative turns the rule off.
func TestNewChecksRejoinDelayAgainstTheLease(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	cases := []struct {
		name  string
		lease time.Duration
		delay time.Duration
		want  time.Duration // the RejoinDelay in effect; 0: refused
	}{
		{"below the lease", 30 * time.Second, time.Second, 0},
		{"one nanosecond below the lease", 30 * time.Second, 30*time.Second - 1, 0},
		{"below the default lease", 0, redlock.DefaultLeaseDuration - time.Millisecond, 0},
		{"the minimum below the lease", redlock.MinLeaseDuration + 1, redlock.MinLeaseDuration, 0},
		{"equal to the lease", 30 * time.Second, 30 * time.Second, 30 * time.Second},
		{"equal to the default lease", 0, redlock.DefaultLeaseDuration, redlock.DefaultLeaseDuration},
		{"longer than the lease", 30 * time.Second, time.Minute, time.Minute},
		{"the maximum", time.Second, 24 * time.Hour, 24 * time.Hour},
		{"zero: the lease", 30 * time.Second, 0, 30 * time.Second},
		{"zero: the default lease", 0, 0, redlock.DefaultLeaseDuration},
		{"negative: off", 30 * time.Second, -1, -1},
		{"negative: off, whatever its size", 30 * time.Second, -time.Hour, -time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := redlock.New(c.Nodes(), redlock.Config{LeaseDuration: tc.lease, RejoinDelay: tc.delay})
			if tc.want == 0 {
				require.Nil(t, l)
				require.ErrorIs(t, err, redlock.ErrInvalidConfig)
				lease := cmp.Or(tc.lease, redlock.DefaultLeaseDuration)
				require.ErrorContains(t, err, fmt.Sprintf("RejoinDelay %s is shorter than LeaseDuration %s: ", tc.delay, lease))
				require.ErrorContains(t, err, "set RejoinDelay to at least the longest lease of every Locker on these nodes, or negative to turn the rule off")
				return
			}
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			require.Equal(t, tc.want, l.Config().RejoinDelay)
		})
	}
	_, err := redlock.New(c.Nodes(), redlock.Config{RejoinDelay: 24*time.Hour + 1})
	require.ErrorIs(t, err, redlock.ErrInvalidConfig)
	require.ErrorContains(t, err, "over the maximum")
}

func TestNewRejectsBadNodeLists(t *testing.T) {
	c := testutil.NewMiniCluster(t, 2)
	nodes := c.Nodes()
	cases := []struct {
		name  string
		nodes []redlock.Node
	}{
		{"nil list", nil},
		{"empty list", []redlock.Node{}},
		{"nil node", []redlock.Node{nodes[0], nil}},
		{"same node twice", []redlock.Node{nodes[0], nodes[1], nodes[0]}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redlock.New(tc.nodes, redlock.Config{})
			require.ErrorIs(t, err, redlock.ErrInvalidConfig)
		})
	}
}

func TestResourceAndTokenValidation(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), redlock.Config{})
	ctx := testutil.Context(t)
	for _, bad := range []string{"", strings.Repeat("r", redlock.MaxResourceLen+1)} {
		_, err := l.TryAcquire(ctx, bad)
		require.ErrorIs(t, err, redlock.ErrInvalidResource)
		_, err = l.Acquire(ctx, bad)
		require.ErrorIs(t, err, redlock.ErrInvalidResource)
		_, err = l.Inspect(ctx, bad)
		require.ErrorIs(t, err, redlock.ErrInvalidResource)
	}
	for _, bad := range []string{"", "abc", strings.Repeat("z", 32), strings.Repeat("a", 33)} {
		require.ErrorIs(t, l.Release(ctx, "r", bad), redlock.ErrInvalidResource)
		_, err := l.Renew(ctx, "r", bad)
		require.ErrorIs(t, err, redlock.ErrInvalidResource)
	}
}

func TestResourceNamesAreOpaque(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), redlock.Config{})
	names := []string{"a", "orders:dispatch", "{braces}", "{}", "a}b{c", "\x00\xff binary", "ключ-ресурса-🔒", strings.Repeat("r", redlock.MaxResourceLen)}
	fences := map[string]bool{}
	for _, name := range names {
		lease, err := tryAcquire(t, l, name)
		require.NoError(t, err, "resource %q", name)
		require.Equal(t, name, lease.Resource())
		st, err := l.Inspect(context.Background(), name)
		require.NoError(t, err)
		require.Equal(t, redlock.Held, st.State)
		require.Equal(t, lease.Token(), st.Holder.Token)
		fences[name] = true
		require.NoError(t, lease.Release(context.Background()))
	}
	// Each name is its own lock: all of them could be held at once.
	var leases []*redlock.Lease
	for _, name := range names {
		lease, err := tryAcquire(t, l, name)
		require.NoError(t, err)
		leases = append(leases, lease)
	}
	for _, lease := range leases {
		require.NoError(t, lease.Release(context.Background()))
	}
}

func TestAcquireErrorIsDescriptive(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	l := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 5 * time.Second})
	held, err := l.TryAcquire(testutil.Context(t), "busy")
	require.NoError(t, err)
	defer held.Release(context.Background())

	_, err = l.TryAcquire(testutil.Context(t), "busy")
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.NotErrorIs(t, err, redlock.ErrNoQuorum)
	var ae *redlock.AcquireError
	require.True(t, errors.As(err, &ae))
	require.Equal(t, 2, ae.Needed)
	require.Equal(t, 3, ae.Total)
	require.Less(t, ae.Granted, 2) // the holder's third grant may still be in flight
	require.NotEmpty(t, ae.Refused)
	require.Greater(t, ae.HolderTTL, 4*time.Second)
	require.Contains(t, err.Error(), `"busy"`)
	require.Contains(t, err.Error(), "2 needed")
}
