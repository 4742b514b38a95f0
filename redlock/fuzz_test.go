package redlock_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/internal/nodeurl"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
)

// FuzzDial feeds node URLs, as users type them into configuration files and
// the CLI, to Dial. Whatever the input, Dial must not panic, must reject it
// with ErrInvalidConfig when it does not parse or names the same node twice,
// and must never repeat the password of a URL that parses in its error.
//
// Nothing is dialled: the context is cancelled before Dial is called (so
// every parsable URL ends in ErrNoQuorum), and inputs naming any host but
// the loopback interface are skipped, so the fuzzer cannot make this test
// talk to the network.
//
// Run with: go test -run='^$' -fuzz='^FuzzDial$' -fuzztime=5s ./redlock/
func FuzzDial(f *testing.F) {
	seeds := []string{
		"redis://127.0.0.1:6379",
		"redis://127.0.0.1:6379/2",
		"rediss://localhost:6380?dial_timeout=1s",
		"redis://user:s3cret-pw@127.0.0.1:6379/0",
		"redis://:s3cret-pw@127.0.0.1:6379/notadb",
		"redis://user:s3cret pw@127.0.0.1:6379",
		"redis://user:s3cret%zzpw@127.0.0.1:6379",
		"redis://u:p@ss-w0rd@127.0.0.1:6379",
		"redis://[::1]:6379",
		"redis://127.0.0.1:notaport",
		"redis://127.0.0.1:6379?max_retries=x",
		"redis://127.0.0.1:6379?unknown_option=1",
		"http://127.0.0.1:6379",
		"unix:///tmp/redis.sock",
		"::::",
		"",
		" redis://127.0.0.1:6379 ",
		"redis+cluster://:s3cret-pw@127.0.0.1:7000?addr=127.0.0.1:7001",
		"rediss+cluster://127.0.0.1:7000?addr=localhost",
		"redis+sentinel://127.0.0.1:26379?master_name=m&addr=127.0.0.1:26380&password=s3cret-pw",
		"redis+sentinel://127.0.0.1:26379",
		"unix+cluster:///tmp/x",
		"redis:",
	}
	for _, s := range seeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, raw string, twice bool) {
		spec, perr := nodeurl.Parse(raw)
		if perr == nil && !specLoopback(spec) {
			return // never dial anything but this machine
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		urls := []string{raw}
		if twice {
			urls = append(urls, " "+raw+" ")
		}
		nodes, err := redisnode.Dial(ctx, urls...)
		if err == nil {
			_ = nodes.Close()
			t.Fatalf("Dial(%q) with a cancelled context succeeded", urls)
		}
		if nodes != nil {
			t.Fatalf("Dial(%q) failed (%v) but returned nodes", urls, err)
		}
		switch {
		case perr != nil || twice:
			if !errors.Is(err, redlock.ErrInvalidConfig) {
				t.Fatalf("Dial(%q) = %v, want ErrInvalidConfig (parse error: %v)", urls, err, perr)
			}
		case !errors.Is(err, redlock.ErrNoQuorum):
			t.Fatalf("Dial(%q) = %v, want ErrNoQuorum: nothing answers a cancelled context", urls, err)
		}
		if pw := password(raw); len(pw) >= 6 && strings.Count(raw, pw) == 1 && strings.Contains(err.Error(), pw) {
			t.Fatalf("Dial(%q): error repeats the password %q: %v", raw, pw, err)
		}
	})
}

// specLoopback reports whether every address of the node is on this
// machine.
func specLoopback(s *nodeurl.Spec) bool {
	switch s.Kind {
	case nodeurl.Cluster:
		return allLoopback(s.ClusterOptions.Addrs)
	case nodeurl.Sentinel:
		return allLoopback(s.FailoverOptions.SentinelAddrs)
	}
	return loopback(s.Options)
}

func allLoopback(addrs []string) bool {
	for _, a := range addrs {
		if !loopback(&redis.Options{Addr: a}) {
			return false
		}
	}
	return true
}

// loopback reports whether opts point at a TCP address on this machine.
func loopback(opts *redis.Options) bool {
	if opts.Network != "" && opts.Network != "tcp" {
		return false
	}
	host, _, err := net.SplitHostPort(opts.Addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// password returns the password of raw when it parses as a URL with one.
// Dial also redacts what looks like a password in a URL that does not
// parse, on a best-effort basis that this test does not hold it to.
func password(raw string) string {
	if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.User != nil {
		pw, _ := u.User.Password()
		return pw
	}
	return ""
}
