// Package rueidisnode is a redlock.Node over rueidis
// (github.com/redis/rueidis), an alternative transport to
// redlock/redisnode's go-redis Node, in a module of its own so that the
// library does not depend on rueidis. Neither it nor package redlock
// imports go-redis: a rueidis user's build has one Redis client.
//
// Its gain is pipelining: rueidis writes the commands of all the goroutines
// using a node on one connection, from one writer goroutine, and reads the
// replies on another, so many goroutines locking at once share round trips
// and system calls, on the client and on the server. A lone caller pays
// about what it pays over go-redis.
//
//	n1, err := rueidisnode.Dial("redis://10.0.0.1:6379")
//	...
//	l, err := redlock.New([]redlock.Node{n1, n2, n3}, redlock.Config{})
//	...
//	defer n1.Close() // after l.Close()
//
// A Node speaks to one standalone server (redis://, rediss:// or unix://
// URLs, rueidis's syntax: rueidis.ParseURL); for a Redis Cluster or a
// Sentinel group, use redisnode.Dial. It implements the Node contract
// exactly (redlock.Node's doc comment): Eval runs EVALSHA with the
// script's hash and EVAL with its source when the server answers NOSCRIPT;
// replies come back as int64, string, []any and nil, and a server's error
// reply as an *Error with the server's full text and a RedisError method.
// Every call returns by its context's end and is not handed to the
// connection once its context has ended. Its DB method says the database
// the URL selects, for the data-loss rule's marker, and BoundedByContext
// says that its calls are bounded (a Locker over this one node calls it
// in the caller's goroutine). Uptime reads INFO
// server and CONFIG GET (every 5 s at most), and Subscribe keeps one
// dedicated pub/sub connection for release announcements.
//
// What the Locker needs of the client is set whatever the options say
// (New): one pipelined connection, so that a call and the clean-up the
// Locker sends after it reach the server in that order; no retries; no
// client-side caching.
package rueidisnode
