package testutil

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

const (
	// sentinelCount is the number of sentinels StartSentinel starts.
	sentinelCount = 3
	// sentinelQuorum is the number of sentinels that must agree that the
	// primary is down before one of them fails it over.
	sentinelQuorum = 2
	// sentinelDownAfter is the sentinels' down-after-milliseconds: a primary
	// silent this long is subjectively down.
	sentinelDownAfter = 1000
	// sentinelFailoverTimeout is the sentinels' failover-timeout in
	// milliseconds: a failover that makes no progress for this long is
	// aborted, and retried after twice as long.
	sentinelFailoverTimeout = 5000
)

// SentinelGroup is a primary and a replica (real redis-server processes)
// watched by three Redis Sentinels, started by StartSentinel. Every method
// is safe for concurrent use.
type SentinelGroup struct {
	name      string
	password  string
	servers   []*RedisServer // the data nodes: the first primary, then its replica
	sentinels []*RedisServer
	admins    []*redis.SentinelClient // one per sentinel, same order
}

// StartSentinel starts a primary and one replica of it (replicaof), each
// as StartRedisServer does (own directory, AOF with appendfsync always, the
// options' config lines and password, plus masterauth with WithPassword),
// and three sentinels monitoring the primary under the name master with a
// quorum of 2, down-after-milliseconds 1000 and failover-timeout 5000. Each
// sentinel is redis-server in sentinel mode on a free 127.0.0.1 port, with
// its own config file (which it rewrites) in its own directory; the
// options' config lines and password apply to the data nodes only (the
// sentinels need no password, and know the data nodes' one). StartSentinel
// returns once the replica's link is up and every sentinel reports the
// primary's address, lists the replica with its link ok, and knows the two
// other sentinels; it fails the test if that takes more than 30s, with the
// log tail of the process that was not ready. WithTLS is not supported. It
// skips the test if redis-server is missing (see RedisServerPath). The
// test's cleanup stops the sentinels first (SIGTERM, then SIGKILL after
// 10s), then kills the data nodes.
func StartSentinel(t testing.TB, master string, opts ...Option) *SentinelGroup {
	t.Helper()
	if master == "" || strings.ContainsAny(master, " \t\r\n\"'") {
		t.Fatalf("testutil.StartSentinel: invalid master name %q", master)
	}
	bin := RedisServerPath(t)
	o := buildOptions(opts)
	if o.tls != nil {
		t.Fatal("testutil.StartSentinel: WithTLS is not supported")
	}
	g, err := startSentinel(t, bin, master, o)
	if err != nil {
		t.Fatalf("testutil.StartSentinel: %v", err)
	}
	return g
}

// StartSentinels starts n independent Sentinel groups as StartSentinel
// does, at once (each group's start waits seconds for its sentinels to
// agree, mostly idle), and returns them in order. Each group has its own
// sentinels, so they may share the master name.
func StartSentinels(t testing.TB, n int, master string, opts ...Option) []*SentinelGroup {
	t.Helper()
	if master == "" || strings.ContainsAny(master, " \t\r\n\"'") {
		t.Fatalf("testutil.StartSentinels: invalid master name %q", master)
	}
	bin := RedisServerPath(t)
	o := buildOptions(opts)
	if o.tls != nil {
		t.Fatal("testutil.StartSentinels: WithTLS is not supported")
	}
	gs := make([]*SentinelGroup, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { gs[i], errs[i] = startSentinel(t, bin, master, o) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("testutil.StartSentinels: %v", err)
	}
	return gs
}

func startSentinel(t testing.TB, bin, name string, o redisOptions) (*SentinelGroup, error) {
	g := &SentinelGroup{name: name, password: o.password}
	var base []string
	if o.password != "" {
		// Either data node may become the other's replica.
		base = append(base, "masterauth "+confQuote(o.password))
	}
	// A replica syncs at once rather than waiting 5s for others.
	base = append(base, "repl-diskless-sync-delay 0")
	po := o
	po.lines = slices.Concat(base, o.lines)
	primary, err := startServer(t, bin, po)
	if err != nil {
		return nil, err
	}
	ro := o
	ro.lines = slices.Concat(base, []string{"replicaof 127.0.0.1 " + strconv.Itoa(primary.Port())}, o.lines)
	replica, err := startServer(t, bin, ro)
	if err != nil {
		return nil, err
	}
	g.servers = []*RedisServer{primary, replica}

	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	// Sentinels learn of replicas from the primary's INFO, which they ask
	// at once on connecting and then every 10s: the replica must be
	// listed before they start.
	err = awaitSettled(ctx, "the replica to sync", func(ctx context.Context) (*RedisServer, error) {
		return blame(checkReplicaOf(ctx, replica, primary))
	})
	if err != nil {
		return nil, err
	}
	// The first replica gave the primary a new replication id: vouch again.
	if err := primary.Vouch(ctx); err != nil { // operator.go
		return nil, err
	}

	// redis-server runs as a sentinel when named redis-sentinel.
	sbin := filepath.Join(t.TempDir(), "redis-sentinel")
	if err := os.Symlink(bin, sbin); err != nil {
		return nil, fmt.Errorf("link %s as redis-sentinel: %w", bin, err)
	}
	so := redisOptions{lines: []string{
		"protected-mode no",
		fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d", name, primary.Port(), sentinelQuorum),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", name, sentinelDownAfter),
		fmt.Sprintf("sentinel failover-timeout %s %d", name, sentinelFailoverTimeout),
		fmt.Sprintf("sentinel parallel-syncs %s 1", name),
	}}
	if o.password != "" {
		so.lines = append(so.lines, fmt.Sprintf("sentinel auth-pass %s %s", name, confQuote(o.password)))
	}
	g.sentinels = make([]*RedisServer, sentinelCount)
	errs := make([]error, sentinelCount)
	var wg sync.WaitGroup
	for i := range sentinelCount {
		wg.Go(func() { g.sentinels[i], errs[i] = startServer(t, sbin, so) })
	}
	wg.Wait()
	// Registered after every server's own cleanup, so it runs first.
	t.Cleanup(func() { g.cleanup(t) })
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, s := range g.sentinels {
		g.admins = append(g.admins, redis.NewSentinelClient(FastFailOptions(s.Addr(), "", redisTimeout)))
	}

	err = awaitSettled(ctx, "the sentinels to know the group", func(ctx context.Context) (*RedisServer, error) {
		for i, s := range g.sentinels {
			sc := g.admins[i]
			m, err := sc.Master(ctx, name).Result()
			if err != nil {
				return s, fmt.Errorf("SENTINEL MASTER on %s: %w", s.Addr(), err)
			}
			if m["flags"] != "master" || m["port"] != strconv.Itoa(primary.Port()) ||
				m["num-slaves"] != "1" || m["num-other-sentinels"] != strconv.Itoa(sentinelCount-1) {
				return s, fmt.Errorf("sentinel %s sees the master as flags:%s port:%s num-slaves:%s num-other-sentinels:%s",
					s.Addr(), m["flags"], m["port"], m["num-slaves"], m["num-other-sentinels"])
			}
			if err := checkSentinelReplica(ctx, sc, s, name, replica); err != nil {
				return s, err
			}
		}
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// checkReplicaOf checks that r is a replica of p with its link up. Its
// error, if not nil, is a *nodeError.
func checkReplicaOf(ctx context.Context, r, p *RedisServer) error {
	info, err := r.Do(ctx, "INFO", "replication").Text()
	if err != nil {
		return complain(r, "INFO replication on %s: %w", r.Addr(), err)
	}
	role, _ := infoField(info, "role")
	port, _ := infoField(info, "master_port")
	link, _ := infoField(info, "master_link_status")
	if role != "slave" || port != strconv.Itoa(p.Port()) || link != "up" {
		return complain(r, "%s reports role:%s master_port:%s master_link_status:%s, want a replica of %s with its link up",
			r.Addr(), role, port, link, p.Addr())
	}
	return nil
}

// checkSentinelReplica checks that sentinel s lists r as a replica of the
// master with its link ok.
func checkSentinelReplica(ctx context.Context, sc *redis.SentinelClient, s *RedisServer, name string, r *RedisServer) error {
	reps, err := sc.Replicas(ctx, name).Result()
	if err != nil {
		return fmt.Errorf("SENTINEL REPLICAS on %s: %w", s.Addr(), err)
	}
	for _, rep := range reps {
		if rep["port"] != strconv.Itoa(r.Port()) {
			continue
		}
		if rep["flags"] != "slave" || rep["master-link-status"] != "ok" {
			return fmt.Errorf("sentinel %s sees replica %s as flags:%s master-link-status:%s",
				s.Addr(), r.Addr(), rep["flags"], rep["master-link-status"])
		}
		return nil
	}
	return fmt.Errorf("sentinel %s does not list replica %s", s.Addr(), r.Addr())
}

// cleanup stops the sentinels gracefully, in parallel, before their own
// cleanups and the data nodes' kill them.
func (g *SentinelGroup) cleanup(t testing.TB) {
	for _, sc := range g.admins {
		_ = sc.Close()
	}
	var wg sync.WaitGroup
	for _, s := range g.sentinels {
		if s == nil {
			continue
		}
		wg.Go(func() {
			if err := s.Stop(); err != nil {
				t.Errorf("testutil: stop sentinel: %v", err)
			}
		})
	}
	wg.Wait()
}

// MasterName returns the name the sentinels monitor the primary under.
func (g *SentinelGroup) MasterName() string { return g.name }

// SentinelAddrs returns every sentinel's host:port, in order.
func (g *SentinelGroup) SentinelAddrs() []string {
	addrs := make([]string, len(g.sentinels))
	for i, s := range g.sentinels {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Sentinels returns the sentinel processes, in the order of SentinelAddrs,
// in a new slice, for fault injection (Kill, Pause, Restart...). Their
// Client and Do speak to the sentinel, not to a data node.
func (g *SentinelGroup) Sentinels() []*RedisServer { return slices.Clone(g.sentinels) }

// Servers returns the two data nodes in a new slice: the first primary,
// then the first replica, whatever their roles are now.
func (g *SentinelGroup) Servers() []*RedisServer { return slices.Clone(g.servers) }

// URL returns the group's redis+sentinel:// URL: the first sentinel as
// host, master_name, the other sentinels as addr parameters, and with
// WithPassword the data nodes' password as the password parameter, as in
// redis+sentinel://127.0.0.1:S1?master_name=m&addr=127.0.0.1:S2&addr=127.0.0.1:S3&password=pw.
// With the scheme redis:// it is what go-redis's ParseFailoverURL takes.
func (g *SentinelGroup) URL() string {
	addrs := g.SentinelAddrs()
	q := []string{"master_name=" + url.QueryEscape(g.name)}
	for _, a := range addrs[1:] {
		q = append(q, "addr="+a)
	}
	if g.password != "" {
		q = append(q, "password="+url.QueryEscape(g.password))
	}
	u := url.URL{Scheme: "redis+sentinel", Host: addrs[0], RawQuery: strings.Join(q, "&")}
	return u.String()
}

// primaryAddr asks the sentinels, in order, for the primary's address and
// returns the first answer.
func (g *SentinelGroup) primaryAddr(ctx context.Context) (string, error) {
	var errs []error
	for i, sc := range g.admins {
		if !g.sentinels[i].Running() || g.sentinels[i].Paused() {
			continue
		}
		a, err := sc.GetMasterAddrByName(ctx, g.name).Result()
		if err == nil && len(a) == 2 {
			return a[0] + ":" + a[1], nil
		}
		errs = append(errs, fmt.Errorf("sentinel %s: %v %w", g.sentinels[i].Addr(), a, err))
	}
	if len(errs) == 0 {
		return "", errors.New("testutil: no sentinel is running")
	}
	return "", errors.Join(errs...)
}

// server returns the data node serving addr, or nil.
func (g *SentinelGroup) server(addr string) *RedisServer {
	for _, s := range g.servers {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// Primary returns the data node that the sentinels name as primary now
// (SENTINEL GET-MASTER-ADDR-BY-NAME, asked of each running sentinel in turn
// until one answers), or nil if none answers within 500ms each.
func (g *SentinelGroup) Primary() *RedisServer {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	addr, err := g.primaryAddr(ctx)
	if err != nil {
		return nil
	}
	return g.server(addr)
}

// KillPrimary SIGKILLs the data node Primary returns and waits until the
// process is gone. The sentinels then fail over to the other one by
// themselves once they agree it is down (after about a second, plus the
// election).
func (g *SentinelGroup) KillPrimary() error {
	p := g.Primary()
	if p == nil {
		return errors.New("testutil: no sentinel names a known primary")
	}
	return p.Kill()
}

// Failover makes the other data node primary: SENTINEL FAILOVER on the
// first running sentinel that accepts it, then waits until every running
// sentinel names it primary, it reports role:master, and the old primary,
// if running, reports being its replica with its link up. The sentinels
// turn a live old primary into a replica only after it has reported
// role:master to them for 8s, so a failover with both nodes up takes about
// 10s. Failover returns an error when that has not happened within 30s (the
// log tail of the node that was not ready says why) or when ctx ends.
func (g *SentinelGroup) Failover(ctx context.Context) error {
	callCtx, cancel := context.WithTimeout(ctx, checkTimeout)
	oldAddr, err := g.primaryAddr(callCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("testutil: ask the sentinels for the primary: %w", err)
	}
	old := g.server(oldAddr)
	if old == nil {
		return fmt.Errorf("testutil: the sentinels name %s as primary, which is no data node of the group", oldAddr)
	}
	next := g.servers[0]
	if next == old {
		next = g.servers[1]
	}
	if !next.Running() || next.Paused() {
		return fmt.Errorf("testutil: %s, the data node to promote, is not running or is paused", next.Addr())
	}

	started := false
	err = awaitSettled(ctx, "a sentinel to start the failover", func(ctx context.Context) (*RedisServer, error) {
		var errs []error
		for i, sc := range g.admins {
			s := g.sentinels[i]
			if !s.Running() || s.Paused() {
				continue
			}
			err := sc.Failover(ctx, g.name).Err()
			if err == nil || strings.HasPrefix(err.Error(), "INPROG") {
				started = true
				return nil, nil
			}
			// NOGOODSLAVE: this sentinel's view of the replica is stale.
			errs = append(errs, fmt.Errorf("SENTINEL FAILOVER on %s: %w", s.Addr(), err))
		}
		if len(errs) == 0 {
			return nil, errors.New("no sentinel is running")
		}
		return g.sentinels[0], errors.Join(errs...)
	})
	if !started {
		return err
	}

	what := fmt.Sprintf("the sentinels to fail over from %s to %s", old.Addr(), next.Addr())
	return awaitSettled(ctx, what, func(ctx context.Context) (*RedisServer, error) {
		for i, sc := range g.admins {
			s := g.sentinels[i]
			if !s.Running() || s.Paused() {
				continue
			}
			a, err := sc.GetMasterAddrByName(ctx, g.name).Result()
			if err != nil {
				return s, fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME on %s: %w", s.Addr(), err)
			}
			if len(a) != 2 || a[0]+":"+a[1] != next.Addr() {
				return s, fmt.Errorf("sentinel %s names %v as primary", s.Addr(), a)
			}
		}
		info, err := next.Do(ctx, "INFO", "replication").Text()
		if err != nil {
			return next, fmt.Errorf("INFO replication on %s: %w", next.Addr(), err)
		}
		if role, _ := infoField(info, "role"); role != "master" {
			return next, fmt.Errorf("%s reports role:%s", next.Addr(), role)
		}
		if old.Running() && !old.Paused() {
			return blame(checkReplicaOf(ctx, old, next))
		}
		return nil, nil
	})
}
