package cli

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/redlock/redisnode"
)

// serverCounts is what the nodes' servers counted so far, summed over the
// nodes (every primary of a cluster): INFO commandstats and INFO cpu.
type serverCounts struct {
	// calls counts every command but INFO: the scripts and the commands
	// they call (commandstats counts both), subscriptions.
	calls int64
	// scripts counts the script calls (EVALSHA, EVAL); scriptUsec is the
	// time the servers spent in them, the commands they call included.
	scripts    int64
	scriptUsec int64
	// cpuUsec is the servers' CPU time, user and system (syscalls
	// included): used_cpu_user + used_cpu_sys.
	cpuUsec int64
}

// serverCost is the --json and table summary of what the servers did per
// acquisition in the measured window.
type serverCost struct {
	CommandsPerAcq   float64 `json:"commands_per_acquisition"`
	ScriptsPerAcq    float64 `json:"scripts_per_acquisition"`
	ScriptUsecPerAcq float64 `json:"server_us_per_acquisition"`
	CPUUsecPerAcq    float64 `json:"server_cpu_us_per_acquisition"`
}

// readServerCounts reads the counters of every node's servers. It reports
// false when one of them cannot say (a node that is down, a stand-in such
// as miniredis without INFO commandstats, a node that is not a redisnode.Node):
// a sum over part of the nodes would mislead.
func readServerCounts(ctx context.Context, nodes redisnode.Nodes) (serverCounts, bool) {
	var (
		mu  sync.Mutex
		sum serverCounts
		ok  = true
		wg  sync.WaitGroup
	)
	add := func(ctx context.Context, c redis.Cmdable) error {
		stats, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		cpu, err := c.Info(ctx, "cpu").Result()
		if err != nil {
			return err
		}
		s, good := parseServerCounts(stats, cpu)
		mu.Lock()
		defer mu.Unlock()
		ok = ok && good
		sum.calls += s.calls
		sum.scripts += s.scripts
		sum.scriptUsec += s.scriptUsec
		sum.cpuUsec += s.cpuUsec
		return nil
	}
	for _, n := range nodes {
		rn, isRedis := n.(*redisnode.Node)
		if !isRedis {
			return serverCounts{}, false
		}
		wg.Go(func() {
			var err error
			switch c := rn.Client().(type) {
			case *redis.ClusterClient:
				err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return add(ctx, m) })
			default:
				err = add(ctx, c)
			}
			if err != nil {
				mu.Lock()
				ok = false
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return sum, ok
}

// parseServerCounts reads one server's INFO commandstats and INFO cpu
// replies; false when commandstats has no script line and no other count
// (a server that does not keep them).
func parseServerCounts(stats, cpu string) (serverCounts, bool) {
	var s serverCounts
	seen := false
	for line := range strings.Lines(stats) {
		name, fields, found := strings.Cut(strings.TrimSpace(line), ":")
		cmd, isStat := strings.CutPrefix(name, "cmdstat_")
		if !found || !isStat {
			continue
		}
		seen = true
		calls, usec := statField(fields, "calls"), statField(fields, "usec")
		if cmd == "info" {
			continue
		}
		s.calls += calls
		if cmd == "evalsha" || cmd == "eval" || cmd == "fcall" {
			s.scripts += calls
			s.scriptUsec += usec
		}
	}
	var cpuSec float64
	for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, _ := strconv.ParseFloat(infoValue(cpu, f), 64)
		cpuSec += v
	}
	s.cpuUsec = int64(math.Round(cpuSec * 1e6))
	return s, seen
}

// statField returns the integer value of key in a commandstats line's
// fields ("calls=3,usec=40,..."), or 0.
func statField(fields, key string) int64 {
	for f := range strings.SplitSeq(fields, ",") {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// infoValue returns field's value in an INFO reply, or "".
func infoValue(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), field+":"); ok {
			return v
		}
	}
	return ""
}

// perAcquisition is what the servers did between before and after, per
// acquisition; nil without acquisitions.
func perAcquisition(before, after serverCounts, acquisitions int64) *serverCost {
	if acquisitions <= 0 {
		return nil
	}
	per := func(d int64) float64 { return math.Round(float64(d)/float64(acquisitions)*100) / 100 }
	return &serverCost{
		CommandsPerAcq:   per(after.calls - before.calls),
		ScriptsPerAcq:    per(after.scripts - before.scripts),
		ScriptUsecPerAcq: per(after.scriptUsec - before.scriptUsec),
		CPUUsecPerAcq:    per(after.cpuUsec - before.cpuUsec),
	}
}
