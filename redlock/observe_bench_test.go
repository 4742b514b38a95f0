package redlock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// noopContextObserver receives every kind of event and does nothing.
type noopContextObserver struct{}

func (noopContextObserver) Observe(redlock.Event) {}
func (noopContextObserver) ObserveContext(ctx context.Context, _ redlock.Event) context.Context {
	return ctx
}

// BenchmarkObserverOff measures allocations per TryAcquire+Release and per
// Acquire+Release on three in-process nodes (miniredis: deterministic
// allocations, no network) without an Observer or a Logger: the path the
// observer API must leave unchanged (no allocation added per operation),
// and with a no-op Observer and a no-op ContextObserver (every event, each
// through the guard) for comparison.
func BenchmarkObserverOff(b *testing.B) {
	for _, bc := range []struct {
		name string
		obs  redlock.Observer
	}{
		{"none", nil},
		{"noop", redlock.ObserverFunc(func(redlock.Event) {})},
		{"ctx-noop", noopContextObserver{}},
	} {
		for _, op := range []string{"TryAcquire", "Acquire"} {
			b.Run(bc.name+"/"+op, func(b *testing.B) {
				c := testutil.NewMiniCluster(b, 3)
				l, err := redlock.New(c.Nodes(), redlock.Config{LeaseDuration: 10 * time.Second, RejoinDelay: freshServers, Observer: bc.obs})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				ctx := context.Background()
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					acquire := l.TryAcquire
					if op == "Acquire" {
						acquire = l.Acquire
					}
					lease, err := acquire(ctx, "bench:"+strconv.Itoa(i))
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
}
