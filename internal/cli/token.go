package cli

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/e6344662/go-redlock/redlock"
)

// renewResult is the --json output of renew.
type renewResult struct {
	Resource  string `json:"resource"`
	Renewed   bool   `json:"renewed"`
	ExpiresAt string `json:"expires_at"`
	TTLMillis int64  `json:"ttl_ms"`
}

// releaseResult is the --json output of release.
type releaseResult struct {
	Resource string `json:"resource"`
	Released bool   `json:"released"`
}

// tokenCmd builds renew and release: commands that act on the lock held by
// --token, on all nodes, and succeed when a majority did. act makes its
// calls, each bounded by bounded (one node call timeout and a second), and
// prints its result.
func (a *App) tokenCmd(use, short, long string, act func(ctx context.Context, s *session, resource, token string) error) *cobra.Command {
	var token string
	cmd := &cobra.Command{
		Use:   use + " RESOURCE --token TOKEN",
		Short: short,
		Long:  long + "\n\n" + exitCodeHelp,
		Args:  exactArgs("RESOURCE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			resource := args[0]
			if err := a.prepare(cmd, checkResource(resource), checkToken(token)); err != nil {
				return err
			}
			return a.withSession(cmd.Context(), func(ctx context.Context, s *session) error {
				if err := act(ctx, s, resource, token); err != nil {
					return opError(ctx, err, len(s.nodes))
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "the lock's token, as printed by acquire (required)")
	return cmd
}

// bounded bounds one call of renew or release on all nodes: one node call
// timeout and a second.
func (a *App) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.g.callTimeout()+time.Second)
}

// renewCmd builds renew.
func (a *App) renewCmd() *cobra.Command {
	var cmd *cobra.Command
	cmd = a.tokenCmd("renew", "Extend the lock held by a token for another TTL",
		`Extend the lock on RESOURCE held by TOKEN to --ttl from now, on every node
where TOKEN holds it. Succeeds when a majority extended it. It never re-creates
a lock that has expired or that another token holds.

Give renew the --ttl the lock was acquired with: the nodes do not store it.
Without --ttl, renew first reads the lock and refuses (exit 2) when the
default TTL would end it sooner than it ends now, so a lock taken with
"acquire --ttl 15m" is never cut to 10s by a bare "renew". An explicit --ttl
is always applied, shorter or not.`,
		func(ctx context.Context, s *session, resource, token string) error {
			if !cmd.Flags().Changed("ttl") {
				if err := a.checkNotShortened(ctx, s, resource, token); err != nil {
					return err
				}
			}
			cctx, cancel := a.bounded(ctx)
			defer cancel()
			until, err := s.locker.Renew(cctx, resource, token)
			if err != nil {
				return err
			}
			res := renewResult{Resource: resource, Renewed: true,
				ExpiresAt: expiresAt(until), TTLMillis: time.Until(until).Milliseconds()}
			a.report(res, func() {
				a.printf("renewed %q until %s (in %s)\n", resource, res.ExpiresAt, fmtDuration(time.Until(until)))
			})
			return nil
		})
	return cmd
}

// checkNotShortened is renew's guard when --ttl was not given: it reads
// the lock and fails with a would_shorten usage error when the lock held
// by token has more time left than the TTL in effect would give it. The
// time left is the lock's as a majority holds it: the quorum-th longest TTL
// among the nodes where token holds it. When too few nodes say (the token
// holds it on fewer than a majority, or they did not answer), it returns
// nil and leaves the verdict to the renewal itself.
func (a *App) checkNotShortened(ctx context.Context, s *session, resource, token string) error {
	cctx, cancel := a.bounded(ctx)
	defer cancel()
	st, err := s.locker.Inspect(cctx, resource)
	if err != nil {
		return err
	}
	left := remainingTTL(st, token, s.quorum())
	if left <= a.g.ttl {
		return nil
	}
	return &cliError{code: exitUsage, kind: kindWouldShorten,
		msg: fmt.Sprintf("renew would shorten the lock on %q from %s left to the default --ttl %s: "+
			"give --ttl explicitly (the TTL it was acquired with, or %s to keep it as it is)",
			resource, roundDur(left), a.g.ttl, roundUpSecond(left)),
		extra: map[string]any{"remaining_ttl_ms": left.Milliseconds(), "ttl_ms": a.g.ttl.Milliseconds()}}
}

// remainingTTL is how long the lock on st's resource held by token has
// left on a majority (quorum) of the nodes: the quorum-th longest TTL
// among the nodes where token holds it with an expiry, or 0 when fewer
// than quorum such nodes answered.
func remainingTTL(st *redlock.Status, token string, quorum int) time.Duration {
	var ttls []time.Duration
	for _, ns := range st.Nodes {
		if ns.Err == nil && ns.Info.Held && ns.Info.Token == token && ns.Info.TTL > 0 {
			ttls = append(ttls, ns.Info.TTL)
		}
	}
	if quorum <= 0 || len(ttls) < quorum {
		return 0
	}
	slices.Sort(ttls)
	slices.Reverse(ttls)
	return ttls[quorum-1]
}

// roundUpSecond rounds d up to a whole second (at least 1s).
func roundUpSecond(d time.Duration) time.Duration {
	return max(time.Second, (d + time.Second - 1).Truncate(time.Second))
}

// releaseCmd builds release.
func (a *App) releaseCmd() *cobra.Command {
	return a.tokenCmd("release", "Delete the lock held by a token",
		`Delete the lock on RESOURCE held by TOKEN on every node where TOKEN holds it.
Succeeds when a majority deleted it. It never deletes a lock another token
holds.`,
		func(ctx context.Context, s *session, resource, token string) error {
			cctx, cancel := a.bounded(ctx)
			defer cancel()
			if err := s.locker.Release(cctx, resource, token); err != nil {
				return err
			}
			a.report(releaseResult{Resource: resource, Released: true}, func() {
				a.printf("released %q\n", resource)
			})
			return nil
		})
}
