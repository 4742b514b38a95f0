package cli

import (
	"context"
	"errors"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
)

// session is a connection to the nodes and a Locker over them.
type session struct {
	nodes  redisnode.Nodes
	locker *redlock.Locker
}

// quorum is how many of the session's nodes make a majority (the Locker's
// rule: N/2+1).
func (s *session) quorum() int { return len(s.nodes)/2 + 1 }

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
	nodes, err := redisnode.Dial(dctx, urls...)
	if err != nil {
		return nil, opError(ctx, err, len(urls))
	}
	cfg := a.g.config()
	cfg.Observer = a.watched()
	l, err := redlock.New(nodes, cfg)
	if err != nil {
		_ = nodes.Close()
		return nil, classify(err)
	}
	return &session{nodes: nodes, locker: l}, nil
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
