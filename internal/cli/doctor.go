package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/spf13/cobra"

	"github.com/e6344662/go-redlock/internal/redact"
)

// clockWarn is the clock offset between a node and the median of the nodes
// above which doctor warns.
const clockWarn = 250 * time.Millisecond

// clusterNode is the node column of the checks on the node set as a whole.
const clusterNode = "*"

// doctorResult is the --json output of doctor.
type doctorResult struct {
	OK     bool    `json:"ok"`
	Nodes  int     `json:"nodes"`
	Quorum int     `json:"quorum"`
	Fail   int     `json:"fail"`
	Warn   int     `json:"warn"`
	Checks []check `json:"checks"`
}

// doctorCmd builds doctor.
func (a *App) doctorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check the nodes for what Redlock's safety depends on",
		Long: `Check every node and print a table with OK, WARN or FAIL per check and node:
  reachable    PING answered, with the round-trip time
  version      server version and mode (a Sentinel is FAIL)
  role         a replica is FAIL; a primary with replicas is WARN
  persistence  appendonly yes + appendfsync always is OK; anything less is
               WARN (a restarted node forgets locks and fence counters)
  eviction     maxmemory-policy noeviction is OK; allkeys-* and volatile-*
               can evict lock keys and are FAIL
  scripts      every Lua script redlock runs loads (SCRIPT LOAD)
  clock        the node's TIME against the median of the nodes, corrected
               for half the round trip; WARN above ` + clockWarn.String() + `
and for the node set (node "*"): node_count (WARN when even or below 3),
quorum (FAIL when no majority is reachable), distinct (FAIL when two URLs
reach the same server). Exits 1 when any check is FAIL.

` + exitCodeHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.prepare(cmd); err != nil {
				return err
			}
			urls, err := a.g.nodeURLs(a.Getenv)
			if err != nil {
				return err
			}
			clients, err := doctorClients(urls)
			if err != nil {
				return err
			}
			defer func() {
				for _, c := range clients {
					_ = c.Close()
				}
			}()
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			res := diagnose(ctx, clients, a.g.callTimeout())
			if ie := interrupted(ctx); ie != nil {
				return ie
			}
			for i := range res.Checks {
				res.Checks[i].Detail = a.redact(res.Checks[i].Detail)
			}
			a.report(res, func() { a.printDoctor(res) })
			if !res.OK {
				return &cliError{code: exitFailure, kind: kindFailure, reported: true, msg: failSummary(res.Fail)}
			}
			return nil
		},
	}
}

// failSummary is doctor's error line for n failed checks: "doctor: 1
// check FAILs", "doctor: 2 checks FAIL".
func failSummary(n int) string {
	if n == 1 {
		return "doctor: 1 check FAILs"
	}
	return fmt.Sprintf("doctor: %d checks FAIL", n)
}

// doctorClients builds one client per URL without connecting. A URL that
// go-redis rejects is a usage error; its password never appears.
func doctorClients(urls []string) ([]*redis.Client, error) {
	var clients []*redis.Client
	for _, raw := range urls {
		opts, err := redis.ParseURL(raw)
		if err != nil {
			for _, c := range clients {
				_ = c.Close()
			}
			return nil, usageErrorf("malformed node URL %s: %s", redact.URL(raw), redact.URLError(raw, err))
		}
		opts.ContextTimeoutEnabled = true
		opts.MaxRetries = -1 // one attempt per check: the doctor measures
		opts.DisableIdentity = true
		opts.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		clients = append(clients, redis.NewClient(opts))
	}
	return clients, nil
}

// diagnose examines every node in parallel, then the node set.
func diagnose(ctx context.Context, clients []*redis.Client, timeout time.Duration) doctorResult {
	reports := make([]*nodeReport, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() { reports[i] = examine(ctx, c, c.Options().Addr, timeout) })
	}
	wg.Wait()
	checkClocks(reports)

	n := len(clients)
	res := doctorResult{Nodes: n, Quorum: n/2 + 1}
	for _, r := range reports {
		res.Checks = append(res.Checks, r.checks...)
	}
	res.Checks = append(res.Checks, clusterChecks(reports)...)
	for _, c := range res.Checks {
		switch c.Status {
		case statusFail:
			res.Fail++
		case statusWarn:
			res.Warn++
		}
	}
	res.OK = res.Fail == 0
	return res
}

// checkClocks adds a clock row to every reachable node: its offset from the
// median of the nodes' offsets.
func checkClocks(reports []*nodeReport) {
	var offsets []time.Duration
	for _, r := range reports {
		if r.clockOK {
			offsets = append(offsets, r.clock)
		}
	}
	if len(offsets) == 0 {
		return
	}
	slices.Sort(offsets)
	median := offsets[len(offsets)/2]
	for _, r := range reports {
		switch {
		case !r.reachable:
		case !r.clockOK:
			r.add("clock", statusWarn, "TIME failed")
		default:
			rel := r.clock - median
			detail := fmt.Sprintf("%s from the nodes' median (±%s); %s from this host", signed(rel), fmtDuration(r.clockErr), signed(r.clock))
			status := statusOK
			if rel > clockWarn || rel < -clockWarn {
				status = statusWarn
				detail += fmt.Sprintf("; over %s: are the clocks synchronized (NTP)? a clock that jumps expires locks early", clockWarn)
			}
			r.add("clock", status, "%s", detail)
		}
	}
}

// signed formats d with an explicit sign.
func signed(d time.Duration) string {
	d = roundDur(d)
	if d < 0 {
		return "-" + (-d).String()
	}
	return "+" + d.String()
}

// clusterChecks are the checks on the node set as a whole.
func clusterChecks(reports []*nodeReport) []check {
	n := len(reports)
	q := n/2 + 1
	var out []check
	add := func(name, status, format string, args ...any) {
		out = append(out, check{Node: clusterNode, Check: name, Status: status, Detail: fmt.Sprintf(format, args...)})
	}
	switch {
	case n == 1:
		add("node_count", statusWarn, "a single node: no fault tolerance; use 3 or 5 independent servers")
	case n == 2:
		add("node_count", statusWarn, "2 nodes need both (quorum 2): no fault tolerance; use 3 or 5")
	case n%2 == 0:
		add("node_count", statusWarn, "%d nodes tolerate %d down, as %d would (quorum %d); use an odd number", n, n-q, n-1, q)
	default:
		add("node_count", statusOK, "%d nodes, quorum %d: tolerates %d down", n, q, n-q)
	}

	up := 0
	for _, r := range reports {
		if r.reachable {
			up++
		}
	}
	if up >= q {
		add("quorum", statusOK, "%d of %d nodes reachable, %d needed", up, n, q)
	} else {
		add("quorum", statusFail, "only %d of %d nodes reachable, %d needed: no lock can be taken", up, n, q)
	}

	byID := map[string][]string{}
	for _, r := range reports {
		if r.runID != "" {
			byID[r.runID] = append(byID[r.runID], r.addr)
		}
	}
	var dups []string
	for _, addrs := range byID {
		if len(addrs) > 1 {
			dups = append(dups, strings.Join(addrs, " = "))
		}
	}
	slices.Sort(dups)
	if len(dups) > 0 {
		add("distinct", statusFail, "the same server is listed more than once (%s): it would count twice toward a quorum", strings.Join(dups, "; "))
	} else {
		add("distinct", statusOK, "%d distinct servers (by run_id)", len(byID))
	}
	return out
}

// printDoctor prints doctor's table and verdict.
func (a *App) printDoctor(res doctorResult) {
	tw := a.table()
	fmt.Fprintln(tw, "NODE\tCHECK\tSTATUS\tDETAIL")
	for _, c := range res.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Node, c.Check, c.Status, c.Detail)
	}
	_ = tw.Flush()
	verdict := "no FAIL"
	if !res.OK {
		verdict = "NOT SAFE for Redlock"
	}
	a.printf("doctor: %d FAIL, %d WARN, %d OK: %s\n", res.Fail, res.Warn, len(res.Checks)-res.Fail-res.Warn, verdict)
}
