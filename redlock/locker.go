package redlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Locker grants leases on named resources over a fixed set of independent
// nodes. A lease is granted when a majority (N/2+1) of the nodes grant it
// within its validity. A Locker is safe for concurrent use.
//
// The node set must be the same in every process that locks the same
// resources: changing it while locks are held breaks mutual exclusion.
type Locker struct {
	cfg      Config
	nodes    []Node
	all      []int // 0..len(nodes)-1
	quorum   int
	seedStep string // seedStep(cfg)
	// delayArg is the granting scripts' rejoin-delay argument, in ms (the
	// rule off, a negative RejoinDelay, waits nothing: the scripts count
	// 0, their checks still apply), built once.
	delayArg any
	fair     bool // waiters queue on the nodes (Config.QueueTTL)
	// validity and drift are cfg.validity() and cfg.drift(), once.
	validity, drift time.Duration
	// data holds, by node index, what the Locker last learned of the
	// node's data (nil until it used the node).
	data []atomic.Pointer[nodeData]
	// hooks are the leases' release and end hooks (wait.go).
	hooks leaseHooks
	// slotted holds, by node index, whether the node refused the keys of
	// several hash slots in one script (a Redis Cluster): AcquireAll then
	// calls it once per slot group.
	slotted []atomic.Bool
	// inbox is the key whose release channel carries the locks the nodes
	// hand over to this Locker's waiters ("" when it has none: see
	// newInbox).
	inbox string

	mu     sync.Mutex
	closed bool
	// closing is closed by Close: it wakes the Acquire calls that wait.
	closing chan struct{}
	leases  map[*Lease]struct{}
	// yields holds, per lock key this Locker released while others were
	// waiting, until when its own next Acquire of that key stands back.
	yields map[string]time.Time
	// bg counts what Close waits for: attempts in flight, their clean-ups,
	// and leases until they end.
	bg      sync.WaitGroup
	hub     waitHub
	workers *workers
	inline  bool // a single node, called in the caller's goroutine
	// observing guards the Observer's calls (observe.go).
	observing observerGuard
}

// New returns a Locker over nodes. It rejects an empty node list, nil or
// duplicate nodes (one server must not count twice toward the quorum), and
// invalid Config values, with errors wrapping ErrInvalidConfig.
func New(nodes []Node, cfg Config) (*Locker, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: no nodes", ErrInvalidConfig)
	}
	seen := make(map[string]bool, len(nodes))
	for i, n := range nodes {
		if n == nil {
			return nil, fmt.Errorf("%w: node %d is nil", ErrInvalidConfig, i)
		}
		if seen[n.Addr()] {
			return nil, fmt.Errorf("%w: node %s given twice (one server must not count twice toward a quorum)", ErrInvalidConfig, n.Addr())
		}
		seen[n.Addr()] = true
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Locker{
		cfg:      cfg,
		seedStep: seedStep(cfg),
		delayArg: strconv.FormatInt(max(cfg.RejoinDelay, 0).Milliseconds(), 10),
		validity: cfg.validity(),
		drift:    cfg.drift(),
		fair:     cfg.QueueTTL > 0,
		data:     make([]atomic.Pointer[nodeData], len(nodes)),
		slotted:  make([]atomic.Bool, len(nodes)),
		inbox:    newInbox(cfg),
		nodes:    append([]Node(nil), nodes...),
		quorum:   len(nodes)/2 + 1,
		leases:   make(map[*Lease]struct{}),
		closing:  make(chan struct{}),
		yields:   make(map[string]time.Time),
		workers:  newWorkers(),
	}
	l.hooks = newLeaseHooks(l)
	l.hub = waitHub{l: l, keys: make(map[string]*keyWait)}
	if b, ok := nodes[0].(NodeBounded); ok && len(nodes) == 1 {
		// One node whose every call returns by its deadline: fan-outs call
		// it inline. Any other node is called on a worker, so that a call
		// that ignores its deadline never holds the caller up.
		l.inline = b.BoundedByContext()
	}
	l.all = make([]int, len(nodes))
	for i := range l.all {
		l.all[i] = i
	}
	return l, nil
}

// Config returns the Locker's configuration with defaults filled in.
func (l *Locker) Config() Config { return l.cfg }

// Key returns the lock key of resource on every node: KeyPrefix + "{" +
// resource + "}". The fence counter is Key + ":fence" and the release
// channel Key + ":released".
func (l *Locker) Key(resource string) string { return l.cfg.KeyPrefix + "{" + resource + "}" }

// checkResource rejects names the Locker will not lock.
func checkResource(resource string) error {
	if resource == "" {
		return fmt.Errorf("%w: empty resource name", ErrInvalidResource)
	}
	if len(resource) > MaxResourceLen {
		return fmt.Errorf("%w: resource name is %d bytes, over the limit of %d", ErrInvalidResource, len(resource), MaxResourceLen)
	}
	if resource[0] == '}' {
		// P{}...} has an empty hash tag: the lock and fence keys would fall
		// in different Redis Cluster slots.
		return fmt.Errorf("%w: resource name must not start with '}'", ErrInvalidResource)
	}
	return nil
}

// newInbox names a Locker's inbox: a key under the Locker's prefix (so
// that an ACL limited to the prefix's channels allows it) that no lock
// uses, its resource starting with "~" and a random id. The nodes announce
// a hand-over to one of the Locker's waiters on its release channel alone,
// so that the other processes waiting for the lock are not woken by it. A
// prefix with white space has no inbox (a place names its inbox between
// spaces): hand-overs are then announced on the lock's own channel.
func newInbox(cfg Config) string {
	if strings.ContainsAny(cfg.KeyPrefix, " \t\n\v\f\r") {
		return ""
	}
	return cfg.KeyPrefix + "{~" + newToken()[:16] + "}"
}

// newToken draws a fresh 128-bit token from crypto/rand, hex encoded.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// checkToken rejects strings that are not a token drawn by newToken.
func checkToken(token string) error {
	if len(token) != 32 {
		return fmt.Errorf("%w: token must be 32 hex digits, got %d characters", ErrInvalidResource, len(token))
	}
	if _, err := hex.DecodeString(token); err != nil {
		return fmt.Errorf("%w: token must be 32 hex digits", ErrInvalidResource)
	}
	return nil
}

// enter registers an operation that may start background work with Close,
// which waits for it; it reports false once the Locker is closed. The
// caller calls l.bg.Done when the operation ends, and may start background
// goroutines (l.bg.Add) until then.
func (l *Locker) enter() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.bg.Add(1)
	return true
}

// isClosed reports whether Close has been called.
func (l *Locker) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// track records a live lease so that Close can release it; it reports false
// when the Locker is closed.
func (l *Locker) track(ls *Lease) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.leases[ls] = struct{}{}
	return true
}

func (l *Locker) forget(ls *Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.leases, ls)
}

// Close releases every lease the Locker still holds, makes the Acquire
// calls that wait return ErrClosed once they have left the nodes' wait
// queues, waits for its background work to stop, and makes later
// acquisitions fail with ErrClosed.
// It does not close the nodes. Errors from releases are joined.
func (l *Locker) Close() error {
	l.mu.Lock()
	if !l.closed {
		close(l.closing)
	}
	l.closed = true
	leases := make([]*Lease, 0, len(l.leases))
	for ls := range l.leases {
		leases = append(leases, ls)
	}
	l.mu.Unlock()

	// The leases are released at once, not one after another: each may
	// wait for silent nodes (Lease.Release).
	errs := make([]error, len(leases))
	var wg sync.WaitGroup
	for i, ls := range leases {
		wg.Go(func() {
			if err := ls.Release(context.Background()); err != nil &&
				!errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrLeaseReleased) {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	l.bg.Wait()
	if err := l.hub.close(); err != nil {
		errs = append(errs, err)
	}
	l.workers.stop()
	return errors.Join(errs...)
}

// Renew extends the lock on resource held by token (from another process,
// such as a lease printed by redlock-cli acquire) on every node. It succeeds
// when a majority extended it, and returns the new validity. It fails with
// ErrNotHeld when the token holds the lock on fewer than a majority, and with
// ErrNoQuorum when no majority answered. It never re-creates an expired lock.
func (l *Locker) Renew(ctx context.Context, resource, token string) (time.Time, error) {
	if err := checkResource(resource); err != nil {
		return time.Time{}, err
	}
	if err := checkToken(token); err != nil {
		return time.Time{}, err
	}
	start := time.Now()
	keys := lockKeys(l.Key(resource))
	t := l.yesNo(ctx, "renew", l.allIdxs(), allAnswers, func(ctx context.Context, i int) (bool, error) {
		return renewAt(ctx, l.nodes[i], keys, token, l.cfg.LeaseDuration, l.seedStep, l.gateFor(ctx, i).marker(keys[0]))
	})
	validUntil := start.Add(l.validity)
	if err := l.verdict("renew", resource, t); err != nil {
		return time.Time{}, err
	}
	if !time.Now().Before(validUntil) {
		return time.Time{}, fmt.Errorf("%w: renewal of %q took longer than the lease validity", ErrNotHeld, resource)
	}
	return validUntil, nil
}

// Release deletes the lock on resource held by token on every node. It
// succeeds when a majority deleted it, fails with ErrNotHeld when the token
// held it on fewer than a majority, and with ErrNoQuorum when no majority
// answered. It never deletes a lock held by another token.
func (l *Locker) Release(ctx context.Context, resource, token string) error {
	if err := checkResource(resource); err != nil {
		return err
	}
	if err := checkToken(token); err != nil {
		return err
	}
	t := l.releaseOn(ctx, l.allIdxs(), l.hooks.release(releaseArgs{keys: lockKeys(l.Key(resource)), token: token}), allAnswers)
	return l.verdict("release", resource, t)
}
