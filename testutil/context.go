package testutil

import (
	"context"
	"testing"
	"time"
)

// DefaultTestTimeout bounds the context returned by Context: long enough for
// any single step of a test on a loaded machine, short enough that a test
// that would otherwise wait forever fails with a message instead of hanging
// until the go test timeout.
const DefaultTestTimeout = 30 * time.Second

// Context returns a context that ends after DefaultTestTimeout, or a second
// before the test binary's own deadline if that comes first, and is
// cancelled when the test ends. Use it instead of context.Background for
// every call that may wait (Acquire, Campaign, a node call), so that a bug
// makes the test fail instead of hang.
func Context(t testing.TB) context.Context {
	t.Helper()
	d := DefaultTestTimeout
	if tt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := tt.Deadline(); ok {
			d = min(d, max(time.Until(dl)-time.Second, time.Second))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
