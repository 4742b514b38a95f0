package redlock

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Defaults for the zero values of Config.
const (
	// DefaultLeaseDuration is the lease TTL when Config.LeaseDuration is zero.
	DefaultLeaseDuration = 10 * time.Second
	// DefaultMaxNodeCallTimeout caps the default NodeCallTimeout.
	DefaultMaxNodeCallTimeout = 5 * time.Second
	// DefaultKeyPrefix is the key prefix when Config.KeyPrefix is empty.
	DefaultKeyPrefix = "redlock:"
	// MaxResourceLen is the longest resource name, in bytes.
	MaxResourceLen = 1024
	// MaxOwnerLen is the longest owner label, in bytes.
	MaxOwnerLen = 256
	// MinLeaseDuration is the shortest lease duration New accepts.
	MinLeaseDuration = 10 * time.Millisecond

	// defaultClockDriftFactor is the drift factor when
	// Config.ClockDriftFactor is zero.
	defaultClockDriftFactor = 0.01
	// maxLeaseDuration is the longest lease duration, rejoin delay and
	// queue TTL New accepts.
	maxLeaseDuration = 24 * time.Hour
	// minNodeCallTimeout is the shortest NodeCallTimeout New accepts.
	minNodeCallTimeout = time.Millisecond
	// driftFloor is added to every drift allowance (the Redis distlock rule).
	driftFloor = 2 * time.Millisecond
)

// Config configures a Locker. The zero value of every field means its
// default; New rejects invalid values with an error wrapping ErrInvalidConfig.
type Config struct {
	// LeaseDuration is the TTL set on the nodes at every acquisition and
	// renewal. Defaults to DefaultLeaseDuration; must be at least
	// MinLeaseDuration and at most 24h.
	LeaseDuration time.Duration
	// ClockDriftFactor is the fraction of LeaseDuration held back for the
	// difference in clock rates between this process and the nodes: a lease
	// is valid for LeaseDuration - (ceil(LeaseDuration*ClockDriftFactor)+2ms)
	// from the start of its attempt. Defaults to 0.01;
	// must be in (0, 1).
	ClockDriftFactor float64
	// NodeCallTimeout bounds every call to one node. Defaults to the smaller
	// of DefaultMaxNodeCallTimeout and LeaseDuration/3; must be at least
	// 1ms and below the lease's validity.
	NodeCallTimeout time.Duration
	// NewBackOff makes a fresh retry policy for each Acquire and each renewal
	// cycle. Defaults to exponential backoff from 100ms to 1s with jitter and
	// no elapsed-time limit (the caller's context and the lease's validity
	// bound the retries).
	NewBackOff func() backoff.BackOff
	// KeyPrefix is prepended to every key. Defaults to DefaultKeyPrefix; it
	// must not contain braces (the resource is the keys' hash tag).
	KeyPrefix string
	// Owner is a label stored with every lock so that operators can see who
	// holds it; it is not used for ownership checks. Defaults to
	// "hostname:pid"; at most MaxOwnerLen bytes.
	Owner string
	// RejoinDelay keeps a node that may have lost data out of the quorum
	// for that long after the loss was noticed (docs/design.md §6.2).
	// Every script that can grant checks the node in band, on the node:
	// its identity (INFO replication: a replica refuses, ErrReadOnly; a new
	// replication id after any restart, durable or not, a failover or a
	// failback is a loss) and its marker key, named for the db (a missing
	// marker: first use of a server or db, FLUSHALL, FLUSHDB, SWAPDB, a
	// restart without data; a clock behind the time the marker last saw).
	// Such a node refuses to grant, with its reason (ErrRejoining), for
	// RejoinDelay from when the loss was noticed; a recorded sit-out is
	// never shortened. A lock key lost (evicted, deleted) while its fence
	// counter records a live lease is refused until that lease's end.
	// It must be at least the longest lease of every Locker that uses the
	// same nodes: after that long no lease the node forgot can still be
	// valid. New refuses a positive RejoinDelay below this Locker's
	// LeaseDuration; the other Lockers' leases are the deployment's to
	// cover, as in the Redlock paper (a restarted node waits the longest
	// lease in use): no record on a node can enforce it, since a loss takes
	// every record (docs/design.md §6.2). The price: every restart, and the
	// first use of a fresh server, sits out the delay. A negative value
	// turns the wait off (the delay counts as 0: the identity, replica and
	// lost-key checks and the counters' floor still apply, nothing is
	// waited), for every Locker that shares the node when this one notices
	// a loss first. Node clocks must differ by less than 9.5 s
	// and less than RejoinDelay (docs/design.md §6.1). A node whose INFO is
	// refused (an ACL) grants nothing; a server without a replication
	// section in INFO (a stand-in such as miniredis) is not checked; a
	// node whose maxmemory-policy the Locker reads as allkeys-* is refused
	// (ErrEvictsLocks). The marker names the db the Node says it uses
	// (NodeDB; redisnode.Node: its client's DB). Defaults to LeaseDuration;
	// when positive, at least LeaseDuration and at most 24h.
	RejoinDelay time.Duration
	// QueueTTL is how long a waiting Acquire keeps its place in the lock's
	// wait queue on the nodes without renewing it. Acquire is fair: a
	// waiter takes a ticket on the nodes, a release wakes only the head of
	// the queue, and a node grants a free lock only to the head while its
	// ticket is alive, so waiters from any process take turns in arrival
	// order instead of splitting the nodes' votes (docs/design.md, section
	// 11.1). A waiter renews its place at least every QueueTTL/3; a waiter
	// that dies holds up the lock for at most QueueTTL after its turn
	// comes. TryAcquire never queues, and is refused while others wait.
	// Defaults to LeaseDuration (or twice NodeCallTimeout if that is longer); must be at least twice NodeCallTimeout and
	// at most 24h; a negative value turns the queue off (waiters
	// then race for a released lock, as with other Redlock clients).
	QueueTTL time.Duration
	// DisableHandOver turns the hand-over off. By default a release hands
	// the lock to the head of the wait queue inside the release script, so
	// that under sustained contention the next waiter holds it without an
	// attempt of its own (docs/design.md, section 11.2); turned off, the
	// release only names the head, which then makes an attempt. Has no
	// effect without the queue.
	DisableHandOver bool
	// Logger receives structured events: lease acquired, released and lost,
	// and node failures. Tokens are never logged. Defaults to nil: silent.
	Logger *slog.Logger
	// Observer receives every event with its latency and node counts, to
	// feed a metrics system. Defaults to nil.
	Observer Observer
}

// drift is the validity held back for clock drift.
func (c Config) drift() time.Duration {
	return time.Duration(math.Ceil(float64(c.LeaseDuration)*c.ClockDriftFactor)) + driftFloor
}

// validity is how long a lease lasts from the start of its attempt.
func (c Config) validity() time.Duration { return c.LeaseDuration - c.drift() }

func defaultBackOff() backoff.BackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(100*time.Millisecond),
		backoff.WithMaxInterval(time.Second),
		backoff.WithMaxElapsedTime(0),
	)
}

func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// withDefaults fills in zero values and validates every field.
func (c Config) withDefaults() (Config, error) {
	c, err := c.withTimingDefaults()
	if err != nil {
		return c, err
	}
	if c.NewBackOff == nil {
		c.NewBackOff = defaultBackOff
	} else if c.NewBackOff() == nil {
		return c, fmt.Errorf("%w: NewBackOff returned nil", ErrInvalidConfig)
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	if strings.ContainsAny(c.KeyPrefix, "{}") {
		return c, fmt.Errorf("%w: KeyPrefix %q contains a brace: the resource's hash tag {R} must be the key's first", ErrInvalidConfig, c.KeyPrefix)
	}
	if c.Owner == "" {
		c.Owner = defaultOwner()
	}
	if len(c.Owner) > MaxOwnerLen {
		return c, fmt.Errorf("%w: Owner is %d bytes, over the limit of %d", ErrInvalidConfig, len(c.Owner), MaxOwnerLen)
	}
	return c, nil
}

// withTimingDefaults fills in and validates the timing parameters, one
// step per parameter in this order: each default may depend on the
// parameters before it (the call timeout on the lease, the queue's TTL on
// both).
func (c Config) withTimingDefaults() (Config, error) {
	for _, step := range []func(*Config) error{
		(*Config).leaseDefaults,
		(*Config).driftDefaults,
		(*Config).callTimeoutDefaults,
		(*Config).rejoinDefaults,
		(*Config).queueDefaults,
	} {
		if err := step(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// leaseDefaults fills in and checks LeaseDuration.
func (c *Config) leaseDefaults() error {
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.LeaseDuration < MinLeaseDuration || c.LeaseDuration > maxLeaseDuration {
		return fmt.Errorf("%w: LeaseDuration %s is outside [%s, %s]", ErrInvalidConfig, c.LeaseDuration, MinLeaseDuration, maxLeaseDuration)
	}
	return nil
}

// driftDefaults fills in and checks ClockDriftFactor, and that the lease
// keeps some validity after the drift allowance.
func (c *Config) driftDefaults() error {
	if c.ClockDriftFactor == 0 {
		c.ClockDriftFactor = defaultClockDriftFactor
	}
	if !(c.ClockDriftFactor > 0 && c.ClockDriftFactor < 1) { // also rejects NaN
		return fmt.Errorf("%w: ClockDriftFactor %v is outside (0, 1)", ErrInvalidConfig, c.ClockDriftFactor)
	}
	if c.validity() <= 0 {
		return fmt.Errorf("%w: LeaseDuration %s leaves no validity after the drift allowance %s", ErrInvalidConfig, c.LeaseDuration, c.drift())
	}
	return nil
}

// callTimeoutDefaults fills in and checks NodeCallTimeout: a call must
// end within the lease's validity.
func (c *Config) callTimeoutDefaults() error {
	if c.NodeCallTimeout == 0 {
		c.NodeCallTimeout = min(DefaultMaxNodeCallTimeout, c.LeaseDuration/3)
	}
	if c.NodeCallTimeout < minNodeCallTimeout {
		return fmt.Errorf("%w: NodeCallTimeout %s is below the minimum %s", ErrInvalidConfig, c.NodeCallTimeout, minNodeCallTimeout)
	}
	if c.NodeCallTimeout >= c.validity() {
		return fmt.Errorf("%w: NodeCallTimeout %s must be below the lease validity %s", ErrInvalidConfig, c.NodeCallTimeout, c.validity())
	}
	return nil
}

// rejoinDefaults fills in and checks RejoinDelay: a positive delay must
// cover this Locker's own leases (the longest lease of the other Lockers on
// the same nodes is the deployment's to ensure, docs/design.md §6.2).
func (c *Config) rejoinDefaults() error {
	if c.RejoinDelay == 0 {
		c.RejoinDelay = c.LeaseDuration
	}
	if c.RejoinDelay > maxLeaseDuration {
		return fmt.Errorf("%w: RejoinDelay %s is over the maximum %s", ErrInvalidConfig, c.RejoinDelay, maxLeaseDuration)
	}
	if c.RejoinDelay > 0 && c.RejoinDelay < c.LeaseDuration {
		return fmt.Errorf("%w: RejoinDelay %s is shorter than LeaseDuration %s: a node that lost data would grant again while a lease of this Locker may still be valid; set RejoinDelay to at least the longest lease of every Locker on these nodes, or negative to turn the rule off",
			ErrInvalidConfig, c.RejoinDelay, c.LeaseDuration)
	}
	return nil
}

// queueDefaults fills in and checks QueueTTL: a place must outlive a
// renewal's call (negative turns the queue off).
func (c *Config) queueDefaults() error {
	if c.QueueTTL == 0 {
		c.QueueTTL = max(c.LeaseDuration, 2*c.NodeCallTimeout)
	}
	if c.QueueTTL > maxLeaseDuration || (c.QueueTTL > 0 && c.QueueTTL < 2*c.NodeCallTimeout) {
		return fmt.Errorf("%w: QueueTTL %s is outside [2 x NodeCallTimeout = %s, %s] (negative turns the queue off)", ErrInvalidConfig, c.QueueTTL, 2*c.NodeCallTimeout, maxLeaseDuration)
	}
	return nil
}
