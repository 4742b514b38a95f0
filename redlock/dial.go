package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/internal/nodeurl"
)

// Nodes is a set of nodes built by Dial. Close closes their clients.
type Nodes []Node

// Close closes every node that has a Close method and joins their errors.
func (ns Nodes) Close() error {
	var errs []error
	for _, n := range ns {
		if c, ok := n.(interface{ Close() error }); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close %s: %w", n.Addr(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// Dial builds one RedisNode per node URL: a standalone server
// (redis://, rediss:// for TLS, unix:// for a socket), a Redis Cluster
// (redis+cluster://seed:port?addr=seed2:port, one node however many shards)
// or a primary managed by Redis Sentinel
// (redis+sentinel://sentinel:port?master_name=NAME&addr=sentinel2:port, one
// node however many replicas). Options are go-redis's URL options (user,
// password, database, dial_timeout, ...; see package go-redis's ParseURL,
// ParseClusterURL and ParseFailoverURL). Unless the URL says otherwise
// (max_retries), the clients do not retry commands or redial: the Locker
// retries across nodes itself.
//
// Dial then asks every node, in parallel and bounded by ctx, which servers
// it is (INFO server: a standalone server or a Sentinel group's current
// primary, every primary of a cluster), and fails only when no majority
// answers, so a minority that is down at start-up does not stop the caller.
// An error wrapping ErrInvalidConfig reports a malformed URL, a node named
// twice (two URLs reaching one server, directly or through a cluster or
// Sentinel, must not count twice toward a quorum), and a URL of the wrong
// kind (a standalone URL naming a cluster member or a sentinel). Passwords
// never appear in errors.
//
// Dial connects to each standalone node once with the client's own dialer
// before its first command, so that a node that cannot be reached is
// reported in Dial's error only: go-redis's connection pool would also log
// the failed dial through go-redis's process-wide logger (stderr by
// default). Dial does not change that logger. Once Dial has returned (and
// while it dials a cluster or Sentinel group), go-redis logs the dials that
// fail while a server is down; silence them with redis.SetLogger, as
// redlock-cli does.
func Dial(ctx context.Context, urls ...string) (Nodes, error) {
	if len(urls) == 0 {
		return nil, fmt.Errorf("%w: no node URLs", ErrInvalidConfig)
	}
	nodes := make(Nodes, 0, len(urls))
	specs := make([]*nodeurl.Spec, 0, len(urls))
	seen := make(map[string]bool, len(urls))
	for _, raw := range urls {
		spec, err := nodeurl.Parse(raw)
		if err != nil {
			_ = nodes.Close()
			return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
		if seen[spec.Key] {
			_ = nodes.Close()
			return nil, fmt.Errorf("%w: node %s given twice (one server must not count twice toward a quorum)", ErrInvalidConfig, spec.Name)
		}
		seen[spec.Key] = true
		spec.Tune()
		n := NewRedisNode(spec.NewClient())
		n.addr = spec.Name
		n.failover = spec.FailoverOptions
		nodes = append(nodes, n)
		specs = append(specs, spec)
	}

	type answer struct {
		addr string
		ids  []string
		err  error
	}
	answers := make(chan answer, len(nodes))
	for i, n := range nodes {
		go func() {
			ids, err := identify(ctx, specs[i], n.(*RedisNode).client)
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				err = &NodeError{Addr: n.Addr(), Err: err}
			}
			answers <- answer{addr: n.Addr(), ids: ids, err: err}
		}()
	}
	var failed []error
	byRunID := make(map[string]string, len(nodes))
	var bad error
	for range nodes {
		a := <-answers
		if errors.Is(a.err, ErrInvalidConfig) {
			bad = a.err
			continue
		}
		if a.err != nil {
			failed = append(failed, a.err)
			continue
		}
		for _, id := range a.ids {
			if other := byRunID[id]; other != "" && other != a.addr {
				bad = fmt.Errorf("%w: %s and %s reach the same server (one server must not count twice toward a quorum)", ErrInvalidConfig, other, a.addr)
			}
			byRunID[id] = a.addr
		}
	}
	if bad != nil {
		_ = nodes.Close()
		return nil, bad
	}
	if len(nodes)-len(failed) < len(nodes)/2+1 {
		_ = nodes.Close()
		return nil, fmt.Errorf("%w: %d of %d nodes answered%w", ErrNoQuorum, len(nodes)-len(failed), len(nodes), nodeErrors(failed))
	}
	return nodes, nil
}

// identify pings the node and returns the run ids of the servers behind it
// (none when a server will not say). A URL that names a deployment of
// another kind than its scheme says is an error wrapping ErrInvalidConfig.
func identify(ctx context.Context, spec *nodeurl.Spec, c redis.UniversalClient) ([]string, error) {
	switch spec.Kind {
	case nodeurl.Cluster:
		var mu sync.Mutex
		var ids []string
		err := c.(*redis.ClusterClient).ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			info, err := serverInfo(ctx, m)
			mu.Lock()
			defer mu.Unlock()
			if id := infoField(info, "run_id"); id != "" {
				ids = append(ids, id)
			}
			return err
		})
		if err != nil && strings.Contains(err.Error(), "cluster support disabled") {
			return nil, fmt.Errorf("%w: %s is not a Redis Cluster (cluster support disabled): name it with redis://", ErrInvalidConfig, spec.Name)
		}
		if len(ids) > 0 {
			err = nil // a cluster with a shard down still serves the others
		}
		return ids, err
	case nodeurl.Standalone:
		if err := dialOnce(ctx, c.(*redis.Client).Options()); err != nil {
			return nil, err
		}
	}
	info, err := serverInfo(ctx, c)
	if err != nil {
		return nil, err
	}
	switch mode := infoField(info, "redis_mode"); {
	case spec.Kind == nodeurl.Standalone && mode == "cluster":
		return nil, fmt.Errorf("%w: %s is a member of a Redis Cluster: name the whole cluster with redis+cluster://%s (one node = one cluster)", ErrInvalidConfig, spec.Name, spec.Name)
	case spec.Kind == nodeurl.Standalone && mode == "sentinel":
		return nil, fmt.Errorf("%w: %s is a Sentinel, not a data server: use redis+sentinel://%s?master_name=NAME", ErrInvalidConfig, spec.Name, spec.Name)
	}
	if id := infoField(info, "run_id"); id != "" {
		return []string{id}, nil
	}
	return nil, nil
}

// serverInfo returns the server's INFO server section, which doubles as a
// ping. A server that refuses INFO (an ACL user without it, a stand-in like
// miniredis) answers a PING instead and returns "".
func serverInfo(ctx context.Context, c redis.Cmdable) (string, error) {
	info, err := c.Info(ctx, "server").Result()
	var rerr redis.Error
	if errors.As(err, &rerr) && !strings.HasPrefix(rerr.Error(), "WRONGPASS") && !strings.HasPrefix(rerr.Error(), "NOAUTH") {
		return "", c.Ping(ctx).Err()
	}
	return info, err
}

// dialOnce opens and closes one connection to the server of opts with the
// client's dialer (TLS included), bounded by DialTimeout as go-redis bounds
// each of its own dials. A failure here is not logged by go-redis.
func dialOnce(ctx context.Context, opts *redis.Options) error {
	if opts.DialTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.DialTimeout)
		defer cancel()
	}
	conn, err := opts.Dialer(ctx, opts.Network, opts.Addr)
	if err != nil {
		return err
	}
	_ = conn.Close()
	return nil
}

// infoField returns field's value in an INFO reply, or "".
func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), field+":"); ok {
			return v
		}
	}
	return ""
}
