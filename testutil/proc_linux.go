package testutil

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"
)

// sysProcAttr makes the kernel SIGKILL the server when the thread that
// started it dies; the server is started from a goroutine locked to its
// thread for the server's whole life, so that is when the test binary dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// pauseProcess sends SIGSTOP and waits until the kernel reports the process
// stopped, so no command sent after it returns is served.
func pauseProcess(p *os.Process) error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		state, err := procState(p.Pid)
		if err != nil || state == 'T' || state == 't' {
			return nil // stopped, or /proc unreadable: the signal was sent
		}
		if time.Now().After(deadline) {
			return errors.New("process did not stop within 2s of SIGSTOP")
		}
		time.Sleep(time.Millisecond)
	}
}

// procState returns the state letter of process pid from /proc/pid/stat.
func procState(pid int) (byte, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name is in parentheses and may contain anything; the
	// state follows the last closing parenthesis and a space.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, errors.New("malformed /proc stat")
	}
	return b[i+2], nil
}

// resumeProcess sends SIGCONT.
func resumeProcess(p *os.Process) error { return p.Signal(syscall.SIGCONT) }

// terminateProcess asks the process to shut down gracefully.
func terminateProcess(p *os.Process) error { return p.Signal(syscall.SIGTERM) }
