// Package bench compares redlock with go-redsync v4, bsm/redislock and the
// raw floor of Redlock's round trips, in one run, against real redis-server
// processes started by testutil. It is a separate module so that the
// library never depends on its peers.
//
//	go test -run '^$' -bench . -count 5      # or: make bench (repository root)
//
// Benchmarks (names are benchstat keys):
//
//	BenchmarkUncontended/N=n/impl=x   one goroutine, acquire+release on a fresh key
//	BenchmarkInterleaved/N=n          the same, floor/redlock/redsync interleaved op by op
//	BenchmarkParallel/N=n/impl=x      8 goroutines on distinct fresh keys
//	BenchmarkHotKey/N=3/workers=w/impl=x  one key, w workers holding it ~1ms
//	BenchmarkRedisMemory              bytes on Redis per held lock and per fence key
//	BenchmarkHotKeyProcesses/procs=p/impl=x  one key, p OS processes × 4 workers
//	BenchmarkSemaphoreProcesses/procs=4/workers=16/K=4  semaphore of 4 slots vs mutex
//
// The *Processes benchmarks run their workers in child processes (this
// test binary again, running only TestProcChild, told what to do by
// $REDLOCK_BENCH_CHILD), each with its own Locker and connections, as
// separate services would. All children start at one wall-clock instant
// and run for -bench.procdur (5s) per op; each writes a JSON line per
// acquisition (hotkey.Record: worker, process, wall-clock times of the
// Acquire call, its return and the Release call), and the parent merges
// them by time: hand-offs (xproc- for those to another process), waits,
// shares, attempts and overlaps, which fail the benchmark. Run them with
// -benchtime 1x (make bench-procs).
//
// Issue 36's matrix (N = 1, 3, 5 × 1, 64, 256 goroutines; ours over go-redis
// and over the rueidisnode module, go-redsync, bsm/redislock, rueidislock
// and both floors; ratios within interleaved rounds, p50/p99, client and
// server CPU per op, allocations, AcquireAll of 8) is a command, not a
// benchmark: `go run ./cmd/matrix` (12-14 minutes on a loaded 2-core machine; see its doc comment).
//
// The servers run without persistence ("appendonly no") unless -bench.aof
// is given, which keeps testutil's AOF with appendfsync always.
package bench
