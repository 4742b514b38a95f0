package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// leaseScanCap bounds the keys the rejoin check examines on one server
// (SCAN MATCH --prefix*): a large keyspace is sampled, not walked.
const leaseScanCap = 10000

// leaseScanPage is the COUNT of each SCAN call.
const leaseScanPage = 1000

// leaseScan is what the rejoin check saw of the live leases under
// --prefix on one server: a lease key's TTL is at most its Locker's
// LeaseDuration, so a TTL left above the rejoin delay shows a Locker
// whose leases the delay does not cover.
type leaseScan struct {
	examined int           // keys SCAN returned
	capped   bool          // stopped at leaseScanCap before the end
	leases   int           // lease keys among them with a TTL
	longest  time.Duration // the most time left of any of them
	key      string        // that lease's key
	op       string        // the command that failed: SCAN or PTTL
	err      error         // why the scan stopped early
}

// isLeaseKey reports whether key, under prefix, is a lease's key: a
// lock's P{R}, a read-write lock's writer P{R}:rw or a reader
// P{R}:rw:reader:<token> (docs/design.md §3, §14), each with the
// Locker's LeaseDuration as TTL; not a fence counter, a queue, a writer's
// intent (their TTLs follow other rules) or a marker. R may hold a brace
// but not start with one; no suffix holds one, so the last brace closes
// the tag.
func isLeaseKey(prefix, key string) bool {
	rest, ok := strings.CutPrefix(key, prefix+"{")
	if !ok {
		return false
	}
	i := strings.LastIndexByte(rest, '}')
	if i < 1 {
		return false
	}
	suffix := rest[i+1:]
	return suffix == "" || suffix == ":rw" || strings.HasPrefix(suffix, ":rw:reader:")
}

// scanLeases walks the keys under prefix on c (at most leaseScanCap,
// each call bounded by timeout) and reads the TTL left of every lease
// key.
func scanLeases(ctx context.Context, c *redis.Client, prefix string, timeout time.Duration) leaseScan {
	var s leaseScan
	match := globEscape(prefix) + "*"
	var cursor uint64
	for {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		keys, next, err := c.Scan(cctx, cursor, match, leaseScanPage).Result()
		s.op = "SCAN"
		if err == nil {
			s.examined += len(keys)
			s.op, err = "PTTL", s.readTTLs(cctx, c, prefix, keys)
		}
		cancel()
		if err != nil {
			s.err = err
			return s
		}
		if cursor = next; cursor == 0 {
			return s
		}
		if s.examined >= leaseScanCap {
			s.capped = true
			return s
		}
	}
}

// readTTLs reads the PTTL of the lease keys among keys.
func (s *leaseScan) readTTLs(ctx context.Context, c *redis.Client, prefix string, keys []string) error {
	var leases []string
	for _, k := range keys {
		if isLeaseKey(prefix, k) {
			leases = append(leases, k)
		}
	}
	if len(leases) == 0 {
		return nil
	}
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range leases {
			p.PTTL(ctx, k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, cmd := range cmds {
		left, err := cmd.(*redis.DurationCmd).Result()
		if err != nil || left <= 0 { // gone since the SCAN, or no TTL
			continue
		}
		s.leases++
		if left > s.longest {
			s.longest, s.key = left, leases[i]
		}
	}
	return nil
}

// maxKeyShown bounds a key quoted in a detail.
const maxKeyShown = 80

// shownKey quotes key for a detail, cut to maxKeyShown bytes.
func shownKey(key string) string {
	if len(key) > maxKeyShown {
		return fmt.Sprintf("%q...", key[:maxKeyShown])
	}
	return fmt.Sprintf("%q", key)
}

// note is the rejoin row's words on the leases seen, and whether they
// make it WARN: a lease with more time left than delay (positive) was
// taken by a Locker whose leases delay does not cover.
func (s leaseScan) note(delay time.Duration) (string, bool) {
	var b strings.Builder
	warn := s.leases > 0 && s.longest > delay
	switch {
	case warn:
		fmt.Fprintf(&b, "; a live lock under --prefix, %s, has %s left, more than the %s rejoin delay: some client takes leases longer than this delay covers, and a node that lost data would grant such a lock again while it is held; give every client a rejoin delay of at least the longest lease on these nodes (Config.RejoinDelay, --rejoin-delay), or run doctor with the --rejoin-delay (default --ttl) the clients use",
			shownKey(s.key), fmtDuration(s.longest), delay)
	case s.leases > 0:
		fmt.Fprintf(&b, "; the live locks under --prefix (%d) have at most %s left, within the delay", s.leases, fmtDuration(s.longest))
	case s.err == nil:
		b.WriteString("; no live lock under --prefix")
	}
	switch {
	case s.err != nil && s.examined == 0:
		fmt.Fprintf(&b, "; live locks not checked (%s: %s)", s.op, reason(s.err))
	case s.err != nil:
		fmt.Fprintf(&b, "; live locks checked in the first %s only (%s: %s)", plural(s.examined, "key"), s.op, reason(s.err))
	case s.capped:
		fmt.Fprintf(&b, " (%s examined, the cap: longer leases may be among the others)", plural(s.examined, "key"))
	default:
		fmt.Fprintf(&b, " (%s examined)", plural(s.examined, "key"))
	}
	return b.String(), warn
}
