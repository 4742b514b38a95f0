package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/redlock"
)

// exampleNodes starts n in-process Redis servers and dials them, as a
// program would dial its real servers; stop closes everything.
func exampleNodes(n int) (nodes redlock.Nodes, stop func()) {
	var servers []*miniredis.Miniredis
	var urls []string
	for range n {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			panic(err)
		}
		servers = append(servers, m)
		urls = append(urls, "redis://"+m.Addr())
	}
	nodes, err := redlock.Dial(context.Background(), urls...)
	if err != nil {
		panic(err)
	}
	return nodes, func() {
		_ = nodes.Close()
		for _, m := range servers {
			m.Close()
		}
	}
}

func ExampleLocker_Acquire() {
	nodes, stop := exampleNodes(3)
	defer stop()
	ctx := context.Background()

	locker, err := redlock.New(nodes, redlock.Config{LeaseDuration: 10 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	lease, err := locker.Acquire(ctx, "orders:dispatch") // waits while busy, bounded by ctx
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held:", lease.Context().Err() == nil, "fenced:", lease.Fence() > 0)

	// Another process trying now is told the lock is busy.
	_, err = locker.TryAcquire(ctx, "orders:dispatch")
	fmt.Println("busy:", errors.Is(err, redlock.ErrNotAcquired))

	if err := lease.Release(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Println("after release:", context.Cause(lease.Context()))
	// Output:
	// held: true fenced: true
	// busy: true
	// after release: redlock: lease released
}

func ExampleLease_Fence() {
	nodes, stop := exampleNodes(3)
	defer stop()
	ctx := context.Background()
	locker, err := redlock.New(nodes, redlock.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	// The resource keeps the highest token it has seen (fencing.Store does
	// the same on Redis, fencing.Middleware over HTTP).
	var resource fencing.Fence

	first, _ := locker.Acquire(ctx, "ledger")
	_ = first.Release(ctx) // or: first's holder pauses past its lease
	second, _ := locker.Acquire(ctx, "ledger")
	defer second.Release(ctx)

	fmt.Println("second writes:", resource.Check("ledger", second.Fence()))
	err = resource.Check("ledger", first.Fence())
	fmt.Println("first writes late:", errors.Is(err, fencing.ErrStaleToken))
	// Output:
	// second writes: <nil>
	// first writes late: true
}

func ExampleElector() {
	nodes, stop := exampleNodes(3)
	defer stop()
	ctx := context.Background()
	locker, err := redlock.New(nodes, redlock.Config{LeaseDuration: 5 * time.Second, Owner: "dispatcher-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()
	elector, err := redlock.NewElector(locker, "orders-dispatcher")
	if err != nil {
		fmt.Println(err)
		return
	}

	term, err := elector.Campaign(ctx) // blocks until this process leads
	if err != nil {
		fmt.Println(err)
		return
	}
	leader, _ := elector.Leader(ctx) // what anyone can see
	fmt.Println("leader:", leader.Owner, "term fence:", term.Fence() == leader.Fence)

	_ = term.Resign(ctx) // hand over at once
	_, err = elector.Leader(ctx)
	fmt.Println("after resign:", errors.Is(err, redlock.ErrNoLeader))
	// Output:
	// leader: dispatcher-1 term fence: true
	// after resign: true
}

// A semaphore of 2: at most two holders at once, each with the lease and
// fencing token of one slot.
func ExampleSemaphore() {
	nodes, stop := exampleNodes(3)
	defer stop()
	locker, err := redlock.New(nodes, redlock.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	sem, err := locker.NewSemaphore("encoders", 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	lease, err := sem.Acquire(context.Background()) // waits for a free slot
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(context.Background())
	fmt.Println("slot:", lease.Resource(), "of", len(sem.Slots()))
	// Output is one of: slot: encoders#0 of 2, or slot: encoders#1 of 2.
}
