package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/internal/redact"
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

// Dial builds one RedisNode per redis:// or rediss:// URL (go-redis's URL
// syntax: user, password, database, TLS, and query options such as
// dial_timeout). Unless the URL says otherwise (max_retries), the clients do
// not retry commands or redial: the Locker retries across nodes itself. It
// then pings every node in parallel, bounded by ctx, and
// fails only when no majority answers, so a minority that is down at start-up
// does not stop the caller. A malformed or duplicate URL is an error wrapping
// ErrInvalidConfig; passwords never appear in errors.
//
// Dial connects to each node once with the client's own dialer before its
// first command, so that a node that cannot be reached is reported in Dial's
// error only: go-redis's connection pool would also log the failed dial
// through go-redis's process-wide logger (stderr by default). Dial does not
// change that logger. Once Dial has returned, the pool logs the dials that
// fail while a node is down; silence them with redis.SetLogger, as
// redlock-cli does.
func Dial(ctx context.Context, urls ...string) (Nodes, error) {
	if len(urls) == 0 {
		return nil, fmt.Errorf("%w: no node URLs", ErrInvalidConfig)
	}
	nodes := make(Nodes, 0, len(urls))
	seen := make(map[string]bool, len(urls))
	for _, raw := range urls {
		opts, err := redis.ParseURL(strings.TrimSpace(raw))
		if err != nil {
			_ = nodes.Close()
			return nil, fmt.Errorf("%w: node URL %s: %s", ErrInvalidConfig, redact.URL(raw), redact.URLError(raw, err))
		}
		id := fmt.Sprintf("%s/%d", opts.Addr, opts.DB)
		if seen[id] {
			_ = nodes.Close()
			return nil, fmt.Errorf("%w: node %s given twice (one server must not count twice toward a quorum)", ErrInvalidConfig, opts.Addr)
		}
		seen[id] = true
		// The Locker bounds every call with a context deadline; make the
		// client honour it instead of its own ReadTimeout. Retrying is the
		// Locker's job (across nodes, within the lease's validity), so by
		// default a dead node fails at once instead of being redialled.
		opts.ContextTimeoutEnabled = true
		if opts.MaxRetries == 0 {
			opts.MaxRetries = -1
		}
		if opts.DialerRetries == 0 {
			opts.DialerRetries = 1
		}
		nodes = append(nodes, NewRedisNode(redis.NewClient(opts)))
	}

	type answer struct {
		addr, runID string
		err         error
	}
	answers := make(chan answer, len(nodes))
	for _, n := range nodes {
		go func() {
			c := n.(*RedisNode).client
			if err := dialOnce(ctx, c.(*redis.Client).Options()); err != nil {
				answers <- answer{addr: n.Addr(), err: &NodeError{Addr: n.Addr(), Err: err}}
				return
			}
			// INFO server doubles as the ping and names the server process,
			// so that one server reached under two names is caught.
			info, err := c.Info(ctx, "server").Result()
			var rerr redis.Error
			if errors.As(err, &rerr) && !strings.HasPrefix(rerr.Error(), "WRONGPASS") && !strings.HasPrefix(rerr.Error(), "NOAUTH") {
				// A server that refuses INFO (an ACL user without it, a
				// stand-in like miniredis) still counts if it answers PING.
				info, err = "", c.Ping(ctx).Err()
			}
			if err != nil {
				err = &NodeError{Addr: n.Addr(), Err: err}
			}
			answers <- answer{addr: n.Addr(), runID: infoField(info, "run_id"), err: err}
		}()
	}
	var failed []error
	byRunID := make(map[string]string, len(nodes))
	var dup error
	for range nodes {
		a := <-answers
		switch {
		case a.err != nil:
			failed = append(failed, a.err)
		case a.runID == "":
		case byRunID[a.runID] != "":
			dup = fmt.Errorf("%w: %s and %s are the same server (one server must not count twice toward a quorum)", ErrInvalidConfig, byRunID[a.runID], a.addr)
		default:
			byRunID[a.runID] = a.addr
		}
	}
	if dup != nil {
		_ = nodes.Close()
		return nil, dup
	}
	if len(nodes)-len(failed) < len(nodes)/2+1 {
		_ = nodes.Close()
		return nil, fmt.Errorf("%w: %d of %d nodes answered%w", ErrNoQuorum, len(nodes)-len(failed), len(nodes), nodeErrors(failed))
	}
	return nodes, nil
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

// isAuthError reports whether err is the server refusing our credentials or
// permissions: retrying will not help.
func isAuthError(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	for _, p := range []string{"NOPERM", "WRONGPASS", "NOAUTH"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
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
