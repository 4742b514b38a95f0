// Package cli is redlock-cli: its commands, one file each (acquire.go,
// token.go for renew and release, status.go, run.go, doctor.go, bench.go,
// demo.go, verify.go with verify_*.go), and what they share: the global
// flags (flags.go), the session to the nodes (session.go), signals
// (signals.go), exit codes and error messages (exitcode.go, errmsg.go)
// and the printers (print.go).
// cmd/redlock-cli only wires it to the process: App.Execute.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/e6344662/go-redlock/redlock"
)

// App is one invocation of redlock-cli: its standard streams and its
// environment, which the caller sets, and the global flags. Use a new App
// for each command line.
type App struct {
	// Stdin is given to COMMAND under "run".
	Stdin io.Reader
	// Stdout receives results: tables, or JSON objects with --json.
	Stdout io.Writer
	// Stderr receives errors, warnings and progress, one line each.
	Stderr io.Writer
	// Getenv reads an environment variable (os.Getenv).
	Getenv func(string) string

	g globals
	// observer, when set (--metrics-addr), receives the events of every
	// Locker the command makes.
	observer redlock.Observer
	// trace is --trace (trace.go).
	trace traceState
	// watch, when set (acquire, run), observes the session's Locker in
	// front of observer: it warns about rejoining and misconfigured nodes
	// and keeps the last failed attempt.
	watch *watcher
	// verifyLockers, when set (tests only), makes verify's Lockers.
	verifyLockers verifyLockersFunc
}

// rootLong is the help text of redlock-cli itself.
const rootLong = `redlock-cli takes Redlock locks on Redis servers you already run: a lock is
held when a majority of independent servers grant it, and every holder gets a
fencing token that grows with each new holder.

Point it at the servers with --nodes or ` + envNodes + `, for example
  export ` + envNodes + `=redis://127.0.0.1:6381,redis://127.0.0.1:6382,redis://127.0.0.1:6383

Try "redlock-cli demo" first: it needs no Redis at all. "redlock-cli bench"
measures the lock on your nodes (or, with --embedded 3, on in-process ones).

` + exitCodeHelp

// newRoot builds the command tree.
func (a *App) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "redlock-cli",
		Short:         "Redlock locks with fencing tokens over independent Redis servers",
		Long:          rootLong,
		SilenceErrors: true,
		SilenceUsage:  true,
		// No command: the usage goes to stderr and the exit code is 2, so
		// that a script's "redlock-cli --json" (a command left out) fails
		// rather than print help where it expects JSON. --help still prints
		// the help on stdout and exits 0.
		Args:                       cobra.ArbitraryArgs,
		SuggestionsMinimumDistance: 2,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
				if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
					msg += "; did you mean " + strings.Join(s, " or ") + "?"
				}
				return usageErrorf("%s", msg)
			}
			cmd.SetOut(a.Stderr)
			_ = cmd.Usage()
			return usageErrorf("no command given")
		},
	}
	root.SetIn(a.Stdin)
	root.SetOut(a.Stdout)
	root.SetErr(a.Stderr)
	a.g.register(root.PersistentFlags())
	a.registerTrace(root)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageErrorf("%s", err.Error())
	})
	root.AddCommand(a.acquireCmd(), a.renewCmd(), a.releaseCmd(), a.statusCmd(),
		a.runCmd(), a.doctorCmd(), a.demoCmd(), a.benchCmd(), a.verifyCmd())
	return root
}

// Execute runs the command line args (without the program name) and
// returns the exit code. Errors are printed as one line on stderr (and,
// with --json, as a JSON object on stdout).
func (a *App) Execute(ctx context.Context, args []string) int {
	quietOnce.Do(func() { redis.SetLogger(quietLogger{}) })
	defer a.trace.stop()
	root := a.newRoot()
	root.SetArgs(flockArgs(root, args))
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var ce *cliError
	if !errors.As(err, &ce) {
		// Cobra's own parse errors: unknown command, flag or argument.
		ce = usageErrorf("%s", strings.Join(strings.Fields(err.Error()), " "))
	}
	if ce.code == exitUsage {
		a.g.json = a.g.json || wantsJSON(args)
	}
	// The one place every error passes: no password of a node URL and no
	// whole lock token reaches stderr or the JSON error object.
	ce.msg = a.redact(ce.msg)
	if ce.msg != "" {
		msg := ce.msg
		if ce.code == exitUsage && cmd != nil {
			msg += fmt.Sprintf(" (see '%s --help')", cmd.CommandPath())
		}
		fmt.Fprintf(a.Stderr, "redlock-cli: %s\n", msg)
	}
	if a.g.json && !ce.reported && ce.kind != "" {
		obj := map[string]any{"error": ce.kind, "message": ce.msg, "exit_code": ce.code}
		for k, v := range ce.extra {
			if str, ok := v.(string); ok {
				v = a.redact(str)
			}
			obj[k] = v
		}
		a.emit(obj)
	}
	return ce.code
}

// quietOnce silences go-redis's logger once per process.
var quietOnce sync.Once

// quietLogger drops go-redis's internal log lines (such as failed dials to
// a node that is down): redlock-cli reports node failures itself, in one
// line.
type quietLogger struct{}

// Printf drops the line.
func (quietLogger) Printf(context.Context, string, ...any) {}

// wantsJSON reports whether --json is among args before "--", for errors
// found before the flags were parsed.
func wantsJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "--json=true":
			return true
		}
	}
	return false
}
