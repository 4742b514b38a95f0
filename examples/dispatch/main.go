// Command dispatch compares three ways for several workers to dispatch the
// same stream of orders, on three embedded Redis lock nodes (miniredis) and
// redlock's real Locker and Elector:
//
//   - scan: every worker scans the orders table and dispatches what is
//     pending;
//   - claim: a worker takes a lease on an order (a lock per row) before
//     dispatching it;
//   - leader: one elected leader dispatches; every dispatch carries the
//     term's fencing token, which the orders service checks.
//
// Every mode runs the same workload with the same faults: a worker freezes
// just before a dispatch for longer than a lease (in leader mode, the
// leader), and later a worker crashes and restarts (in leader mode, the
// leader again). The orders service counts the courier calls and prints a
// table: effects, duplicates, empty polls, failovers and stale writes
// fenced off.
//
//	go run ./examples/dispatch
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	w := DefaultWorkload()
	flag.IntVar(&w.Orders, "orders", w.Orders, "orders in the workload")
	flag.IntVar(&w.Workers, "workers", w.Workers, "worker processes (at least 3)")
	flag.DurationVar(&w.Lease, "lease", w.Lease, "lease duration of every lock")
	flag.Parse()
	w.CrashAt = min(w.CrashAt, w.Orders)
	w.StallAt = min(w.StallAt, w.CrashAt)
	w.Stall, w.Restart = 3*w.Lease, 2*w.Lease

	redis.SetLogger(quiet{}) // crashed workers' connections fail on purpose
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stats, err := Compare(ctx, w)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dispatch:", err)
		os.Exit(1)
	}
	fmt.Printf("%d orders, %d workers, lease %s; one worker stalls (%s or more, until another has taken over) before a dispatch, one crashes and restarts\n\n",
		w.Orders, w.Workers, w.Lease, w.Stall)
	PrintTable(os.Stdout, stats)
}

// PrintTable writes one row per mode.
func PrintTable(out io.Writer, stats []Stats) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\torders\teffects\tduplicates\tempty polls\tfailovers\tfenced off\tundispatched\ttime\t")
	for _, s := range stats {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", s.Mode, s.Orders, s.Effects, s.Duplicates,
			s.EmptyPolls, s.Failovers, s.Fenced, s.Undispatched, s.Elapsed.Round(10*time.Millisecond))
	}
	_ = tw.Flush()
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
