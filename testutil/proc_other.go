//go:build !unix

package testutil

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// sysProcAttr returns nil: there is no portable way here to tie a child's
// life to its parent's.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// pauseProcess reports that pausing needs SIGSTOP, which this system lacks.
func pauseProcess(*os.Process) error {
	return fmt.Errorf("pause needs SIGSTOP: %w", errors.ErrUnsupported)
}

// resumeProcess reports that resuming needs SIGCONT, which this system lacks.
func resumeProcess(*os.Process) error {
	return fmt.Errorf("resume needs SIGCONT: %w", errors.ErrUnsupported)
}

// terminateProcess kills the process: there is no SIGTERM here.
func terminateProcess(p *os.Process) error { return p.Kill() }
