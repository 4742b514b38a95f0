package testutil

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
)

// RequireRedisEnv names the environment variable that, when set to a true
// value such as 1, turns a missing redis-server from a skipped test into a
// failed one (for CI, where the real-server tests must run).
const RequireRedisEnv = "REDLOCK_REQUIRE_REDIS"

const redisMissingMsg = "redis-server not found on PATH; install it (apt-get install redis-server) or set " +
	RequireRedisEnv + "=1 to make this a failure"

// shortSkipMsg is why a real-server test skips under go test -short (make
// quick), whatever RequireRedisEnv says: -short is the explicit request for
// the quick loop without redis-server.
const shortSkipMsg = "real redis-server test skipped under -short (make quick); make test runs it"

const (
	// readyTimeout bounds how long a starting server may take to answer.
	readyTimeout = 10 * time.Second
	// stopTimeout bounds a graceful Stop before it falls back to SIGKILL.
	stopTimeout = 10 * time.Second
	// startAttempts bounds the fresh ports tried when another process takes
	// the port picked for a new server before it binds it.
	startAttempts = 5
	// rebindWindow bounds how long Restart retries binding the server's
	// own port when something else holds it briefly.
	rebindWindow = 2 * time.Second
)

var (
	// errBind marks a start that failed because the port was taken.
	errBind = errors.New("port already in use")
	// errClosed marks a call after the test's cleanup stopped the server.
	errClosed = errors.New("testutil: redis server already cleaned up")
)

// RedisServerPath returns the path of the redis-server binary found on
// PATH. Under go test -short it skips the test, even when RequireRedisEnv
// is set: every helper that starts a real server comes through here, so
// -short runs no real server. If there is none on PATH, it skips the test
// with a message saying how to install it, or fails the test instead when
// RequireRedisEnv is set.
func RedisServerPath(t testing.TB) string {
	t.Helper()
	return redisServerPath(t, testing.Short(), exec.LookPath, os.Getenv)
}

// redisServerPath is RedisServerPath with -short, the PATH lookup and the
// environment injected.
func redisServerPath(t testing.TB, short bool, lookPath func(string) (string, error), getenv func(string) string) string {
	t.Helper()
	path, msg, fatal := findRedisServer(short, lookPath, getenv)
	switch {
	case path != "":
		return path
	case fatal:
		t.Fatal(msg)
	default:
		t.Skip(msg)
	}
	return ""
}

// findRedisServer decides what RedisServerPath does: it returns the path
// when redis-server is found (and the run is not -short), else the message
// and whether the test must fail rather than skip.
func findRedisServer(short bool, lookPath func(string) (string, error), getenv func(string) string) (path, msg string, fatal bool) {
	if short {
		return "", shortSkipMsg, false
	}
	if p, err := lookPath("redis-server"); err == nil {
		return p, "", false
	}
	if required, _ := strconv.ParseBool(strings.TrimSpace(getenv(RequireRedisEnv))); required {
		return "", redisMissingMsg + " (" + RequireRedisEnv + " is set, so this is a failure)", true
	}
	return "", redisMissingMsg, false
}

// Option configures a real redis-server started by StartRedis or
// StartRedisServer.
type Option func(*redisOptions)

type redisOptions struct {
	lines    []string
	password string
	tls      *TLSCerts // nil: plain TCP
	replicas int       // per cluster shard (StartCluster only)
	host     string    // bind address; "" is 127.0.0.1
	prefix   []string  // command run before redis-server (WithCommandPrefix)
	env      []string  // extra environment of the server process
}

// WithConfig appends lines to the generated redis.conf, after the defaults,
// so they override them (for example "maxmemory-policy allkeys-lru" or
// "appendonly no"). The server must still answer on its port on 127.0.0.1
// (plain TCP, or TLS with WithTLS) for start-up to succeed.
func WithConfig(lines ...string) Option {
	return func(o *redisOptions) { o.lines = append(o.lines, lines...) }
}

// WithPassword makes the server require pw (requirepass) and makes every
// client, node and URL the server hands out authenticate with it.
func WithPassword(pw string) Option {
	return func(o *redisOptions) { o.password = pw }
}

// WithHost makes a server started by StartRedisServer or StartRedis bind
// host, an IPv4 address other than 127.0.0.1 (for example one end of a veth
// pair in a network namespace, see WithCommandPrefix), instead of
// 127.0.0.1; Addr and URL then name it. Protected mode is turned off, so
// the address must be reachable only from the test's own machine. The port
// is still one that was free on 127.0.0.1.
func WithHost(host string) Option {
	return func(o *redisOptions) { o.host = host }
}

// WithCommandPrefix runs the server as prefix... redis-server redis.conf,
// for example ("ip", "netns", "exec", "ns1") to start it in the network
// namespace ns1. The prefix must replace itself with redis-server (exec, as
// ip netns exec, env and nice do), so that Kill, Pause and the parent-death
// signal reach the server and its process id is the one started.
func WithCommandPrefix(prefix ...string) Option {
	return func(o *redisOptions) { o.prefix = append([]string(nil), prefix...) }
}

// WithEnv adds "KEY=value" entries to the server process's environment, on
// top of the test process's own (for example LD_PRELOAD and FAKETIME_* for
// libfaketime). Restarts keep them.
func WithEnv(env ...string) Option {
	return func(o *redisOptions) { o.env = append(o.env, env...) }
}

// RedisServer is one real redis-server process started for a test, with
// fault controls. It lives in its own directory under t.TempDir() with AOF
// persistence and appendfsync always, so a killed server restarts with
// every acknowledged write; DEBUG (for example DEBUG SLEEP, a slow node) is
// enabled for local clients. The test's cleanup kills it (paused or not) and
// closes every client it handed out. All methods are safe for concurrent
// use; fault controls return errors rather than failing the test, so they
// may be called from any goroutine.
type RedisServer struct {
	bin      string
	dir      string
	confPath string
	logPath  string
	outPath  string
	password string
	prefix   []string // WithCommandPrefix
	env      []string // WithEnv
	port     int
	addr     string
	tlsConf  *tls.Config // nil: plain TCP

	clients clientSet[*redis.Client]
	admin   *redis.Client

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
	paused bool
	closed bool
}

// StartRedisServer starts one redis-server on a free 127.0.0.1 port and
// waits until it answers. It skips the test if redis-server is missing (see
// RedisServerPath) and fails it if the server does not come up within 10s.
func StartRedisServer(t testing.TB, opts ...Option) *RedisServer {
	t.Helper()
	bin := RedisServerPath(t)
	s, err := startServer(t, bin, buildOptions(opts))
	if err != nil {
		t.Fatalf("testutil.StartRedisServer: %v", err)
	}
	return s
}

func buildOptions(opts []Option) redisOptions {
	var o redisOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// startServer creates, registers for cleanup and starts one server. It is
// safe to call from several goroutines of one test.
func startServer(t testing.TB, bin string, o redisOptions) (*RedisServer, error) {
	// t.TempDir registers its removal before the cleanup below, so cleanups
	// (last in, first out) kill the server before its directory goes.
	dir := t.TempDir()
	s := &RedisServer{
		bin:      bin,
		dir:      dir,
		confPath: filepath.Join(dir, "redis.conf"),
		logPath:  filepath.Join(dir, "redis.log"),
		outPath:  filepath.Join(dir, "stdout.log"),
		password: o.password,
		prefix:   o.prefix,
		env:      o.env,
	}
	if o.tls != nil {
		s.tlsConf = o.tls.ClientConfig()
	}
	t.Cleanup(func() { s.cleanup(t) })

	var err error
	for range startAttempts {
		s.port, err = freePort()
		if err != nil {
			return nil, err
		}
		s.addr = net.JoinHostPort(cmp.Or(o.host, "127.0.0.1"), strconv.Itoa(s.port))
		if err = os.WriteFile(s.confPath, []byte(s.config(o)), 0o600); err != nil {
			return nil, fmt.Errorf("testutil: write redis config: %w", err)
		}
		s.mu.Lock()
		err = s.startLocked()
		s.mu.Unlock()
		if err == nil {
			s.admin = s.Client()
			return s, s.Vouch(context.Background()) // operator.go
		}
		if !errors.Is(err, errBind) {
			return nil, err
		}
	}
	return nil, err
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("testutil: find a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("testutil: find a free port: %w", err)
	}
	return port, nil
}

// config renders the server's redis.conf: the settings the Redlock safety
// argument needs, then the caller's lines.
func (s *RedisServer) config(o redisOptions) string {
	var b strings.Builder
	b.WriteString("# generated by github.com/e6344662/go-redlock/testutil\n")
	if o.host != "" {
		fmt.Fprintf(&b, "bind %s\nprotected-mode no\n", o.host)
	} else {
		b.WriteString("bind 127.0.0.1\n")
	}
	if o.tls != nil {
		b.WriteString(o.tls.confLines(s.port))
	} else {
		fmt.Fprintf(&b, "port %d\n", s.port)
	}
	fmt.Fprintf(&b, "dir %s\nlogfile %s\n", confQuote(s.dir), confQuote(s.logPath))
	b.WriteString("daemonize no\n")
	b.WriteString("appendonly yes\nappendfsync always\nsave \"\"\n")
	b.WriteString("maxmemory-policy noeviction\n")
	b.WriteString("enable-debug-command local\n")
	if o.password != "" {
		fmt.Fprintf(&b, "requirepass %s\n", confQuote(o.password))
	}
	for _, l := range o.lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// confQuote quotes v as a redis.conf argument.
func confQuote(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}

// startLocked starts the process on s.port and waits until it answers.
func (s *RedisServer) startLocked() error {
	if s.closed {
		return errClosed
	}
	if s.runningLocked() {
		return nil
	}
	out, err := os.OpenFile(s.outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("testutil: open redis output file: %w", err)
	}
	argv := append(append([]string(nil), s.prefix...), s.bin, s.confPath)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.dir
	if len(s.env) > 0 {
		cmd.Env = append(os.Environ(), s.env...)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		// The parent-death signal follows the thread that forked, so that
		// thread is kept for this goroutine until the server is gone.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(exited)
	}()
	err = <-started
	_ = out.Close()
	if err != nil {
		return fmt.Errorf("testutil: start %s: %w", s.bin, err)
	}
	s.cmd, s.exited, s.paused = cmd, exited, false
	if err := s.waitReadyLocked(); err != nil {
		_ = s.killLocked()
		return err
	}
	return nil
}

// waitReadyLocked waits until this server's process answers PING on its
// port (not LOADING), or fails with the tail of its log.
func (s *RedisServer) waitReadyLocked() error {
	deadline := time.Now().Add(readyTimeout)
	pid := s.cmd.Process.Pid
	var lastErr error
	for {
		select {
		case <-s.exited:
			tail := s.logTail()
			if strings.Contains(tail, "Address already in use") {
				return fmt.Errorf("testutil: redis-server on %s: %w; log tail:\n%s", s.addr, errBind, tail)
			}
			return fmt.Errorf("testutil: redis-server on %s exited during start-up (%v); log tail:\n%s",
				s.addr, s.cmd.ProcessState, tail)
		default:
		}
		ready, err := probe(s.addr, s.password, pid, s.tlsConf)
		if ready {
			return nil
		}
		lastErr = err
		if time.Now().After(deadline) {
			return fmt.Errorf("testutil: redis-server on %s not ready after %v (last probe: %v); log tail:\n%s",
				s.addr, readyTimeout, lastErr, s.logTail())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// probe reports whether the redis-server process pid serves addr and is
// ready for commands. It speaks RESP on a plain connection rather than
// through go-redis, whose pools back off for a second after repeated dial
// errors. With tlsConf it speaks TLS.
func probe(addr, password string, pid int, tlsConf *tls.Config) (bool, error) {
	var conn net.Conn
	var err error
	if tlsConf != nil {
		conn, err = tls.DialWithDialer(&net.Dialer{Timeout: redisTimeout}, "tcp", addr, tlsConf)
	} else {
		conn, err = net.DialTimeout("tcp", addr, redisTimeout)
	}
	if err != nil {
		return false, err
	}
	defer func() { _ = conn.Close() }()
	if err := conn.SetDeadline(time.Now().Add(redisTimeout)); err != nil {
		return false, err
	}
	r := bufio.NewReader(conn)
	if password != "" {
		if _, err := respCall(conn, r, "AUTH", password); err != nil {
			return false, err
		}
	}
	info, err := respCall(conn, r, "INFO", "server")
	if err != nil {
		return false, err
	}
	if got, ok := infoField(info, "process_id"); ok && got != strconv.Itoa(pid) {
		// Someone else's server holds the port; ours will fail to bind.
		return false, fmt.Errorf("%s is served by process %s, not %d", addr, got, pid)
	}
	// INFO is served while the AOF loads; PING is not.
	if _, err := respCall(conn, r, "PING"); err != nil {
		return false, err
	}
	return true, nil
}

// respCall sends one command and reads a simple, error or bulk reply.
func respCall(w io.Writer, r *bufio.Reader, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad bulk reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

// infoField returns the value of field in an INFO reply.
func infoField(info, field string) (string, bool) {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), field+":"); ok {
			return v, true
		}
	}
	return "", false
}

// logTail returns the last lines of the server's log and of its standard
// output (where fatal config errors go), for error messages.
func (s *RedisServer) logTail() string {
	var b strings.Builder
	for _, p := range []string{s.logPath, s.outPath} {
		if t := tailFile(p, 2048); t != "" {
			fmt.Fprintf(&b, "--- %s ---\n%s\n", p, t)
		}
	}
	if b.Len() == 0 {
		return "(no output)"
	}
	return b.String()
}

// tailFile returns up to the last n bytes of the file at path, from a line
// start where possible.
func tailFile(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-n, 0)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	s := string(buf)
	if off > 0 {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return strings.TrimRight(s, "\n")
}

// runningLocked reports whether the process is alive (paused or not).
func (s *RedisServer) runningLocked() bool {
	if s.exited == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// killLocked SIGKILLs a running process and waits until it is gone.
func (s *RedisServer) killLocked() error {
	if !s.runningLocked() {
		s.paused = false
		return nil
	}
	err := s.cmd.Process.Kill() // works on a stopped process too
	<-s.exited
	s.paused = false
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("testutil: kill redis-server on %s: %w", s.addr, err)
	}
	return nil
}

// cleanup is the test's cleanup for the server: it closes every client and
// kills the process, paused or not, and waits for it.
func (s *RedisServer) cleanup(t testing.TB) {
	s.clients.closeAll()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if !s.runningLocked() {
		return
	}
	if s.paused {
		_ = resumeProcess(s.cmd.Process)
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		t.Errorf("testutil: redis-server pid %d on %s did not exit after SIGKILL", s.cmd.Process.Pid, s.addr)
	}
	s.paused = false
}

// Addr returns the server's host:port (127.0.0.1:port unless WithHost),
// which stays the same across restarts.
func (s *RedisServer) Addr() string { return s.addr }

// Port returns the server's TCP port, which stays the same across restarts.
func (s *RedisServer) Port() int { return s.port }

// URL returns the server's redis:// URL (rediss:// with WithTLS), with the
// password if one was set with WithPassword, as accepted by redisnode.Dial and
// the CLI.
func (s *RedisServer) URL() string {
	u := url.URL{Scheme: "redis", Host: s.addr}
	if s.tlsConf != nil {
		u.Scheme = "rediss"
	}
	if s.password != "" {
		u.User = url.UserPassword("", s.password)
	}
	return u.String()
}

// Dir returns the server's data directory (its config, log and AOF files).
func (s *RedisServer) Dir() string { return s.dir }

// LogPath returns the path of the server's log file.
func (s *RedisServer) LogPath() string { return s.logPath }

// Client returns a new go-redis client to the server with 500ms dial, read
// and write timeouts and no retries, so a paused or dead server costs one
// fast error; the server closes it at cleanup. As with MiniCluster.Nodes,
// a client that failed PoolSize dials in a row stops dialing for about a
// second. With WithTLS the client speaks TLS and trusts the server's CA.
func (s *RedisServer) Client() *redis.Client {
	opts := FastFailOptions(s.addr, s.password, redisTimeout)
	if s.tlsConf != nil {
		opts.TLSConfig = s.tlsConf.Clone()
	}
	return s.clients.add(redis.NewClient(opts))
}

// Node returns a redlock node over a new client like Client's, speaking
// RESP2 as redisnode.Dial's do; the server closes it at cleanup.
func (s *RedisServer) Node() redlock.Node {
	opts := nodeOptions(FastFailOptions(s.addr, s.password, redisTimeout))
	if s.tlsConf != nil {
		opts.TLSConfig = s.tlsConf.Clone()
	}
	return newNode(s.clients.add(redis.NewClient(opts)))
}

// CommandCalls reads INFO commandstats on s: the calls of each command
// since the server started or CONFIG RESETSTAT (lower case, such as
// "fcall" or "evalsha"; subcommands as "function|load"; a command not yet
// called is absent, 0 in the map).
func CommandCalls(t testing.TB, s *RedisServer) map[string]int {
	t.Helper()
	info, err := s.Do(Context(t), "INFO", "commandstats").Text()
	require.NoError(t, err)
	calls := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		require.NoError(t, err)
		calls[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return calls
}

// Do runs one raw command on the server through a shared client (for
// example Do(ctx, "CONFIG", "GET", "maxmemory-policy")).
func (s *RedisServer) Do(ctx context.Context, args ...any) *redis.Cmd {
	return s.admin.Do(ctx, args...)
}

// Running reports whether the server process is alive; a paused server is
// running.
func (s *RedisServer) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runningLocked()
}

// Paused reports whether the server is running but stopped by Pause.
func (s *RedisServer) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused && s.runningLocked()
}

// Kill SIGKILLs the server (a crash: no shutdown work) and waits until the
// process is gone; connections are then refused until Restart. Killing a
// server that is not running does nothing.
func (s *RedisServer) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killLocked()
}

// Stop shuts the server down gracefully (SIGTERM: the AOF is flushed, the
// process exits) and waits, resuming it first if it is paused. If it has
// not exited within 10s it is killed and Stop returns an error. Stopping a
// server that is not running does nothing.
func (s *RedisServer) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.runningLocked() {
		return nil
	}
	p := s.cmd.Process
	if s.paused {
		if err := resumeProcess(p); err != nil {
			return fmt.Errorf("testutil: resume redis-server on %s: %w", s.addr, err)
		}
		s.paused = false
	}
	if err := terminateProcess(p); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("testutil: stop redis-server on %s: %w", s.addr, err)
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(stopTimeout):
		_ = s.killLocked()
		return fmt.Errorf("testutil: redis-server on %s did not stop within %v; killed it", s.addr, stopTimeout)
	}
}

// Pause stops the server process with SIGSTOP: it keeps its port and
// accepts connections but answers nothing, so commands time out, until
// Resume. Pausing a paused server does nothing; pausing a server that is not
// running is an error.
func (s *RedisServer) Pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.runningLocked() {
		return fmt.Errorf("testutil: pause redis-server on %s: not running", s.addr)
	}
	if s.paused {
		return nil
	}
	if err := pauseProcess(s.cmd.Process); err != nil {
		return fmt.Errorf("testutil: pause redis-server on %s: %w", s.addr, err)
	}
	s.paused = true
	return nil
}

// Resume continues a server stopped by Pause (SIGCONT); it then serves the
// commands that queued up meanwhile. Resuming a server that is not paused
// does nothing.
func (s *RedisServer) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.paused || !s.runningLocked() {
		s.paused = false
		return nil
	}
	if err := resumeProcess(s.cmd.Process); err != nil {
		return fmt.Errorf("testutil: resume redis-server on %s: %w", s.addr, err)
	}
	s.paused = false
	return nil
}

// Restart starts the server again on the same port and directory, so it
// reloads its AOF, and waits until it answers (after the AOF is loaded). A
// running server is killed first, as in a crash. Restart fails after the
// test's cleanup has run.
func (s *RedisServer) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.killLocked(); err != nil {
		return err
	}
	deadline := time.Now().Add(rebindWindow)
	for {
		err := s.startLocked()
		if err == nil || !errors.Is(err, errBind) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// RedisCluster is a set of independent real redis-server processes started
// by StartRedis. Every method is safe for concurrent use.
type RedisCluster struct {
	servers []*RedisServer
}

// StartRedis starts n independent redis-servers in parallel, as
// StartRedisServer does, each with the same options. It skips the test if
// redis-server is missing and fails it if any server does not come up; the
// test's cleanup kills them all.
func StartRedis(t testing.TB, n int, opts ...Option) *RedisCluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("testutil.StartRedis: need at least one server, got %d", n)
	}
	bin := RedisServerPath(t)
	o := buildOptions(opts)
	servers := make([]*RedisServer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { servers[i], errs[i] = startServer(t, bin, o) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("testutil.StartRedis: %v", err)
	}
	return &RedisCluster{servers: servers}
}

// Len returns the number of servers.
func (c *RedisCluster) Len() int { return len(c.servers) }

// Server returns server i; it panics if i is out of range.
func (c *RedisCluster) Server(i int) *RedisServer {
	if i < 0 || i >= len(c.servers) {
		panic(fmt.Sprintf("testutil: server %d out of range [0,%d)", i, len(c.servers)))
	}
	return c.servers[i]
}

// Servers returns every server, in order, in a new slice.
func (c *RedisCluster) Servers() []*RedisServer {
	return append([]*RedisServer(nil), c.servers...)
}

// Nodes returns one redlock node per server, in order, each over a new
// client with short timeouts and no retries (see RedisServer.Client); the
// servers close them at cleanup.
func (c *RedisCluster) Nodes() []redlock.Node {
	nodes := make([]redlock.Node, len(c.servers))
	for i, s := range c.servers {
		nodes[i] = s.Node()
	}
	return nodes
}

// Addrs returns every server's host:port, in order.
func (c *RedisCluster) Addrs() []string {
	addrs := make([]string, len(c.servers))
	for i, s := range c.servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// URLs returns every server's redis:// URL, in order.
func (c *RedisCluster) URLs() []string {
	urls := make([]string, len(c.servers))
	for i, s := range c.servers {
		urls[i] = s.URL()
	}
	return urls
}

// WaitSubscribed waits (up to 10 s, failing t after) until every server has
// n subscribers on channel, as a Locker's waiters subscribe to a lock's
// release channel (the lock key followed by ":released").
func WaitSubscribed(t testing.TB, servers []*RedisServer, channel string, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, s := range servers {
			got, err := s.Client().PubSubNumSub(context.Background(), channel).Result()
			if err != nil || got[channel] != n {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond)
}
