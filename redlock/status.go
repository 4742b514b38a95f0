package redlock

import (
	"context"
	"sync"
	"time"
)

// State is the overall verdict of Inspect on a resource.
type State int

const (
	// Unknown means no majority of nodes agreed: too few answered, or they
	// disagree (a lock in the middle of being taken or lost).
	Unknown State = iota
	// Free means a majority of nodes hold no lock on the resource.
	Free
	// Held means a majority of nodes hold the lock with the same token.
	Held
)

// String returns "unknown", "free" or "held".
func (s State) String() string {
	switch s {
	case Free:
		return "free"
	case Held:
		return "held"
	}
	return "unknown"
}

// NodeStatus is one node's view of a resource.
type NodeStatus struct {
	// Addr names the node.
	Addr string
	// Info is the node's state of the resource, when Err is nil.
	Info LockInfo
	// Err is the node's error (a *NodeError), if it failed.
	Err error
	// RTT is the round-trip time of the inspect call.
	RTT time.Duration
}

// Status is the state of one resource across all nodes.
type Status struct {
	// Resource is the inspected resource.
	Resource string
	// State is the verdict.
	State State
	// Holder is the holder's state on one of the agreeing nodes, when Held.
	Holder LockInfo
	// Nodes has one entry per node, in the Locker's node order.
	Nodes []NodeStatus
}

// Inspect reads the state of resource on every node without changing it,
// and gives the verdict: held (by the token a majority agrees on), free, or
// unknown. It never fails for a node's error; those are in Status.Nodes.
func (l *Locker) Inspect(ctx context.Context, resource string) (*Status, error) {
	if err := checkResource(resource); err != nil {
		return nil, err
	}
	key := l.Key(resource)
	st := &Status{Resource: resource, Nodes: make([]NodeStatus, len(l.nodes))}
	var wg sync.WaitGroup
	for i, node := range l.nodes {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, l.cfg.NodeCallTimeout)
			defer cancel()
			start := time.Now()
			info, err := node.Inspect(cctx, key)
			ns := NodeStatus{Addr: node.Addr(), Info: info, RTT: time.Since(start)}
			if err != nil {
				ns.Err = &NodeError{Addr: node.Addr(), Err: err}
			}
			st.Nodes[i] = ns
		})
	}
	wg.Wait()

	free := 0
	byToken := make(map[string]int)
	for _, ns := range st.Nodes {
		switch {
		case ns.Err != nil:
		case !ns.Info.Held:
			free++
		default:
			byToken[ns.Info.Token]++
			if byToken[ns.Info.Token] >= l.quorum && st.State != Held {
				st.State, st.Holder = Held, ns.Info
			}
		}
	}
	if st.State != Held && free >= l.quorum {
		st.State = Free
	}
	return st, nil
}
