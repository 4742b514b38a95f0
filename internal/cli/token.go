package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"
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
// --token, on all nodes, and succeed when a majority did. act makes the
// call, bounded by one node call timeout and a second, and prints its
// result.
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
				cctx, cancel := context.WithTimeout(ctx, a.g.callTimeout()+time.Second)
				defer cancel()
				if err := act(cctx, s, resource, token); err != nil {
					return opError(ctx, err, len(s.nodes))
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "the lock's token, as printed by acquire (required)")
	return cmd
}

// renewCmd builds renew.
func (a *App) renewCmd() *cobra.Command {
	return a.tokenCmd("renew", "Extend the lock held by a token for another TTL",
		`Extend the lock on RESOURCE held by TOKEN to --ttl from now, on every node
where TOKEN holds it. Succeeds when a majority extended it. It never re-creates
a lock that has expired or that another token holds.`,
		func(ctx context.Context, s *session, resource, token string) error {
			until, err := s.locker.Renew(ctx, resource, token)
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
}

// releaseCmd builds release.
func (a *App) releaseCmd() *cobra.Command {
	return a.tokenCmd("release", "Delete the lock held by a token",
		`Delete the lock on RESOURCE held by TOKEN on every node where TOKEN holds it.
Succeeds when a majority deleted it. It never deletes a lock another token
holds.`,
		func(ctx context.Context, s *session, resource, token string) error {
			if err := s.locker.Release(ctx, resource, token); err != nil {
				return err
			}
			a.report(releaseResult{Resource: resource, Released: true}, func() {
				a.printf("released %q\n", resource)
			})
			return nil
		})
}
