//go:build unix

package cli

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// child is COMMAND, running in its own process group.
type child struct {
	cmd    *exec.Cmd
	pgid   int
	exited chan struct{} // closed when COMMAND has exited and been reaped
	err    error         // from Wait, once exited is closed
}

// startChild starts argv with env and the app's standard streams, in a new
// process group. The returned child's exited channel closes when it ends.
func startChild(argv []string, a *App, env []string) (*child, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, execError(argv[0], err)
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = a.Stdin, a.Stdout, a.Stderr
	cmd.SysProcAttr = childAttr()
	// When a stream is not a file, output is copied through a pipe; do not
	// wait for helpers that keep it open after COMMAND exits.
	cmd.WaitDelay = time.Second

	adoptOrphans()
	c := &child{cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Linux's parent-death signal fires when the thread that started
		// the child ends, so that thread stays locked to this goroutine
		// until the child has exited.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		c.pgid = cmd.Process.Pid
		started <- nil
		c.err = cmd.Wait()
		close(c.exited)
	}()
	if err := <-started; err != nil {
		return nil, execError(argv[0], err)
	}
	return c, nil
}

// signal sends sig to COMMAND's process group.
func (c *child) signal(sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		_ = syscall.Kill(-c.pgid, s)
	}
}

// terminate sends SIGTERM to the process group.
func (c *child) terminate() { c.signal(syscall.SIGTERM) }

// kill sends SIGKILL to the process group.
func (c *child) kill() { c.signal(syscall.SIGKILL) }

// groupAlive reports whether any process of the group still exists, after
// reaping those that ended (call it only once COMMAND has exited).
func (c *child) groupAlive() bool {
	reapOrphans()
	return syscall.Kill(-c.pgid, 0) == nil
}

// status returns redlock-cli's exit code for COMMAND's end, COMMAND's exit
// status (-1 when killed by a signal) and the name of that signal.
func (c *child) status() (code, childCode int, sig string) {
	if c.err == nil {
		return 0, 0, ""
	}
	var ee *exec.ExitError
	if !errors.As(c.err, &ee) {
		return exitFailure, -1, ""
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignalBase + int(ws.Signal()), -1, ws.Signal().String()
	}
	return ee.ExitCode(), ee.ExitCode(), ""
}
