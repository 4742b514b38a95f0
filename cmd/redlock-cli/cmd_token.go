package main

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
// --token, on all nodes, and succeed when a majority did.
func (a *app) tokenCmd(use, short, long string, act func(ctx context.Context, s *session, resource, token string) error) *cobra.Command {
	var token string
	cmd := &cobra.Command{
		Use:   use + " RESOURCE --token TOKEN",
		Short: short,
		Long:  long + "\n\n" + exitCodeHelp,
		Args:  exactArgs("RESOURCE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.prepare(cmd); err != nil {
				return err
			}
			resource := args[0]
			if err := checkResource(resource); err != nil {
				return err
			}
			if err := checkToken(token); err != nil {
				return err
			}
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			s, err := a.connect(ctx)
			if err != nil {
				return err
			}
			defer s.close()
			if err := act(ctx, s, resource, token); err != nil {
				return opError(ctx, err, len(s.nodes))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "the lock's token, as printed by acquire (required)")
	return cmd
}

func (a *app) renewCmd() *cobra.Command {
	return a.tokenCmd("renew", "Extend the lock held by a token for another TTL",
		`Extend the lock on RESOURCE held by TOKEN to --ttl from now, on every node
where TOKEN holds it. Succeeds when a majority extended it. It never re-creates
a lock that has expired or that another token holds.`,
		func(ctx context.Context, s *session, resource, token string) error {
			cctx, cancel := context.WithTimeout(ctx, a.g.callTimeout()+time.Second)
			defer cancel()
			until, err := s.locker.Renew(cctx, resource, token)
			if err != nil {
				return err
			}
			res := renewResult{Resource: resource, Renewed: true,
				ExpiresAt: wallClock(until).Format(time.RFC3339Nano), TTLMillis: time.Until(until).Milliseconds()}
			if a.g.json {
				a.emit(res)
			} else {
				a.printf("renewed %q until %s (in %s)\n", resource, res.ExpiresAt, fmtDuration(time.Until(until)))
			}
			return nil
		})
}

func (a *app) releaseCmd() *cobra.Command {
	return a.tokenCmd("release", "Delete the lock held by a token",
		`Delete the lock on RESOURCE held by TOKEN on every node where TOKEN holds it.
Succeeds when a majority deleted it. It never deletes a lock another token
holds.`,
		func(ctx context.Context, s *session, resource, token string) error {
			cctx, cancel := context.WithTimeout(ctx, a.g.callTimeout()+time.Second)
			defer cancel()
			if err := s.locker.Release(cctx, resource, token); err != nil {
				return err
			}
			if a.g.json {
				a.emit(releaseResult{Resource: resource, Released: true})
			} else {
				a.printf("released %q\n", resource)
			}
			return nil
		})
}
