package cli

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
)

// faultRun is the fault injector of a run: it ends with the run.
type faultRun struct {
	wg sync.WaitGroup
	n  int
}

// wait waits for the injector to stop and returns how many faults it
// injected.
func (f *faultRun) wait() int {
	f.wg.Wait()
	return f.n
}

// startFaults starts injecting --faults until ctx ends: one node at a
// time, in turn, a fault lasting twice the call timeout, every
// max(duration/5, 2 × that), the first half that in.
func (v *verifier) startFaults(ctx context.Context) *faultRun {
	f := &faultRun{}
	if v.o.faults == faultsNone {
		return f
	}
	length := 2 * v.app.g.callTimeout()
	every := max(v.o.duration/5, 2*length)
	f.wg.Go(func() {
		// The first half an interval in, then every interval.
		t := time.NewTimer(every / 2)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				t.Reset(every)
			}
			node := v.s.nodes[i%len(v.s.nodes)]
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), v.app.g.callTimeout())
			var err error
			switch v.o.faults {
			case faultsPause:
				err = pauseNode(fctx, node, length)
			case faultsKillConns:
				err = killOwnConns(fctx, node, clientName(v.runID))
			}
			cancel()
			if err == nil {
				f.n++
			}
		}
	})
	return f
}

// nodeClient returns node's go-redis client, or nil when it is not a
// redisnode.Node.
func nodeClient(n redlock.Node) redis.UniversalClient {
	if rn, ok := n.(*redisnode.Node); ok {
		return rn.Client()
	}
	return nil
}

// forEachServer calls fn with a client of each server behind c: the
// masters of a cluster, else c itself.
func forEachServer(ctx context.Context, c redis.UniversalClient, fn func(ctx context.Context, c redis.UniversalClient) error) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return fn(ctx, m) })
	}
	return fn(ctx, c)
}

// pauseNode pauses every client of node's server for d (CLIENT PAUSE).
func pauseNode(ctx context.Context, node redlock.Node, d time.Duration) error {
	c := nodeClient(node)
	if c == nil {
		return nil
	}
	return forEachServer(ctx, c, func(ctx context.Context, s redis.UniversalClient) error {
		return s.Do(ctx, "CLIENT", "PAUSE", strconv.FormatInt(d.Milliseconds(), 10), "ALL").Err()
	})
}

// killOwnConns kills the connections to node named name (this run's own:
// CLIENT LIST, then CLIENT KILL ID for each). Killing the connection that
// sends the command fails that command, which does not matter.
func killOwnConns(ctx context.Context, node redlock.Node, name string) error {
	c := nodeClient(node)
	if c == nil {
		return nil
	}
	return forEachServer(ctx, c, func(ctx context.Context, s redis.UniversalClient) error {
		list, err := s.ClientList(ctx).Result()
		if err != nil {
			return err
		}
		for _, id := range clientIDsNamed(list, name) {
			_ = s.Do(ctx, "CLIENT", "KILL", "ID", id).Err()
		}
		return nil
	})
}

// clientIDsNamed returns the ids of CLIENT LIST's lines whose name is
// name.
func clientIDsNamed(list, name string) []string {
	var ids []string
	for _, line := range strings.Split(list, "\n") {
		id, named := "", false
		for _, f := range strings.Fields(line) {
			k, val, _ := strings.Cut(f, "=")
			switch k {
			case "id":
				id = val
			case "name":
				named = val == name
			}
		}
		if named && id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// scanPrefix returns up to limit keys under prefix, over every node.
func scanPrefix(ctx context.Context, nodes redisnode.Nodes, prefix string, limit int) ([]string, error) {
	var found []string
	var mu sync.Mutex
	for _, n := range nodes {
		c := nodeClient(n)
		if c == nil {
			continue
		}
		err := forEachServer(ctx, c, func(ctx context.Context, s redis.UniversalClient) error {
			it := s.Scan(ctx, 0, globEscape(prefix)+"*", 1000).Iterator()
			for it.Next(ctx) {
				mu.Lock()
				full := len(found) >= limit
				if !full {
					found = append(found, n.Addr()+": "+it.Val())
				}
				mu.Unlock()
				if full {
					return nil
				}
			}
			return it.Err()
		})
		if err != nil {
			return found, &redlock.NodeError{Addr: n.Addr(), Err: err}
		}
	}
	return found, nil
}

// deletePrefix deletes every key under prefix on every node and returns
// how many it deleted.
func deletePrefix(ctx context.Context, nodes redisnode.Nodes, prefix string) (int, error) {
	total := 0
	var mu sync.Mutex
	var errs []error
	for _, n := range nodes {
		c := nodeClient(n)
		if c == nil {
			continue
		}
		err := forEachServer(ctx, c, func(ctx context.Context, s redis.UniversalClient) error {
			it := s.Scan(ctx, 0, globEscape(prefix)+"*", 1000).Iterator()
			for it.Next(ctx) {
				k, err := s.Del(ctx, it.Val()).Result()
				if err != nil {
					return err
				}
				mu.Lock()
				total += int(k)
				mu.Unlock()
			}
			return it.Err()
		})
		if err != nil {
			errs = append(errs, &redlock.NodeError{Addr: n.Addr(), Err: err})
		}
	}
	if len(errs) > 0 {
		return total, errs[0]
	}
	return total, nil
}
