package fencing

import "sync"

// RWFence is an in-memory fence for a resource guarded by a read-write
// lock (redlock.RWLock), whose readers hold tokens of their own at the
// same time: it accepts any reader whose token is not below the last
// writer's, and a write only from a token not below every token it has
// accepted, reads included. Readers' tokens exceed every earlier writer's
// and a writer's every earlier token, so a current reader is never
// refused for another reader's token, and a stale writer (paused past its
// lease, then readers or a new writer came) is refused. The zero value is
// ready to use; an RWFence is safe for concurrent use and must not be
// copied after first use. Like Fence it never forgets a key and lives
// with the process; it is a gate, not atomic with what follows it.
type RWFence struct {
	mu   sync.Mutex
	keys map[string]*rwEntry
}

// rwEntry is one key's state: the highest writer's token accepted, and
// the highest token of any kind.
type rwEntry struct {
	writer, highest Token
}

func (f *RWFence) entryLocked(key string) *rwEntry {
	e := f.keys[key]
	if e == nil {
		if f.keys == nil {
			f.keys = make(map[string]*rwEntry)
		}
		e = &rwEntry{}
		f.keys[key] = e
	}
	return e
}

// CheckRead accepts token t for a read of key when t is not below the
// highest writer's token accepted for key, and records it; a lower token
// is refused with a *StaleError (Highest: that writer's token), and token
// 0 with an error wrapping ErrInvalidToken, neither changing the fence.
// Readers' tokens may arrive in any order among themselves.
func (f *RWFence) CheckRead(key string, t Token) error {
	if t == 0 {
		return zeroTokenError(key)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.entryLocked(key)
	if t < e.writer {
		return &StaleError{Key: key, Token: t, Highest: e.writer}
	}
	e.highest = max(e.highest, t)
	return nil
}

// CheckWrite accepts token t for a write to key when t is not below any
// token accepted for key so far, reads included (equal: one writer
// writing again), and records it as the writer's; a lower token is
// refused with a *StaleError, and token 0 with an error wrapping
// ErrInvalidToken, neither changing the fence.
func (f *RWFence) CheckWrite(key string, t Token) error {
	if t == 0 {
		return zeroTokenError(key)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.entryLocked(key)
	if t < e.highest {
		return &StaleError{Key: key, Token: t, Highest: e.highest}
	}
	e.writer, e.highest = t, t
	return nil
}
