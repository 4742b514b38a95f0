package hotkey

import (
	"os"
	"time"
)

// exactHolds makes Hold sleep in the kernel (REDLOCK_BENCH_HOLD=exact)
// rather than with time.Sleep.
var exactHolds = os.Getenv("REDLOCK_BENCH_HOLD") == "exact"

// Hold keeps the lock for d, the benchmark's critical section. By default
// it is time.Sleep. A 1 ms time.Sleep lasts until about 1 ms after the
// last network reply the process gets during it (the Go runtime's poller
// waits for timers in whole milliseconds): measured 1.31-1.35 ms in
// redlock's processes, whose waiters queue during each hold, against
// 1.11-1.13 ms in go-redsync's, so the hold, and the rate, depend on the
// library beside the critical section (docs/benchmarks.md). With
// REDLOCK_BENCH_HOLD=exact, Hold sleeps in the kernel (nanosleep, where
// the platform has it) and every implementation holds for the same time.
func Hold(d time.Duration) {
	if exactHolds && kernelSleep(d) {
		return
	}
	time.Sleep(d)
}
