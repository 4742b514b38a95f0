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
