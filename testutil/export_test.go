package testutil

import "testing"

// Internals exported for the external tests of this package.
var (
	FindRedisServer     = findRedisServer
	RedisServerPathWith = redisServerPath
)

// StartServerErr starts one server like StartRedisServer but returns the
// start-up error instead of failing the test.
func StartServerErr(t testing.TB, opts ...Option) (*RedisServer, error) {
	return startServer(t, RedisServerPath(t), buildOptions(opts))
}
