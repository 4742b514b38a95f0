package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e6344662/go-redlock/testutil"
)

// Clock faults with libfaketime (Debian's faketime package).
//
// In the clock scenarios every lock node runs under
// LD_PRELOAD=libfaketime.so.1 with a spec file of its own
// (FAKETIME_TIMESTAMP_FILE, re-read at every clock call: FAKETIME_NO_CACHE),
// which says "+0" (the real clock) until the nemesis changes it. Redis
// expires keys by that clock, and TIME reports it. A jump writes a larger
// offset to the file: the running server's clock steps forward at once. A
// fast clock restarts the server with "+<offset> x<rate>" (libfaketime
// counts the rate from the process's start, so changing the rate of a
// running process would make its clock jump), and ends by writing a plain
// offset at least as far ahead as the fast clock got, so that the node's
// clock never goes back.
//
// Debian's redis-server is linked with jemalloc, which reads the clock
// while it initialises; libfaketime, initialising on that first call,
// allocates, and the recursion aborts the server ("Unexpected recursive
// calls to clock_gettime()"). Preloading libc.so.6 after libfaketime makes
// the server allocate with glibc's malloc (it is found first), which does
// not read the clock. The server still reports jemalloc as its allocator.

// libfaketimeEnv overrides where libfaketime.so.1 is looked for.
const libfaketimeEnv = "REDLOCK_LIBFAKETIME"

// libfaketimePath returns the path of libfaketime.so.1, or "".
func libfaketimePath() string {
	var cands []string
	if p := os.Getenv(libfaketimeEnv); p != "" {
		cands = []string{p}
	} else {
		cands, _ = filepath.Glob("/usr/lib/*/faketime/libfaketime.so.1")
		cands = append(cands, "/usr/lib/faketime/libfaketime.so.1", "/usr/local/lib/faketime/libfaketime.so.1")
	}
	for _, p := range cands {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// requireFaketime returns libfaketime's path, or skips the test (fails it
// under REDLOCK_REQUIRE_REDIS=1, as in CI) when it is missing.
func requireFaketime(t *testing.T) string {
	t.Helper()
	if p := libfaketimePath(); p != "" {
		return p
	}
	msg := "libfaketime.so.1 not found (apt-get install faketime, or set " + libfaketimeEnv + "); the clock scenarios need it"
	if required, _ := strconv.ParseBool(os.Getenv(testutil.RequireRedisEnv)); required {
		t.Fatal(msg + " (" + testutil.RequireRedisEnv + " is set, so this is a failure)")
	}
	t.Skip(msg)
	return ""
}

// fakeClock is one lock node's clock under libfaketime.
type fakeClock struct {
	file string
	lib  string

	mu     sync.Mutex
	offset time.Duration // ahead of the real clock, as last set at rate 1
	pids   []int         // server processes that ran under this clock
}

func newFakeClock(dir, lib string) (*fakeClock, error) {
	c := &fakeClock{file: filepath.Join(dir, "faketime.rc"), lib: lib}
	return c, c.write(0, 1)
}

// env is the server's environment for this clock (testutil.WithEnv).
func (c *fakeClock) env() []string {
	return []string{
		"LD_PRELOAD=" + c.lib + " libc.so.6",
		"FAKETIME_TIMESTAMP_FILE=" + c.file,
		"FAKETIME_NO_CACHE=1",
	}
}

// write replaces the spec atomically (the server reads it at every clock
// call): the clock is offset ahead of the real one, running at rate.
func (c *fakeClock) write(offset time.Duration, rate int) error {
	spec := fmt.Sprintf("%+.6f", offset.Seconds())
	if rate != 1 {
		spec += " x" + strconv.Itoa(rate)
	}
	tmp := c.file + ".tmp"
	if err := os.WriteFile(tmp, []byte(spec+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, c.file)
}

// jump steps the running server's clock forward by d.
func (c *fakeClock) jump(d time.Duration) (time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
	return c.offset, c.write(c.offset, 1)
}

// fast restarts s with its clock running rate times as fast as the real
// one from now on, and returns a function that puts it back to rate 1
// without stepping it back.
func (c *fakeClock) fast(s *testutil.RedisServer, rate int) (func() error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.write(c.offset, rate); err != nil {
		return nil, err
	}
	// The restart is before libfaketime's start in the new process, so
	// the time from here overestimates how long the clock ran fast: the
	// offset set at the end is at least what the clock reached.
	started := time.Now()
	if err := c.restartLocked(s); err != nil {
		return nil, err
	}
	return func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.offset += time.Duration(rate-1) * time.Since(started)
		return c.write(c.offset, 1)
	}, nil
}

// restartLocked restarts s (AOF reloaded) and forgets the old process's
// libfaketime shared memory, which a SIGKILL leaves behind.
func (c *fakeClock) restartLocked(s *testutil.RedisServer) error {
	old := len(c.pids)
	if err := s.Restart(); err != nil {
		return err
	}
	if old > 0 {
		removeFaketimeShm(c.pids[old-1])
	}
	return c.notePIDLocked(s)
}

// notePID records the server's process id, for the shared memory cleanup.
func (c *fakeClock) notePID(s *testutil.RedisServer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.notePIDLocked(s)
}

func (c *fakeClock) notePIDLocked(s *testutil.RedisServer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := s.Do(ctx, "INFO", "server").Text()
	if err != nil {
		return err
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				return err
			}
			c.pids = append(c.pids, pid)
			return nil
		}
	}
	return errors.New("INFO server has no process_id")
}

// cleanup removes the shared memory of every process that ran under this
// clock; they are all gone by then.
func (c *fakeClock) cleanup() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pid := range c.pids {
		removeFaketimeShm(pid)
	}
}

// removeFaketimeShm removes libfaketime's shared memory and semaphore of a
// process that is gone (a process that exits cleanly removes them itself).
func removeFaketimeShm(pid int) {
	if alive(strconv.Itoa(pid)) {
		return
	}
	for _, f := range []string{"/dev/shm/faketime_shm_", "/dev/shm/sem.faketime_sem_"} {
		_ = os.Remove(f + strconv.Itoa(pid))
	}
}

// clockAhead measures how far s's clock (TIME) is ahead of ours.
func clockAhead(ctx context.Context, s *testutil.RedisServer) (time.Duration, error) {
	before := time.Now()
	v, err := s.Do(ctx, "TIME").Slice()
	after := time.Now()
	if err != nil {
		return 0, err
	}
	if len(v) != 2 {
		return 0, fmt.Errorf("TIME: %v", v)
	}
	sec, err1 := strconv.ParseInt(fmt.Sprint(v[0]), 10, 64)
	usec, err2 := strconv.ParseInt(fmt.Sprint(v[1]), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("TIME: %w", err)
	}
	node := time.Unix(sec, usec*1000)
	mid := before.Add(after.Sub(before) / 2)
	return node.Sub(mid), nil
}
