//go:build !unix

package cli

import (
	"errors"
	"os"
)

// child is not supported here: run needs Unix process groups and signals.
type child struct{ exited chan struct{} }

// startChild fails: there is no COMMAND to start here.
func startChild([]string, *App, []string) (*child, error) {
	return nil, &cliError{code: exitCannotExec, kind: kindExec, msg: "run needs Unix process groups and signals", err: errors.ErrUnsupported}
}

// signal does nothing.
func (c *child) signal(os.Signal) {}

// terminate does nothing.
func (c *child) terminate() {}

// kill does nothing.
func (c *child) kill() {}

// groupAlive reports that no process is left.
func (c *child) groupAlive() bool { return false }

// status is a failure.
func (c *child) status() (code, childCode int, sig string) { return exitFailure, -1, "" }

// adoptOrphans does nothing.
func adoptOrphans() {}

// reapOrphans does nothing.
func reapOrphans() {}
