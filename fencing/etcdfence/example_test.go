package etcdfence_test

import (
	"context"
	"errors"
	"log"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/fencing/etcdfence"
	"github.com/e6344662/go-redlock/redlock"
)

// The holder of the "config" lock updates two keys in one fenced
// transaction.
func ExampleFencer_Do() {
	ctx := context.Background()
	var client *clientv3.Client // clientv3.New(clientv3.Config{Endpoints: ...})
	var lease *redlock.Lease    // locker.Acquire(ctx, "config")

	f := etcdfence.New(client, "") // fence keys under redlock-fence/
	_, err := f.Do(ctx, "config", lease.Fence(),
		clientv3.OpPut("config/feature-x", "on"),
		clientv3.OpDelete("config/feature-y"))
	if errors.Is(err, fencing.ErrStaleToken) {
		log.Print("a newer holder has written the configuration: nothing applied")
	}
}
