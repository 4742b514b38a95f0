//go:build !unix

package cli

import (
	"errors"
	"os"
)

// child is not supported here: run needs Unix process groups and signals.
type child struct{ exited chan struct{} }

func startChild([]string, *App, []string) (*child, error) {
	return nil, &cliError{code: exitCannotExec, kind: kindExec, msg: "run needs Unix process groups and signals", err: errors.ErrUnsupported}
}

func (c *child) signal(os.Signal)                          {}
func (c *child) terminate()                                {}
func (c *child) kill()                                     {}
func (c *child) groupAlive() bool                          { return false }
func (c *child) status() (code, childCode int, sig string) { return exitFailure, -1, "" }

func adoptOrphans() {}
func reapOrphans()  {}
