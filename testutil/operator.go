package testutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/redlock"
)

// Operator actions on real redis-servers, as an operator (or a monitoring
// tool) takes them on a running deployment: the safety scenarios of issue
// 30 and the chaos suite's operator nemesis run them against the lock
// nodes. Each returns an error rather than failing the test, so that it
// may run from any goroutine.

// fillerPrefix names the keys EvictUntilGone writes to fill memory.
const fillerPrefix = "testutil:filler:"

// EvictUntilGone makes s evict keys until none of keys exists: it sets
// maxmemory-policy to policy (such as "volatile-lru"), lowers maxmemory to
// a little above the memory in use, and writes filler keys (1 KiB each,
// with a TTL of an hour, so volatile policies may evict them too) until
// the server has evicted every one of keys, or fails after 200000
// fillers. It leaves maxmemory and the policy as they are then (the
// operator's next move: raise maxmemory, flip the policy back) and
// returns how many keys the server evicted meanwhile (INFO stats).
func EvictUntilGone(ctx context.Context, s *RedisServer, policy string, keys ...string) (int64, error) {
	before, err := infoInt(ctx, s, "stats", "evicted_keys")
	if err != nil {
		return 0, err
	}
	used, err := infoInt(ctx, s, "memory", "used_memory")
	if err != nil {
		return 0, err
	}
	if err := s.Do(ctx, "CONFIG", "SET", "maxmemory-policy", policy).Err(); err != nil {
		return 0, fmt.Errorf("testutil: CONFIG SET maxmemory-policy %s on %s: %w", policy, s.Addr(), err)
	}
	if err := s.Do(ctx, "CONFIG", "SET", "maxmemory", strconv.FormatInt(used+512<<10, 10)).Err(); err != nil {
		return 0, fmt.Errorf("testutil: CONFIG SET maxmemory on %s: %w", s.Addr(), err)
	}
	value := strings.Repeat("x", 1024)
	c := s.patientClient()
	for i := 0; i < 200000; i += 100 {
		n, err := c.Exists(ctx, keys...).Result()
		if err != nil {
			return 0, fmt.Errorf("testutil: EXISTS on %s: %w", s.Addr(), err)
		}
		if n == 0 {
			after, err := infoInt(ctx, s, "stats", "evicted_keys")
			return after - before, err
		}
		p := c.Pipeline()
		for k := i; k < i+100; k++ {
			p.Set(ctx, fillerPrefix+strconv.Itoa(k), value, time.Hour)
		}
		if _, err := p.Exec(ctx); err != nil && !strings.HasPrefix(err.Error(), "OOM") {
			return 0, fmt.Errorf("testutil: filling %s: %w", s.Addr(), err)
		}
	}
	return 0, fmt.Errorf("testutil: %s evicted not all of %q (maxmemory-policy %s)", s.Addr(), keys, policy)
}

// NoEviction gives s back an unlimited memory (maxmemory 0) and the
// policy noeviction, and deletes the fillers EvictUntilGone wrote.
func NoEviction(ctx context.Context, s *RedisServer) error {
	for _, kv := range [][2]string{{"maxmemory", "0"}, {"maxmemory-policy", "noeviction"}} {
		if err := s.Do(ctx, "CONFIG", "SET", kv[0], kv[1]).Err(); err != nil {
			return fmt.Errorf("testutil: CONFIG SET %s %s on %s: %w", kv[0], kv[1], s.Addr(), err)
		}
	}
	c := s.patientClient()
	iter := c.Scan(ctx, 0, fillerPrefix+"*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 1000 {
			if err := c.Unlink(ctx, batch...).Err(); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		return c.Unlink(ctx, batch...).Err()
	}
	return nil
}

// RestartEmpty kills s, removes its data files (the AOF directory and any
// RDB snapshot) and starts it again: a restart that loses every key, as a
// server without persistence, or one whose disk was replaced, comes back.
func (s *RedisServer) RestartEmpty() error {
	if err := s.Kill(); err != nil {
		return err
	}
	for _, name := range []string{"appendonlydir", "dump.rdb", "appendonly.aof"} {
		if err := os.RemoveAll(filepath.Join(s.dir, name)); err != nil {
			return fmt.Errorf("testutil: remove %s's %s: %w", s.Addr(), name, err)
		}
	}
	return s.Restart()
}

// ReplicaOf makes r a replica of p (REPLICAOF) and waits, until ctx ends,
// for its link to be up and its first sync done: r then holds a copy of
// p's data and p's replication id.
func ReplicaOf(ctx context.Context, r, p *RedisServer) error {
	host, port, _ := strings.Cut(p.Addr(), ":")
	if err := r.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		return fmt.Errorf("testutil: REPLICAOF on %s: %w", r.Addr(), err)
	}
	for {
		err := checkReplicaOf(ctx, r, p)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Promote makes s a primary again (REPLICAOF NO ONE): it keeps the data
// it has and takes a new replication id, as a replica promoted by a
// failover does.
func Promote(ctx context.Context, s *RedisServer) error {
	if err := s.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		return fmt.Errorf("testutil: REPLICAOF NO ONE on %s: %w", s.Addr(), err)
	}
	return nil
}

// FailbackInPlace fails p over to the older data of r and back, in place:
// p becomes a replica of r (a full sync: p's data is replaced by r's copy,
// which misses whatever r did not receive) and then a primary again
// (REPLICAOF NO ONE). p keeps its address and its run_id, which is why the
// data-loss rule reads the replication id instead.
func FailbackInPlace(ctx context.Context, p, r *RedisServer) error {
	if err := ReplicaOf(ctx, p, r); err != nil {
		return err
	}
	return Promote(ctx, p)
}

// ReplID returns s's replication id (INFO replication master_replid), the
// identity the data-loss rule reads.
func ReplID(ctx context.Context, s *RedisServer) (string, error) {
	info, err := s.Do(ctx, "INFO", "replication").Text()
	if err != nil {
		return "", err
	}
	id, ok := infoField(info, "master_replid")
	if !ok {
		return "", fmt.Errorf("testutil: %s: INFO replication has no master_replid", s.Addr())
	}
	return id, nil
}

// patientClient is a client of s like Client's, with timeouts of 10 s: a
// fixture's writes must not fail on a loaded machine. s closes it at
// cleanup.
func (s *RedisServer) patientClient() *redis.Client {
	opts := FastFailOptions(s.addr, s.password, 10*time.Second)
	if s.tlsConf != nil {
		opts.TLSConfig = s.tlsConf.Clone()
	}
	return s.clients.add(redis.NewClient(opts))
}

// infoInt reads an integer field of an INFO section of s.
func infoInt(ctx context.Context, s *RedisServer, section, field string) (int64, error) {
	info, err := s.Do(ctx, "INFO", section).Text()
	if err != nil {
		return 0, fmt.Errorf("testutil: INFO %s on %s: %w", section, s.Addr(), err)
	}
	v, ok := infoField(info, field)
	if !ok {
		return 0, fmt.Errorf("testutil: INFO %s on %s has no %s", section, s.Addr(), field)
	}
	return strconv.ParseInt(v, 10, 64)
}

// DefaultMarker is the data-loss rule's marker key (docs/design.md §6.2)
// of a Locker with the default key prefix in db 0.
const DefaultMarker = "redlock:~trust:db0"

// Vouch writes the marker DefaultMarker on s, vouching for its data from
// now: a Locker with the default prefix in db 0 then grants at once on a
// fresh server, instead of sitting out its rejoin delay at first use (a
// missing marker is a loss: a fresh server cannot be told from a flushed
// one). Every server the package starts is vouched for this way as it
// first comes up (a fixture: no lease can have been granted on it yet);
// a test of the first use deletes the marker (DEL DefaultMarker) or runs
// FLUSHALL. A replica, a cluster node and a stand-in without a replication
// id are left alone.
func (s *RedisServer) Vouch(ctx context.Context) error {
	return s.VouchFor(ctx, redlock.DefaultKeyPrefix)
}

// VouchFor is Vouch for a Locker with key prefix prefix (db 0).
func (s *RedisServer) VouchFor(ctx context.Context, prefix string) error {
	c := s.patientClient()
	info, err := c.Do(ctx, "INFO", "replication").Text()
	if err != nil {
		return nil // a sentinel, or a server that does not say: not a lock node
	}
	role, _ := infoField(info, "role")
	id, ok := infoField(info, "master_replid")
	if role != "master" || !ok {
		return nil
	}
	if ci, err := c.Do(ctx, "INFO", "cluster").Text(); err == nil {
		if on, _ := infoField(ci, "cluster_enabled"); on == "1" {
			return nil
		}
	}
	tv, err := c.Do(ctx, "TIME").StringSlice()
	if err != nil || len(tv) != 2 {
		return fmt.Errorf("testutil: vouch for %s: TIME: %v", s.Addr(), err)
	}
	sec, err1 := strconv.ParseInt(tv[0], 10, 64)
	usec, err2 := strconv.ParseInt(tv[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("testutil: vouch for %s: TIME: %w", s.Addr(), err)
	}
	return c.Set(ctx, redlock.MarkerKeys(prefix, 0, false)[0], vouching(id, sec*1_000_000+usec), 0).Err()
}

// vouching is a marker's value that vouches for replication id id from
// the start of the current second (now in µs on the server's clock), so
// that the floor it sets does not split the nodes' first counters.
func vouching(id string, now int64) string {
	return "v4 " + id + " " + strconv.FormatInt(now-now%1_000_000, 10) + " " + strconv.FormatInt(now, 10) + " -"
}

// Vouch writes on every shard the markers of its hash slots for a Locker
// with the default prefix (redlock.MarkerKeys), as RedisServer.Vouch does
// for a server: a fixture, so that a new cluster grants at once.
func (c *Cluster) Vouch(ctx context.Context) error {
	markers := redlock.MarkerKeys(redlock.DefaultKeyPrefix, 0, true)
	for i, sh := range c.shards {
		p := sh.servers[0]
		c := p.patientClient()
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		id, _ := infoField(info, "master_replid")
		tv, err := c.Do(ctx, "TIME").StringSlice()
		if err != nil || len(tv) != 2 {
			return fmt.Errorf("testutil: vouch for %s: TIME: %v", p.Addr(), err)
		}
		sec, _ := strconv.ParseInt(tv[0], 10, 64)
		usec, _ := strconv.ParseInt(tv[1], 10, 64)
		v := vouching(id, sec*1_000_000+usec)
		for lo := sh.lo; lo <= sh.hi; lo += 256 {
			pipe := c.Pipeline()
			for slot := lo; slot <= min(lo+255, sh.hi); slot++ {
				pipe.Set(ctx, markers[slot], v, 0)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return fmt.Errorf("testutil: vouch for shard %d: %w", i, err)
			}
		}
	}
	return nil
}
