package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/e6344662/go-redlock/internal/redact"
	"github.com/e6344662/go-redlock/redlock"
)

// statusNode is one node's entry in the --json output of status.
type statusNode struct {
	Addr        string  `json:"addr"`
	Reachable   bool    `json:"reachable"`
	Held        bool    `json:"held"`
	TokenPrefix string  `json:"token_prefix,omitempty"`
	Owner       string  `json:"owner,omitempty"`
	TTLMillis   int64   `json:"ttl_ms"`
	Fence       uint64  `json:"fence"`
	Waiting     int     `json:"waiting"`
	RTTMillis   float64 `json:"rtt_ms"`
	Error       string  `json:"error,omitempty"`
}

// statusHolder is the holder in the --json output of status.
type statusHolder struct {
	TokenPrefix string `json:"token_prefix"`
	Owner       string `json:"owner"`
	TTLMillis   int64  `json:"ttl_ms"`
}

// statusResult is the --json output of status.
type statusResult struct {
	Resource string        `json:"resource"`
	Key      string        `json:"key"`
	State    string        `json:"state"`
	Holder   *statusHolder `json:"holder"`
	HeldOn   int           `json:"held_on"`
	FreeOn   int           `json:"free_on"`
	Answered int           `json:"answered"`
	Total    int           `json:"total"`
	Quorum   int           `json:"quorum"`
	Fence    uint64        `json:"fence"`
	Waiting  int           `json:"waiting"`
	Nodes    []statusNode  `json:"nodes"`
}

// statusCmd builds status.
func (a *App) statusCmd() *cobra.Command {
	slots := 1
	cmd := &cobra.Command{
		Use:   "status RESOURCE [-n K]",
		Short: "Show the lock on every node and the overall verdict",
		Long: `Show, per node, whether it answered (with the error if not), the holder's
token prefix and owner, the remaining TTL, the node's fence counter and the
callers waiting in the lock's queue on it; then
the verdict: held (a majority agrees on one token), free (a majority holds no
lock), or unknown (no majority answered, or the answers disagree: a lock
being taken or expiring). With -n K, the same for each slot RESOURCE#0 ..
RESOURCE#K-1 of the semaphore (one result per slot). Exits 3 when fewer than
a majority answered.

` + exitCodeHelp,
		Args: exactArgs("RESOURCE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			resource := args[0]
			if err := a.prepare(cmd, checkSlots(slots), checkResource(resource)); err != nil {
				return err
			}
			resources := []string{resource}
			if slots > 1 {
				resources = resources[:0]
				for i := range slots {
					resources = append(resources, redlock.SlotResource(resource, i))
				}
			}
			return a.withSession(cmd.Context(), func(ctx context.Context, s *session) error {
				for _, r := range resources {
					if err := a.status(ctx, s, r); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	addSlotsFlag(cmd.Flags(), &slots)
	return cmd
}

// status prints the state of one resource on every node.
func (a *App) status(ctx context.Context, s *session, resource string) error {
	st, err := s.locker.Inspect(ctx, resource)
	if err != nil {
		return opError(ctx, err, len(s.nodes))
	}
	res := summarizeStatus(s.locker, st)
	for i := range res.Nodes {
		res.Nodes[i].Error = a.redact(res.Nodes[i].Error)
	}
	a.report(res, func() { a.printStatus(res) })
	if res.Answered < res.Quorum {
		msg := fmt.Sprintf("cannot reach a majority of the nodes: %d of %d answered, %d needed", res.Answered, res.Total, res.Quorum)
		if accessDenied(statusNodeErrors(st), res.Total) {
			return &cliError{code: exitAccessDenied, kind: kindAccessDenied, reported: true, msg: accessDeniedPrefix + msg}
		}
		return &cliError{code: exitNoQuorum, kind: kindNoQuorum, reported: true, msg: msg}
	}
	return nil
}

// summarizeStatus turns an Inspect result into the status output.
func summarizeStatus(l *redlock.Locker, st *redlock.Status) statusResult {
	res := statusResult{
		Resource: st.Resource,
		Key:      l.Key(st.Resource),
		State:    st.State.String(),
		Total:    len(st.Nodes),
		Quorum:   l.Quorum(),
		Nodes:    make([]statusNode, 0, len(st.Nodes)),
	}
	for _, ns := range st.Nodes {
		n := statusNode{Addr: ns.Addr, RTTMillis: float64(ns.RTT.Microseconds()) / 1000}
		if ns.Err != nil {
			n.Error = reason(unwrapNode(ns.Err))
			res.Nodes = append(res.Nodes, n)
			continue
		}
		res.Answered++
		n.Reachable = true
		n.Fence = uint64(ns.Info.Fence)
		res.Fence = max(res.Fence, n.Fence)
		n.Waiting = ns.Info.Waiters
		res.Waiting = max(res.Waiting, n.Waiting)
		if ns.Info.Held {
			n.Held = true
			n.TokenPrefix = redact.TokenPrefix(ns.Info.Token)
			n.Owner = ns.Info.Owner
			n.TTLMillis = ttlMillis(ns.Info.TTL)
			if st.State == redlock.Held && ns.Info.Token == st.Holder.Token {
				res.HeldOn++
			}
		} else {
			res.FreeOn++
		}
		res.Nodes = append(res.Nodes, n)
	}
	if st.State == redlock.Held {
		res.Holder = &statusHolder{
			TokenPrefix: redact.TokenPrefix(st.Holder.Token),
			Owner:       st.Holder.Owner,
			TTLMillis:   ttlMillis(st.Holder.TTL),
		}
	}
	return res
}

// statusNodeErrors returns the errors of the nodes that failed.
func statusNodeErrors(st *redlock.Status) []*redlock.NodeError {
	var out []*redlock.NodeError
	for _, ns := range st.Nodes {
		if ne, ok := ns.Err.(*redlock.NodeError); ok {
			out = append(out, ne)
		}
	}
	return out
}

// unwrapNode returns the error inside a *redlock.NodeError.
func unwrapNode(err error) error {
	if ne, ok := err.(*redlock.NodeError); ok {
		return ne.Err
	}
	return err
}

// printStatus prints status's table and verdict.
func (a *App) printStatus(res statusResult) {
	tw := a.table()
	fmt.Fprintln(tw, "NODE\tLOCK\tTOKEN\tOWNER\tTTL\tFENCE\tWAITING\tRTT\tERROR")
	for _, n := range res.Nodes {
		rtt := fmtDuration(time.Duration(n.RTTMillis * float64(time.Millisecond)))
		switch {
		case !n.Reachable:
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t%s\t%s\n", n.Addr, rtt, n.Error)
		case n.Held:
			fmt.Fprintf(tw, "%s\theld\t%s\t%s\t%s\t%d\t%d\t%s\t\n", n.Addr, n.TokenPrefix, n.Owner, ttlText(n.TTLMillis), n.Fence, n.Waiting, rtt)
		default:
			fmt.Fprintf(tw, "%s\tfree\t-\t-\t-\t%d\t%d\t%s\t\n", n.Addr, n.Fence, n.Waiting, rtt)
		}
	}
	_ = tw.Flush()
	a.printf("%s\n", verdict(res))
}

// verdict is the last line of status.
func verdict(res statusResult) string {
	q := fmt.Sprintf("quorum %d of %d", res.Quorum, res.Total)
	switch {
	case res.Holder != nil:
		expires := "expires in " + ttlText(res.Holder.TTLMillis)
		if res.Holder.TTLMillis < 0 {
			expires = "no expiry: not a redlock lock, it stays until deleted"
		}
		return fmt.Sprintf("%q: held by %s (token %s...) on %d nodes, %s; %s; fence counter %d",
			res.Resource, res.Holder.Owner, res.Holder.TokenPrefix, res.HeldOn, q, expires, res.Fence)
	case res.State == "free":
		return fmt.Sprintf("%q: free on %d nodes, %s; fence counter %d", res.Resource, res.FreeOn, q, res.Fence)
	case res.Answered < res.Quorum:
		return fmt.Sprintf("%q: unknown: only %d nodes answered, %s", res.Resource, res.Answered, q)
	}
	return fmt.Sprintf("%q: unknown: no majority agrees (held on %d, free on %d, %s): a lock being taken, released or expiring",
		res.Resource, res.Answered-res.FreeOn, res.FreeOn, q)
}
