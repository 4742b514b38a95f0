package redisfence_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/fencing/redisfence"
)

func ExampleStore() {
	mr, err := miniredis.Run() // stands in for the Redis server being protected
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()

	ctx := context.Background()
	store := redisfence.New(client, "res:")
	fmt.Println(store.Write(ctx, "config", "v1", 7))
	fmt.Println(store.Write(ctx, "config", "v0", 6)) // a stale holder

	value, highest, found, err := store.Read(ctx, "config")
	fmt.Println(value, highest, found, err)
	fmt.Println(mr.Keys())
	// Output:
	// <nil>
	// fencing: stale token 6 for "config": highest accepted is 7
	// v1 7 true <nil>
	// [res:config res:config:fence]
}
