// Command redlock-cli takes Redlock locks on existing Redis servers from the
// shell: acquire, renew, release and inspect locks, run a command under a
// lock (flock(1) across machines), check that the servers are configured the
// way Redlock's safety needs (doctor), measure throughput and hand-off
// latency on them (bench), or watch fencing at work with no Redis at all
// (demo). run and bench serve Prometheus metrics with --metrics-addr.
//
// Exit codes are listed by "redlock-cli --help" and in docs/cli.md (section "Exit codes").
//
// The commands live in internal/cli; this package only wires them to the
// process.
package main

import (
	"context"
	"os"

	"github.com/e6344662/go-redlock/internal/cli"
)

// main runs the command line and exits with its exit code.
func main() {
	a := &cli.App{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	os.Exit(a.Execute(context.Background(), os.Args[1:]))
}
