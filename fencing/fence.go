package fencing

import (
	"context"
	"fmt"
	"sync"
)

// Fence is an in-memory fence for a resource served by one process: for
// each key it remembers the highest token it has accepted and refuses lower
// ones. The zero value is ready to use. A Fence is safe for concurrent use
// and must not be copied after first use.
//
// A Fence never forgets a key (forgetting would let a stale holder back in),
// so its memory grows with the number of distinct keys, a small entry each.
// It lives and dies with the process: a resource shared by several processes
// or restarted between writes needs a durable fence, such as Store.
type Fence struct {
	mu   sync.Mutex
	keys map[string]*fenceEntry
}

// fenceEntry is one key's state.
type fenceEntry struct {
	highest Token         // guarded by Fence.mu
	turn    chan struct{} // capacity 1; full while a Do runs for the key
}

// entryLocked returns key's entry, creating it. f.mu must be held.
func (f *Fence) entryLocked(key string) *fenceEntry {
	e := f.keys[key]
	if e == nil {
		if f.keys == nil {
			f.keys = make(map[string]*fenceEntry)
		}
		e = &fenceEntry{turn: make(chan struct{}, 1)}
		f.keys[key] = e
	}
	return e
}

// Check accepts t for key when t is not below the highest token accepted
// for key so far, and records it; a token equal to the highest is accepted
// again, since one holder may write several times. A lower token is refused
// with a *StaleError, and token 0 with an error wrapping ErrInvalidToken;
// neither changes the fence. Once Check has accepted t, it refuses every
// token below t for key.
//
// Check is only a gate: it is not atomic with whatever the caller does after
// it returns, so a holder that passes Check and then stalls can still act
// after a newer holder has. When the operation runs in this process, Do
// closes that gap.
func (f *Fence) Check(key string, t Token) error {
	if t == 0 {
		return zeroTokenError(key)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.entryLocked(key)
	if t < e.highest {
		return &StaleError{Key: key, Token: t, Highest: e.highest}
	}
	e.highest = t
	return nil
}

// Highest returns the highest token accepted for key, or 0 when none has
// been.
func (f *Fence) Highest(key string) Token {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.keys[key]; e != nil {
		return e.highest
	}
	return 0
}

// Do runs fn under the fence: it waits until no other Do runs for key, then
// checks and records t as Check does, and runs fn only if t was accepted,
// returning fn's error. Do calls for one key therefore run one at a time, in
// an order in which their accepted tokens never decrease: every effect fn
// completes before it returns happens before the effects of any later holder
// going through Do, which is the guarantee fencing exists for.
//
// A token found stale is refused at once, without waiting. If ctx ends
// while Do waits for its turn, Do returns an error wrapping ctx.Err() and
// records nothing. The token is recorded before fn runs and stays recorded
// whatever fn returns: a holder of t existing proves every lower token
// stale.
//
// Do serializes only with other Do calls for key, not with Check. fn must
// not call Do for the same key on the same Fence (it would wait for itself
// until ctx ends).
func (f *Fence) Do(ctx context.Context, key string, t Token, fn func() error) error {
	if t == 0 {
		return zeroTokenError(key)
	}
	f.mu.Lock()
	e := f.entryLocked(key)
	highest := e.highest
	f.mu.Unlock()
	if t < highest {
		return &StaleError{Key: key, Token: t, Highest: highest}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fencing: waiting for key %q: %w", key, err)
	}
	select {
	case e.turn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("fencing: waiting for key %q: %w", key, ctx.Err())
	}
	defer func() { <-e.turn }()
	if err := f.Check(key, t); err != nil {
		return err
	}
	return fn()
}
