package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/e6344662/go-redlock/internal/redact"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
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
	// NotIndependent names the listed nodes that are not independent
	// (one server twice, a replica of another listed node): see
	// independence.
	NotIndependent []string `json:"not_independent,omitempty"`
	// Error, Message and ExitCode are set when fewer than a majority
	// answered: the error object's fields, in the one result.
	Error    string `json:"error,omitempty"`
	Message  string `json:"message,omitempty"`
	ExitCode int    `json:"exit_code,omitempty"`
}

// statusCmd builds status.
func (a *App) statusCmd() *cobra.Command {
	slots := 1
	rw := false
	cmd := &cobra.Command{
		Use:   "status RESOURCE [-n K | --rw]",
		Short: "Show the lock on every node and the overall verdict",
		Long: `Show, per node, whether it answered (with the error if not), the holder's
token prefix and owner, the remaining TTL, the node's fence counter and the
callers waiting in the lock's queue on it; then
the verdict: held (a majority agrees on one token), free (a majority holds no
lock), or unknown (no majority answered, or the answers disagree: a lock
being taken or expiring). With -n K, the same for each slot RESOURCE#0 ..
RESOURCE#K-1 of the semaphore (one result per slot). With --rw, the
read-write lock on RESOURCE: its writer and readers (those a majority of
the nodes records), the writers waiting, and each node's view. Exits 3
when fewer than a majority answered.

` + exitCodeHelp,
		Args: exactArgs("RESOURCE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			resource := args[0]
			if err := a.prepare(cmd, checkSlots(slots), checkResource(resource)); err != nil {
				return err
			}
			if rw && slots > 1 {
				return usageErrorf("-n (a semaphore) does not go with --rw")
			}
			resources := []string{resource}
			if slots > 1 {
				resources = resources[:0]
				for i := range slots {
					resources = append(resources, redlock.SlotResource(resource, i))
				}
			}
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			s, err := a.connect(ctx)
			var ce *cliError
			if err != nil && !rw && errors.As(err, &ce) && (ce.code == exitNoQuorum || ce.code == exitAccessDenied) {
				// No majority answered: still show what each node says.
				return a.statusPerNode(ctx, resources)
			}
			if err != nil {
				return err
			}
			defer s.close()
			indep := independence(ctx, s.nodes, a.g.callTimeout())
			if rw {
				return a.statusRW(ctx, s, resource, indep)
			}
			for _, r := range resources {
				if err := a.status(ctx, s, r, indep); err != nil {
					return err
				}
			}
			return nil
		},
	}
	addSlotsFlag(cmd.Flags(), &slots)
	cmd.Flags().BoolVar(&rw, "rw", false, "show the read-write lock on RESOURCE: its writer and readers")
	return cmd
}

// status prints the state of one resource on every node; indep lists the
// nodes that are not independent (independence).
func (a *App) status(ctx context.Context, s *session, resource string, indep []string) error {
	st, err := s.locker.Inspect(ctx, resource)
	if err != nil {
		return opError(ctx, err, len(s.nodes))
	}
	res := summarizeStatus(s.locker.Key(resource), s.quorum(), st)
	res.NotIndependent = indep
	return a.reportStatus(res, statusNodeErrors(st))
}

// independence reads INFO server and replication from every server behind
// the nodes (each primary of a cluster) and names the nodes that are not
// independent: two that reach one server, or one whose server replicates
// another's (doctor's independent check; a replica is never a vote). A
// server that does not answer in timeout is left out: status shows its
// error anyway.
func independence(ctx context.Context, nodes redisnode.Nodes, timeout time.Duration) []string {
	ids := make([][]serverIdentity, len(nodes))
	var mu sync.Mutex
	var wg sync.WaitGroup
	one := func(i int, c *redis.Client, label string) {
		if id, err := identify(ctx, c, label, timeout); err == nil {
			mu.Lock()
			ids[i] = append(ids[i], id)
			mu.Unlock()
		}
	}
	for i, n := range nodes {
		rn, ok := n.(*redisnode.Node)
		if !ok {
			continue
		}
		switch c := rn.Client().(type) {
		case *redis.Client:
			wg.Go(func() { one(i, c, n.Addr()) })
		case *redis.ClusterClient:
			wg.Go(func() {
				cctx, cancel := context.WithTimeout(ctx, timeout)
				defer cancel()
				_ = c.ForEachMaster(cctx, func(_ context.Context, m *redis.Client) error {
					one(i, m, n.Addr()+"/"+m.Options().Addr)
					return nil
				})
			})
		}
	}
	wg.Wait()
	return dependences(ids)
}

// independenceWarning is status's line about nodes that are not
// independent; "" when there are none.
func independenceWarning(indep []string) string {
	if len(indep) == 0 {
		return ""
	}
	return "warning: the nodes are not independent: " + strings.Join(indep, "; ") + ". Hint: " + independentHint + " (redlock-cli doctor checks them)"
}

// reportStatus prints one resource's status, and returns the no-quorum
// (or access-denied) error when fewer than a majority answered; errs are
// the nodes' errors.
func (a *App) reportStatus(res statusResult, errs []*redlock.NodeError) error {
	for i := range res.Nodes {
		res.Nodes[i].Error = a.redact(res.Nodes[i].Error)
	}
	var ce *cliError
	if res.Answered < res.Quorum {
		msg := fmt.Sprintf("cannot reach a majority of the nodes: %d of %d answered, %d needed", res.Answered, res.Total, res.Quorum)
		if len(errs) > 0 {
			msg += ": " + summarizeNodes(errs)
		}
		ce = &cliError{code: exitNoQuorum, kind: kindNoQuorum, reported: true, msg: clip(msg)}
		if accessDenied(errs, res.Total) {
			ce.code, ce.kind, ce.msg = exitAccessDenied, kindAccessDenied, clip(accessDeniedPrefix+msg)
		}
		if sd := scriptsDisabledError(nil, errs, res.Total); sd != nil {
			ce.code, ce.kind, ce.msg = sd.code, sd.kind, sd.msg
		}
		res.Error, res.Message, res.ExitCode = ce.kind, a.redact(ce.msg), ce.code
	}
	a.report(res, func() { a.printStatus(res) })
	if ce != nil {
		return ce
	}
	return nil
}

// statusPerNode is status when connecting found no majority:
// it asks each node on its own, so the table still shows every node's
// answer or error, and ends with the no-quorum error.
func (a *App) statusPerNode(ctx context.Context, resources []string) error {
	urls, err := a.g.nodeURLs(a.Getenv)
	if err != nil {
		return err
	}
	type one struct {
		s   *session
		err *redlock.NodeError
	}
	nodes := make([]one, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() {
			s, err := a.connectURLs(ctx, []string{u})
			if err == nil {
				nodes[i].s = s
				return
			}
			if errs := nodeErrors(err); len(errs) > 0 {
				nodes[i].err = errs[0]
			} else {
				nodes[i].err = &redlock.NodeError{Addr: redact.URL(u), Err: err}
			}
		})
	}
	wg.Wait()
	defer func() {
		for _, n := range nodes {
			if n.s != nil {
				n.s.close()
			}
		}
	}()
	if ie := interrupted(ctx); ie != nil {
		return ie
	}
	quorum := len(urls)/2 + 1
	var first error
	for _, r := range resources {
		st := &redlock.Status{Resource: r, Nodes: make([]redlock.NodeStatus, len(nodes))}
		key := ""
		for i, n := range nodes {
			if n.s == nil {
				st.Nodes[i] = redlock.NodeStatus{Addr: n.err.Addr, Err: n.err}
				continue
			}
			key = n.s.locker.Key(r)
			one, err := n.s.locker.Inspect(ctx, r)
			if err != nil {
				return opError(ctx, err, len(urls))
			}
			st.Nodes[i] = one.Nodes[0]
		}
		if key == "" {
			key = a.g.prefix + "{" + r + "}"
		}
		if err := a.reportStatus(summarizeStatus(key, quorum, st), statusNodeErrors(st)); err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		// The nodes came back between the two tries.
		return nil
	}
	return first
}

// summarizeStatus turns an Inspect result into the status output, for the
// lock key key and a quorum of quorum nodes.
func summarizeStatus(key string, quorum int, st *redlock.Status) statusResult {
	res := statusResult{
		Resource: st.Resource,
		Key:      key,
		State:    st.State.String(),
		Total:    len(st.Nodes),
		Quorum:   quorum,
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
	if w := independenceWarning(res.NotIndependent); w != "" {
		a.printf("%s\n", w)
	}
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
		return fmt.Sprintf("%q: held by %s (token %s...) on %s, %s; %s; fence counter %d",
			res.Resource, res.Holder.Owner, res.Holder.TokenPrefix, plural(res.HeldOn, "node"), q, expires, res.Fence)
	case res.State == "free":
		return fmt.Sprintf("%q: free on %s, %s; fence counter %d", res.Resource, plural(res.FreeOn, "node"), q, res.Fence)
	case res.Answered < res.Quorum:
		return fmt.Sprintf("%q: unknown: only %s answered, %s", res.Resource, plural(res.Answered, "node"), q)
	}
	return fmt.Sprintf("%q: unknown: no majority agrees (held on %d, free on %d, %s): a lock being taken, released or expiring",
		res.Resource, res.Answered-res.FreeOn, res.FreeOn, q)
}
