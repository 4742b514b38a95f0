package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/fencing/redisfence"
	"github.com/e6344662/go-redlock/redlock"
)

// The demo's parameters.
const (
	demoNodes    = 5
	demoResource = "ledger"
	demoKey      = "balance"
	demoLease    = time.Second
	// demoPause is how far the nodes' clocks move (FastForward) while the
	// slow worker is frozen: past its lease, and short of a fence
	// counter's life (twice the rejoin delay): miniredis moves its keys'
	// TTLs, not the clock it answers TIME with, so a counter that expired
	// in a fast-forward would start again from a clock that did not move.
	demoPause = 1500 * time.Millisecond
	// demoTimeout bounds each node call: generous (a third of the lease, the
	// library's default) so that the demo also runs on a busy machine.
	demoTimeout = 300 * time.Millisecond
	// demoDeadline bounds the whole scenario.
	demoDeadline = 20 * time.Second
)

// demo is one run of the scenario: five lock nodes, one resource server,
// and the statistics the summary reports.
type demo struct {
	out     io.Writer
	verbose bool
	start   time.Time

	nodes    []*miniredis.Miniredis
	addrs    []string // of nodes, kept: a closed miniredis has none
	resource *miniredis.Miniredis
	store    *redisfence.Store

	mu       sync.Mutex // guards what follows, and the output
	clients  []*redis.Client
	lockers  []*redlock.Locker
	acquired int
	accepted int
	rejected int
	fences   []fencing.Token // in acquisition order
}

// newDemo prepares a run of the scenario that narrates on out when
// verbose.
func newDemo(out io.Writer, verbose bool) *demo {
	return &demo{out: out, verbose: verbose}
}

// play runs the scenario and checks its invariants: fencing tokens strictly
// increase, the balance equals the accepted writes, and the paused worker's
// write was rejected.
func (d *demo) play(ctx context.Context) (demoResult, error) {
	ctx, cancel := context.WithTimeout(ctx, demoDeadline)
	defer cancel()
	d.start = time.Now()
	if err := d.startServers(); err != nil {
		return demoResult{}, err
	}
	defer d.stop()

	d.sayf("redlock demo: %d embedded Redis nodes n1..n%d (quorum %d), lease %s; the protected resource, a balance, lives on a separate embedded Redis and accepts a write only with a fencing token not below the highest it has seen.\n",
		demoNodes, demoNodes, demoNodes/2+1, demoLease)
	workers := make([]*demoWorker, 3)
	for i := range workers {
		w, err := d.newWorker(fmt.Sprintf("worker-%d", i+1))
		if err != nil {
			return demoResult{}, err
		}
		workers[i] = w
	}

	d.sayf("\n1. Three workers contend for %q; each adds 1 to the balance under the lock.\n", demoResource)
	d.sayf("   (Every attempt that reaches a node counts there, so fencing tokens increase but skip numbers.)\n")
	if err := d.contend(ctx, workers, 2); err != nil {
		return demoResult{}, err
	}

	d.nodes[demoNodes-1].Close()
	d.sayf("\n2. n%d is killed: %d of %d nodes left, still a majority.\n", demoNodes, demoNodes-1, demoNodes)
	if err := d.contend(ctx, workers, 1); err != nil {
		return demoResult{}, err
	}
	if err := d.nodes[demoNodes-1].Restart(); err != nil {
		return demoResult{}, fmt.Errorf("restart n%d: %w", demoNodes, err)
	}
	d.sayf("   n%d restarts with its data (as with AOF), its fence counter behind the others'.\n", demoNodes)
	if err := d.round(ctx, workers[2]); err != nil {
		return demoResult{}, err
	}

	d.sayf("\n3. worker-1 is paused (a GC pause, a VM stall) for longer than its lease.\n")
	if err := d.pause(ctx, workers[0], workers[1]); err != nil {
		return demoResult{}, err
	}
	return d.result(ctx)
}

// contend runs rounds rounds of every worker, all at once.
func (d *demo) contend(ctx context.Context, workers []*demoWorker, rounds int) error {
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Go(func() {
			for range rounds {
				if errs[i] = d.round(ctx, w); errs[i] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// round is one critical section: acquire, read the balance, write it plus
// one with the fencing token, release.
func (d *demo) round(ctx context.Context, w *demoWorker) error {
	lease, err := d.acquire(ctx, w)
	if err != nil {
		return err
	}
	balance, err := d.read(ctx)
	if err != nil {
		return err
	}
	if err := d.write(ctx, w, balance+1, lease.Fence()); err != nil {
		return err
	}
	time.Sleep(3 * time.Millisecond) // the rest of the work
	if err := lease.Release(ctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: release: %w", w.name, err)
		}
		// Not fatal: the lock is safe, it expires by its TTL on the nodes
		// that still hold it, and the fence keeps the next holder's writes
		// ordered. Only a slow machine gets here.
		d.event(w.name, "release not confirmed (%v); the lock expires by its TTL", err)
		return nil
	}
	d.event(w.name, "released")
	return nil
}

// acquire waits for the lock and records its fencing token.
func (d *demo) acquire(ctx context.Context, w *demoWorker) (*redlock.Lease, error) {
	lease, err := w.locker.Acquire(ctx, demoResource)
	if err != nil {
		return nil, fmt.Errorf("%s: acquire: %w", w.name, err)
	}
	d.mu.Lock()
	d.acquired++
	d.fences = append(d.fences, lease.Fence())
	d.mu.Unlock()
	d.event(w.name, "acquired the lock, fence %d (granted by %s)", lease.Fence(), d.names(lease.Granted()))
	return lease, nil
}

// read returns the balance.
func (d *demo) read(ctx context.Context) (int, error) {
	v, _, found, err := d.store.Read(ctx, demoKey)
	if err != nil || !found {
		return 0, err
	}
	return strconv.Atoi(v)
}

// write writes the balance with a fencing token and counts the outcome. A
// stale rejection is not an error.
func (d *demo) write(ctx context.Context, w *demoWorker, balance int, fence fencing.Token) error {
	err := d.store.Write(ctx, demoKey, strconv.Itoa(balance), fence)
	var stale *fencing.StaleError
	switch {
	case err == nil:
		d.mu.Lock()
		d.accepted++
		d.mu.Unlock()
		d.event(w.name, "write balance=%d with fence %d: accepted", balance, fence)
		return nil
	case errors.As(err, &stale):
		d.mu.Lock()
		d.rejected++
		d.mu.Unlock()
		d.event(w.name, "write balance=%d with fence %d: REJECTED, stale (the store has seen fence %d)", balance, fence, stale.Highest)
		return nil
	}
	return fmt.Errorf("%s: write: %w", w.name, err)
}

// pause plays the paused worker: slow takes the lock and reads, then
// "freezes" while the nodes' clocks move past its lease (FastForward);
// fast takes the lock meanwhile and writes; slow wakes and writes with its
// old token, which the store rejects; then slow's lease ends as lost.
func (d *demo) pause(ctx context.Context, slow, fast *demoWorker) error {
	lease, err := d.acquire(ctx, slow)
	if err != nil {
		return err
	}
	balance, err := d.read(ctx)
	if err != nil {
		return err
	}
	d.event(slow.name, "read balance=%d, then freezes before writing", balance)
	for _, m := range d.nodes {
		m.FastForward(demoPause)
	}
	d.event("", "%s pass on the nodes: %s's lock expires there, and it does not know", demoPause, slow.name)
	if err := d.round(ctx, fast); err != nil {
		return err
	}
	d.event(slow.name, "wakes up and writes the balance it computed")
	if err := d.write(ctx, slow, balance+1, lease.Fence()); err != nil {
		return err
	}

	wait := time.NewTimer(3 * demoLease)
	defer wait.Stop()
	select {
	case <-lease.Context().Done():
		d.event(slow.name, "its lease ends at its next renewal: %v", context.Cause(lease.Context()))
	case <-wait.C:
		return fmt.Errorf("%s: lease not reported lost within %s", slow.name, 3*demoLease)
	case <-ctx.Done():
		return ctx.Err()
	}
	_ = lease.Release(ctx) // reports the loss; nothing is left to delete
	return nil
}

// result reads the final balance and checks the invariants.
func (d *demo) result(ctx context.Context) (demoResult, error) {
	balance, err := d.read(ctx)
	if err != nil {
		return demoResult{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	res := demoResult{
		Acquisitions:   d.acquired,
		WritesAccepted: d.accepted,
		StaleRejected:  d.rejected,
		Balance:        balance,
		DurationMS:     time.Since(d.start).Milliseconds(),
	}
	if len(d.fences) > 0 {
		res.FirstFence, res.LastFence = uint64(d.fences[0]), uint64(d.fences[len(d.fences)-1])
	}
	for i := 1; i < len(d.fences); i++ {
		if d.fences[i] <= d.fences[i-1] {
			return res, fmt.Errorf("fencing tokens did not increase: %d after %d", d.fences[i], d.fences[i-1])
		}
	}
	if balance != d.accepted {
		return res, fmt.Errorf("balance %d differs from the %d accepted writes: an update was lost", balance, d.accepted)
	}
	if d.rejected == 0 {
		return res, errors.New("the paused worker's stale write was not rejected")
	}
	return res, nil
}
