package bench_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/scripts"
)

// setSrc is a one-command script: the transport benchmark measures the
// round trips, not the lock scripts. setScript runs it through go-redis,
// setNodeScript through a Node.
const setSrc = `return redis.call('SET', KEYS[1], ARGV[1], 'PX', 10000)`

var (
	setScript     = redis.NewScript(setSrc)
	setNodeScript = scripts.New("set", setSrc)
)

// BenchmarkTransport compares three ways to run a script from many
// goroutines on one node (the choice behind issue 24): go-redis's
// Script.Run on the plain client (one round trip per call: the transport
// before batching), redisnode.Node.Eval (redlock's adaptive batcher), and
// Script.Run on go-redis's experimental blocking AutoPipeliner. One op is
// one script call on a fresh key.
func BenchmarkTransport(b *testing.B) {
	c := startServers(b, 1)
	for _, g := range []int{1, 64, 256} {
		type impl struct {
			name string
			eval func(ctx context.Context, key string) error
		}
		plain := c.Server(0).Client()
		node := redisnode.New(c.Server(0).Client())
		apClient := c.Server(0).Client()
		ap, err := apClient.AutoPipeline()
		if err != nil {
			b.Fatal(err)
		}
		list := []impl{
			{"plain", func(ctx context.Context, key string) error {
				return setScript.Run(ctx, plain, []string{key}, "v").Err()
			}},
			{"redlock", func(ctx context.Context, key string) error {
				_, err := node.Eval(ctx, setNodeScript, []string{key}, "v")
				return err
			}},
			{"autopipeline", func(ctx context.Context, key string) error {
				return setScript.Run(ctx, ap, []string{key}, "v").Err()
			}},
		}
		for _, im := range list {
			b.Run(fmt.Sprintf("goroutines=%d/impl=%s", g, im.name), func(b *testing.B) {
				r := round.Add(1)
				var next atomic.Int64
				lat := make([]time.Duration, b.N)
				var errs opErrors
				var wg sync.WaitGroup
				b.ResetTimer()
				for range g {
					wg.Go(func() {
						for {
							i := next.Add(1) - 1
							if i >= int64(b.N) {
								return
							}
							ctx, cancel := context.WithTimeout(context.Background(), time.Second)
							t0 := time.Now()
							errs.note(im.eval(ctx, fmt.Sprintf("t:%d:%d", r, i)))
							lat[i] = time.Since(t0)
							cancel()
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				errs.check(b, b.N)
				reportLatency(b, lat)
			})
		}
		_ = ap.Close()
		_ = apClient.Close()
		_ = plain.Close()
		_ = node.Close()
	}
}
