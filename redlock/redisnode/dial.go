package redisnode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/internal/nodeurl"
	"github.com/e6344662/go-redlock/redlock"
)

// Nodes is a set of nodes built by Dial, ready for redlock.New. Close
// closes their clients.
type Nodes []redlock.Node

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

// Dial builds one Node per node URL: a standalone server
// (redis://, rediss:// for TLS, unix:// for a socket), a Redis Cluster
// (redis+cluster://seed:port?addr=seed2:port, one node however many shards)
// or a primary managed by Redis Sentinel
// (redis+sentinel://sentinel:port?master_name=NAME&addr=sentinel2:port, one
// node however many replicas). Options are go-redis's URL options (user,
// password, database, dial_timeout, ...; see package go-redis's ParseURL,
// ParseClusterURL and ParseFailoverURL). Unless the URL says otherwise
// (max_retries), the clients do not retry commands or redial: the Locker
// retries across nodes itself. Unless it says protocol=3, they speak
// RESP2, which spares go-redis a check for push notifications before each
// command; the replies the Locker reads are the same in both.
//
// Dial then asks every node, in parallel and bounded by ctx, which servers
// it is (INFO server: a standalone server or a Sentinel group's current
// primary, every primary of a cluster), and fails only when no majority
// answers, so a minority that is down at start-up does not stop the caller.
// An error wrapping redlock.ErrInvalidConfig reports a malformed URL, a node named
// twice (two URLs reaching one server, directly or through a cluster or
// Sentinel, must not count twice toward a quorum), and a URL of the wrong
// kind (a standalone URL naming a cluster member or a sentinel). Passwords
// never appear in errors.
//
// A TLS node's connections (rediss://, rediss+cluster://,
// rediss+sentinel://) are bounded, the TCP connect and the TLS handshake
// together, by the caller's context and by the URL's dial_timeout (5s by
// default): a server that accepts the connection but never answers the
// handshake, such as one without TLS on that port, holds neither Dial nor
// a Locker's call past its context. A handshake that fails or does not
// finish wraps ErrTLSHandshake, says which, and, when the server may not
// speak TLS on that port, says so. (A Sentinel URL is the exception in
// part: go-redis dials the sentinels in the background under dial_timeout
// alone, and closing the client, as Dial does when it fails, waits for
// that dial.)
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
		return nil, fmt.Errorf("%w: no node URLs", redlock.ErrInvalidConfig)
	}
	nodes, specs, err := build(urls)
	if err != nil {
		return nil, err
	}

	type answer struct {
		addr string
		ids  []string
		err  error
	}
	answers := make(chan answer, len(nodes))
	for i, n := range nodes {
		go func() {
			ids, err := identify(ctx, specs[i], n.(*Node).client)
			if err != nil && !errors.Is(err, redlock.ErrInvalidConfig) {
				err = &redlock.NodeError{Addr: n.Addr(), Err: err}
			}
			answers <- answer{addr: n.Addr(), ids: ids, err: err}
		}()
	}
	var failed []error
	byRunID := make(map[string]string, len(nodes))
	var bad error
	for range nodes {
		a := <-answers
		if errors.Is(a.err, redlock.ErrInvalidConfig) {
			bad = a.err
			continue
		}
		if a.err != nil {
			failed = append(failed, a.err)
			continue
		}
		for _, id := range a.ids {
			if other := byRunID[id]; other != "" && other != a.addr {
				bad = fmt.Errorf("%w: %s and %s reach the same server (one server must not count twice toward a quorum)", redlock.ErrInvalidConfig, other, a.addr)
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
		return nil, fmt.Errorf("%w: %d of %d nodes answered%w", redlock.ErrNoQuorum, len(nodes)-len(failed), len(nodes), joined(failed))
	}
	return nodes, nil
}

// build parses every URL and builds a Node for each, with Dial's client
// options; it refuses a malformed URL and a node named twice.
func build(urls []string) (Nodes, []*nodeurl.Spec, error) {
	nodes := make(Nodes, 0, len(urls))
	specs := make([]*nodeurl.Spec, 0, len(urls))
	seen := make(map[string]bool, len(urls))
	for _, raw := range urls {
		spec, err := nodeurl.Parse(raw)
		if err != nil {
			_ = nodes.Close()
			return nil, nil, fmt.Errorf("%w: %v", redlock.ErrInvalidConfig, err)
		}
		if seen[spec.Key] {
			_ = nodes.Close()
			return nil, nil, fmt.Errorf("%w: node %s given twice (one server must not count twice toward a quorum)", redlock.ErrInvalidConfig, spec.Name)
		}
		seen[spec.Key] = true
		spec.Tune()
		boundTLS(spec)
		useRESP2(spec)
		n := New(spec.NewClient())
		n.addr = spec.Name
		n.failover = spec.FailoverOptions
		nodes = append(nodes, n)
		specs = append(specs, spec)
	}
	return nodes, specs, nil
}

// identify pings the node and returns the run ids of the servers behind it
// (none when a server will not say). A URL that names a deployment of
// another kind than its scheme says is an error wrapping redlock.ErrInvalidConfig.
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
			return nil, fmt.Errorf("%w: %s is not a Redis Cluster (cluster support disabled): name it with redis://", redlock.ErrInvalidConfig, spec.Name)
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
		return nil, fmt.Errorf("%w: %s is a member of a Redis Cluster: name the whole cluster with redis+cluster://%s (one node = one cluster)", redlock.ErrInvalidConfig, spec.Name, spec.Name)
	case spec.Kind == nodeurl.Standalone && mode == "sentinel":
		return nil, fmt.Errorf("%w: %s is a Sentinel, not a data server: use redis+sentinel://%s?master_name=NAME", redlock.ErrInvalidConfig, spec.Name, spec.Name)
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

// useRESP2 makes the node's client speak RESP2 unless the URL chose a
// protocol (protocol=3): the Locker needs nothing of RESP3 (its scripts'
// replies decode alike, and release announcements come on a pub/sub
// connection of their own), and over RESP3 go-redis checks every pooled
// connection for push notifications before each command.
func useRESP2(spec *nodeurl.Spec) {
	set := func(p *int) {
		if *p == 0 {
			*p = 2
		}
	}
	switch spec.Kind {
	case nodeurl.Standalone:
		set(&spec.Options.Protocol)
	case nodeurl.Cluster:
		set(&spec.ClusterOptions.Protocol)
	case nodeurl.Sentinel:
		set(&spec.FailoverOptions.Protocol)
	}
}

// ErrTLSHandshake is wrapped by the error of a connection to a TLS node
// whose TLS handshake failed or did not finish within the caller's context
// or the node's dial timeout; the error also wraps the cause (a
// tls.RecordHeaderError, context.DeadlineExceeded, ...).
var ErrTLSHandshake = errors.New("redisnode: TLS handshake failed")

// defaultDialTimeout is go-redis's dial timeout when a URL sets none.
const defaultDialTimeout = 5 * time.Second

// boundTLS gives the options of a TLS node a dialer that bounds the
// handshake by the caller's context (tlsDialer). go-redis's own dialer
// uses tls.DialWithDialer, which takes no context: a handshake that gets
// no answer then lasts the whole dial timeout whatever the context says.
// A dialer set by other means is kept.
func boundTLS(spec *nodeurl.Spec) {
	set := func(dialer *func(context.Context, string, string) (net.Conn, error), timeout time.Duration, cfg *tls.Config) {
		if cfg != nil && *dialer == nil {
			*dialer = tlsDialer(timeout, cfg)
		}
	}
	switch spec.Kind {
	case nodeurl.Standalone:
		o := spec.Options
		set(&o.Dialer, o.DialTimeout, o.TLSConfig)
	case nodeurl.Cluster:
		o := spec.ClusterOptions
		set(&o.Dialer, o.DialTimeout, o.TLSConfig)
	case nodeurl.Sentinel:
		o := spec.FailoverOptions
		set(&o.Dialer, o.DialTimeout, o.TLSConfig)
	}
}

// tlsDialer returns a dialer that connects over TCP and then makes the TLS
// handshake with cfg, both within ctx and timeout (0: go-redis's default;
// negative: none). A handshake that fails or times out returns a
// *handshakeError.
func tlsDialer(timeout time.Duration, cfg *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if timeout == 0 {
		timeout = defaultDialTimeout
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		d := net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3}}
		raw, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c := cfg
		if c.ServerName == "" {
			// As tls.Dial does: verify the certificate against the host.
			host, _, splitErr := net.SplitHostPort(addr)
			if splitErr != nil {
				host = addr
			}
			c = cfg.Clone()
			c.ServerName = host
		}
		conn := tls.Client(raw, c)
		if err := conn.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, &handshakeError{err: err, timedOut: ctx.Err() != nil}
		}
		return conn, nil
	}
}

// handshakeError is a TLS handshake that failed, or did not finish in time
// (timedOut). It wraps ErrTLSHandshake and the cause.
type handshakeError struct {
	err      error
	timedOut bool
}

// notTLSHint follows the causes that a server without TLS on the port
// gives a TLS client.
const notTLSHint = ": it may not speak TLS on this port (for a server without TLS, use redis:// rather than rediss://)"

func (e *handshakeError) Error() string {
	var rec tls.RecordHeaderError
	switch {
	case e.timedOut:
		return "TLS handshake timed out (" + e.err.Error() + "): the server accepted the connection but did not answer the handshake" + notTLSHint
	case errors.As(e.err, &rec):
		return "TLS handshake failed: the server answered, but not in TLS" + notTLSHint
	case errors.Is(e.err, io.EOF), errors.Is(e.err, syscall.ECONNRESET):
		return "TLS handshake failed: the server closed the connection (" + e.err.Error() + ")" + notTLSHint
	}
	return "TLS handshake failed: " + e.err.Error()
}

// Unwrap returns ErrTLSHandshake and the cause.
func (e *handshakeError) Unwrap() []error { return []error{ErrTLSHandshake, e.err} }

// infoField returns field's value in an INFO reply, or "".
func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), field+":"); ok {
			return v
		}
	}
	return ""
}

// joined prints node errors after a summary, each after "; ", and wraps
// them.
type joined []error

func (es joined) Error() string {
	var b strings.Builder
	for _, err := range es {
		b.WriteString("; " + err.Error())
	}
	return b.String()
}

// Unwrap returns the node errors.
func (es joined) Unwrap() []error { return es }
