//go:build unix

package hotkey

import (
	"syscall"
	"time"
)

// kernelSleep sleeps d in the nanosleep system call; it reports false if
// it could not.
func kernelSleep(d time.Duration) bool {
	ts := syscall.NsecToTimespec(int64(d))
	for {
		var left syscall.Timespec
		err := syscall.Nanosleep(&ts, &left)
		if err == nil {
			return true
		}
		if err != syscall.EINTR {
			return false
		}
		ts = left
	}
}
