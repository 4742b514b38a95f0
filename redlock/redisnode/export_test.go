package redisnode

// Pending reports n's calls waiting in its batcher's queue, the round
// trips in flight (single calls and pipelines) and the calls holding room
// (queued or in flight).
func Pending(n *Node) (queued, flushing, room int) { return n.batch.pending() }

// Batch limits, for tests: round trips in flight per node, and calls queued
// or in flight per node.
const (
	BatchFlushers = batchFlushers
	BatchPending  = batchPending
)

// FunctionCounts reports the FCALLs and FUNCTION LOADs n sent, and the
// calls it sent again as EVALSHA after the server refused their FCALL.
func FunctionCounts(n *Node) (fcalls, loads, fallbacks int64) {
	f := n.batch.fn
	return f.fcalls.Load(), f.loads.Load(), f.fallbacks.Load()
}
