package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/e6344662/go-redlock/redlock"
)

// acquireResult is the --json output of acquire.
type acquireResult struct {
	Resource string `json:"resource"`
	// Semaphore is the semaphore's resource when Resource is one of its
	// slots (-n K above 1).
	Semaphore string   `json:"semaphore,omitempty"`
	Key       string   `json:"key"`
	Token     string   `json:"token"`
	Fence     uint64   `json:"fence"`
	Owner     string   `json:"owner"`
	Granted   []string `json:"granted"`
	ExpiresAt string   `json:"expires_at"`
	TTLMillis int64    `json:"ttl_ms"`
}

// acquireCmd builds acquire.
func (a *App) acquireCmd() *cobra.Command {
	var wait time.Duration
	slots := 1
	var shared bool
	cmd := &cobra.Command{
		Use:   "acquire RESOURCE [-n K] [--wait DURATION]",
		Short: "Take a lock and print its token; it lives until its TTL",
		Long: `Take the lock on RESOURCE and print the resource, the token, the fencing
token, the nodes that granted it and when it expires. One attempt by default;
with --wait, retry until the lock is free or DURATION has passed, also while
no majority of the nodes can be reached.

With -n K, take one of the K slots of the semaphore on RESOURCE instead: the
slot's name (RESOURCE#i) is printed as the resource, and renew and release
take that name with the token. A shell script can so hold a slot over
several steps.

No process stays behind to renew the lock: it expires after --ttl unless
"redlock-cli renew" extends it or "redlock-cli release" deletes it, both with
the printed token. The token is a secret: whoever has it can release the lock.

--shared is not offered: a reader's lease of the read-write lock cannot be
renewed or released by its token from another process; hold one over several
steps with "redlock-cli run --shared RESOURCE -- sh -c 'step1 && step2'".

` + exitCodeHelp,
		Args: exactArgs("RESOURCE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			resource := args[0]
			if shared {
				return usageErrorf("acquire --shared is not supported: a reader's lease cannot be renewed or released by its token from another process; hold a shared lock over several steps with: redlock-cli run --shared %s -- sh -c 'step1 && step2' (or a script)", shellQuote(resource))
			}
			if err := a.prepare(cmd, checkWait(cmd, wait), checkResource(resource), checkSlots(slots)); err != nil {
				return err
			}
			w := startWait(wait)
			a.watch = newWatcher(a.observer, a.warnf, w.total > 0)
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			s, err := a.connectWaiting(ctx, w)
			if err != nil {
				return err
			}
			lease, err := a.lockSlot(ctx, s, resource, slots, w)
			if err != nil {
				return closeFailed(s, err)
			}
			// The lock outlives this process: stop renewing it, and keep
			// Close from releasing it.
			lease.Orphan()
			sem := ""
			if slots > 1 {
				sem = resource
			}
			a.printAcquired(s, lease, sem, slots)
			// Closing waits for the attempt's late calls, so that a node
			// that failed after the majority had answered is named too.
			s.close()
			a.watch.flush()
			return nil
		},
	}
	addWaitFlag(cmd.Flags(), &wait)
	addSlotsFlag(cmd.Flags(), &slots)
	cmd.Flags().BoolVar(&shared, "shared", false, "not supported (a reader's lease cannot be released by token): use run --shared")
	_ = cmd.Flags().MarkHidden("shared")
	return cmd
}

// waiting is how long acquire and run may wait (--wait): total, the whole
// wait as given (0: one attempt), and until, when it ends, counted from
// the command's start, so that time spent connecting comes out of it.
type waiting struct {
	total time.Duration
	until time.Time
}

// startWait starts a wait of d from now.
func startWait(d time.Duration) waiting {
	if d <= 0 {
		return waiting{}
	}
	return waiting{total: d, until: time.Now().Add(d)}
}

// connectWaiting connects like connect; with a wait, it retries while no
// majority of the nodes answers, until they do or the wait runs out (then
// the last no-quorum error, which says how long it waited). Other errors
// (usage, access denied) return at once: waiting does not fix them.
func (a *App) connectWaiting(ctx context.Context, w waiting) (*session, error) {
	backoff := 100 * time.Millisecond
	for {
		s, err := a.connect(ctx)
		var ce *cliError
		if err == nil || w.total <= 0 || !errors.As(err, &ce) || ce.code != exitNoQuorum {
			return s, err
		}
		left := time.Until(w.until)
		if left <= 0 {
			ce.msg = clip(fmt.Sprintf("still after waiting %s: %s", w.total, ce.msg))
			if ce.extra == nil {
				ce.extra = map[string]any{}
			}
			ce.extra["waited_ms"] = w.total.Milliseconds()
			return nil, ce
		}
		t := time.NewTimer(min(backoff, left))
		select {
		case <-ctx.Done():
			t.Stop()
			if ie := interrupted(ctx); ie != nil {
				return nil, ie
			}
			return nil, err
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

// lock makes one attempt on resource, or with a wait retries until it
// ends. Failures are *cliError values.
func (a *App) lock(ctx context.Context, s *session, resource string, w waiting) (*redlock.Lease, error) {
	if w.total <= 0 {
		lease, err := s.locker.TryAcquire(ctx, resource)
		if err != nil {
			return nil, a.acquireFailure(ctx, s, resource, err, 0)
		}
		return lease, nil
	}
	wctx, cancel := context.WithDeadline(ctx, w.until)
	defer cancel()
	wctx, done := a.watch.waitWith(wctx)
	defer done()
	lease, err := s.locker.Acquire(wctx, resource)
	if err != nil {
		return nil, a.acquireFailure(ctx, s, resource, err, w.total)
	}
	return lease, nil
}

// lockAll takes every resource, all or none (Locker.AcquireAll): one
// attempt, or with a wait retries until it ends. Failures are *cliError
// values, naming the first resource's holder when busy.
func (a *App) lockAll(ctx context.Context, s *session, resources []string, w waiting) ([]*redlock.Lease, error) {
	if w.total <= 0 {
		leases, err := s.locker.TryAcquireAll(ctx, resources...)
		if err != nil {
			return nil, a.busyOfAll(ctx, s, resources, a.acquireFailure(ctx, s, resources[0], err, 0))
		}
		return leases, nil
	}
	wctx, cancel := context.WithDeadline(ctx, w.until)
	defer cancel()
	wctx, done := a.watch.waitWith(wctx)
	defer done()
	leases, err := s.locker.AcquireAll(wctx, resources...)
	if err != nil {
		return nil, a.busyOfAll(ctx, s, resources, a.acquireFailure(ctx, s, resources[0], err, w.total))
	}
	return leases, nil
}

// busyOfAll rewrites ce, the failure of taking resources all at once,
// when they were busy: the message names each resource that is held and
// its holder (the library's error names the set only). Other failures are
// returned as they are.
func (a *App) busyOfAll(ctx context.Context, s *session, resources []string, ce *cliError) *cliError {
	if ce.code != exitBusy {
		return ce
	}
	type held struct {
		owner string
		ttl   time.Duration
	}
	found := make([]held, len(resources))
	var wg sync.WaitGroup
	for i, r := range resources {
		wg.Go(func() {
			found[i].owner, found[i].ttl = a.holder(ctx, s, r)
		})
	}
	wg.Wait()
	var parts []string
	var holders []map[string]any
	for i, r := range resources {
		h := found[i]
		if h.owner == "" && h.ttl == 0 {
			continue
		}
		text := fmt.Sprintf("%q", r)
		obj := map[string]any{"resource": r}
		if h.owner != "" {
			text += " held by " + h.owner
			obj["owner"] = h.owner
		} else {
			text += " held"
		}
		if h.ttl > 0 {
			text += " for " + roundDur(h.ttl).String() + " more"
		}
		if h.ttl != 0 {
			obj["ttl_ms"] = ttlMillis(h.ttl)
		}
		parts = append(parts, text)
		holders = append(holders, obj)
	}
	if len(parts) == 0 {
		return ce
	}
	lead := fmt.Sprintf("%d of the %d resources are busy", len(parts), len(resources))
	if len(parts) == 1 {
		lead = fmt.Sprintf("1 of the %d resources is busy", len(resources))
	}
	if ms, ok := ce.extra["waited_ms"].(int64); ok && ce.kind == kindTimeout {
		lead = fmt.Sprintf("gave up waiting for %s after %s: %s", strings.Join(quoteAll(resources), ", "), roundDur(time.Duration(ms)*time.Millisecond), lead)
	}
	ce.msg = clip(lead + ": " + strings.Join(parts, "; ") + " (none was taken: all or none)")
	if ce.extra == nil {
		ce.extra = map[string]any{}
	}
	delete(ce.extra, "holder_owner")
	delete(ce.extra, "holder_ttl_ms")
	ce.extra["busy"] = holders
	return ce
}

// quoteAll quotes each of ss.
func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// rwHolderText says who holds the read-write lock on resource, or waits
// for it, as far as a majority of the nodes records it: "held by the
// writer OWNER for 9.5s more", "read by 2 readers (a, b)", "2 writers
// wait" (for a reader only: a writer that waited may count itself); ""
// when it cannot tell within one call timeout.
func (a *App) rwHolderText(ctx context.Context, s *session, resource string, shared bool) (string, map[string]any) {
	rw, err := s.locker.NewRWLock(resource)
	if err != nil {
		return "", nil
	}
	ictx, cancel := context.WithTimeout(ctx, a.g.callTimeout())
	defer cancel()
	st, err := rw.Inspect(ictx)
	if err != nil {
		return "", nil
	}
	var parts []string
	extra := map[string]any{}
	if w := st.Writer; w != nil {
		text := "held by the writer " + w.Owner
		if w.TTL > 0 {
			text += " for " + roundDur(w.TTL).String() + " more"
		}
		parts = append(parts, text)
		extra["holder_owner"] = w.Owner
		extra["holder_ttl_ms"] = ttlMillis(w.TTL)
	}
	if n := len(st.Readers); n > 0 {
		owners := make([]string, n)
		for i, r := range st.Readers {
			owners[i] = r.Owner
		}
		parts = append(parts, fmt.Sprintf("read by %s (%s)", plural(n, "reader"), strings.Join(owners, ", ")))
		extra["readers"] = owners
	}
	if shared && st.WritersWaiting > 0 {
		verb := "waits"
		if st.WritersWaiting > 1 {
			verb = "wait"
		}
		parts = append(parts, fmt.Sprintf("%s %s (new readers queue behind)", plural(st.WritersWaiting, "writer"), verb))
		extra["writers_waiting"] = st.WritersWaiting
	}
	return strings.Join(parts, "; "), extra
}

// lockRW takes the read-write lock on resource, as a reader (shared) or
// its writer: one attempt, or with a wait retries until it ends.
func (a *App) lockRW(ctx context.Context, s *session, resource string, shared bool, w waiting) (*redlock.Lease, error) {
	rw, err := s.locker.NewRWLock(resource)
	if err != nil {
		return nil, classify(err)
	}
	take := rw.TryAcquire
	if shared {
		take = rw.TryAcquireShared
	}
	if w.total <= 0 {
		lease, err := take(ctx)
		if err != nil {
			return nil, a.rwFailure(ctx, s, resource, shared, err, 0)
		}
		return lease, nil
	}
	take = rw.Acquire
	if shared {
		take = rw.AcquireShared
	}
	wctx, cancel := context.WithDeadline(ctx, w.until)
	defer cancel()
	wctx, done := a.watch.waitWith(wctx)
	defer done()
	lease, err := take(wctx)
	if err != nil {
		return nil, a.rwFailure(ctx, s, resource, shared, err, w.total)
	}
	return lease, nil
}

// rwFailure is acquireFailure for a read-write lock: its holders are not
// the plain lock's, so a busy lock is reported by the attempt's own words
// (who holds it: a writer, readers, or a writer waits).
func (a *App) rwFailure(ctx context.Context, s *session, resource string, shared bool, err error, waited time.Duration) *cliError {
	var ae *redlock.AcquireError
	if errors.Is(err, redlock.ErrNotAcquired) && errors.As(err, &ae) && !rejoiningBlocks(ae) {
		if ie := interrupted(ctx); ie != nil {
			return ie
		}
		ce := busyError(ae, "")
		if who, extra := a.rwHolderText(ctx, s, resource, shared); who != "" {
			ce.msg = clip(fmt.Sprintf("the read-write lock %q is busy: %s (granted by %d of %d nodes, %d needed)", resource, who, ae.Granted, ae.Total, ae.Needed))
			maps.Copy(ce.extra, extra)
		}
		return ce
	}
	if waited > 0 && errors.Is(err, context.DeadlineExceeded) && !rejoiningBlocks(a.watch.lastAttempt()) {
		ce := &cliError{code: exitBusy, kind: kindTimeout, msg: fmt.Sprintf("gave up waiting for the read-write lock %q after %s: still busy", resource, waited), err: err,
			extra: map[string]any{"waited_ms": waited.Milliseconds()}}
		if who, extra := a.rwHolderText(ctx, s, resource, shared); who != "" {
			ce.msg = clip(ce.msg + ": " + who)
			maps.Copy(ce.extra, extra)
		}
		return ce
	}
	return a.acquireFailure(ctx, s, resource, err, waited)
}

// lockSlot is lock for a semaphore of slots (-n): above 1 it takes one of
// the slots R#0..R#K-1 (one attempt each, or wait for any until w ends).
func (a *App) lockSlot(ctx context.Context, s *session, resource string, slots int, w waiting) (*redlock.Lease, error) {
	if slots <= 1 {
		return a.lock(ctx, s, resource, w)
	}
	sem, err := s.locker.NewSemaphore(resource, slots)
	if err != nil {
		return nil, classify(err)
	}
	if w.total <= 0 {
		lease, err := sem.TryAcquire(ctx)
		if err != nil {
			return nil, a.slotFailure(ctx, s, sem, err, 0)
		}
		return lease, nil
	}
	wctx, cancel := context.WithDeadline(ctx, w.until)
	defer cancel()
	wctx, done := a.watch.waitWith(wctx)
	defer done()
	lease, err := sem.Acquire(wctx)
	if err != nil {
		return nil, a.slotFailure(ctx, s, sem, err, w.total)
	}
	return lease, nil
}

// slotFailure is acquireFailure for a semaphore: when every slot is busy
// (or stayed busy for the wait), the message names each slot's holder, not
// only the last slot tried.
func (a *App) slotFailure(ctx context.Context, s *session, sem *redlock.Semaphore, err error, waited time.Duration) *cliError {
	ce := a.acquireFailure(ctx, s, sem.Slots()[0], err, waited)
	if ce.code != exitBusy {
		return ce
	}
	resource, _, _ := strings.Cut(sem.Slots()[0], "#")
	var held []string
	var holders []map[string]any
	for _, slot := range sem.Slots() {
		owner, ttl := a.holder(ctx, s, slot)
		h := map[string]any{"slot": slot}
		text := slot
		if owner != "" {
			h["owner"] = owner
			text += " held by " + owner
		}
		if ttl != 0 {
			h["ttl_ms"] = ttlMillis(ttl)
			if ttl > 0 {
				text += " for " + roundDur(ttl).String() + " more"
			}
		}
		held = append(held, text)
		holders = append(holders, h)
	}
	msg := fmt.Sprintf("all %d slots of %q are busy: %s", len(held), resource, strings.Join(held, "; "))
	if waited > 0 {
		msg = fmt.Sprintf("gave up waiting for a slot of %q after %s: all %d slots are still busy: %s",
			resource, waited, len(held), strings.Join(held, "; "))
	}
	ce.msg = clip(msg)
	if ce.extra == nil {
		ce.extra = map[string]any{}
	}
	delete(ce.extra, "holder_owner")
	delete(ce.extra, "holder_ttl_ms")
	ce.extra["slots"] = holders
	return ce
}

// acquireFailure maps a failed acquisition to a *cliError: interrupted, no
// quorum, busy, or (after waiting) still busy when --wait ran out.
func (a *App) acquireFailure(ctx context.Context, s *session, resource string, err error, waited time.Duration) *cliError {
	if ie := interrupted(ctx); ie != nil {
		return ie
	}
	if last := a.watch.lastAttempt(); last != nil {
		if ce := scriptsDisabledError(last, nodeErrors(last), last.Total); ce != nil {
			return ce // the watcher ended the wait: it cannot help
		}
	}
	var ae *redlock.AcquireError
	isAE := errors.As(err, &ae)
	switch {
	case errors.Is(err, redlock.ErrNoQuorum) && isAE:
		ce := attemptFailure(err, ae, nil, false)
		ce.settle = func() *cliError {
			late, ok := a.watch.lateFailures(ae)
			return attemptFailure(err, ae, late, ok)
		}
		return ce
	case errors.Is(err, redlock.ErrNoQuorum):
		return noQuorumError(err, answeredNodes(err, len(s.nodes)), len(s.nodes))
	case errors.Is(err, redlock.ErrNotAcquired) && isAE && rejoiningBlocks(ae):
		return rejoiningError(ae, "")
	case errors.Is(err, redlock.ErrNotAcquired) && isAE:
		owner, _ := a.holder(ctx, s, resource)
		return busyError(ae, owner)
	case waited > 0 && errors.Is(err, context.DeadlineExceeded) && rejoiningBlocks(a.watch.lastAttempt()):
		ce := rejoiningError(a.watch.lastAttempt(), fmt.Sprintf("gave up waiting after %s: ", waited))
		ce.extra["waited_ms"] = waited.Milliseconds()
		return ce
	case waited > 0 && errors.Is(err, context.DeadlineExceeded):
		msg := fmt.Sprintf("gave up waiting for %q after %s: still busy", resource, waited)
		extra := map[string]any{"waited_ms": waited.Milliseconds()}
		owner, ttl := a.holder(ctx, s, resource)
		if owner != "" {
			msg += ", held by " + owner
			extra["holder_owner"] = owner
		}
		if ttl < 0 {
			msg += " with no expiry: not a redlock lock, it stays until deleted"
			extra["holder_ttl_ms"] = ttlMillis(ttl)
		}
		return &cliError{code: exitBusy, kind: kindTimeout, msg: msg, err: err, extra: extra}
	}
	return classify(err)
}

// attemptFailure is the no-quorum error of a failed attempt, ae (err
// wraps it). An attempt ends as soon as its answers decide it, so some
// nodes may not have answered by then. Before its calls have ended
// (settled false), the count is of the nodes that answered (granted or
// refused) before the attempt ended, and the message says so and how
// many had not answered yet. Once they have ended (settled: every late
// failure is in late), the nodes that answered later count too, the
// message says how many did, and names the late failures with the others.
func attemptFailure(err error, ae *redlock.AcquireError, late []*redlock.NodeError, settled bool) *cliError {
	failed := 0
	for _, e := range ae.NodeErrors {
		var ne *redlock.NodeError
		if errors.As(e, &ne) {
			failed++
		}
	}
	inTime := ae.Granted + len(ae.Refused)
	pending := max(0, ae.Total-inTime-failed)
	if !settled {
		note := ""
		if pending > 0 {
			note = fmt.Sprintf(" before the attempt ended (%d had not answered yet)", pending)
		}
		return noQuorumNoted(err, inTime, ae.Total, note)
	}
	lateAnswers := max(0, pending-len(late))
	note := ""
	if lateAnswers > 0 {
		note = fmt.Sprintf(" (%d after the attempt had ended)", lateAnswers)
	}
	named := []error{err}
	for _, ne := range late {
		named = append(named, ne)
	}
	ce := noQuorumNoted(errors.Join(named...), inTime+lateAnswers, ae.Total, note)
	ce.err = err
	return ce
}

// closeFailed closes s after a failed acquisition and returns err as it
// reads then. Closing waits for the failed attempt's calls still running
// (each bounded by the node call timeout), so that a no-quorum error can
// count the nodes that answered after the attempt had ended and name those
// that failed then (the watcher saw their failures).
func closeFailed(s *session, err error) error {
	s.close()
	var ce *cliError
	if errors.As(err, &ce) && ce.settle != nil {
		return ce.settle()
	}
	return err
}

// rejoiningError describes an attempt that rejoining nodes kept from a
// majority (exit 9): nobody holds the lock, and it passes by itself.
// prefix starts the message.
func rejoiningError(ae *redlock.AcquireError, prefix string) *cliError {
	nodes := rejoiningNodes(ae)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i], _, _ = strings.Cut(n, " ")
	}
	msg := fmt.Sprintf("%s%q is unavailable, not busy: %s", prefix, ae.Resource, rejoiningText(ae, nodes))
	if prefix == "" {
		msg += "; nobody holds the lock and this passes by itself: retry after that, or wait for it with --wait DURATION"
	}
	return &cliError{code: exitRejoining, kind: kindRejoining, msg: clip(msg), err: ae,
		extra: map[string]any{"rejoining": addrs, "granted": ae.Granted, "needed": ae.Needed, "total": ae.Total}}
}

// holder returns the owner label of resource's holder ("" when it cannot
// tell within one call timeout) and its TTL (negative: the key has no
// expiry; zero when unknown).
func (a *App) holder(ctx context.Context, s *session, resource string) (owner string, ttl time.Duration) {
	ictx, cancel := context.WithTimeout(ctx, a.g.callTimeout())
	defer cancel()
	st, err := s.locker.Inspect(ictx, resource)
	if err != nil || st.State != redlock.Held {
		return "", 0
	}
	return st.Holder.Owner, st.Holder.TTL
}

// printAcquired prints the lock acquire took; sem is the semaphore's
// resource and slots its limit when the lock is one of its slots.
func (a *App) printAcquired(s *session, lease *redlock.Lease, sem string, slots int) {
	until := lease.ValidUntil()
	res := acquireResult{
		Semaphore: sem,
		Resource:  lease.Resource(),
		Key:       s.locker.Key(lease.Resource()),
		Token:     lease.Token(),
		Fence:     uint64(lease.Fence()),
		Owner:     s.locker.Config().Owner,
		Granted:   lease.Granted(),
		ExpiresAt: expiresAt(until),
		TTLMillis: time.Until(until).Milliseconds(),
	}
	a.report(res, func() {
		tw := a.table()
		fmt.Fprintf(tw, "resource:\t%s\n", res.Resource)
		if sem != "" {
			fmt.Fprintf(tw, "slot of:\t%s (%s; renew and release take %s)\n", sem, plural(slots, "slot"), res.Resource)
		}
		fmt.Fprintf(tw, "token:\t%s\n", res.Token)
		fmt.Fprintf(tw, "fence:\t%d\n", res.Fence)
		fmt.Fprintf(tw, "owner:\t%s\n", res.Owner)
		fmt.Fprintf(tw, "granted:\t%s (%d of %d nodes)\n", strings.Join(res.Granted, ","), len(res.Granted), len(s.nodes))
		fmt.Fprintf(tw, "expires:\t%s (in %s)\n", res.ExpiresAt, fmtDuration(time.Until(until)))
		_ = tw.Flush()
	})
}
