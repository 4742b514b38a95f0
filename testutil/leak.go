package testutil

import "go.uber.org/goleak"

// LeakOptions are the goleak options for tests of code that uses go-redis:
// after a client is closed, go-redis's redial loop (started when dials
// failed, as they do against a killed node) may sleep up to a second more
// before it notices. Use as goleak.VerifyTestMain(m, testutil.LeakOptions()...).
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"),
	}
}
