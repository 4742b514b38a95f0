package testutil_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/testutil"
)

// keysPerShard returns, for each shard of c, a few keys that hash to it.
func keysPerShard(c *testutil.Cluster, per int) [][]string {
	keys := make([][]string, c.Len())
	for n, full := 0, 0; full < c.Len(); n++ {
		k := "key:" + strconv.Itoa(n)
		i := c.ShardForKey(k)
		if len(keys[i]) < per {
			keys[i] = append(keys[i], k)
			if len(keys[i]) == per {
				full++
			}
		}
	}
	return keys
}

// pidOf returns the process ID that server s reports.
func pidOf(t *testing.T, s *testutil.RedisServer) int {
	t.Helper()
	info, err := s.Do(ctxT(t), "INFO", "server").Text()
	require.NoError(t, err)
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			require.NoError(t, err)
			return pid
		}
	}
	t.Fatalf("no process_id in INFO of %s", s.Addr())
	return 0
}

// requireGone fails unless every process in pids has exited.
func requireGone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		require.True(t, os.IsNotExist(err), "process %d outlived its test (stat: %v)", pid, err)
	}
}

// eventually retries f until it succeeds or timeout passes, for clients
// that reload their view of the servers in the background.
func eventually(t *testing.T, what string, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v: %v", what, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestClusterServesEveryShardAndLosesOnlyAKilledOne(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	c := testutil.StartCluster(t, 3)
	require.Equal(t, 3, c.Len())

	seeds := c.Seeds()
	require.Len(t, seeds, 3)
	require.Len(t, c.Servers(), 3)
	for i, s := range seeds {
		require.Equal(t, c.Shard(i).Addr(), s)
		require.Nil(t, c.Replica(i))
		require.Equal(t, "yes", configGet(t, c.Shard(i), "cluster-enabled"))
		require.Equal(t, "yes", configGet(t, c.Shard(i), "appendonly"))
		require.Equal(t, "always", configGet(t, c.Shard(i), "appendfsync"))
	}
	require.Equal(t, fmt.Sprintf("redis+cluster://%s?addr=%s&addr=%s", seeds[0], seeds[1], seeds[2]), c.URL())
	opts, err := redis.ParseClusterURL(strings.Replace(c.URL(), "redis+cluster://", "redis://", 1))
	require.NoError(t, err)
	require.Equal(t, seeds, opts.Addrs)
	require.Error(t, c.Failover(ctx, 0), "a shard without a replica cannot fail over")
	require.Panics(t, func() { c.Shard(3) })

	cl := c.Client()
	keys := keysPerShard(c, 3)
	for i, ks := range keys {
		for _, k := range append(ks, "{"+ks[0]+"}.tagged", "x{"+ks[0]+"}") {
			slot, err := cl.ClusterKeySlot(ctx, k).Result()
			require.NoError(t, err)
			require.EqualValues(t, slot, testutil.KeySlot(k), "slot of %q", k)
			require.Equal(t, i, c.ShardForKey(k), "shard of %q", k)
		}
		for _, k := range ks {
			require.NoError(t, cl.Set(ctx, k, "v"+k, 0).Err())
			require.Equal(t, "v"+k, cl.Get(ctx, k).Val())
			// The key lives on the shard's master itself.
			got, err := c.Shard(i).Do(ctx, "GET", k).Text()
			require.NoError(t, err)
			require.Equal(t, "v"+k, got)
		}
	}
	for _, k := range []string{"foo{}{bar}", "foo{{bar}}zap", "{}", "{", ""} {
		slot, err := cl.ClusterKeySlot(ctx, k).Result()
		require.NoError(t, err)
		require.EqualValues(t, slot, testutil.KeySlot(k), "slot of %q", k)
	}

	require.NoError(t, c.KillShard(1))
	require.False(t, c.Shard(1).Running())
	for i, ks := range keys {
		for _, k := range ks {
			start := time.Now()
			err := cl.Set(ctx, k, "w"+k, 0).Err()
			if i == 1 {
				require.Error(t, err, "key %q of the killed shard", k)
				require.Less(t, time.Since(start), 3*time.Second, "a dead shard fails fast")
			} else {
				require.NoError(t, err, "key %q of a live shard", k)
				require.Equal(t, "w"+k, cl.Get(ctx, k).Val())
			}
		}
	}

	require.NoError(t, c.RestartShard(1))
	for _, k := range keys[1] {
		eventually(t, "read "+k+" after restart", 10*time.Second, func() error {
			v, err := cl.Get(ctx, k).Result()
			if err == nil && v != "v"+k {
				return fmt.Errorf("got %q", v)
			}
			return err
		})
	}
}

func TestClusterFailoverPromotesTheReplica(t *testing.T) {
	t.Parallel()
	ctx := testutil.Context(t)
	c := testutil.StartCluster(t, 3, testutil.WithReplicas(1), testutil.WithPassword("s3cret"))
	require.Len(t, c.Servers(), 6)
	require.True(t, strings.HasPrefix(c.URL(), "redis+cluster://:s3cret@"+c.Seeds()[0]+"?addr="), c.URL())
	master, replica := c.Shard(1), c.Replica(1)
	require.NotNil(t, replica)
	require.NotEqual(t, master, replica)
	role, err := replica.Do(ctx, "ROLE").Slice()
	require.NoError(t, err)
	require.Equal(t, "slave", role[0])
	require.EqualValues(t, master.Port(), role[2])

	cl := c.Client()
	keys := keysPerShard(c, 2)
	for _, ks := range keys {
		for _, k := range ks {
			require.NoError(t, cl.Set(ctx, k, "v1", 0).Err())
		}
	}

	// The master dies: its keys fail until the replica takes over.
	require.NoError(t, c.KillShard(1))
	require.Error(t, cl.Set(ctx, keys[1][0], "v2", 0).Err())
	require.NoError(t, c.Failover(ctx, 1))
	require.Equal(t, replica, c.Shard(1))
	require.Equal(t, master, c.Replica(1), "the dead master is now the shard's replica")
	require.Equal(t, replica.Addr(), c.Seeds()[1])
	for _, ks := range keys {
		for _, k := range ks {
			eventually(t, "write "+k+" after the failover", 10*time.Second, func() error { return cl.Set(ctx, k, "v2", 0).Err() })
			require.Equal(t, "v2", cl.Get(ctx, k).Val())
		}
	}

	// The old master comes back as the replica; a graceful failover (both
	// up) hands the shard back to it.
	require.NoError(t, c.RestartShard(1))
	require.True(t, master.Running())
	require.Equal(t, replica, c.Shard(1))
	require.NoError(t, c.Failover(ctx, 1))
	require.Equal(t, master, c.Shard(1))
	require.Equal(t, replica, c.Replica(1))
	for _, k := range keys[1] {
		eventually(t, "read "+k+" after failing back", 10*time.Second, func() error {
			v, err := cl.Get(ctx, k).Result()
			if err == nil && v != "v2" {
				return fmt.Errorf("got %q", v)
			}
			return err
		})
	}
	role, err = replica.Do(ctx, "ROLE").Slice()
	require.NoError(t, err)
	require.Equal(t, "slave", role[0], "the promoted replica steps down again")
}

func TestClusterCleanupStopsEverything(t *testing.T) {
	testutil.RedisServerPath(t) // skip here, not only in the subtest
	t.Parallel()
	var pids []int
	t.Run("inner", func(t *testing.T) {
		c := testutil.StartCluster(t, 2, testutil.WithReplicas(1))
		for _, s := range c.Servers() {
			pids = append(pids, pidOf(t, s))
		}
		_ = c.Client()
		require.NoError(t, c.Replica(0).Pause())
	})
	require.Len(t, pids, 4)
	requireGone(t, pids)
}

func TestClusterKeySlotKnownValues(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	require.Equal(t, 12182, testutil.KeySlot("foo"))
	require.Equal(t, 5061, testutil.KeySlot("bar"))
	require.Equal(t, 12739, testutil.KeySlot("123456789"))
	require.Equal(t, testutil.KeySlot("user1000"), testutil.KeySlot("{user1000}.following"))
	require.Equal(t, testutil.KeySlot("user1000"), testutil.KeySlot("{user1000}.followers"))
	require.Equal(t, testutil.KeySlot("bar"), testutil.KeySlot("foo{bar}{zap}"))
	require.Equal(t, testutil.KeySlot("{bar"), testutil.KeySlot("foo{{bar}}zap"))
}
