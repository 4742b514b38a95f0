// Command quickstart shows redlock end to end with no Redis installed: it
// starts three in-process Redis nodes (miniredis) and a fourth as the
// protected resource, lets three workers take turns on one lock while each
// writes with its fencing token, loses a node without losing the lock, and
// shows a paused holder's late write being rejected by the fence.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/fencing/redisfence"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	redis.SetLogger(quiet{}) // node 3 is killed on purpose below

	// Three independent lock nodes. In production these are three Redis
	// servers on separate machines: redisnode.Dial(ctx, "redis://a:6379", ...).
	var urls []string
	var servers []*miniredis.Miniredis
	for range 3 {
		s, err := miniredis.Run()
		if err != nil {
			return err
		}
		defer s.Close()
		servers = append(servers, s)
		urls = append(urls, "redis://"+s.Addr())
	}
	nodes, err := redisnode.Dial(ctx, urls...)
	if err != nil {
		return err
	}
	defer nodes.Close()

	locker, err := redlock.New(nodes, redlock.Config{LeaseDuration: 2 * time.Second, Owner: "quickstart"})
	if err != nil {
		return err
	}
	defer locker.Close()

	// The protected resource: a Redis server that checks fencing tokens.
	res, err := miniredis.Run()
	if err != nil {
		return err
	}
	defer res.Close()
	resClient := redis.NewClient(&redis.Options{Addr: res.Addr()})
	defer resClient.Close()
	store := redisfence.New(resClient, "app:")

	fmt.Printf("3 lock nodes, quorum %d; lease %s\n\n", len(nodes)/2+1, locker.Config().LeaseDuration)

	// 1. Workers take turns. Each write carries the lease's fencing token.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := 1; w <= 3; w++ {
		wg.Go(func() {
			for round := range 2 {
				lease, err := locker.Acquire(ctx, "report")
				if err != nil {
					fmt.Println("acquire:", err)
					return
				}
				err = store.Write(lease.Context(), "report", fmt.Sprintf("worker %d round %d", w, round), lease.Fence())
				mu.Lock()
				fmt.Printf("worker %d holds the lock  fence=%-3d write: %v\n", w, lease.Fence(), errText(err))
				mu.Unlock()
				if err := lease.Release(ctx); err != nil {
					fmt.Println("release:", err)
				}
			}
		})
	}
	wg.Wait()

	// 2. A node dies; a majority (2 of 3) still grants the lock.
	servers[2].Close()
	lease, err := locker.Acquire(ctx, "report")
	if err != nil {
		return err
	}
	fmt.Printf("\nnode 3 down: lock still granted by %v, fence=%d\n", lease.Granted(), lease.Fence())

	// 3. A holder "pauses" (think: a long GC pause) past its lease. Here the
	// lock is deleted on the nodes to stand for its expiry; another worker
	// takes it and writes. The paused holder wakes and writes with its old
	// token: the resource rejects it.
	stale := lease.Fence()
	for _, s := range servers[:2] {
		s.Del(locker.Key("report"))
	}
	fresh, err := locker.Acquire(ctx, "report")
	if err != nil {
		return err
	}
	if err := store.Write(ctx, "report", "written by the new holder", fresh.Fence()); err != nil {
		return err
	}
	err = store.Write(ctx, "report", "late write from the paused holder", stale)
	fmt.Printf("new holder wrote with fence=%d; paused holder's write with fence=%d: %v\n", fresh.Fence(), stale, errText(err))
	if !errors.Is(err, fencing.ErrStaleToken) {
		return fmt.Errorf("the stale write was not rejected")
	}
	_ = fresh.Release(ctx)
	_ = lease.Release(ctx) // reports that the lease was lost: honest

	value, highest, _, err := store.Read(ctx, "report")
	if err != nil {
		return err
	}
	fmt.Printf("\nresource holds %q (fence %d): the stale write changed nothing\n", value, highest)
	return nil
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func errText(err error) string {
	if err == nil {
		return "accepted"
	}
	return "REJECTED (" + err.Error() + ")"
}
