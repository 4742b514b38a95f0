// Package redisnode is the go-redis transport of package redlock: a
// redlock.Node over a go-redis client (a *redis.Client, a Sentinel
// failover client or a *redis.ClusterClient).
//
// Dial builds the nodes from URLs (a standalone server, TLS, a Unix socket,
// a whole Redis Cluster, a whole Sentinel group) with the client options
// the Locker needs, and checks that no server counts twice; New wraps a
// client of your own:
//
//	nodes, err := redisnode.Dial(ctx, "redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379")
//	...
//	defer nodes.Close() // after the Locker's Close
//	l, err := redlock.New(nodes, redlock.Config{})
//
// A Node runs the lock scripts as FCALLs of one Redis Function library
// (scripts.Functions) on Redis 7 and later, loading it once per server,
// and with EVALSHA (then EVAL when the server lacks one) where functions
// are not available (older servers, miniredis, an ACL; functions.go),
// batching the calls of concurrent goroutines into pipelines; it
// reports its servers' uptime and eviction policy (Uptime), carries release
// announcements over one pub/sub connection that follows failovers
// (Subscribe), says its database (DB) and that every call returns by its
// context's deadline when the client honours it (BoundedByContext). Every
// rule of the protocol is the Locker's: package redlock imports no Redis
// client, and module rueidisnode is a Node over rueidis instead.
package redisnode
