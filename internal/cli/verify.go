package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/fencing/redisfence"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
)

// verify's defaults and limits.
const (
	defaultVerifyPrefix = "redlock-verify:"
	maxVerifyClients    = 256
	maxVerifyResources  = 64
	faultsNone          = "none"
	faultsPause         = "pause"
	faultsKillConns     = "kill-conns"
	registerNode        = "node"
	registerMemory      = "memory"
	// verifyCheckTimeout bounds porcupine's search for a linearization.
	verifyCheckTimeout = 30 * time.Second
)

// verifyOptions are the flags of verify.
type verifyOptions struct {
	duration  time.Duration
	clients   int
	resources int
	faults    string
	procs     int
	rate      float64
	reg       string
	hold      time.Duration
	force     bool
	html      string
	// worker: this process is one of the --procs processes (hidden).
	worker workerSpec
}

// register adds verify's flags to fs.
func (o *verifyOptions) register(fs *pflag.FlagSet) {
	fs.DurationVar(&o.duration, "duration", time.Minute, "how long the clients run")
	fs.IntVar(&o.clients, "clients", 8, "concurrent clients, each in a loop of lock, fenced write, unlock")
	fs.IntVar(&o.resources, "resources", 4, "resources the clients lock, each with its own register; each lock picks one at random")
	fs.StringVar(&o.faults, "faults", faultsNone, "faults to inject while the clients run: none, pause (CLIENT PAUSE on one node at a time, for twice the call timeout) or kill-conns (CLIENT KILL of this run's own connections to one node at a time)")
	fs.IntVar(&o.procs, "procs", 1, "spread the clients over `N` processes (this one and N-1 copies of redlock-cli), so that the lock is checked across processes too")
	fs.Float64Var(&o.rate, "rate", 50, "at most `R` lock acquisitions per second, over all clients and processes (0: no limit)")
	fs.StringVar(&o.reg, "register", registerNode, "where the fenced register lives: node (keys PREFIX+register:{RESOURCE} on the first node) or memory (in this process; not with --procs)")
	fs.DurationVar(&o.hold, "hold", 0, "hold each lock this long after the write, before unlocking")
	fs.BoolVar(&o.force, "force", false, "start even when keys under the prefix exist (they are deleted at the end, with the run's own)")
	fs.StringVar(&o.html, "html", "", "write porcupine's HTML visualization of the history (operations and holders) to `FILE`")
	o.worker.register(fs)
}

// validate checks verify's flags.
func (o *verifyOptions) validate() error {
	switch {
	case o.clients < 1 || o.clients > maxVerifyClients:
		return usageErrorf("--clients must be from 1 to %d, got %d", maxVerifyClients, o.clients)
	case o.resources < 1 || o.resources > maxVerifyResources:
		return usageErrorf("--resources must be from 1 to %d, got %d", maxVerifyResources, o.resources)
	case o.faults != faultsNone && o.faults != faultsPause && o.faults != faultsKillConns:
		return usageErrorf("--faults must be %s, %s or %s, got %q", faultsNone, faultsPause, faultsKillConns, o.faults)
	case o.procs < 1 || o.procs > o.clients:
		return usageErrorf("--procs must be from 1 to --clients (%d), got %d", o.clients, o.procs)
	case o.hold < 0:
		return usageErrorf("--hold must not be negative, got %s", o.hold)
	case o.rate < 0 || o.rate > 1e6:
		return usageErrorf("--rate must be from 0 (no limit) to 1000000 per second, got %v", o.rate)
	case o.reg != registerNode && o.reg != registerMemory:
		return usageErrorf("--register must be %s or %s, got %q", registerNode, registerMemory, o.reg)
	case o.reg == registerMemory && o.procs > 1:
		return usageErrorf("--register memory lives in one process: not with --procs %d (use --register node)", o.procs)
	}
	return positive("duration", o.duration)
}

// verifyLong is the help text of verify.
const verifyLong = `Check your own deployment: --clients concurrent clients lock one of
--resources resources at random, read and then write, with the lease's
fencing token, a fenced register (on the first node, or in memory), and
unlock, for --duration, at most --rate acquisitions per second. Every
operation's invocation and response is recorded, and the history is then
checked:

  mutual exclusion   no two leases of a resource were held at once (each
                     client checks its lease before and after its write);
  lease validity     no two leases' validity windows (from the grant to the
                     release, or to the lease's ValidUntil) overlap;
  fencing order      a lease asked for after another was granted has a
                     higher token, no token is given twice, and no write is
                     accepted after a higher token's;
  no lost write      every write accepted while its lease was held is in
                     the register's chain of values;
  linearizability    the register's history is linearizable (porcupine).

The report gives operations, holders, hand-overs (a lease taken by another
client than the previous holder), p50/p99 acquire and hold times, the
violations found (0 expected) and whether the history is linearizable; with
--json, one JSON object. A progress line is shown on a terminal only.

Safe on a production deployment: only keys under the prefix (default
` + defaultVerifyPrefix + `, set with --prefix) are written, verify refuses to start
when keys under it exist (unless --force), and it deletes every key under it
at the end. A new prefix has no marker yet, so the nodes sit out the rejoin
delay (--rejoin-delay, default the ttl) before the first grant. Faults are
opt-in: --faults pause pauses one node at a time (CLIENT PAUSE, which also
holds up every other client of that node), --faults kill-conns kills this
run's own connections to one node at a time (CLIENT KILL by the run's client
name).

Exits 0 when no violation was found, 10 when one was, 2 when keys under the
prefix exist, or as acquire does when no lease could be granted at all.
SIGINT stops the clients early: the history so far is checked, reported
and cleaned up, and verify exits 130 (10 if it found a violation).

` + exitCodeHelp

// verifyCmd builds verify.
func (a *App) verifyCmd() *cobra.Command {
	var o verifyOptions
	cmd := &cobra.Command{
		Use:   "verify [--duration D] [--clients N] [--resources N] [--faults none|pause|kill-conns] [--procs N] [--rate R] [--force] [--html FILE]",
		Short: "Check your deployment: concurrent fenced writes under the lock, checked for safety and linearizability",
		Long:  verifyLong,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("prefix") {
				a.g.prefix = defaultVerifyPrefix
			}
			if err := a.prepare(cmd, o.validate()); err != nil {
				return err
			}
			v := &verifier{app: a, o: o}
			if o.worker.active() {
				return v.runWorker(cmd.Context())
			}
			return v.run(cmd.Context())
		},
	}
	o.register(cmd.Flags())
	return cmd
}

// verifier is one run of verify.
type verifier struct {
	app   *App
	o     verifyOptions
	runID string
	urls  []string
	s     *session
	// lockers: client c uses lockers[c % len(lockers)].
	lockers   []*redlock.Locker
	register  verifyRegister
	resources []string
	start     time.Time
	rec       *recorder
	// info is porcupine's record of the check, for --html.
	info *porcupine.LinearizationInfo
}

// verifyLockers, when set (by tests), makes the Lockers of verify's
// clients over the session's nodes instead of one Locker per client over
// all of them: a test makes a broken deployment with it.
type verifyLockersFunc func(nodes redisnode.Nodes, cfg redlock.Config, clients int) ([]*redlock.Locker, error)

// verifyRegister is the fenced register: redisfence.Store on a node, or
// memRegister.
type verifyRegister interface {
	Read(ctx context.Context, key string) (value string, highest fencing.Token, found bool, err error)
	Write(ctx context.Context, key, value string, t fencing.Token) error
}

// newRunID returns 8 random hex digits.
func newRunID() string {
	var id [4]byte
	_, _ = rand.Read(id[:])
	return hex.EncodeToString(id[:])
}

// clientName is the client name (CLIENT SETNAME) of a run's connections.
func clientName(runID string) string { return "redlock-verify-" + runID }

// withClientName returns raw with its client_name query parameter set to
// name: the connections of the run can then be told apart (kill-conns).
func withClientName(raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	q.Set("client_name", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// connect dials the nodes (with the run's client name) and makes the
// clients' Lockers and the register.
func (v *verifier) connect(ctx context.Context) error {
	a := v.app
	urls, err := a.g.nodeURLs(a.Getenv)
	if err != nil {
		return err
	}
	v.urls = urls
	named := make([]string, len(urls))
	for i, u := range urls {
		named[i] = withClientName(u, clientName(v.runID))
	}
	s, err := a.connectURLs(ctx, named)
	if err != nil {
		return err
	}
	v.s = s
	cfg := a.g.config()
	n := v.o.clients
	if v.o.worker.active() {
		n = v.o.worker.count
	}
	if a.verifyLockers != nil {
		v.lockers, err = a.verifyLockers(s.nodes, cfg, n)
	} else {
		for range n {
			var l *redlock.Locker
			if l, err = redlock.New(s.nodes, cfg); err != nil {
				break
			}
			v.lockers = append(v.lockers, l)
		}
	}
	if err != nil {
		return classify(err)
	}
	if v.o.reg == registerMemory {
		v.register = newMemRegister()
	} else {
		rn, ok := s.nodes[0].(*redisnode.Node)
		if !ok {
			return usageErrorf("--register node needs a Redis node first in --nodes")
		}
		v.register = redisfence.New(rn.Client(), a.g.prefix+"register:")
	}
	return nil
}

// close closes the Lockers and the session.
func (v *verifier) close() {
	v.closeLockers()
	if v.s != nil {
		_ = v.s.nodes.Close()
		v.s = nil
	}
}

// closeLockers closes the Lockers, releasing what they hold.
func (v *verifier) closeLockers() {
	var wg sync.WaitGroup
	for _, l := range v.lockers {
		wg.Go(func() { _ = l.Close() })
	}
	wg.Wait()
	v.lockers = nil
}

// registerKey is resource's key in the register.
func registerKey(resource string) string { return "{" + resource + "}" }

// resourceNames returns the run's resources: verify:RUNID:I.
func resourceNames(runID string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "verify:" + runID + ":" + strconv.Itoa(i)
	}
	return names
}

// run is verify in the process the user started.
func (v *verifier) run(parent context.Context) error {
	a := v.app
	ctx, stop := interruptible(parent)
	defer stop()
	v.runID = newRunID()
	v.resources = resourceNames(v.runID, v.o.resources)
	if err := v.connect(ctx); err != nil {
		v.close()
		return err
	}
	defer v.close()

	existing, err := scanPrefix(ctx, v.s.nodes, a.g.prefix, 3)
	if err != nil {
		return v.cleanupFailed(ctx, err)
	}
	if len(existing) > 0 && !v.o.force {
		return &cliError{code: exitUsage, kind: kindPrefixInUse,
			msg:   fmt.Sprintf("keys under the prefix %q already exist (%s): another verify may be running, or one was stopped before it could clean up; use another --prefix, or --force to run anyway and delete every key under it at the end", a.g.prefix, strings.Join(existing, ", ")),
			extra: map[string]any{"prefix": a.g.prefix, "keys": existing}}
	}

	v.start = time.Now()
	v.rec = newRecorder(v.o.resources, v.o.clients)
	end := v.start.Add(v.o.duration)
	rctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()

	var wg sync.WaitGroup
	local := v.o.clients
	var workers *workerSet
	if v.o.procs > 1 {
		local = v.o.clients / v.o.procs
		workers, err = v.startWorkers(rctx, local)
		if err != nil {
			cancel()
			v.cleanup(context.WithoutCancel(ctx))
			return err
		}
	}
	// Each process takes its clients' share of --rate.
	limiter := newLimiter(rctx, v.o.rate*float64(local)/float64(v.o.clients))
	for c := range local {
		wg.Go(func() { v.client(rctx, c, v.lockers[c%len(v.lockers)], limiter) })
	}
	faults := v.startFaults(rctx)
	progressDone := make(chan struct{})
	var progress sync.WaitGroup
	if isTerminal(a.Stderr) && !a.g.json {
		progress.Go(func() { v.progress(progressDone) })
	}
	wg.Wait()
	var workerErr error
	if workers != nil {
		workerErr = workers.wait(v.rec)
	}
	nFaults := faults.wait()
	close(progressDone)
	progress.Wait()

	// The final read of each register, after every client has stopped.
	bg := context.WithoutCancel(ctx)
	for i, res := range v.resources {
		v.finalRead(bg, i, res)
	}
	res := v.check()
	res.FaultsInjected = nFaults
	res.DurationMS = time.Since(v.start).Milliseconds()
	if v.o.html != "" {
		if err := v.writeHTML(res); err != nil {
			a.warnf("verify: cannot write --html %s: %s", v.o.html, oneLine(err))
		} else {
			res.HTML = v.o.html
		}
	}
	v.closeLockers()
	removed, cerr := v.cleanupAll(bg)
	res.KeysRemoved = removed
	if cerr != nil {
		res.CleanupError = a.redact(oneLine(cerr))
	}
	if workerErr != nil {
		return &cliError{code: exitFailure, kind: kindFailure, msg: "verify: " + oneLine(workerErr), err: workerErr}
	}
	if res.Acquisitions == 0 {
		if ie := interrupted(ctx); ie != nil {
			return ie
		}
		return v.nothingTested(res)
	}
	a.report(res, func() { a.printVerify(res) })
	if res.CleanupError != "" {
		a.warnf("verify: some keys under %q may remain: %s", a.g.prefix, res.CleanupError)
	}
	if ie := interrupted(ctx); ie != nil {
		// Stopped early: the report covers what ran, then the signal's code.
		ie.reported = true
		if res.ViolationCount == 0 {
			return ie
		}
	}
	if res.ViolationCount > 0 {
		return &cliError{code: exitViolation, kind: kindViolation, reported: true,
			msg: fmt.Sprintf("verify found %s: %s", plural(res.ViolationCount, "violation"), strings.Join(res.Examples, "; "))}
	}
	return nil
}

// nothingTested is the error of a run in which no lease was granted: the
// most frequent acquire error says why.
func (v *verifier) nothingTested(res *verifyResult) error {
	ce := &cliError{code: exitFailure, kind: kindFailure, msg: "no acquisition was attempted"}
	if last := v.rec.lastErr(); last != nil {
		ce = classify(last)
	}
	ce.msg = clip(fmt.Sprintf("verify: no lock was granted in %s, nothing was tested (acquire errors: %s): %s",
		v.o.duration, fmtErrorCounts(res.AcquireErrors), ce.msg))
	ce.reported = false
	return ce
}

// cleanupFailed is the error when the prefix cannot be scanned.
func (v *verifier) cleanupFailed(ctx context.Context, err error) error {
	return opError(ctx, err, len(v.urls))
}

// cleanupAll deletes every key under the prefix on every node.
func (v *verifier) cleanupAll(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*v.app.g.callTimeout()+5*time.Second)
	defer cancel()
	return deletePrefix(ctx, v.s.nodes, v.app.g.prefix)
}

// cleanup is cleanupAll with the result ignored (a failed start).
func (v *verifier) cleanup(ctx context.Context) { _, _ = v.cleanupAll(ctx) }

// memRegister is a fenced register in this process's memory, with the
// semantics of redisfence.Store.
type memRegister struct {
	mu   sync.Mutex
	vals map[string]memValue
}

// memValue is one key's value and fence.
type memValue struct {
	value string
	found bool
	fence fencing.Token
}

// newMemRegister returns an empty register.
func newMemRegister() *memRegister { return &memRegister{vals: map[string]memValue{}} }

// Read returns key's value and fence.
func (m *memRegister) Read(_ context.Context, key string) (string, fencing.Token, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.vals[key]
	return v.value, v.fence, v.found, nil
}

// Write stores value when t is not below the fence, else refuses it with a
// *fencing.StaleError.
func (m *memRegister) Write(_ context.Context, key, value string, t fencing.Token) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.vals[key]
	if t < v.fence {
		return &fencing.StaleError{Key: key, Token: t, Highest: v.fence}
	}
	m.vals[key] = memValue{value: value, found: true, fence: t}
	return nil
}

// newLimiter returns a channel that yields at most rate values per second
// until ctx ends (then it is closed); nil when rate is 0 (no limit).
func newLimiter(ctx context.Context, rate float64) <-chan struct{} {
	if rate <= 0 {
		return nil
	}
	ch := make(chan struct{})
	every := time.Duration(float64(time.Second) / rate)
	go func() {
		defer close(ch)
		t := time.NewTicker(max(every, time.Microsecond))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			select {
			case ch <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}
