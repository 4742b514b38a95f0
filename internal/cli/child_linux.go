package cli

import "syscall"

// childAttr puts COMMAND in its own process group and has the kernel kill it
// if redlock-cli dies (the lock would then not be renewed).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// adoptOrphans makes redlock-cli the subreaper of COMMAND's descendants:
// those whose parent exits are reparented to it rather than to init, so
// that reapOrphans can collect them once they end. Without it, a process
// of COMMAND's group that ended would linger as a zombie, and count as
// running, until init reaps it (some container init processes never do).
func adoptOrphans() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}

// reapOrphans collects every child that has ended. It must be called only
// after COMMAND itself has been waited for, so that it cannot take
// COMMAND's exit status from exec.Cmd.Wait.
func reapOrphans() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
