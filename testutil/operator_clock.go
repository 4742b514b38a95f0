package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// LibfaketimeEnv overrides where FakeClock looks for libfaketime.so.1.
const LibfaketimeEnv = "REDLOCK_LIBFAKETIME"

// FakeClock is a wall clock that the servers started with its Option run
// under (libfaketime, Debian's faketime package): their TIME, and the
// clock they expire keys by, are the real clock plus an offset that Set
// changes at once, forward or back, while they run (the spec file is
// re-read at every clock call). One FakeClock may drive several servers,
// whose clocks then step together, as an NTP step on every host would.
type FakeClock struct {
	file string
	lib  string
	mu   sync.Mutex
	off  time.Duration
}

// NewFakeClock returns a clock at the real time (offset 0). It skips the
// test when libfaketime is missing (fails it under REDLOCK_REQUIRE_REDIS=1).
func NewFakeClock(t testing.TB) *FakeClock {
	t.Helper()
	lib := os.Getenv(LibfaketimeEnv)
	if lib == "" {
		cands, _ := filepath.Glob("/usr/lib/*/faketime/libfaketime.so.1")
		cands = append(cands, "/usr/lib/faketime/libfaketime.so.1", "/usr/local/lib/faketime/libfaketime.so.1")
		for _, p := range cands {
			if _, err := os.Stat(p); err == nil {
				lib = p
				break
			}
		}
	}
	if lib == "" {
		msg := "libfaketime.so.1 not found (apt-get install faketime, or set " + LibfaketimeEnv + ")"
		if required, _ := strconv.ParseBool(os.Getenv(RequireRedisEnv)); required {
			t.Fatal(msg + " (" + RequireRedisEnv + " is set, so this is a failure)")
		}
		t.Skip(msg)
	}
	c := &FakeClock{file: filepath.Join(t.TempDir(), "faketime.rc"), lib: lib}
	if err := c.Set(0); err != nil {
		t.Fatalf("testutil.NewFakeClock: %v", err)
	}
	return c
}

// Option runs a server under this clock (WithEnv). Debian's redis-server
// allocates with jemalloc, which reads the clock while libfaketime
// initialises; preloading libc.so.6 after libfaketime avoids the
// recursion.
func (c *FakeClock) Option() Option {
	return WithEnv("LD_PRELOAD="+c.lib+" libc.so.6", "FAKETIME_TIMESTAMP_FILE="+c.file, "FAKETIME_NO_CACHE=1")
}

// Set puts the clock offset ahead of the real one (negative: behind); the
// servers' clocks step to it at once.
func (c *FakeClock) Set(offset time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	tmp := c.file + ".tmp"
	if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%+.6f\n", offset.Seconds())), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, c.file); err != nil {
		return err
	}
	c.off = offset
	return nil
}

// Offset returns the offset last set.
func (c *FakeClock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.off
}
