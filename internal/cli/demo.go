package cli

import (
	"github.com/spf13/cobra"
)

// demoResult is the --json output of demo.
type demoResult struct {
	Acquisitions   int    `json:"acquisitions"`
	WritesAccepted int    `json:"writes_accepted"`
	StaleRejected  int    `json:"stale_rejected"`
	Balance        int    `json:"balance"`
	FirstFence     uint64 `json:"first_fence"`
	LastFence      uint64 `json:"last_fence"`
	DurationMS     int64  `json:"duration_ms"`
}

// demoCmd builds demo.
func (a *App) demoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Watch locks and fencing at work, with no Redis needed",
		Long: `Start five embedded Redis nodes (miniredis) and a separate embedded Redis as
the protected resource, all in this process, and play a short scenario:
workers contend for one lock and add to a balance with fenced writes; a node
is killed and the lock still works; a worker is paused past its lease, and its
late write is rejected by the fence. Ends with a summary line. The --nodes,
--ttl and --timeout flags are not used. With --json, prints only the summary
as a JSON object.

` + exitCodeHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			d := newDemo(a.Stdout, !a.g.json)
			res, err := d.play(ctx)
			if ie := interrupted(ctx); ie != nil {
				return ie
			}
			if err != nil {
				return &cliError{code: exitFailure, kind: kindFailure, msg: "demo: " + oneLine(err), err: err}
			}
			a.report(res, func() {
				a.printf("\nsummary: %s, %s accepted, %s rejected; fencing tokens %d..%d strictly increasing; balance %d = accepted writes (%dms)\n",
					plural(res.Acquisitions, "acquisition"), plural(res.WritesAccepted, "fenced write"), plural(res.StaleRejected, "stale write"),
					res.FirstFence, res.LastFence, res.Balance, res.DurationMS)
			})
			return nil
		},
	}
}
