package redlock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// respNode is a Node written from the contract alone, over a RESP2
// connection of its own and without go-redis: what a user writes to put
// the Locker on another Redis client. Each call dials the server, runs
// EVALSHA with the script's digest and, when the server answers NOSCRIPT,
// EVAL with its source. It announces nothing (Subscribe returns nil) and
// does not know its server's uptime (a stand-in such as miniredis says
// nothing either).
type respNode struct {
	addr string
	// shas counts the EVALSHAs the server ran, evals the EVALs after a
	// NOSCRIPT.
	shas, evals *atomic.Int64
}

// respError is a server's error reply, as the Locker recognises one.
type respError struct{ msg string }

func (e respError) Error() string { return e.msg }
func (respError) RedisError()     {}

func (n respNode) Addr() string { return n.addr }

func (n respNode) Eval(ctx context.Context, s *scripts.Script, keys []string, args ...any) (any, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", n.addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	r := bufio.NewReader(conn)
	reply, err := n.do(conn, r, "EVALSHA", s.Hash(), keys, args)
	var rerr respError
	if errors.As(err, &rerr) && strings.HasPrefix(rerr.msg, "NOSCRIPT") {
		n.evals.Add(1)
		return n.do(conn, r, "EVAL", s.Source(), keys, args)
	}
	if err == nil {
		n.shas.Add(1)
	}
	return reply, err
}

// do sends one EVAL or EVALSHA and reads its reply.
func (n respNode) do(conn net.Conn, r *bufio.Reader, cmd, script string, keys []string, args []any) (any, error) {
	words := []string{cmd, script, strconv.Itoa(len(keys))}
	words = append(words, keys...)
	for _, a := range args {
		switch a := a.(type) {
		case string:
			words = append(words, a)
		case int:
			words = append(words, strconv.Itoa(a))
		case int64:
			words = append(words, strconv.FormatInt(a, 10))
		default:
			// Node.Eval's documentation promises nothing else.
			return nil, fmt.Errorf("respNode: argument of type %T", a)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(words))
	for _, w := range words {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(w), w)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return nil, err
	}
	return readReply(r)
}

// readReply decodes one RESP2 reply as Node.Eval returns it.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("respNode: empty reply line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, respError{body}
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		return readBulk(r, body)
	case '*':
		return readArray(r, body)
	}
	return nil, fmt.Errorf("respNode: unknown reply %q", line)
}

// readBulk reads the body of a bulk string of the size the header gave.
func readBulk(r *bufio.Reader, header string) (any, error) {
	size, err := strconv.Atoi(header)
	if err != nil || size < 0 {
		return nil, err // a nil bulk string: nil, nil
	}
	buf := make([]byte, size+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return string(buf[:size]), nil
}

// readArray reads the elements of an array of the length the header gave;
// an error reply inside it is a value.
func readArray(r *bufio.Reader, header string) (any, error) {
	count, err := strconv.Atoi(header)
	if err != nil || count < 0 {
		return nil, err
	}
	vals := make([]any, count)
	for i := range vals {
		v, err := readReply(r)
		if _, reply := err.(respError); reply {
			v, err = err, nil
		}
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	return vals, nil
}

func (n respNode) Uptime(context.Context) (redlock.Uptime, error) { return redlock.Uptime{}, nil }

func (n respNode) Subscribe(func(key, msg string)) redlock.Subscription { return nil }

// TestANodeWithoutGoRedis: a Node written from Node's documentation alone,
// on a RESP connection of its own, works with New and Acquire: it runs the
// scripts by their digest (which the server knows them by) after loading
// them with EVAL once, the Locker grants, fences and releases through it,
// and the lock it takes is the one an ordinary redisnode.Node sees.
func TestANodeWithoutGoRedis(t *testing.T) {
	c := testutil.NewMiniCluster(t, 3)
	var shas, evals atomic.Int64
	nodes := make([]redlock.Node, c.Len())
	for i, addr := range c.Addrs() {
		nodes[i] = respNode{addr: addr, shas: &shas, evals: &evals}
	}
	ctx := testutil.Context(t)
	l := newLocker(t, nodes, redlock.Config{LeaseDuration: 10 * time.Second})
	other := newLocker(t, c.Nodes(), redlock.Config{LeaseDuration: 10 * time.Second})

	lease, err := l.Acquire(ctx, "plain")
	require.NoError(t, err)
	require.Positive(t, lease.Fence())
	// Acquire returns at a majority: the third node's call may still be on
	// its way (the loaded machine, or the KEYS check's longer scripts). It
	// is awaited before another Locker tries: a try that reached the third
	// node first would hold it for a moment, then give it back.
	require.Eventually(t, func() bool {
		st, err := other.Inspect(ctx, "plain")
		if err != nil {
			return false
		}
		for _, n := range st.Nodes {
			if n.Info.Token != lease.Token() {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "every node holds the lock")
	st, err := other.Inspect(ctx, "plain")
	require.NoError(t, err)
	for _, n := range st.Nodes {
		require.Equal(t, lease.Token(), n.Info.Token, "%s", n.Addr)
		require.Equal(t, lease.Fence(), n.Info.Fence, "%s", n.Addr)
	}
	_, err = other.TryAcquire(ctx, "plain")
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "the lock stands on the servers")
	require.NoError(t, lease.Release(ctx))

	next, err := l.Acquire(ctx, "plain")
	require.NoError(t, err)
	require.Greater(t, next.Fence(), lease.Fence())
	require.NoError(t, next.Release(ctx))
	taken, err := other.TryAcquire(ctx, "plain")
	require.NoError(t, err, "released on every server")
	require.NoError(t, taken.Release(ctx))

	require.Positive(t, evals.Load(), "a server without the script is sent its source")
	require.Positive(t, shas.Load(), "the server knows a script by its Hash")
}

// TestNoRedisClientInTheCore: package redlock (and packages scripts and
// fencing) import no Redis client, directly or through another package: the go-redis
// transport lives in package redlock/redisnode, which does import go-redis,
// and a Node over another client (rueidisnode, respNode above) needs nothing
// else.
func TestNoRedisClientInTheCore(t *testing.T) {
	for _, dir := range []string{".", filepath.Join("..", "scripts"), filepath.Join("..", "fencing")} {
		for _, dep := range goListDeps(t, dir) {
			require.False(t, strings.HasPrefix(dep, "github.com/redis/"), "%s depends on %s", dir, dep)
		}
	}
	require.Contains(t, goListDeps(t, "redisnode"), "github.com/redis/go-redis/v9", "the go-redis transport is package redisnode")
	// The core's files, test files aside, name no go-redis type either.
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		parsed, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range parsed.Imports {
			require.NotContains(t, imp.Path.Value, "github.com/redis/", "%s imports a Redis client", f)
		}
	}
}

// goListDeps lists the packages the non-test package in dir depends on,
// itself included (go list -deps).
func goListDeps(t *testing.T, dir string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".")
	cmd.Dir = dir
	out, err := cmd.Output()
	require.NoError(t, err, "go list -deps in %s", dir)
	return strings.Fields(string(out))
}
