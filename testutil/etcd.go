//go:build unix

package testutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// EtcdServer is a one-member etcd cluster started for a test by StartEtcd,
// with its data in a temporary directory, serving clients on a free
// 127.0.0.1 port over plain HTTP (gRPC) and its peer port on another. The
// test's cleanup stops it. This package imports no etcd client: connect
// with go.etcd.io/etcd/client/v3 to Endpoints.
type EtcdServer struct {
	bin        string
	clientPort int
	peerPort   int
	proc       *serverProc
}

// EtcdPath returns the path of the etcd binary: on PATH, else
// /usr/bin/etcd (Debian's etcd-server package). Under go test -short it
// skips the test. Without it, it skips the test with a message saying how
// to install it, or fails it when REDLOCK_REQUIRE_SERVERS is set.
func EtcdPath(t testing.TB) string {
	t.Helper()
	skipShort(t, "etcd")
	if p, err := exec.LookPath("etcd"); err == nil {
		return p
	}
	if p, err := exec.LookPath("/usr/bin/etcd"); err == nil {
		return p
	}
	missingServer(t, "etcd not found on PATH; install it (apt-get install etcd-server)")
	return ""
}

// StartEtcd starts a one-member etcd cluster on free 127.0.0.1 ports and
// waits until it reports itself healthy. It skips or fails the test as
// EtcdPath says when etcd is not installed, and fails it if the server
// does not come up.
func StartEtcd(t testing.TB) *EtcdServer {
	t.Helper()
	bin := EtcdPath(t)
	s, err := startEtcd(t, bin)
	if err != nil {
		t.Fatalf("testutil.StartEtcd: %v", err)
	}
	return s
}

func startEtcd(t testing.TB, bin string) (*EtcdServer, error) {
	s := &EtcdServer{bin: bin}
	var err error
	for range startAttempts {
		if s.clientPort, err = freePort(); err != nil {
			return nil, err
		}
		if s.peerPort, err = freePort(); err != nil {
			return nil, err
		}
		if s.peerPort == s.clientPort {
			continue
		}
		dir := t.TempDir()
		peer := "http://127.0.0.1:" + strconv.Itoa(s.peerPort)
		client := s.Endpoint()
		cmd := exec.Command(bin,
			"--name", "test", "--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", "test="+peer, "--initial-cluster-state", "new",
			"--log-outputs", "stderr")
		cmd.Dir = dir
		s.proc, err = startProc("etcd on "+client, cmd, filepath.Join(dir, "etcd.log"))
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { s.proc.stop(syscall.SIGTERM) })
		err = s.proc.waitReady(s.healthy, "address already in use")
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

// healthy asks the server's /health endpoint.
func (s *EtcdServer) healthy() (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint()+"/health", nil)
	if err != nil {
		return false, err
	}
	req.Close = true // no idle connection left behind for leak checks
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if err != nil {
		return false, err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
		return false, fmt.Errorf("/health: %s %s", resp.Status, body)
	}
	return true, nil
}

// Endpoint returns the client URL, http://127.0.0.1:PORT.
func (s *EtcdServer) Endpoint() string { return "http://127.0.0.1:" + strconv.Itoa(s.clientPort) }

// Endpoints returns the client URLs, for clientv3.Config.Endpoints.
func (s *EtcdServer) Endpoints() []string { return []string{s.Endpoint()} }

// LogPath returns the path of the server's log.
func (s *EtcdServer) LogPath() string { return s.proc.logPath }
