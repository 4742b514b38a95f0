package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/e6344662/go-redlock/internal/redact"
	"github.com/e6344662/go-redlock/redlock"
)

// app is one invocation of the command: its streams, its environment and
// the global flags.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	g              globals
	// observer, when set (--metrics-addr), receives the events of every
	// Locker the command makes.
	observer redlock.Observer
}

const rootLong = `redlock-cli takes Redlock locks on Redis servers you already run: a lock is
held when a majority of independent servers grant it, and every holder gets a
fencing token that grows with each new holder.

Point it at the servers with --nodes or ` + envNodes + `, for example
  export ` + envNodes + `=redis://127.0.0.1:6381,redis://127.0.0.1:6382,redis://127.0.0.1:6383

Try "redlock-cli demo" first: it needs no Redis at all. "redlock-cli bench"
measures the lock on your nodes (or, with --embedded 3, on in-process ones).

` + exitCodeHelp

// newRoot builds the command tree.
func (a *app) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "redlock-cli",
		Short:         "Redlock locks with fencing tokens over independent Redis servers",
		Long:          rootLong,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	a.g.register(root.PersistentFlags())
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageErrorf("%s", err.Error())
	})
	root.AddCommand(a.acquireCmd(), a.renewCmd(), a.releaseCmd(), a.statusCmd(),
		a.runCmd(), a.doctorCmd(), a.demoCmd(), a.benchCmd())
	return root
}

// execute runs the command line args and returns the exit code. Errors are
// printed as one line on stderr (and, with --json, as a JSON object on
// stdout).
func (a *app) execute(ctx context.Context, args []string) int {
	quietOnce.Do(func() { redis.SetLogger(quietLogger{}) })
	root := a.newRoot()
	root.SetArgs(args)
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
		fmt.Fprintf(a.stderr, "redlock-cli: %s\n", msg)
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

var quietOnce sync.Once

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

// emit writes v as one JSON object on one line of stdout.
func (a *app) emit(v any) {
	enc := json.NewEncoder(a.stdout)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// printf writes human-readable output to stdout.
func (a *app) printf(format string, args ...any) {
	fmt.Fprintf(a.stdout, format, args...)
}

// warnf writes a one-line warning to stderr, cleaned by redact.
func (a *app) warnf(format string, args ...any) {
	fmt.Fprintf(a.stderr, "redlock-cli: %s\n", a.redact(fmt.Sprintf(format, args...)))
}

// redact returns s without the passwords of the node URLs and without any
// whole lock token (see package redact). Every error, warning and error
// field of the JSON output goes through it.
func (a *app) redact(s string) string {
	return redact.String(s, a.g.secrets(a.getenv)...)
}

// prepare validates the global flags of cmd; every command calls it first.
func (a *app) prepare(cmd *cobra.Command) error {
	return a.g.validate(cmd.Flags())
}

// exactArgs accepts exactly the named positional arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usageErrorf("%s takes %s, got %d arguments", cmd.Name(), strings.Join(names, " "), len(args))
		}
		return nil
	}
}

// noArgs accepts no positional argument. The message shows them through
// redact.URL: a node URL given without --nodes carries its password.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) != 0 {
		shown := make([]string, len(args))
		for i, arg := range args {
			shown[i] = redact.URL(arg)
		}
		return usageErrorf("%s takes no arguments, got %q", cmd.Name(), shown)
	}
	return nil
}
