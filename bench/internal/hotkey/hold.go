package hotkey

import (
	"os"
	"time"
)

// exactHolds makes Hold sleep in the kernel (REDLOCK_BENCH_HOLD=exact)
// rather than with time.Sleep.
var exactHolds = os.Getenv("REDLOCK_BENCH_HOLD") == "exact"

// Hold keeps the lock for d, the benchmark's critical section. By default
// it is time.Sleep. A 1 ms time.Sleep lasts longer in a process whose
// other goroutines wait on the network (the Go runtime then sleeps in its
// network poller, whose timeout is in whole milliseconds): measured 1.41
// ms in redlock's processes, which hold pub/sub connections open, against
// 1.16 ms in go-redsync's, so the hold, and the rate, depended on the
// library beside the critical section rather than on the lock. With
// REDLOCK_BENCH_HOLD=exact, Hold sleeps in the kernel (nanosleep, where
// the platform has it) and every implementation holds for the same time.
func Hold(d time.Duration) {
	if exactHolds && kernelSleep(d) {
		return
	}
	time.Sleep(d)
}
