package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/e6344662/go-redlock/redlock"
)

// Environment variables run gives COMMAND.
const (
	envResource = "REDLOCK_RESOURCE"
	envToken    = "REDLOCK_TOKEN"
	envFence    = "REDLOCK_FENCE"
	envCount    = "REDLOCK_COUNT"
)

// defaultKillAfter is how long run waits after SIGTERM before SIGKILL.
const defaultKillAfter = 10 * time.Second

// runResult is the --json output of run, printed after COMMAND exits.
type runResult struct {
	Resource string `json:"resource"`
	// Shared is set for a reader (--shared) of the read-write lock.
	Shared bool `json:"shared,omitempty"`
	// RW is set for the read-write lock's writer (--rw).
	RW bool `json:"rw,omitempty"`
	// Resources and Fences list every resource and its lease's fencing
	// token, in the order given, when run took several at once.
	Resources []string `json:"resources,omitempty"`
	Fences    []uint64 `json:"fences,omitempty"`
	// Slot is the semaphore slot held (-n K above 1), RESOURCE#i: the
	// resource the fence belongs to, as in REDLOCK_RESOURCE.
	Slot          string `json:"slot,omitempty"`
	Fence         uint64 `json:"fence"`
	ExitCode      int    `json:"exit_code"`
	ChildExitCode int    `json:"child_exit_code"`
	ChildSignal   string `json:"child_signal,omitempty"`
	LeaseLost     bool   `json:"lease_lost"`
	Released      bool   `json:"released"`
	DurationMS    int64  `json:"duration_ms"`
}

// runLong is the help text of run.
const runLong = `Acquire the lock on RESOURCE (one attempt, or wait up to --wait), then run
COMMAND with REDLOCK_RESOURCE, REDLOCK_TOKEN and REDLOCK_FENCE in its
environment, renewing the lock while it runs. SIGINT, SIGTERM and SIGHUP are
forwarded to COMMAND; a second one (a second Ctrl-C) while COMMAND still
runs sends it SIGKILL. When COMMAND exits, the lock is released and
redlock-cli exits with COMMAND's exit code (128+N if killed by signal N).

If the lease is lost while COMMAND runs (no majority renewed it in time),
COMMAND gets SIGTERM, then SIGKILL after --kill-after, and redlock-cli exits
with 6. Between the loss and COMMAND's end another holder may already run:
protect the resource itself with the fencing token REDLOCK_FENCE.

COMMAND runs in its own process group, and every signal goes to the whole
group, so helpers it starts are stopped too; processes of the group still
running when COMMAND exits get SIGTERM (and SIGKILL after --kill-after)
before the lock is released. COMMAND cannot read from the terminal. On
Linux, COMMAND is killed if redlock-cli itself dies.

With --metrics-addr, Prometheus metrics of the lock (acquisition, renewals,
node errors) are served at http://HOST:PORT/metrics until redlock-cli exits;
the address is printed on stderr.

With --shared, run takes the read-write lock on RESOURCE as a reader: any
number of readers share it, and a writer (--rw) excludes them all; a
reader's REDLOCK_FENCE exceeds every earlier writer's, a writer's every
earlier token (readers' included). Once a writer waits, new readers wait
behind it. The read-write lock is not the plain lock of the same name.

With several resources (run A B C -- COMMAND), run takes a plain lock on
each, all or none (never a part while waiting for the rest), and gives
COMMAND REDLOCK_COUNT and, for each i from 0, REDLOCK_RESOURCE_i,
REDLOCK_TOKEN_i and REDLOCK_FENCE_i (REDLOCK_RESOURCE, REDLOCK_TOKEN and
REDLOCK_FENCE are the first's). COMMAND is stopped if any lease is lost.

Without --, as with flock(1), the first argument that is not one of run's
flags is RESOURCE and everything from the next one that is not a flag is
COMMAND with its arguments: "run job echo hi" and "run --wait 5s job ls -la"
work; several resources need -- (run A B C -- COMMAND). Use -- when COMMAND
is to start with something that looks like a flag.

` + exitCodeHelp

// runCmd builds run.
func (a *App) runCmd() *cobra.Command {
	var wait time.Duration
	var metricsAddr string
	slots := 1
	var shared, rw bool
	killAfter := defaultKillAfter
	cmd := &cobra.Command{
		Use:   "run RESOURCE... [-n K | --shared | --rw] [--wait DURATION] [--kill-after DURATION] [--metrics-addr HOST:PORT] [--] COMMAND [ARGS...]",
		Short: "Run a command while holding a lock (flock(1) across machines)",
		Long:  runLong,
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			switch {
			case dash < 0 && len(args) > 0:
				// flockArgs adds the -- when a COMMAND follows RESOURCE.
				return usageErrorf("run takes RESOURCE COMMAND [ARGS...] (or RESOURCE... -- COMMAND [ARGS...]): no COMMAND")
			case dash == 0 || len(args) == 0:
				return usageErrorf("run takes RESOURCE -- COMMAND [ARGS...]: no RESOURCE")
			case len(args) <= dash:
				return usageErrorf("run takes RESOURCE -- COMMAND [ARGS...]: no COMMAND")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			resources := args[:cmd.ArgsLenAtDash()]
			if err := a.prepare(cmd, checkWait(cmd, wait), positive("kill-after", killAfter), checkSlots(slots), checkRunResources(resources, slots, shared, rw)); err != nil {
				return err
			}
			if cmd.Flags().Changed("metrics-addr") {
				if err := checkMetricsAddr(metricsAddr); err != nil {
					return err
				}
				urls, err := a.g.nodeURLs(a.Getenv)
				if err != nil {
					return err
				}
				stop, err := a.startMetrics(metricsAddr, len(urls))
				if err != nil {
					return err
				}
				defer stop()
			}
			r := &runner{app: a, resource: resources[0], resources: resources, argv: args[len(resources):], wait: wait, killAfter: killAfter, slots: slots, shared: shared, rw: rw}
			return r.run(cmd.Context())
		},
	}
	addWaitFlag(cmd.Flags(), &wait)
	addSlotsFlag(cmd.Flags(), &slots)
	cmd.Flags().BoolVar(&shared, "shared", false, "take the read-write lock on RESOURCE as a reader, shared with other readers")
	cmd.Flags().BoolVar(&rw, "rw", false, "take the read-write lock on RESOURCE as its writer, excluding readers and writers")
	cmd.Flags().DurationVar(&killAfter, "kill-after", defaultKillAfter, "SIGKILL this long after SIGTERM, when the lease is lost or COMMAND left processes behind")
	addMetricsFlag(cmd.Flags(), &metricsAddr)
	return cmd
}

// runner is one execution of run.
type runner struct {
	app       *App
	resource  string
	argv      []string
	wait      time.Duration
	killAfter time.Duration
	slots     int // -n: above 1, a semaphore of that many slots
	// resources are every RESOURCE given (several: all or none); shared
	// and rw take the read-write lock on resource as a reader or writer.
	resources  []string
	shared, rw bool
}

// checkRunResources rejects run's resources and lock kinds that do not go
// together: a name twice, several names with -n, --shared or --rw, or -n
// with --shared or --rw, or both of those.
func checkRunResources(resources []string, slots int, shared, rw bool) error {
	seen := map[string]bool{}
	for _, r := range resources {
		if err := checkResource(r); err != nil {
			return err
		}
		if seen[r] {
			return usageErrorf("resource %q given twice", r)
		}
		seen[r] = true
	}
	switch {
	case shared && rw:
		return usageErrorf("--shared (a reader) and --rw (the writer) exclude each other")
	case (shared || rw) && slots > 1:
		return usageErrorf("-n (a semaphore) does not go with --shared or --rw")
	case len(resources) > 1 && (shared || rw || slots > 1):
		return usageErrorf("several resources are taken as plain locks: not with -n, --shared or --rw")
	case len(resources) > redlock.MaxAcquireAll:
		return usageErrorf("at most %d resources at once, got %d", redlock.MaxAcquireAll, len(resources))
	}
	return nil
}

// run acquires the lock, supervises COMMAND and releases the lock.
func (r *runner) run(ctx context.Context) error {
	a := r.app
	// Signals that arrive while COMMAND runs are forwarded. The channel is
	// registered before the acquisition's own handler is removed, so that
	// no signal is missed in between.
	sigs := make(chan os.Signal, 8)
	defer signal.Stop(sigs)

	actx, stopInterrupt := interruptible(ctx)
	s, leases, err := r.acquire(actx)
	if err != nil {
		stopInterrupt()
		return err
	}
	lease := newHeldSet(leases)
	defer lease.stop()
	// Last, after the close has waited for late calls: nodes that failed
	// after the acquisition's flush.
	defer r.app.watch.flush()
	defer s.close()
	signal.Notify(sigs, stopSignals...)
	stopInterrupt()
	if ie := interrupted(actx); ie != nil {
		r.release(s, leases)
		return ie
	}

	start := time.Now()
	child, err := startChild(r.argv, a, r.childEnv(leases))
	if err != nil {
		r.release(s, leases)
		return err
	}
	out := r.supervise(child, lease, sigs)
	released := r.release(s, leases)

	slot := ""
	if r.slots > 1 {
		slot = leases[0].Resource()
	}
	res := runResult{
		Resource:      r.resource,
		Shared:        r.shared,
		RW:            r.rw,
		Slot:          slot,
		Fence:         uint64(leases[0].Fence()),
		ExitCode:      out.code,
		ChildExitCode: out.childCode,
		ChildSignal:   out.childSignal,
		LeaseLost:     out.lost,
		Released:      released,
		DurationMS:    time.Since(start).Milliseconds(),
	}
	if len(leases) > 1 {
		for _, ls := range leases {
			res.Resources = append(res.Resources, ls.Resource())
			res.Fences = append(res.Fences, uint64(ls.Fence()))
		}
	}
	if out.lost {
		res.ExitCode = exitLeaseLost
	}
	if a.g.json {
		a.emit(res)
	}
	if out.lost {
		return &cliError{code: exitLeaseLost, kind: kindLeaseLost, reported: true,
			msg: fmt.Sprintf("lease on %q was lost while COMMAND ran; COMMAND was stopped (%s)", r.resource, out.stoppedWith)}
	}
	if out.code != 0 {
		return &cliError{code: out.code, reported: true}
	}
	return nil
}

// acquire connects and takes the lock (or locks: several resources).
func (r *runner) acquire(ctx context.Context) (*session, []*redlock.Lease, error) {
	w := startWait(r.wait)
	r.app.watch = newWatcher(r.app.observer, r.app.warnf, w.total > 0)
	s, err := r.app.connectWaiting(ctx, w)
	if err != nil {
		return nil, nil, err
	}
	var leases []*redlock.Lease
	switch {
	case len(r.resources) > 1:
		leases, err = r.app.lockAll(ctx, s, r.resources, w)
	case r.shared || r.rw:
		var lease *redlock.Lease
		lease, err = r.app.lockRW(ctx, s, r.resource, r.shared, w)
		leases = []*redlock.Lease{lease}
	default:
		var lease *redlock.Lease
		lease, err = r.app.lockSlot(ctx, s, r.resource, r.slots, w)
		leases = []*redlock.Lease{lease}
	}
	if err != nil {
		return nil, nil, closeFailed(s, err)
	}
	r.app.watch.flush()
	return s, leases, nil
}

// childEnv is COMMAND's environment: ours plus the leases' variables
// (the first's unsuffixed; with several, each's suffixed by its index).
func (r *runner) childEnv(leases []*redlock.Lease) []string {
	env := append(os.Environ(),
		envResource+"="+leases[0].Resource(),
		envToken+"="+leases[0].Token(),
		envFence+"="+leases[0].Fence().String(),
	)
	if len(leases) > 1 {
		env = append(env, fmt.Sprintf("%s=%d", envCount, len(leases)))
		for i, ls := range leases {
			env = append(env,
				fmt.Sprintf("%s_%d=%s", envResource, i, ls.Resource()),
				fmt.Sprintf("%s_%d=%s", envToken, i, ls.Token()),
				fmt.Sprintf("%s_%d=%s", envFence, i, ls.Fence()),
			)
		}
	}
	return env
}

// release releases the leases at once, warning on stderr when one fails;
// it reports whether a majority deleted every lock.
func (r *runner) release(s *session, leases []*redlock.Lease) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*r.app.g.callTimeout()+time.Second)
	defer cancel()
	errs := make([]error, len(leases))
	var wg sync.WaitGroup
	for i, ls := range leases {
		wg.Go(func() { errs[i] = ls.Release(ctx) })
	}
	wg.Wait()
	all := true
	for i, err := range errs {
		switch {
		case err == nil:
			continue
		case !errors.Is(err, redlock.ErrLeaseLost):
			r.app.warnf("release %q: %s; the lock expires by its TTL (%s)", leases[i].Resource(), opError(ctx, err, len(s.nodes)).msg, r.app.g.ttl)
		}
		all = false
	}
	return all
}

// heldSet is what run supervises: the leases it holds, whose Context ends
// when any of theirs does, with its cause.
type heldSet struct {
	ctx  context.Context
	stop func() // ends the watching
}

// newHeldSet watches leases; with one, its own Context.
func newHeldSet(leases []*redlock.Lease) heldSet {
	if len(leases) == 1 {
		return heldSet{leases[0].Context(), func() {}}
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	for _, ls := range leases {
		go func() {
			select {
			case <-ls.Context().Done():
				cancel(context.Cause(ls.Context()))
			case <-ctx.Done():
			}
		}()
	}
	return heldSet{ctx, func() { cancel(nil) }}
}

// Context ends when any lease's does.
func (h heldSet) Context() context.Context { return h.ctx }

// flockArgs returns the command line args with a "--" put before
// COMMAND when it is "run" without one, as flock(1) reads its arguments:
// the first argument after run's flags is RESOURCE, and COMMAND starts at
// the first one after it that is not a flag of run's (nor a flag's value).
// Any other command line is returned as it is.
func flockArgs(root *cobra.Command, args []string) []string {
	i := skipFlags(root, args, 0)
	if i >= len(args) || args[i] != "run" || slices.Contains(args[i:], "--") {
		return args
	}
	run, _, err := root.Find([]string{"run"})
	if err != nil || run == root {
		return args
	}
	res := skipFlags(run, args, i+1)
	if res >= len(args) {
		return args
	}
	cmd := skipFlags(run, args, res+1)
	if cmd >= len(args) {
		return args
	}
	out := make([]string, 0, len(args)+1)
	out = append(out, args[:cmd]...)
	out = append(out, "--")
	return append(out, args[cmd:]...)
}

// skipFlags returns the index of the first argument of args from i on
// that is neither a flag of cmd (its own or inherited) nor a flag's value.
func skipFlags(cmd *cobra.Command, args []string, i int) int {
	lookup := func(name string, short bool) *pflag.Flag {
		for _, fs := range []*pflag.FlagSet{cmd.Flags(), cmd.InheritedFlags(), cmd.Root().PersistentFlags()} {
			var f *pflag.Flag
			if short {
				f = fs.ShorthandLookup(name)
			} else {
				f = fs.Lookup(name)
			}
			if f != nil {
				return f
			}
		}
		return nil
	}
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" || !strings.HasPrefix(a, "-") {
			return i
		}
		var f *pflag.Flag
		switch {
		case strings.HasPrefix(a, "--"):
			name, _, hasValue := strings.Cut(a[2:], "=")
			if !hasValue {
				f = lookup(name, false)
			}
		case len(a) == 2:
			f = lookup(a[1:], true)
		}
		if f != nil && f.NoOptDefVal == "" {
			i++ // the flag's value
		}
	}
	return i
}

// execError maps a failure to start COMMAND to its exit code.
func execError(name string, err error) *cliError {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist):
		return &cliError{code: exitNotFound, kind: kindExec, msg: fmt.Sprintf("COMMAND %q not found", name), err: err}
	case errors.Is(err, os.ErrPermission):
		return &cliError{code: exitCannotExec, kind: kindExec, msg: fmt.Sprintf("COMMAND %q cannot be executed: permission denied", name), err: err}
	}
	return &cliError{code: exitCannotExec, kind: kindExec, msg: fmt.Sprintf("cannot start COMMAND %q: %s", name, oneLine(err)), err: err}
}
