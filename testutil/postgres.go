//go:build unix

package testutil

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RequireServersEnv names the environment variable that, when set to a
// true value such as 1, turns a missing PostgreSQL or etcd binary from a
// skipped test into a failed one (for CI, where .ci/run installs both).
// It is separate from RequireRedisEnv so that a machine with redis-server
// but without PostgreSQL or etcd can still require Redis.
const RequireServersEnv = "REDLOCK_REQUIRE_SERVERS"

// errServerBind marks a start that failed because the port was taken.
var errServerBind = errors.New("port already in use")

// missingServer skips or fails t because a server binary is missing: what
// says what is missing and how to install it. Under -short it always
// skips, as every real-server helper does.
func missingServer(t testing.TB, what string) {
	t.Helper()
	msg, fatal := missingServerMsg(what, os.Getenv)
	if fatal {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// missingServerMsg is what missingServer says, and whether it fails.
func missingServerMsg(what string, getenv func(string) string) (string, bool) {
	msg := what + "; set " + RequireServersEnv + "=1 to make this a failure"
	if required, _ := strconv.ParseBool(strings.TrimSpace(getenv(RequireServersEnv))); required {
		return what + " (" + RequireServersEnv + " is set, so this is a failure)", true
	}
	return msg, false
}

// skipShort skips t under go test -short: no real server runs in the
// quick loop (make quick).
func skipShort(t testing.TB, name string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("real %s test skipped under -short (make quick); make test runs it", name)
	}
}

// serverProc is one server process started for a test: started from a
// goroutine locked to its OS thread, so that on Linux the parent-death
// signal kills it if the test binary dies before its cleanup runs.
type serverProc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	once    sync.Once
}

// startProc starts cmd with its output appended to logPath.
func startProc(name string, cmd *exec.Cmd, logPath string) (*serverProc, error) {
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("testutil: open %s log: %w", name, err)
	}
	defer func() { _ = out.Close() }()
	cmd.Stdout, cmd.Stderr = out, out
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = sysProcAttr()
	}
	p := &serverProc{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("testutil: start %s: %w", name, err)
	}
	return p, nil
}

// alive reports whether the process has not exited.
func (p *serverProc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// waitReady polls ready until it reports true, failing when the process
// exits first (with errServerBind when its log says the port was taken,
// per bindMsg) or after readyTimeout.
func (p *serverProc) waitReady(ready func() (bool, error), bindMsg ...string) error {
	deadline := time.Now().Add(readyTimeout)
	var last error
	for {
		if !p.alive() {
			tail := tailFile(p.logPath, 2048)
			for _, m := range bindMsg {
				if strings.Contains(tail, m) {
					return fmt.Errorf("testutil: %s: %w; log tail:\n%s", p.name, errServerBind, tail)
				}
			}
			return fmt.Errorf("testutil: %s exited during start-up (%v); log tail:\n%s", p.name, p.cmd.ProcessState, tail)
		}
		ok, err := ready()
		if ok {
			return nil
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("testutil: %s not ready after %v (last check: %v); log tail:\n%s",
				p.name, readyTimeout, last, tailFile(p.logPath, 2048))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop sends sig, waits up to stopTimeout for the process to exit, then
// kills it. It is idempotent.
func (p *serverProc) stop(sig syscall.Signal) {
	p.once.Do(func() {
		if !p.alive() {
			return
		}
		_ = p.cmd.Process.Signal(sig)
		select {
		case <-p.exited:
		case <-time.After(stopTimeout):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
}

// PostgresServer is a PostgreSQL server started for a test by
// StartPostgres: a fresh cluster (initdb) in a temporary directory,
// listening on a free 127.0.0.1 port only (no Unix socket), with trust
// authentication for the superuser "postgres" and fsync off (test data need
// not survive a crash of the machine). The test's cleanup stops it and
// removes its directory.
type PostgresServer struct {
	binDir string
	dir    string
	port   int
	proc   *serverProc
}

// PostgresBinDir returns the directory holding PostgreSQL's initdb and
// postgres binaries: the one of initdb on PATH, else the newest
// /usr/lib/postgresql/<version>/bin (where Debian's postgresql package puts
// them, off PATH). Under go test -short it skips the test. Without them it
// skips the test with a message saying how to install them, or fails it
// when REDLOCK_REQUIRE_SERVERS is set.
func PostgresBinDir(t testing.TB) string {
	t.Helper()
	skipShort(t, "PostgreSQL")
	dir := findPostgresBinDir(exec.LookPath, filepath.Glob)
	if dir == "" {
		missingServer(t, "PostgreSQL not found (no initdb on PATH or in /usr/lib/postgresql/*/bin); install it (apt-get install postgresql)")
	}
	return dir
}

// findPostgresBinDir is PostgresBinDir's search, with PATH and the file
// system injected; "" when nothing is found.
func findPostgresBinDir(lookPath func(string) (string, error), glob func(string) ([]string, error)) string {
	if p, err := lookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		return filepath.Dir(p)
	}
	found, _ := glob("/usr/lib/postgresql/*/bin/initdb")
	// Newest version first: compare the version directories as numbers.
	version := func(p string) int {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
		return v
	}
	slices.SortFunc(found, func(a, b string) int { return version(b) - version(a) })
	if len(found) == 0 {
		return ""
	}
	return filepath.Dir(found[0])
}

// StartPostgres initdbs a new PostgreSQL cluster in a temporary directory
// and starts it on a free 127.0.0.1 port, waiting until it accepts
// connections. PostgreSQL refuses to run as root: when the test runs as
// root (as CI does) the server runs as the "postgres" user that Debian's
// package creates, in a directory that user owns. It skips or fails the
// test as PostgresBinDir says when PostgreSQL is not installed, and fails
// it if the server does not come up.
func StartPostgres(t testing.TB) *PostgresServer {
	t.Helper()
	binDir := PostgresBinDir(t)
	cred, err := postgresCredential()
	if err != nil {
		missingServer(t, err.Error())
	}
	s, err := startPostgres(t, binDir, cred)
	if err != nil {
		t.Fatalf("testutil.StartPostgres: %v", err)
	}
	return s
}

// postgresCredential returns the credential to run PostgreSQL with: nil
// when the test does not run as root, else the postgres user's.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL refuses to run as root, and there is no postgres user to run it as (%v); install Debian's postgresql package, which creates it", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user postgres has a non-numeric uid %q or gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func startPostgres(t testing.TB, binDir string, cred *syscall.Credential) (*PostgresServer, error) {
	// Not t.TempDir: its parents are private to the test's user, and the
	// postgres user must reach its own directory.
	base := os.TempDir()
	if cred != nil && !traversable(base) {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "redlock-pg-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("give %s to the postgres user: %w", dir, err)
		}
	}
	s := &PostgresServer{binDir: binDir, dir: dir}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(binDir, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions")
	s.prepare(initdb, cred)
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	for range startAttempts {
		if s.port, err = freePort(); err != nil {
			return nil, err
		}
		cmd := exec.Command(filepath.Join(binDir, "postgres"), "-D", data, "-p", strconv.Itoa(s.port),
			"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
			"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
			"-c", "shared_buffers=16MB", "-c", "max_connections=60")
		s.prepare(cmd, cred)
		s.proc, err = startProc("postgres on "+s.Addr(), cmd, filepath.Join(dir, "postgres.log"))
		if err != nil {
			return nil, err
		}
		// Fast shutdown: roll back open transactions, end sessions.
		t.Cleanup(func() { s.proc.stop(syscall.SIGINT) })
		err = s.proc.waitReady(s.ready, "could not bind", "Address already in use")
		if err == nil {
			return s, nil
		}
		s.proc.stop(syscall.SIGKILL)
		if !errors.Is(err, errServerBind) {
			return nil, err
		}
	}
	return nil, err
}

// traversable reports whether every directory from / down to dir lets
// other users through (the x bit for others), so that the postgres user
// can reach a directory of its own inside it.
func traversable(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil || st.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// prepare runs cmd in the server's directory, as the postgres user when
// cred is set, in the C locale.
func (s *PostgresServer) prepare(cmd *exec.Cmd, cred *syscall.Credential) {
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	attr := sysProcAttr() // the parent-death signal, where there is one
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Credential = cred
	cmd.SysProcAttr = attr
}

// ready reports whether the server says it accepts connections and its
// port answers.
func (s *PostgresServer) ready() (bool, error) {
	log, err := os.ReadFile(s.proc.logPath)
	if err != nil {
		return false, err
	}
	if !strings.Contains(string(log), "database system is ready to accept connections") {
		return false, errors.New("not ready to accept connections yet")
	}
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return false, err
	}
	_ = c.Close()
	return true, nil
}

// Addr returns the server's address, 127.0.0.1:port.
func (s *PostgresServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port returns the server's TCP port.
func (s *PostgresServer) Port() int { return s.port }

// URL returns a connection URL for the superuser postgres and the database
// postgres, without TLS (the server has none):
// postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable.
func (s *PostgresServer) URL() string {
	return "postgres://postgres@" + s.Addr() + "/postgres?sslmode=disable"
}

// Env returns the libpq environment variables (PGHOST, PGPORT, PGUSER,
// PGDATABASE, PGSSLMODE) that make psql, and anything else that finds its
// database the way psql does, connect to this server.
func (s *PostgresServer) Env() []string {
	return []string{"PGHOST=127.0.0.1", "PGPORT=" + strconv.Itoa(s.port), "PGUSER=postgres",
		"PGDATABASE=postgres", "PGSSLMODE=disable", "PGPASSWORD="}
}

// BinDir returns the directory of the server's binaries (initdb, postgres,
// and usually psql).
func (s *PostgresServer) BinDir() string { return s.binDir }

// LogPath returns the path of the server's log.
func (s *PostgresServer) LogPath() string { return s.proc.logPath }
