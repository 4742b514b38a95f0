package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/e6344662/go-redlock/fencing/redisfence"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
)

// startServers starts the lock nodes and the resource server.
func (d *demo) startServers() error {
	servers, err := startMiniredis(demoNodes+1, true)
	if err != nil {
		return err
	}
	d.nodes, d.resource = servers[:demoNodes], servers[demoNodes]
	for _, m := range d.nodes {
		d.addrs = append(d.addrs, m.Addr())
	}
	d.store = redisfence.New(d.client(d.resource.Addr()), "demo:")
	return nil
}

// stop closes every locker (releasing what they hold), client and server.
func (d *demo) stop() {
	d.mu.Lock()
	lockers, clients := d.lockers, d.clients
	d.lockers, d.clients = nil, nil
	d.mu.Unlock()
	for _, l := range lockers {
		_ = l.Close()
	}
	for _, c := range clients {
		_ = c.Close()
	}
	stopMiniredis(d.nodes)
	if d.resource != nil {
		d.resource.Close()
	}
}

// client returns a client to addr that fails fast when the server is down.
func (d *demo) client(addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:                  addr,
		DialTimeout:           demoTimeout,
		ReadTimeout:           demoTimeout,
		WriteTimeout:          demoTimeout,
		DialerRetries:         1,
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
		MaintNotificationsConfig: &maintnotifications.Config{
			Mode: maintnotifications.ModeDisabled,
		},
	})
	d.mu.Lock()
	d.clients = append(d.clients, c)
	d.mu.Unlock()
	return c
}

// demoWorker is one lock user, with its own connections, as a separate
// process would have.
type demoWorker struct {
	name   string
	locker *redlock.Locker
}

// newWorker makes a worker with its own clients and Locker, labelled name.
func (d *demo) newWorker(name string) (*demoWorker, error) {
	nodes := make([]redlock.Node, len(d.nodes))
	for i, addr := range d.addrs {
		nodes[i] = redisnode.New(d.client(addr))
	}
	l, err := redlock.New(nodes, redlock.Config{
		LeaseDuration:   demoLease,
		NodeCallTimeout: demoTimeout,
		Owner:           name,
		NewBackOff: func() backoff.BackOff {
			return backoff.NewExponentialBackOff(
				backoff.WithInitialInterval(2*time.Millisecond),
				backoff.WithMaxInterval(20*time.Millisecond),
				backoff.WithMaxElapsedTime(0))
		},
	})
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.lockers = append(d.lockers, l)
	d.mu.Unlock()
	return &demoWorker{name: name, locker: l}, nil
}

// names maps node addresses to n1..n5.
func (d *demo) names(addrs []string) string {
	var out []string
	for _, a := range addrs {
		for i, addr := range d.addrs {
			if addr == a {
				out = append(out, fmt.Sprintf("n%d", i+1))
			}
		}
	}
	return strings.Join(out, " ")
}

// event prints one timestamped line of the scenario.
func (d *demo) event(who, format string, args ...any) {
	d.sayf("  %6.3fs  %-9s %s\n", time.Since(d.start).Seconds(), who, fmt.Sprintf(format, args...))
}

// sayf prints narration when verbose.
func (d *demo) sayf(format string, args ...any) {
	if !d.verbose {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, format, args...)
}
