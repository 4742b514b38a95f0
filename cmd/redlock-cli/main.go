// Command redlock-cli takes Redlock locks on existing Redis servers from the
// shell: acquire, renew, release and inspect locks, run a command under a
// lock (flock(1) across machines), check that the servers are configured the
// way Redlock's safety needs (doctor), measure throughput and hand-off
// latency on them (bench), or watch fencing at work with no Redis at all
// (demo). run and bench serve Prometheus metrics with --metrics-addr.
//
// Exit codes are listed by "redlock-cli --help" and in README.md (section "Command line").
package main

import (
	"context"
	"os"
)

// quietLogger drops go-redis's internal log lines (such as failed dials to
// a node that is down): redlock-cli reports node failures itself, in one
// line.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func main() {
	a := &app{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	os.Exit(a.execute(context.Background(), os.Args[1:]))
}
