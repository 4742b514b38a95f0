// Package impls puts the lock implementations under comparison behind one
// small interface, so that every benchmark drives each of them through the
// same loop: redlock (this repository), go-redsync v4, bsm/redislock and
// rueidis's rueidislock (one node only) and the raw floor (the two parallel round trips any Redlock
// client needs, done directly with go-redis).
package impls

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/scripts"
)

// LeaseDuration is the TTL every implementation sets on its lock keys.
const LeaseDuration = 10 * time.Second

// ErrNotAcquired is returned by the floor and redislock workers when the
// lock is busy (the peers' own errors are passed through as they are).
var ErrNotAcquired = errors.New("impls: not acquired")

// Worker holds at most one lock at a time. It is used by one goroutine.
type Worker interface {
	// Acquire takes the lock on key: one attempt for a try-style impl, or
	// waiting until it is free for a waiting impl.
	Acquire(ctx context.Context, key string) error
	// Release releases the lock taken by the last successful Acquire.
	Release(ctx context.Context) error
}

// Impl is one implementation, configured for one benchmark.
type Impl struct {
	// Name is the value of the benchmark's impl= key.
	Name string
	// NewWorker makes a worker; callers make one per goroutine.
	NewWorker func() Worker
	// Close frees what the implementation opened (lockers, not clients).
	Close func() error
	// Attempts, when set, returns how many acquisition attempts were made
	// so far (redlock in Wait mode, from its Observer).
	Attempts func() int64
}

// Mode selects how Acquire behaves when the lock is busy.
type Mode int

const (
	// Try makes exactly one attempt (uncontended benchmarks).
	Try Mode = iota
	// Wait retries until the lock is taken or ctx ends (hot key).
	Wait
)

// Redlock is this repository's Locker over nodes. TryAcquire or Acquire
// plus Lease.Release, with fencing tokens (the library always fences).
// With shared set every worker uses one Locker (one pub/sub subscription
// per node for all its waiters); otherwise each worker gets its own Locker,
// as separate processes would have.
//
// tune, if given, adjusts the Config (e.g. QueueTTL -1: no wait queue).
func Redlock(name string, nodes []redlock.Node, mode Mode, shared bool, tune ...func(*redlock.Config)) (*Impl, error) {
	// The servers start fresh, without persistence, for every benchmark:
	// the rejoin delay would keep them out for a lease. The benchmarks
	// measure the steady state.
	cfg := redlock.Config{LeaseDuration: LeaseDuration, RejoinDelay: -1}
	for _, f := range tune {
		f(&cfg)
	}
	var attempts atomic.Int64
	if mode == Wait {
		// Count attempts only where waiting makes them vary; the
		// uncontended benchmarks run without an Observer.
		cfg.Observer = redlock.ObserverFunc(func(e redlock.Event) {
			if e.Kind == redlock.EventAttempt {
				attempts.Add(1)
			}
		})
	}
	var (
		mu      sync.Mutex
		lockers []*redlock.Locker
	)
	newLocker := func() (*redlock.Locker, error) {
		l, err := redlock.New(nodes, cfg)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		lockers = append(lockers, l)
		mu.Unlock()
		return l, nil
	}
	// The first Locker checks the config; later ones cannot fail.
	one, err := newLocker()
	if err != nil {
		return nil, err
	}
	// Without sharing, the first worker takes that Locker, the others their own.
	var first atomic.Bool
	first.Store(true)
	impl := &Impl{
		Name: name,
		NewWorker: func() Worker {
			l := one
			if !shared && !first.CompareAndSwap(true, false) {
				l, _ = newLocker()
			}
			return &redlockWorker{l: l, wait: mode == Wait}
		},
		Close: func() error {
			mu.Lock()
			defer mu.Unlock()
			var errs []error
			for _, l := range lockers {
				errs = append(errs, l.Close())
			}
			lockers = nil
			return errors.Join(errs...)
		},
	}
	if mode == Wait {
		impl.Attempts = attempts.Load
	}
	return impl, nil
}

type redlockWorker struct {
	l     *redlock.Locker
	wait  bool
	lease *redlock.Lease
}

func (w *redlockWorker) Acquire(ctx context.Context, key string) error {
	var err error
	if w.wait {
		w.lease, err = w.l.Acquire(ctx, key)
	} else {
		w.lease, err = w.l.TryAcquire(ctx, key)
	}
	return err
}

func (w *redlockWorker) Release(ctx context.Context) error {
	ls := w.lease
	w.lease = nil
	return ls.Release(ctx)
}

// Holder is implemented by workers that can name the lock they hold, when
// that is not simply the key given to Acquire (a semaphore's slot).
type Holder interface {
	// Held returns the resource of the lock taken by the last successful
	// Acquire.
	Held() string
}

// RedlockSemaphore is this repository's Semaphore of k slots, on one Locker
// shared by every worker: Locker.NewSemaphore(key, k) once per key, then
// Semaphore.Acquire (waiting, woken by the release of any slot) and
// Lease.Release. Attempts counts attempts at single slots, from the
// Locker's Observer as for Redlock in Wait mode.
func RedlockSemaphore(name string, nodes []redlock.Node, k int) (*Impl, error) {
	var attempts atomic.Int64
	l, err := redlock.New(nodes, redlock.Config{
		LeaseDuration: LeaseDuration,
		RejoinDelay:   -1, // fresh servers, as for Redlock
		Observer: redlock.ObserverFunc(func(e redlock.Event) {
			if e.Kind == redlock.EventAttempt {
				attempts.Add(1)
			}
		}),
	})
	if err != nil {
		return nil, err
	}
	var (
		mu   sync.Mutex
		sems = map[string]*redlock.Semaphore{}
	)
	semaphore := func(key string) (*redlock.Semaphore, error) {
		mu.Lock()
		defer mu.Unlock()
		if s, ok := sems[key]; ok {
			return s, nil
		}
		s, err := l.NewSemaphore(key, k)
		if err != nil {
			return nil, err
		}
		sems[key] = s
		return s, nil
	}
	return &Impl{
		Name:      name,
		NewWorker: func() Worker { return &semaphoreWorker{semaphore: semaphore} },
		Close:     l.Close,
		Attempts:  attempts.Load,
	}, nil
}

type semaphoreWorker struct {
	semaphore func(key string) (*redlock.Semaphore, error)
	lease     *redlock.Lease
}

func (w *semaphoreWorker) Acquire(ctx context.Context, key string) error {
	s, err := w.semaphore(key)
	if err != nil {
		return err
	}
	w.lease, err = s.Acquire(ctx)
	return err
}

func (w *semaphoreWorker) Release(ctx context.Context) error {
	ls := w.lease
	w.lease = nil
	return ls.Release(ctx)
}

func (w *semaphoreWorker) Held() string { return w.lease.Resource() }

// RedsyncOptions are the redsync settings of one benchmark.
type RedsyncOptions struct {
	// Tries is redsync's WithTries; 1 for a single attempt.
	Tries int
	// RetryDelay, when non-zero, replaces redsync's default delay between
	// tries (uniform in [50ms, 250ms)).
	RetryDelay time.Duration
}

// Redsync is go-redsync v4 over its go-redis v9 pools: one Mutex per lock
// (NewMutex + LockContext, UnlockContext), expiry LeaseDuration, every other
// setting at redsync's default (drift factor 0.01, no fail-fast: each round
// waits for every node).
func Redsync(name string, clients []*redis.Client, o RedsyncOptions) *Impl {
	pools := make([]redsyncredis.Pool, len(clients))
	for i, c := range clients {
		pools[i] = goredis.NewPool(c)
	}
	rs := redsync.New(pools...)
	opts := []redsync.Option{redsync.WithExpiry(LeaseDuration), redsync.WithTries(max(o.Tries, 1))}
	if o.RetryDelay > 0 {
		opts = append(opts, redsync.WithRetryDelay(o.RetryDelay))
	}
	return &Impl{
		Name:      name,
		NewWorker: func() Worker { return &redsyncWorker{rs: rs, opts: opts} },
		Close:     func() error { return nil },
	}
}

type redsyncWorker struct {
	rs   *redsync.Redsync
	opts []redsync.Option
	m    *redsync.Mutex
}

func (w *redsyncWorker) Acquire(ctx context.Context, key string) error {
	w.m = w.rs.NewMutex(key, w.opts...)
	return w.m.LockContext(ctx)
}

func (w *redsyncWorker) Release(ctx context.Context) error {
	ok, err := w.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock found no lock")
	}
	return err
}

// Redislock is bsm/redislock on one node: Obtain (no retry) and Release.
func Redislock(name string, client *redis.Client) *Impl {
	c := redislock.New(client)
	return &Impl{
		Name:      name,
		NewWorker: func() Worker { return &redislockWorker{c: c} },
		Close:     func() error { return nil },
	}
}

type redislockWorker struct {
	c    *redislock.Client
	lock *redislock.Lock
}

func (w *redislockWorker) Acquire(ctx context.Context, key string) error {
	var err error
	w.lock, err = w.c.Obtain(ctx, key, LeaseDuration, nil)
	if errors.Is(err, redislock.ErrNotObtained) {
		err = ErrNotAcquired
	}
	return err
}

func (w *redislockWorker) Release(ctx context.Context) error {
	return w.lock.Release(ctx)
}

// compareAndDelete deletes KEYS[1] only when it still holds ARGV[1].
var compareAndDelete = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// Floor is the least any Redlock client must do: SET key token NX PX on
// every node in parallel (one goroutine per node, waiting for all), then
// the Lua compare-and-delete (EVALSHA) on every node the same way. No
// fencing, no validity bookkeeping, no renewal. With one node it still
// spawns its goroutine; redislock is the inline single-node reference.
func Floor(name string, clients []*redis.Client) *Impl {
	return &Impl{
		Name: name,
		NewWorker: func() Worker {
			return &floorWorker{clients: clients, ok: make([]bool, len(clients)), errs: make([]error, len(clients))}
		},
		Close: func() error { return nil },
	}
}

type floorWorker struct {
	clients    []*redis.Client
	key, token string
	ok         []bool
	errs       []error
}

func (w *floorWorker) Acquire(ctx context.Context, key string) error {
	w.key, w.token = key, token()
	w.fanout(func(c *redis.Client) (bool, error) {
		return c.SetNX(ctx, w.key, w.token, LeaseDuration).Result()
	})
	if w.count() >= len(w.clients)/2+1 {
		return nil
	}
	_ = w.Release(context.WithoutCancel(ctx))
	return w.failure()
}

func (w *floorWorker) Release(ctx context.Context) error {
	w.fanout(func(c *redis.Client) (bool, error) {
		n, err := compareAndDelete.Run(ctx, c, []string{w.key}, w.token).Int64()
		return n == 1, err
	})
	if w.count() >= len(w.clients)/2+1 {
		return nil
	}
	return w.failure()
}

func (w *floorWorker) fanout(call func(*redis.Client) (bool, error)) {
	var wg sync.WaitGroup
	for i, c := range w.clients {
		wg.Go(func() { w.ok[i], w.errs[i] = call(c) })
	}
	wg.Wait()
}

func (w *floorWorker) count() int {
	n := 0
	for _, ok := range w.ok {
		if ok {
			n++
		}
	}
	return n
}

func (w *floorWorker) failure() error {
	if err := errors.Join(w.errs...); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	return ErrNotAcquired
}

// token returns a random 128-bit token, hex encoded, like redlock's.
func token() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Unbatched returns nodes whose Eval is EVALSHA on the node's client,
// then EVAL when the server lacks the script (as go-redis's Script.Run
// does), one round trip per call: redisnode.Node's transport before it
// batched concurrent calls (issue 24), as the baseline of the batching.
// Everything else (Uptime, Subscribe, the bound on calls) is the
// redisnode.Node's own.
func Unbatched(nodes []redlock.Node) []redlock.Node {
	out := make([]redlock.Node, len(nodes))
	for i, n := range nodes {
		out[i] = unbatchedNode{n.(*redisnode.Node)}
	}
	return out
}

type unbatchedNode struct{ *redisnode.Node }

func (n unbatchedNode) Eval(ctx context.Context, script *scripts.Script, keys []string, args ...any) (any, error) {
	c := n.Client()
	cmd := c.EvalSha(ctx, script.Hash(), keys, args...)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd = c.Eval(ctx, script.Source(), keys, args...)
	}
	return cmd.Result()
}

// Rueidislock is rueidis's rueidislock on one node (KeyMajority 1, so one
// key per lock): TryWithContext and the returned cancel, which releases the
// lock and waits for the DEL. Its client auto-pipelines the commands of
// concurrent goroutines on shared connections. Keys live LeaseDuration.
func Rueidislock(name, addr string) (*Impl, error) {
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption:   rueidis.ClientOption{InitAddress: []string{addr}},
		KeyMajority:    1,
		KeyValidity:    LeaseDuration,
		NoLoopTracking: true,
	})
	if err != nil {
		return nil, err
	}
	return &Impl{
		Name:      name,
		NewWorker: func() Worker { return &rueidislockWorker{l: l} },
		Close:     func() error { l.Close(); return nil },
	}, nil
}

type rueidislockWorker struct {
	l       rueidislock.Locker
	release context.CancelFunc
}

func (w *rueidislockWorker) Acquire(ctx context.Context, key string) error {
	_, cancel, err := w.l.TryWithContext(ctx, key)
	if errors.Is(err, rueidislock.ErrNotLocked) {
		err = ErrNotAcquired
	}
	w.release = cancel
	return err
}

func (w *rueidislockWorker) Release(context.Context) error {
	w.release()
	return nil
}
