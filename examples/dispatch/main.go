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
// leader again). The sink counts the courier calls and the program prints
// a table: effects, duplicates, empty polls, failovers and stale writes
// fenced off.
//
// The sink is PostgreSQL when one can be reached, found the way psql finds
// it: --database-url, else the libpq environment variables (PGHOST, PGPORT,
// PGUSER, PGDATABASE, PGPASSWORD) and their defaults. Every dispatch is then
// a row of redlock_dispatch_effects, and leader mode's are fenced by
// pgfence.Tx (the token check, the courier call and the row in one
// transaction), so the duplicates are counted in the database. With no
// PostgreSQL reachable it says so and uses the in-memory sink
// (fencing.Fence); --sink=memory or --sink=postgres chooses.
//
//	cd examples/dispatch && go run .
//	cd examples/dispatch && PGHOST=127.0.0.1 PGUSER=postgres go run .
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
	if err := run(context.Background(), os.Args[1:], os.Stdout, stderrSay); err != nil {
		fmt.Fprintln(os.Stderr, "dispatch:", err)
		os.Exit(1)
	}
}

// run is the program: flags in args, the table on out, notes to say.
func run(ctx context.Context, args []string, out io.Writer, say func(string)) error {
	w := DefaultWorkload()
	fs := flag.NewFlagSet("dispatch", flag.ContinueOnError)
	fs.IntVar(&w.Orders, "orders", w.Orders, "orders in the workload")
	fs.IntVar(&w.Workers, "workers", w.Workers, "worker processes (at least 3)")
	fs.DurationVar(&w.Lease, "lease", w.Lease, "lease duration of every lock")
	dbURL := fs.String("database-url", "", "PostgreSQL URL (default: the libpq environment, PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, as psql)")
	sinkKind := fs.String("sink", "auto", "where dispatches go: auto (PostgreSQL if reachable, else memory), postgres, memory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	w.CrashAt = min(w.CrashAt, w.Orders)
	w.StallAt = min(w.StallAt, w.CrashAt)
	w.Stall, w.Restart = 3*w.Lease, 2*w.Lease

	redis.SetLogger(quiet{}) // crashed workers' connections fail on purpose
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	sink, closeSink, err := ChooseSink(ctx, *sinkKind, *dbURL, say)
	if err != nil {
		return err
	}
	defer closeSink()
	stats, err := Compare(ctx, w, sink)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d orders, %d workers, lease %s; one worker stalls (%s or more, until another has taken over) before a dispatch, one crashes and restarts\n",
		w.Orders, w.Workers, w.Lease, w.Stall)
	fmt.Fprintf(out, "sink: %s\n\n", sink.Name())
	PrintTable(out, stats)
	return nil
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
