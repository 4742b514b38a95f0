package redlock

import (
	"context"
	"fmt"
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
	type inspected struct {
		info LockInfo
		rtt  time.Duration
	}
	var wg sync.WaitGroup
	keys := lockKeys(key)
	replies, deadline := fanout(l, ctx, "inspect", l.allIdxs(), &wg, nil, func(ctx context.Context, i int) (inspected, error) {
		start := time.Now()
		info, err := inspect(ctx, l.nodes[i], keys)
		return inspected{info, time.Since(start)}, err
	})
	answered := make([]bool, len(l.nodes))
	gather(ctx, replies, deadline, len(l.nodes), func(r reply[inspected]) bool {
		answered[r.idx] = true
		ns := NodeStatus{Addr: l.nodes[r.idx].Addr(), Info: r.val.info, RTT: r.val.rtt}
		ns.Err = r.err // a *NodeError
		st.Nodes[r.idx] = ns
		return false
	})
	for i, ok := range answered {
		if !ok { // no answer within NodeCallTimeout, or ctx ended
			err := ctx.Err()
			if err == nil {
				err = fmt.Errorf("no answer within %s", l.cfg.NodeCallTimeout)
			}
			st.Nodes[i] = NodeStatus{Addr: l.nodes[i].Addr(), Err: &NodeError{Addr: l.nodes[i].Addr(), Err: err}}
		}
	}

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
