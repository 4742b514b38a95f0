package impls

import (
	"context"
	"sync"

	"github.com/redis/rueidis"
)

// compareAndDeleteSrc is the floors' release: delete KEYS[1] only when it
// still holds ARGV[1].
const compareAndDeleteSrc = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`

// FloorRueidis is Floor over rueidis clients: SET key token NX PX on every
// node in parallel (one goroutine per node, as Floor), then the
// compare-and-delete (EVALSHA, EVAL on NOSCRIPT) the same way. rueidis
// writes the commands of concurrent goroutines to a node together on a
// shared connection (auto-pipelining), so this is the limit for a Redlock
// whose calls share round trips.
func FloorRueidis(name string, clients []rueidis.Client) *Impl {
	cad := rueidis.NewLuaScript(compareAndDeleteSrc)
	return &Impl{
		Name: name,
		NewWorker: func() Worker {
			return &floorRWorker{clients: clients, cad: cad, ok: make([]bool, len(clients)), errs: make([]error, len(clients))}
		},
		Close: func() error { return nil },
	}
}

type floorRWorker struct {
	clients    []rueidis.Client
	cad        *rueidis.Lua
	key, token string
	ok         []bool
	errs       []error
}

func (w *floorRWorker) Acquire(ctx context.Context, key string) error {
	w.key, w.token = key, token()
	w.fanout(func(c rueidis.Client) (bool, error) {
		err := c.Do(ctx, c.B().Set().Key(w.key).Value(w.token).Nx().Px(LeaseDuration).Build()).Error()
		if rueidis.IsRedisNil(err) {
			return false, nil
		}
		return err == nil, err
	})
	if w.count() >= len(w.clients)/2+1 {
		return nil
	}
	_ = w.Release(context.WithoutCancel(ctx))
	return w.failure()
}

func (w *floorRWorker) Release(ctx context.Context) error {
	w.fanout(func(c rueidis.Client) (bool, error) {
		n, err := w.cad.Exec(ctx, c, []string{w.key}, []string{w.token}).AsInt64()
		return n == 1, err
	})
	if w.count() >= len(w.clients)/2+1 {
		return nil
	}
	return w.failure()
}

func (w *floorRWorker) fanout(call func(rueidis.Client) (bool, error)) {
	var wg sync.WaitGroup
	for i, c := range w.clients {
		wg.Go(func() { w.ok[i], w.errs[i] = call(c) })
	}
	wg.Wait()
}

func (w *floorRWorker) count() int {
	n := 0
	for _, ok := range w.ok {
		if ok {
			n++
		}
	}
	return n
}

func (w *floorRWorker) failure() error {
	f := floorWorker{errs: w.errs}
	return f.failure()
}
