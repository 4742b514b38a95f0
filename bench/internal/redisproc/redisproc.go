// Package redisproc starts throwaway redis-server processes for the
// benchmark tools, which run outside go test and so cannot use testutil.
package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Server is one running redis-server without persistence.
type Server struct {
	Addr string
	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

// Start starts n redis-servers on free 127.0.0.1 ports with no persistence
// (appendonly no, no RDB snapshots) and waits until each answers PING. On
// error it stops the ones already started.
func Start(ctx context.Context, n int) ([]*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redisproc: %w (install redis-server)", err)
	}
	var servers []*Server
	for range n {
		s, err := start(ctx, bin)
		if err != nil {
			Stop(servers)
			return nil, err
		}
		servers = append(servers, s)
	}
	return servers, nil
}

func start(ctx context.Context, bin string) (*Server, error) {
	dir, err := os.MkdirTemp("", "redisproc-")
	if err != nil {
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("redisproc: find a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, done: make(chan struct{})}
	s.cmd = exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"),
		"--appendonly", "no", "--save", "", "--daemonize", "no")
	if err := s.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("redisproc: start %s: %w", bin, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()

	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DisableIdentity: true})
	defer func() { _ = c.Close() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.done:
			s.Stop()
			return nil, errors.New("redisproc: redis-server exited during start-up (port taken?)")
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.Stop()
			return nil, fmt.Errorf("redisproc: redis-server on %s not ready: %w", s.Addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop kills the server, waits for it and removes its directory.
func (s *Server) Stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
	_ = os.RemoveAll(s.dir)
}

// Stop stops every server.
func Stop(servers []*Server) {
	for _, s := range servers {
		s.Stop()
	}
}

// Client returns a go-redis client to addr with the settings testutil gives
// the benchmarks' clients: 500ms dial, read, write and pool timeouts that
// follow the caller's context, one dial attempt, no command retries.
func Client(addr string) *redis.Client {
	const timeout = 500 * time.Millisecond
	return redis.NewClient(&redis.Options{
		Addr:                     addr,
		DialTimeout:              timeout,
		ReadTimeout:              timeout,
		WriteTimeout:             timeout,
		PoolTimeout:              timeout,
		DialerRetries:            1,
		MaxRetries:               -1,
		ContextTimeoutEnabled:    true,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}
