package bench_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/scripts"
)

// memKeys is how many locks BenchmarkRedisMemory creates.
const memKeys = 100_000

// BenchmarkRedisMemory measures Redis's used_memory per lock: it creates
// memKeys held locks with redlock's acquire script (in pipelines of 1,000
// EVALSHA; the same keys, values and TTL that TryAcquire writes, with the
// default owner label), releases them with the release script, which leaves
// the fence counters behind (they are never deleted), and then creates as
// many locks the way redsync does (SET NX PX with a 16-byte base64 value).
// It runs once whatever b.N is; use -benchtime=1x.
func BenchmarkRedisMemory(b *testing.B) {
	s := startServers(b, 1).Server(0)
	c := s.Client()
	ctx := context.Background()
	l, err := redlock.New([]redlock.Node{redisnode.New(c)}, redlock.Config{LeaseDuration: 10 * time.Minute, RejoinDelay: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for _, sc := range []*scripts.Script{scripts.Acquire, scripts.Release} {
		if err := c.ScriptLoad(ctx, sc.Source()).Err(); err != nil {
			b.Fatal(err)
		}
	}
	cfg := l.Config()
	ttl := cfg.LeaseDuration.Milliseconds()
	tokens := make([]string, memKeys)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("%032x", i+1) // same length as a real token
	}
	key := func(i int) string { return l.Key("mem:" + strconv.Itoa(i)) }

	b.ResetTimer()
	base := usedMemory(b, c)
	pipeline(b, c, func(p redis.Pipeliner, i int) {
		k := key(i)
		p.EvalSha(ctx, scripts.Acquire.Hash(), []string{k, k + ":fence"}, tokens[i], cfg.Owner, ttl)
	})
	held := usedMemory(b, c)
	pipeline(b, c, func(p redis.Pipeliner, i int) {
		p.EvalSha(ctx, scripts.Release.Hash(), []string{key(i)}, tokens[i], key(i)+":released", "")
	})
	fenced := usedMemory(b, c)
	if n, err := c.DBSize(ctx).Result(); err != nil || n != memKeys {
		b.Fatalf("after release: %d keys (want %d fence keys), %v", n, memKeys, err)
	}
	value := base64.StdEncoding.EncodeToString(make([]byte, 16))
	pipeline(b, c, func(p redis.Pipeliner, i int) {
		p.SetNX(ctx, "redsync:"+strconv.Itoa(i), value, cfg.LeaseDuration)
	})
	rs := usedMemory(b, c)
	b.StopTimer()

	per := func(d int64) float64 { return float64(d) / memKeys }
	b.ReportMetric(per(held-fenced), "lock-B/key")
	b.ReportMetric(per(fenced-base), "fence-B/key")
	b.ReportMetric(per(held-base), "lock+fence-B/key")
	b.ReportMetric(per(rs-fenced), "redsync-lock-B/key")
	b.Logf("owner label %q (%d bytes); lock value %d bytes", cfg.Owner, len(cfg.Owner), 32+1+len(cfg.Owner))
}

// pipeline runs add for i in [0, memKeys) in pipelines of 1,000 commands and
// fails on any error or refusal.
func pipeline(b *testing.B, c *redis.Client, add func(redis.Pipeliner, int)) {
	b.Helper()
	ctx := context.Background()
	for lo := 0; lo < memKeys; lo += 1000 {
		p := c.Pipeline()
		for i := lo; i < min(lo+1000, memKeys); i++ {
			add(p, i)
		}
		cmds, err := p.Exec(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, cmd := range cmds {
			if refused(cmd) {
				b.Fatalf("%v refused", cmd.Args())
			}
		}
	}
}

// refused reports whether a pipelined acquire, release or SET NX said no.
func refused(cmd redis.Cmder) bool {
	switch cmd := cmd.(type) {
	case *redis.BoolCmd:
		return !cmd.Val()
	case *redis.Cmd:
		switch v := cmd.Val().(type) {
		case []any:
			return len(v) != 2 || v[0] != int64(1)
		case int64:
			return v != 1
		}
	}
	return false
}

// usedMemory returns INFO memory's used_memory.
func usedMemory(b *testing.B, c *redis.Client) int64 {
	b.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("INFO memory has no used_memory")
	return 0
}
