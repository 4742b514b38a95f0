//go:build unix && !linux

package cli

import "syscall"

// childAttr puts COMMAND in its own process group. Only Linux can also tie
// its life to redlock-cli's.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// adoptOrphans does nothing: child subreapers are Linux-only.
func adoptOrphans() {}

// reapOrphans does nothing: without a subreaper, orphans go to init.
func reapOrphans() {}
