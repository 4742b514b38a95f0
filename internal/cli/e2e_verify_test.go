package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/testutil"
)

// verifyArgs are the flags that keep a verify run short and robust on a
// loaded machine (a 1 s call timeout). A new prefix has no marker yet: with
// the data-loss rule on, the first grant would wait the rejoin delay, at
// least the 3 s ttl, longer than the run; so the rule is off (these runs'
// faults, lost connections and pauses, lose no data).
var verifyArgs = []string{"verify", "--ttl", "3s", "--timeout", "1s", "--rejoin-delay", "0", "--duration", "2500ms", "--clients", "4", "--resources", "2", "--rate", "200", "--json"}

// requireNoKeys checks that no key under prefix is left on any server.
func requireNoKeys(t *testing.T, c *testutil.RedisCluster, prefix string) {
	t.Helper()
	for _, s := range c.Servers() {
		keys, err := s.Client().Keys(context.Background(), prefix+"*").Result()
		require.NoError(t, err)
		require.Empty(t, keys, "keys left on %s", s.Addr())
	}
}

// TestE2EVerifyHealthy: on a healthy 3-node setup verify finds no
// violation, the history is linearizable, the report counts what ran, the
// HTML file is written, and no key under the prefix is left.
func TestE2EVerifyHealthy(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	html := filepath.Join(t.TempDir(), "history.html")
	for _, extra := range [][]string{
		{"--html", html},
		{"--register", "memory", "--faults", "kill-conns", "--hold", "5ms"},
		{"--procs", "2", "--faults", "pause"},
		{"--rate", "8", "--procs", "2"},
	} {
		t.Run(strings.Join(extra, " "), func(t *testing.T) {
			r := cli(t, nodesEnv(c.URLs()), append(append([]string(nil), verifyArgs...), extra...)...)
			requireCode(t, r, exitOK, "")
			require.NotContains(t, r.stderr, "\r", "a progress bar on stderr that is not a terminal")
			t.Log(r.stdout)
			res := decode(t, r)
			require.Equal(t, 0.0, res["violation_count"], "%v", res)
			require.Equal(t, "yes", res["linearizable"])
			require.Greater(t, res["acquisitions"].(float64), 1.0)
			require.Greater(t, res["writes_accepted"].(float64), 1.0)
			require.Greater(t, res["operations"].(float64), res["acquisitions"].(float64))
			require.GreaterOrEqual(t, res["holders"].(float64), 2.0)
			require.Greater(t, res["keys_removed"].(float64), 0.0)
			require.Equal(t, defaultVerifyPrefix, res["prefix"])
			if extra[0] == "--rate" {
				// Bounded load: at most --rate acquisitions a second over
				// both processes (2.5 s; one more per process for the
				// ticker's first tick).
				require.LessOrEqual(t, res["acquisitions"].(float64), 8*2.5+2)
			}
			if res["faults"] != faultsNone {
				require.GreaterOrEqual(t, res["faults_injected"].(float64), 1.0)
			}
			requireNoKeys(t, c, defaultVerifyPrefix)
		})
	}
	b, err := os.ReadFile(html)
	require.NoError(t, err)
	require.Contains(t, string(b), "<html")
	require.Contains(t, string(b), "holders of verify:")
}

// TestE2EVerifyPrefixInUse: verify refuses to start when keys under its
// prefix exist, touching nothing; with --force it runs and deletes them.
func TestE2EVerifyPrefixInUse(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	ctx := context.Background()
	other := c.Servers()[1].Client()
	require.NoError(t, other.Set(ctx, "app:verify-check:left", "x", 0).Err())
	require.NoError(t, other.Set(ctx, "app:data", "keep", 0).Err())

	args := append(append([]string(nil), verifyArgs...), "--prefix", "app:verify-check:")
	r := cli(t, nodesEnv(c.URLs()), args...)
	requireCode(t, r, exitUsage, "already exist")
	require.Equal(t, "prefix_in_use", decode(t, r)["error"])
	require.Equal(t, "x", other.Get(ctx, "app:verify-check:left").Val())

	r = cli(t, nodesEnv(c.URLs()), append(args, "--force")...)
	requireCode(t, r, exitOK, "")
	require.Equal(t, 0.0, decode(t, r)["violation_count"])
	requireNoKeys(t, c, "app:verify-check:")
	require.Equal(t, "keep", other.Get(ctx, "app:data").Val(), "a key outside the prefix was touched")
}

// aliasNode is a node under another name: a deployment that lists one
// server twice, which redisnode.Dial and redlock.New refuse, made by hand.
type aliasNode struct {
	redlock.Node
	addr string
}

// Addr is the alias.
func (n aliasNode) Addr() string { return n.addr }

// TestE2EVerifyFindsBrokenDeployment: deployments whose quorum is
// weakened let two clients hold a lock at once; verify must say so and
// exit 10, and still clean up. Split brain: half the clients lock on one
// node alone, the other half on another (each Locker counts 1 node as a
// majority). One server listed twice: half the clients use nodes A, A', B
// and the others C, C', B, where X' is X under another name, so that one
// server's vote counts twice and each half has its own majority.
func TestE2EVerifyFindsBrokenDeployment(t *testing.T) {
	t.Parallel()
	mutants := map[string]func(nodes redisnode.Nodes) [][]redlock.Node{
		"split brain": func(nodes redisnode.Nodes) [][]redlock.Node {
			return [][]redlock.Node{{nodes[0]}, {nodes[1]}}
		},
		"one server listed twice": func(nodes redisnode.Nodes) [][]redlock.Node {
			twice := func(n redlock.Node) redlock.Node { return aliasNode{n, n.Addr() + "-again"} }
			return [][]redlock.Node{{nodes[0], twice(nodes[0]), nodes[1]}, {nodes[2], twice(nodes[2]), nodes[1]}}
		},
	}
	for name, sets := range mutants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := testutil.StartRedis(t, 3)
			var stdout, stderr bytes.Buffer
			a := &App{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
			a.verifyLockers = func(nodes redisnode.Nodes, cfg redlock.Config, clients int) ([]*redlock.Locker, error) {
				var out []*redlock.Locker
				for _, set := range sets(nodes) {
					l, err := redlock.New(set, cfg)
					if err != nil {
						return nil, err
					}
					out = append(out, l)
				}
				return out, nil
			}
			args := []string{"--nodes", strings.Join(c.URLs(), ","), "verify", "--ttl", "3s", "--timeout", "1s", "--rejoin-delay", "0", "--duration", "2s",
				"--clients", "4", "--resources", "1", "--rate", "0", "--hold", "10ms", "--json"}
			code := a.Execute(context.Background(), args)
			require.Equal(t, exitViolation, code, "stdout: %s\nstderr: %s", stdout.String(), stderr.String())
			var res map[string]any
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &res), stdout.String())
			require.Greater(t, res["violation_count"].(float64), 0.0)
			vi := res["violations"].(map[string]any)
			require.Greater(t, vi["mutual_exclusion"].(float64)+vi["validity_overlap"].(float64)+vi["token_order"].(float64), 0.0, "%v", vi)
			require.NotEmpty(t, res["examples"])
			require.Contains(t, stderr.String(), "verify found")
			requireNoKeys(t, c, defaultVerifyPrefix)
		})
	}
}

// TestE2EVerifyNothingTested: when no lock can be granted at all (here the
// nodes cannot run scripts), verify does not pass: it says nothing was
// tested, with the acquire errors, and exits non-zero.
func TestE2EVerifyNothingTested(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3, testutil.WithConfig(`rename-command EVALSHA ""`, `rename-command EVAL ""`, `rename-command FCALL ""`))
	r := cli(t, nodesEnv(c.URLs()), "verify", "--ttl", "3s", "--timeout", "1s", "--duration", "1s", "--clients", "2", "--resources", "1")
	require.NotEqual(t, exitOK, r.code, r.stderr)
	require.NotEqual(t, exitViolation, r.code, r.stderr)
	requireOneLine(t, r.stderr, "verify: no lock was granted in 1s, nothing was tested (acquire errors: ")
	require.Empty(t, r.stdout)
	requireNoKeys(t, c, defaultVerifyPrefix)
}

// TestE2EVerifyInterrupted: SIGINT stops the clients early; the history so
// far is still checked and reported, the keys are deleted, and verify
// exits 130.
func TestE2EVerifyInterrupted(t *testing.T) {
	t.Parallel()
	c := testutil.StartRedis(t, 3)
	cmd := cliCommand(t, nodesEnv(c.URLs()), "verify", "--ttl", "3s", "--timeout", "1s", "--rejoin-delay", "0", "--duration", "25s", "--clients", "2", "--resources", "1", "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	require.NoError(t, cmd.Start())
	// The clients run once the register holds a value.
	waitFor(t, 15*time.Second, "a write to the register", func() bool {
		keys, err := c.Servers()[0].Client().Keys(context.Background(), defaultVerifyPrefix+"register:*").Result()
		return err == nil && len(keys) > 0
	})
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	r := waitCLI(t, cmd, &stdout, &stderr, start)
	require.Equal(t, 130, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	res := decode(t, r)
	require.Equal(t, 0.0, res["violation_count"])
	require.Greater(t, res["acquisitions"].(float64), 0.0)
	requireOneLine(t, r.stderr, "interrupted by SIGINT")
	requireNoKeys(t, c, defaultVerifyPrefix)
}
