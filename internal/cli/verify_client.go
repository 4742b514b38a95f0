package cli

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/e6344662/go-redlock/chaos"
	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/redlock"
)

// cycleRecord is what one client recorded for one lease: the lease, its
// validity window's end, how long it was held, and the register operations
// made under it (their Lease field is set when they are recorded). It is
// also the line a --procs worker sends to the main process.
type cycleRecord struct {
	Res   int         `json:"res"`
	Lease chaos.Lease `json:"lease"`
	// ValidEnd ends the lease's validity window: its release call, or its
	// ValidUntil if that came first.
	ValidEnd time.Duration `json:"valid_end"`
	// Hold is from the grant to the release's return.
	Hold time.Duration `json:"hold"`
	Ops  []chaos.Op    `json:"ops"`
	// ReadErr: the read of the register failed, so nothing was written.
	ReadErr bool `json:"read_err,omitempty"`
}

// validWindow is one lease's validity window, for the overlap check.
type validWindow struct {
	client int
	fence  fencing.Token
	from   time.Duration
	to     time.Duration
}

// recorder collects the history of a run: one chaos.History per resource
// (the times are offsets from the run's start, kept by the verifier), the
// validity windows, the acquire and hold times and the failed acquisitions.
type recorder struct {
	hist []*chaos.History

	mu         sync.Mutex
	valid      [][]validWindow
	acquire    []time.Duration
	hold       []time.Duration
	errs       map[string]int
	last       error
	readErrs   int
	attempts   int
	released   int
	finalReads int
	// sink, when set (a --procs worker), receives every record instead.
	sink func(c *cycleRecord, kind string, err error)
}

// newRecorder makes a recorder for n resources.
func newRecorder(resources, _ int) *recorder {
	r := &recorder{errs: map[string]int{}, valid: make([][]validWindow, resources)}
	for range resources {
		r.hist = append(r.hist, chaos.NewHistory())
	}
	return r
}

// addCycle records one lease and its operations.
func (r *recorder) addCycle(c cycleRecord) {
	if r.sink != nil {
		r.sink(&c, "", nil)
		return
	}
	if c.Res < 0 || c.Res >= len(r.hist) {
		return
	}
	h := r.hist[c.Res]
	i := h.AddLease(c.Lease)
	for _, op := range c.Ops {
		op.Lease = i
		h.AddOp(op)
	}
	if c.Lease.Lost {
		h.Count(func(h *chaos.History) { h.LostLeases++ })
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts++
	r.released++
	if c.ReadErr {
		r.readErrs++
	}
	r.valid[c.Res] = append(r.valid[c.Res], validWindow{client: c.Lease.Client, fence: c.Lease.Fence, from: c.Lease.AcquiredAt, to: c.ValidEnd})
	r.acquire = append(r.acquire, c.Lease.AcquiredAt-c.Lease.CalledAt)
	r.hold = append(r.hold, c.Hold)
}

// addErr counts a failed acquisition by kind.
func (r *recorder) addErr(kind string, err error) {
	if r.sink != nil {
		r.sink(nil, kind, err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts++
	r.errs[kind]++
	if err != nil {
		r.last = err
	}
}

// lastErr is the last failed acquisition's error.
func (r *recorder) lastErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// counts returns the acquisitions and failed acquisitions so far.
func (r *recorder) counts() (granted, failed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.acquire), r.attempts - len(r.acquire)
}

// now is the time since the run's start.
func (v *verifier) now() time.Duration { return time.Since(v.start) }

// client is one client's loop until ctx ends: wait for the rate limiter,
// lock a resource at random, read and write the register, unlock. clientID
// is its number over all processes.
func (v *verifier) client(ctx context.Context, clientID int, l *redlock.Locker, limiter <-chan struct{}) {
	for n := 0; ; n++ {
		if limiter != nil {
			if _, ok := <-limiter; !ok {
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		res := rand.IntN(len(v.resources))
		c, err := v.cycle(ctx, clientID, n, res, l)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			v.rec.addErr(verifyErrorKind(err), err)
			// A failure that returns at once (access denied, say) must
			// not spin.
			t := time.NewTimer(100 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		v.rec.addCycle(c)
	}
}

// verifyErrorKind names a failed acquisition in the report.
func verifyErrorKind(err error) string {
	switch {
	case errors.Is(err, redlock.ErrNoQuorum):
		return kindNoQuorum
	case errors.Is(err, redlock.ErrNotAcquired):
		return kindBusy
	case errors.Is(err, context.DeadlineExceeded):
		return kindTimeout
	}
	return classify(err).kind
}

// cycle is one lease: acquire, read, fenced write, release, with each
// operation's invocation and response recorded. The register operations
// and the release are bounded by the call timeout, not by ctx, so that a
// lease taken just before the run's end is still used and released.
func (v *verifier) cycle(ctx context.Context, clientID, n, res int, l *redlock.Locker) (cycleRecord, error) {
	resource := v.resources[res]
	key := registerKey(resource)
	called := v.now()
	lease, err := l.Acquire(ctx, resource)
	if err != nil {
		return cycleRecord{}, err
	}
	acquired := v.now()
	c := cycleRecord{Res: res, Lease: chaos.Lease{Client: clientID, Fence: lease.Fence(), CalledAt: called, AcquiredAt: acquired, HeldUntil: acquired}}
	// held extends the window in which the lease was certainly held.
	held := func() {
		now := time.Now()
		if lease.Context().Err() == nil && now.Before(lease.ValidUntil()) {
			c.Lease.HeldUntil = now.Sub(v.start)
		}
	}
	timeout := 2 * v.app.g.callTimeout()
	bg := context.WithoutCancel(ctx)

	held()
	rctx, cancel := context.WithTimeout(bg, timeout)
	call := v.now()
	value, highest, found, err := v.register.Read(rctx, key)
	ret := v.now()
	cancel()
	if err != nil {
		c.ReadErr = true
	} else {
		c.Ops = append(c.Ops, chaos.Op{Client: clientID, Kind: chaos.Read, Call: call, Return: ret, Value: value, Highest: highest, Found: found})
		held()
		w := chaos.Op{Client: clientID, Kind: chaos.Write, Value: chaos.NewValue(fmt.Sprintf("c%d.%d", clientID, n), value), Token: lease.Fence()}
		wctx, cancel := context.WithTimeout(bg, timeout)
		w.Call = v.now()
		err := v.register.Write(wctx, key, w.Value, w.Token)
		w.Return = v.now()
		cancel()
		var stale *fencing.StaleError
		switch {
		case err == nil:
			w.Outcome = chaos.Accepted
		case errors.As(err, &stale):
			w.Outcome, w.Highest = chaos.Stale, stale.Highest
		default:
			w.Outcome = chaos.Unknown
		}
		c.Ops = append(c.Ops, w)
	}
	held()
	if v.o.hold > 0 {
		t := time.NewTimer(v.o.hold)
		select {
		case <-t.C:
		case <-lease.Context().Done():
			t.Stop()
		}
		held()
	}

	validUntil := lease.ValidUntil().Sub(v.start)
	relCall := v.now()
	c.ValidEnd = min(relCall, validUntil)
	relCtx, cancel := context.WithTimeout(bg, timeout+time.Second)
	err = lease.Release(relCtx)
	cancel()
	c.Hold = v.now() - acquired
	if errors.Is(err, redlock.ErrLeaseLost) {
		c.Lease.Lost = true
	}
	return c, nil
}

// finalRead reads resource i's register once every client has stopped:
// the last operation of its history.
func (v *verifier) finalRead(ctx context.Context, i int, resource string) {
	ctx, cancel := context.WithTimeout(ctx, 2*v.app.g.callTimeout())
	defer cancel()
	call := v.now()
	value, highest, found, err := v.register.Read(ctx, registerKey(resource))
	if err != nil {
		v.app.warnf("verify: the final read of %q failed: %s", resource, oneLine(err))
		return
	}
	v.rec.hist[i].AddOp(chaos.Op{Client: v.o.clients, Lease: -1, Kind: chaos.Read, Call: call, Return: v.now(),
		Value: value, Highest: highest, Found: found})
	v.rec.mu.Lock()
	v.rec.finalReads++
	v.rec.mu.Unlock()
}
