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
//
// The servers run without persistence ("appendonly no") unless -bench.aof
// is given, which keeps testutil's AOF with appendfsync always.
package bench
