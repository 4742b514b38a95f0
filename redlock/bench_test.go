package redlock_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// BenchmarkAcquireRelease is the uncontended hot path on real servers: one
// TryAcquire (fencing token included) and one Release of a fresh key. The
// comparison with other libraries lives in bench/.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, n := range []int{1, 3, 5} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			c := testutil.StartRedis(b, n, testutil.WithConfig("appendonly no"))
			l, err := redlock.New(c.Nodes(), redlock.Config{LeaseDuration: 10 * time.Second, RejoinDelay: freshServers})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				lease, err := l.TryAcquire(ctx, "bench:"+strconv.Itoa(i))
				if err != nil {
					b.Fatal(err)
				}
				if err := lease.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFloor is the baseline for BenchmarkAcquireRelease, measured on
// the same kind of servers: SET NX PX on every node in parallel, then a Lua
// compare-and-delete on every node in parallel, straight through go-redis.
func BenchmarkFloor(b *testing.B) {
	del := redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	for _, n := range []int{1, 3, 5} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			c := testutil.StartRedis(b, n, testutil.WithConfig("appendonly no"))
			clients := make([]*redis.Client, n)
			for i := range n {
				clients[i] = c.Server(i).Client()
			}
			ctx := context.Background()
			each := func(fn func(*redis.Client)) {
				var wg sync.WaitGroup
				for _, cl := range clients {
					wg.Go(func() { fn(cl) })
				}
				wg.Wait()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				key := "floor:" + strconv.Itoa(i)
				each(func(cl *redis.Client) { cl.SetNX(ctx, key, "v", 10*time.Second) })
				each(func(cl *redis.Client) { del.Run(ctx, cl, []string{key}, "v") })
			}
		})
	}
}
