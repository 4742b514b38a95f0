//go:build unix && !linux

package testutil

import (
	"os"
	"syscall"
)

// sysProcAttr returns nil: only Linux can tie a child's life to its
// parent's (Pdeathsig), so elsewhere a server can outlive a test binary that
// is killed before its cleanups run.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// pauseProcess sends SIGSTOP.
func pauseProcess(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }

// resumeProcess sends SIGCONT.
func resumeProcess(p *os.Process) error { return p.Signal(syscall.SIGCONT) }

// terminateProcess asks the process to shut down gracefully.
func terminateProcess(p *os.Process) error { return p.Signal(syscall.SIGTERM) }
