package cli

import (
	"context"
	"errors"
	"strings"

	"github.com/e6344662/go-redlock/internal/nodeurl"
	"github.com/e6344662/go-redlock/redlock"
)

// session is a connection to the nodes and a Locker over them.
type session struct {
	nodes  redlock.Nodes
	locker *redlock.Locker
}

// connect dials the nodes named by the global flags and builds a Locker.
// Errors are *cliError values: usage (bad URL or configuration) or no
// quorum (no majority answered a PING within the call timeout).
func (a *App) connect(ctx context.Context) (*session, error) {
	urls, err := a.g.nodeURLs(a.Getenv)
	if err != nil {
		return nil, err
	}
	return a.connectURLs(ctx, urls)
}

// connectURLs is connect to the nodes at urls. The Locker reports its
// events to a.observer, if set.
func (a *App) connectURLs(ctx context.Context, urls []string) (*session, error) {
	if a.g.ttl < redlock.MinLeaseDuration {
		return nil, usageErrorf("--ttl %s is below the minimum %s", a.g.ttl, redlock.MinLeaseDuration)
	}
	dctx, cancel := context.WithTimeout(ctx, a.g.callTimeout())
	defer cancel()
	nodes, err := redlock.Dial(dctx, urls...)
	if err != nil {
		ce := opError(ctx, err, len(urls))
		ce.msg = clip(tlsHint(ce.msg, urls))
		return nil, ce
	}
	cfg := a.g.config()
	cfg.Observer = a.observer
	if a.watch != nil {
		cfg.Observer = a.watch
	}
	l, err := redlock.New(nodes, cfg)
	if err != nil {
		_ = nodes.Close()
		return nil, classify(err)
	}
	return &session{nodes: nodes, locker: l}, nil
}

// tlsHintText follows "timed out" for a node named by a rediss:// URL: a
// TLS client waiting for a plain server's handshake sees only a timeout.
const tlsHintText = " (during the TLS handshake? if the server does not speak TLS, use redis:// rather than rediss://)"

// tlsHint adds tlsHintText after "ADDR: timed out" in msg for each
// standalone node of urls that uses TLS.
func tlsHint(msg string, urls []string) string {
	for _, u := range urls {
		spec, err := nodeurl.Parse(u)
		if err != nil || spec.Kind != nodeurl.Standalone || spec.Options.TLSConfig == nil {
			continue
		}
		old := spec.Name + ": timed out"
		if i := strings.Index(msg, old); i >= 0 && !strings.HasPrefix(msg[i+len(old):], tlsHintText) {
			msg = msg[:i+len(old)] + tlsHintText + msg[i+len(old):]
		}
	}
	return msg
}

// withSession is the frame of the commands that work on a lock over a
// session: it traps the stop signals (a signal cancels ctx, and the
// connection, acquisition or call it interrupts returns the exit error of
// interrupted), connects to the nodes of the global flags, runs fn and
// closes the session. Call prepare first.
func (a *App) withSession(ctx context.Context, fn func(ctx context.Context, s *session) error) error {
	ctx, stop := interruptible(ctx)
	defer stop()
	s, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	return fn(ctx, s)
}

// close releases every lease still held, stops background work and closes
// the connections.
func (s *session) close() {
	_ = s.locker.Close()
	_ = s.nodes.Close()
}

// opError maps the failure of a call on n nodes (dial, renew, release or
// inspect) to a *cliError: interrupted when a signal ended ctx, no quorum
// with a message naming the nodes that failed, or as classify says.
func opError(ctx context.Context, err error, n int) *cliError {
	if ie := interrupted(ctx); ie != nil {
		return ie
	}
	if errors.Is(err, redlock.ErrNoQuorum) {
		return noQuorumError(err, answeredNodes(err, n), n)
	}
	return classify(err)
}
