//go:build unix

package testutil

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFindPostgresBinDir(t *testing.T) {
	notOnPath := func(string) (string, error) { return "", exec.ErrNotFound }
	for _, c := range []struct {
		name     string
		lookPath func(string) (string, error)
		found    []string
		want     string
	}{
		{"on PATH", func(string) (string, error) { return "/opt/pg/bin/initdb", nil }, nil, "/opt/pg/bin"},
		{"newest Debian version", notOnPath, []string{
			"/usr/lib/postgresql/9/bin/initdb", "/usr/lib/postgresql/15/bin/initdb", "/usr/lib/postgresql/13/bin/initdb",
		}, "/usr/lib/postgresql/15/bin"},
		{"none", notOnPath, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			glob := func(string) ([]string, error) { return append([]string(nil), c.found...), nil }
			require.Equal(t, c.want, findPostgresBinDir(c.lookPath, glob))
		})
	}
}

func TestTraversable(t *testing.T) {
	open := t.TempDir()
	require.NoError(t, os.Chmod(open, 0o755))
	closed := filepath.Join(open, "private")
	require.NoError(t, os.Mkdir(closed, 0o700))
	inner := filepath.Join(closed, "inner")
	require.NoError(t, os.Mkdir(inner, 0o755))
	require.True(t, traversable("/"))
	require.False(t, traversable(closed))
	require.False(t, traversable(inner), "a private parent closes the way")
	require.False(t, traversable(filepath.Join(open, "missing")))
}

func TestMissingServerMsg(t *testing.T) {
	for _, c := range []struct {
		env   string
		fatal bool
	}{{"", false}, {"0", false}, {"1", true}, {"true", true}, {" 1 ", true}, {"yes", false}} {
		msg, fatal := missingServerMsg("etcd not found", func(k string) string {
			require.Equal(t, RequireServersEnv, k)
			return c.env
		})
		require.Equal(t, c.fatal, fatal, "%s=%q", RequireServersEnv, c.env)
		require.True(t, strings.HasPrefix(msg, "etcd not found"), msg)
		if fatal {
			require.Contains(t, msg, "is set, so this is a failure")
		} else {
			require.Contains(t, msg, "set "+RequireServersEnv+"=1 to make this a failure")
		}
	}
}

// procUID returns the real uid of process pid.
func procUID(t *testing.T, pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("no /proc")
	}
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Uid:"); ok {
			uid, err := strconv.Atoi(strings.Fields(v)[0])
			require.NoError(t, err)
			return uid
		}
	}
	t.Fatal("no Uid in /proc status")
	return 0
}

// TestServersStartAndStop: the servers answer on their ports while the
// test runs (PostgreSQL as the postgres user when the test runs as root),
// and nothing is left listening once its cleanup has run.
func TestServersStartAndStop(t *testing.T) {
	var addrs []string
	t.Run("postgres", func(t *testing.T) {
		pg := StartPostgres(t)
		c, err := net.Dial("tcp", pg.Addr())
		require.NoError(t, err)
		require.NoError(t, c.Close())
		if os.Geteuid() == 0 {
			require.NotZero(t, procUID(t, pg.proc.cmd.Process.Pid), "postgres must not run as root")
		}
		if psql := filepath.Join(pg.BinDir(), "psql"); fileExists(psql) {
			out, err := exec.Command(psql, pg.URL(), "-XAtc", "SELECT current_user").CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Equal(t, "postgres", strings.TrimSpace(string(out)))
		}
		addrs = append(addrs, pg.Addr())
	})
	t.Run("etcd", func(t *testing.T) {
		e := StartEtcd(t)
		ok, err := e.healthy()
		require.NoError(t, err)
		require.True(t, ok)
		addrs = append(addrs, strings.TrimPrefix(e.Endpoint(), "http://"))
	})
	for _, a := range addrs {
		c, err := net.Dial("tcp", a)
		if err == nil {
			_ = c.Close()
		}
		require.Error(t, err, "%s still listening after the test's cleanup", a)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
