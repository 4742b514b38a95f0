package fencing_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
)

// requireStale asserts that err is a stale rejection with the given fields.
func requireStale(t *testing.T, err error, key string, tok, highest fencing.Token) {
	t.Helper()
	require.ErrorIs(t, err, fencing.ErrStaleToken)
	var se *fencing.StaleError
	require.ErrorAs(t, err, &se)
	require.Equal(t, fencing.StaleError{Key: key, Token: tok, Highest: highest}, *se)
}

func TestStaleError(t *testing.T) {
	err := &fencing.StaleError{Key: "k", Token: 5, Highest: 7}
	require.EqualError(t, err, `fencing: stale token 5 for "k": highest accepted is 7`)
	require.ErrorIs(t, err, fencing.ErrStaleToken)
	require.NotErrorIs(t, err, fencing.ErrInvalidToken)

	wrapped := errors.Join(errors.New("context"), err)
	requireStale(t, wrapped, "k", 5, 7)
}

func TestFenceCheck(t *testing.T) {
	type step struct {
		key     string
		tok     fencing.Token
		stale   bool          // want a *StaleError
		highest fencing.Token // Highest(key) after the step; StaleError.Highest when stale
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"first token accepted", []step{{"a", 3, false, 3}}},
		{"higher accepted", []step{{"a", 3, false, 3}, {"a", 4, false, 4}, {"a", 100, false, 100}}},
		{"equal accepted again", []step{{"a", 3, false, 3}, {"a", 3, false, 3}, {"a", 3, false, 3}}},
		{"lower rejected", []step{{"a", 7, false, 7}, {"a", 5, true, 7}, {"a", 7, false, 7}}},
		{"rejection does not lower", []step{{"a", 7, false, 7}, {"a", 1, true, 7}, {"a", 6, true, 7}}},
		{"max token", []step{{"a", ^fencing.Token(0), false, ^fencing.Token(0)}, {"a", 1 << 63, true, ^fencing.Token(0)}}},
		{"keys independent", []step{
			{"a", 9, false, 9},
			{"b", 2, false, 2}, // lower than a's, but b has its own history
			{"a", 3, true, 9},
			{"b", 3, false, 3},
			{"c", 1, false, 1},
			{"b", 2, true, 3},
		}},
		{"empty key is a key", []step{{"", 5, false, 5}, {"", 4, true, 5}, {"x", 4, false, 4}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f fencing.Fence // the zero value is ready to use
			for i, s := range tc.steps {
				err := f.Check(s.key, s.tok)
				if s.stale {
					requireStale(t, err, s.key, s.tok, s.highest)
				} else {
					require.NoError(t, err, "step %d", i)
				}
				require.Equal(t, s.highest, f.Highest(s.key), "step %d", i)
			}
		})
	}
}

func TestFenceZeroToken(t *testing.T) {
	var f fencing.Fence
	err := f.Check("k", 0)
	require.ErrorIs(t, err, fencing.ErrInvalidToken)
	require.NotErrorIs(t, err, fencing.ErrStaleToken)
	require.Zero(t, f.Highest("k"))

	require.NoError(t, f.Check("k", 4))
	require.ErrorIs(t, f.Check("k", 0), fencing.ErrInvalidToken)
	require.Equal(t, fencing.Token(4), f.Highest("k"))

	called := false
	err = f.Do(context.Background(), "k", 0, func() error { called = true; return nil })
	require.ErrorIs(t, err, fencing.ErrInvalidToken)
	require.False(t, called)
}

func TestFenceHighestUnknownKey(t *testing.T) {
	var f fencing.Fence
	require.Zero(t, f.Highest("nobody"))
}

// TestFenceCheckConcurrent checks many goroutines racing on a few keys: once
// a token has been accepted for a key, the key's highest never drops below
// it, rejections report a higher token, and in the end Highest is the
// largest token offered.
func TestFenceCheckConcurrent(t *testing.T) {
	var f fencing.Fence
	keys := []string{"a", "b", "c"}
	const goroutines, perGoroutine = 32, 300

	var mu sync.Mutex
	maxOffered := map[string]fencing.Token{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			local := map[string]fencing.Token{}
			for range perGoroutine {
				key := keys[r.IntN(len(keys))]
				tok := fencing.Token(1 + r.IntN(1000))
				local[key] = max(local[key], tok)
				err := f.Check(key, tok)
				if err != nil {
					var se *fencing.StaleError
					if !errors.As(err, &se) || se.Highest <= tok || se.Key != key || se.Token != tok {
						t.Errorf("Check(%q, %d) = %v", key, tok, err)
						return
					}
				}
				if h := f.Highest(key); h < tok && err == nil {
					t.Errorf("after accepting %d for %q, Highest = %d", tok, key, h)
					return
				}
			}
			mu.Lock()
			for k, v := range local {
				maxOffered[k] = max(maxOffered[k], v)
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, k := range keys {
		require.Equal(t, maxOffered[k], f.Highest(k), "key %q", k)
	}
}

// TestFenceDoOrder checks Do's promise: the operations it lets run for one
// key run one at a time and in an order in which tokens never decrease.
func TestFenceDoOrder(t *testing.T) {
	var f fencing.Fence
	keys := []string{"a", "b"}
	// One slice per key, so that Do's per-key serialisation is all that
	// guards it (a shared map would be written for both keys at once).
	ran := map[string]*[]fencing.Token{"a": new([]fencing.Token), "b": new([]fencing.Token)}
	running := map[string]int{}
	var mu sync.Mutex // guards running only; each ran slice is guarded by Do itself

	var wg sync.WaitGroup
	for g := range 24 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 2))
			for range 100 {
				key := keys[r.IntN(len(keys))]
				tok := fencing.Token(1 + r.IntN(500))
				err := f.Do(context.Background(), key, tok, func() error {
					mu.Lock()
					running[key]++
					n := running[key]
					mu.Unlock()
					if n != 1 {
						t.Errorf("%d operations running at once for %q", n, key)
					}
					*ran[key] = append(*ran[key], tok)
					mu.Lock()
					running[key]--
					mu.Unlock()
					return nil
				})
				if err != nil && !errors.Is(err, fencing.ErrStaleToken) {
					t.Errorf("Do: %v", err)
				}
			}
		})
	}
	wg.Wait()
	for _, k := range keys {
		got := *ran[k]
		require.NotEmpty(t, got)
		require.True(t, slices.IsSorted(got), "key %q ran tokens out of order: %v", k, got)
		require.Equal(t, slices.Max(got), f.Highest(k))
	}
}

func TestFenceDo(t *testing.T) {
	ctx := context.Background()

	t.Run("returns fn's error and keeps the token", func(t *testing.T) {
		var f fencing.Fence
		boom := errors.New("boom")
		require.ErrorIs(t, f.Do(ctx, "k", 5, func() error { return boom }), boom)
		require.Equal(t, fencing.Token(5), f.Highest("k"))
		requireStale(t, f.Check("k", 4), "k", 4, 5)
	})

	t.Run("stale token does not run fn", func(t *testing.T) {
		var f fencing.Fence
		require.NoError(t, f.Check("k", 9))
		called := false
		err := f.Do(ctx, "k", 8, func() error { called = true; return nil })
		requireStale(t, err, "k", 8, 9)
		require.False(t, called)
		require.NoError(t, f.Do(ctx, "k", 9, func() error { called = true; return nil }))
		require.True(t, called)
	})

	t.Run("waits for the running operation", func(t *testing.T) {
		var f fencing.Fence
		entered, release := make(chan struct{}), make(chan struct{})
		firstDone := make(chan error, 1)
		go func() {
			firstDone <- f.Do(ctx, "k", 5, func() error {
				close(entered)
				<-release
				return nil
			})
		}()
		<-entered

		secondRan := make(chan struct{})
		secondDone := make(chan error, 1)
		go func() {
			secondDone <- f.Do(ctx, "k", 7, func() error { close(secondRan); return nil })
		}()
		select {
		case <-secondRan:
			t.Fatal("a newer holder ran while an older one was still running")
		case <-time.After(50 * time.Millisecond):
		}
		// A token already known to be stale is refused at once, without
		// queueing behind the running operation.
		require.NoError(t, f.Check("other", 1))
		requireStale(t, f.Do(ctx, "k", 4, func() error { return nil }), "k", 4, 5)

		close(release)
		require.NoError(t, <-firstDone)
		require.NoError(t, <-secondDone)
		<-secondRan
		require.Equal(t, fencing.Token(7), f.Highest("k"))
	})

	t.Run("context ends while waiting", func(t *testing.T) {
		var f fencing.Fence
		entered, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- f.Do(ctx, "k", 5, func() error { close(entered); <-release; return nil })
		}()
		<-entered

		wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		err := f.Do(wctx, "k", 8, func() error { t.Error("fn ran"); return nil })
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, fencing.Token(5), f.Highest("k"), "a token that never got its turn is not recorded")

		close(release)
		require.NoError(t, <-done)
	})

	t.Run("cancelled context", func(t *testing.T) {
		var f fencing.Fence
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := f.Do(cctx, "k", 3, func() error { t.Error("fn ran"); return nil })
		require.ErrorIs(t, err, context.Canceled)
		require.Zero(t, f.Highest("k"))
	})

	t.Run("panic in fn releases the key", func(t *testing.T) {
		var f fencing.Fence
		require.Panics(t, func() {
			_ = f.Do(ctx, "k", 3, func() error { panic("boom") })
		})
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		require.NoError(t, f.Do(wctx, "k", 3, func() error { return nil }))
	})
}
