//go:build !unix

package hotkey

import "time"

// kernelSleep is not available here: Hold uses time.Sleep.
func kernelSleep(time.Duration) bool { return false }
