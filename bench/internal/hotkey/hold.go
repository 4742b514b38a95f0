package hotkey

import (
	"os"
	"time"
)

// exactHolds makes Hold sleep in the kernel (REDLOCK_BENCH_HOLD=exact)
// rather than with time.Sleep.
var exactHolds = os.Getenv("REDLOCK_BENCH_HOLD") == "exact"

// Hold keeps the lock for d, the benchmark's critical section. By default
// it is time.Sleep. A 1 ms time.Sleep lasts longer in some processes than
// in others: measured 1.44-1.51 ms in redlock's, against 1.12 ms in
// go-redsync's, so the hold, and the rate, depended on the library beside
// the critical section rather than on the lock (docs/benchmarks.md). With
// REDLOCK_BENCH_HOLD=exact, Hold sleeps in the kernel (nanosleep, where
// the platform has it) and every implementation holds for the same time.
func Hold(d time.Duration) {
	if exactHolds && kernelSleep(d) {
		return
	}
	time.Sleep(d)
}
