package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/e6344662/go-redlock/internal/redact"
	"github.com/e6344662/go-redlock/redlock"
)

// rwHolder is a writer or reader in the --json output of status --rw.
type rwHolder struct {
	TokenPrefix string `json:"token_prefix"`
	Owner       string `json:"owner"`
	TTLMillis   int64  `json:"ttl_ms"`
}

// rwStatusNode is one node's entry in the --json output of status --rw.
type rwStatusNode struct {
	Addr           string     `json:"addr"`
	Reachable      bool       `json:"reachable"`
	Writer         *rwHolder  `json:"writer"`
	Readers        []rwHolder `json:"readers"`
	WritersWaiting int        `json:"writers_waiting"`
	Fence          uint64     `json:"fence"`
	Error          string     `json:"error,omitempty"`
}

// rwStatusResult is the --json output of status --rw.
type rwStatusResult struct {
	Resource       string         `json:"resource"`
	RW             bool           `json:"rw"`
	State          string         `json:"state"`
	Writer         *rwHolder      `json:"writer"`
	Readers        []rwHolder     `json:"readers"`
	WritersWaiting int            `json:"writers_waiting"`
	Answered       int            `json:"answered"`
	Total          int            `json:"total"`
	Quorum         int            `json:"quorum"`
	Nodes          []rwStatusNode `json:"nodes"`
	// NotIndependent names the listed nodes that are not independent.
	NotIndependent []string `json:"not_independent,omitempty"`
}

// rwHolderOf is info as status --rw shows it: never the whole token.
func rwHolderOf(info *redlock.LockInfo) *rwHolder {
	if info == nil {
		return nil
	}
	return &rwHolder{TokenPrefix: redact.TokenPrefix(info.Token), Owner: info.Owner, TTLMillis: ttlMillis(info.TTL)}
}

// rwHolders is rwHolderOf for a list.
func rwHolders(infos []redlock.LockInfo) []rwHolder {
	out := []rwHolder{}
	for i := range infos {
		out = append(out, *rwHolderOf(&infos[i]))
	}
	return out
}

// statusRW prints the read-write lock on resource: the writer and the
// readers a majority records, and each node's view. State is "write"
// (a writer holds it), "read" (readers do), "free", or "unknown" when
// fewer than a majority answered. indep lists the nodes that are not
// independent (independence).
func (a *App) statusRW(ctx context.Context, s *session, resource string, indep []string) error {
	rw, err := s.locker.NewRWLock(resource)
	if err != nil {
		return classify(err)
	}
	st, err := rw.Inspect(ctx)
	if err != nil {
		return opError(ctx, err, len(s.nodes))
	}
	res := rwStatusResult{Resource: resource, RW: true, Writer: rwHolderOf(st.Writer), Readers: rwHolders(st.Readers),
		WritersWaiting: st.WritersWaiting, Total: len(st.Nodes), Quorum: s.quorum(), NotIndependent: indep}
	for _, ns := range st.Nodes {
		n := rwStatusNode{Addr: ns.Addr, Reachable: ns.Err == nil, Writer: rwHolderOf(ns.Writer), Readers: rwHolders(ns.Readers),
			WritersWaiting: ns.WritersWaiting, Fence: uint64(ns.Fence)}
		if ns.Err != nil {
			n.Error = a.redact(ns.Err.Error())
		} else {
			res.Answered++
		}
		res.Nodes = append(res.Nodes, n)
	}
	switch {
	case res.Answered < res.Quorum:
		res.State = "unknown"
	case res.Writer != nil:
		res.State = "write"
	case len(res.Readers) > 0:
		res.State = "read"
	default:
		res.State = "free"
	}
	a.report(res, func() {
		tw := a.table()
		fmt.Fprintln(tw, "NODE\tWRITER\tREADERS\tWRITERS WAITING\tFENCE")
		for _, n := range res.Nodes {
			if !n.Reachable {
				fmt.Fprintf(tw, "%s\t(error: %s)\t\t\t\n", n.Addr, n.Error)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\n", n.Addr, describeRWHolder(n.Writer), len(n.Readers), n.WritersWaiting, n.Fence)
		}
		_ = tw.Flush()
		var readers []string
		for _, r := range res.Readers {
			readers = append(readers, describeRWHolder(&r))
		}
		a.printf("%s (read-write): %s; writer %s; %d readers%s; %d writers waiting (%d of %d nodes answered)\n",
			resource, res.State, describeRWHolder(res.Writer), len(res.Readers), listed(readers), res.WritersWaiting, res.Answered, res.Total)
		if w := independenceWarning(res.NotIndependent); w != "" {
			a.printf("%s\n", w)
		}
	})
	if res.Answered < res.Quorum {
		return &cliError{code: exitNoQuorum, kind: kindNoQuorum, reported: true,
			msg: fmt.Sprintf("cannot reach a majority of the nodes: %d of %d answered, %d needed", res.Answered, res.Total, res.Quorum)}
	}
	return nil
}

// describeRWHolder is a holder for people: "abcd1234 (owner, 9.9s)", or
// "none".
func describeRWHolder(h *rwHolder) string {
	if h == nil {
		return "none"
	}
	return fmt.Sprintf("%s (%s, %dms)", h.TokenPrefix, h.Owner, h.TTLMillis)
}

// listed is ": a, b" for a non-empty list, else "".
func listed(items []string) string {
	if len(items) == 0 {
		return ""
	}
	return ": " + strings.Join(items, ", ")
}
