package cli

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/internal/nodeurl"
)

// The trust row: what a node's marker key says of its data (Safety v4,
// docs/design.md §6.2). Every db of a server keeps one marker,
// "<prefix>~trust:db<N>" (on a Redis Cluster node one per hash slot,
// "<prefix>{<slot tag>}~trust:db0"), holding "v4 <replid> <from µs> <seen
// µs> <why>": the replication id (INFO master_replid) whose data it vouches
// for, from when (on the node's clock) the node may grant, the latest node
// time it saw, and why it had to wait ("-" once it may). Every granting
// script reads the server's master_replid in band and judges the marker:
// none, another replid, or a clock behind seen is a loss, and the node
// sits out the rejoin delay.

// markerName ends every marker key but its db suffix, as in
// redlock/calls.go.
const markerName = "~trust"

// Trust states of the --json trust object.
const (
	trustTrusted     = "trusted"      // the marker names this server's data and its time has passed
	trustSittingOut  = "sitting_out"  // the node grants nothing until the marker's time
	trustNoMarker    = "no_marker"    // the first lock counts a loss and sits out
	trustOtherServer = "other_server" // the marker vouches for another replication id: the next lock sits out
	trustBadMarker   = "bad_marker"   // the key holds something else: every lock fails (WRONGTYPE)
	trustUnknown     = "unknown"      // the marker could not be read
)

// trustState is the "trust" object of a trust row in doctor --json.
type trustState struct {
	// Marker is the marker key read (on a cluster primary, the pattern of
	// its slot markers).
	Marker string `json:"marker"`
	// State is one of trusted, sitting_out, no_marker, other_server,
	// bad_marker, unknown (on a cluster primary: the worst of its slots).
	State string `json:"state"`
	// ReplID is the replication id the marker vouches for.
	ReplID string `json:"replid,omitempty"`
	// Since is when the node became trusted (trusted) or will be
	// (sitting_out), in RFC 3339 local time; AgeSeconds how long ago,
	// WaitSeconds how long it still sits out.
	Since       string  `json:"since,omitempty"`
	AgeSeconds  float64 `json:"age_seconds,omitempty"`
	WaitSeconds float64 `json:"wait_seconds,omitempty"`
	// Why the node sits out, or last sat out: no-marker, identity,
	// clock-back.
	Why string `json:"why,omitempty"`
	// MayEvict reports maxmemory with an allkeys-* policy (or a
	// configuration CONFIG GET may not read): the library then refuses the
	// node.
	MayEvict bool `json:"may_evict"`
	// InfoInScripts reports that the node's user may call INFO inside a
	// script, which every granting script needs (it reads the server's
	// identity in band).
	InfoInScripts bool `json:"info_in_scripts"`
	// SlotMarkers counts a cluster primary's slot markers, SlotsWaiting
	// those sitting out, SlotsOtherServer those vouching for another
	// replication id.
	SlotMarkers      int `json:"slot_markers,omitempty"`
	SlotsWaiting     int `json:"slots_waiting,omitempty"`
	SlotsOtherServer int `json:"slots_other_server,omitempty"`
}

// marker is a parsed marker value.
type marker struct {
	replid    string // "" for a marker older than v4 (it vouches for none)
	from      int64  // µs on the node's clock
	seen      int64  // µs on the node's clock; 0 for an older marker
	why       string
	oldFormat bool
}

// markerRE is the marker's form, as scripts/trust.lua writes it (its
// last field, the db's high-water of Safety v4.1, scripts/counter.lua C6,
// is absent until a value is counted under the marker); oldRE the
// form before Safety v4 ("<run_id> <evicted_keys> <from> <why>"), which
// the scripts judge as vouching for no replication id.
var (
	markerRE = regexp.MustCompile(`^v4 (\S+) (\d+) (\d+) (\S+)(?: (\d+))?$`)
	oldRE    = regexp.MustCompile(`^(\S+) (\d+) (\d+) (\S+)$`)
)

// parseMarker parses a marker value; an error says it is not one.
func parseMarker(s string) (marker, error) {
	if m := markerRE.FindStringSubmatch(s); m != nil {
		from, err1 := strconv.ParseInt(m[2], 10, 64)
		seen, err2 := strconv.ParseInt(m[3], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return marker{}, fmt.Errorf("%q is not a marker: %w", truncate(s, 60), err)
		}
		return marker{replid: m[1], from: from, seen: seen, why: m[4]}, nil
	}
	if m := oldRE.FindStringSubmatch(s); m != nil {
		from, err := strconv.ParseInt(m[3], 10, 64)
		if err != nil {
			return marker{}, fmt.Errorf("%q is not a marker: %w", truncate(s, 60), err)
		}
		return marker{from: from, why: "-", oldFormat: true}, nil
	}
	return marker{}, fmt.Errorf("%q is not a marker (want \"v4 REPLID FROM_US SEEN_US WHY\")", truncate(s, 60))
}

// truncate cuts s to n bytes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// markerKey is the marker of db db on a server that is not sharded: the
// prefix up to its first brace (as the library cuts it from a lock key),
// then ~trust:db<N>.
func markerKey(prefix string, db int) string {
	if i := strings.IndexByte(prefix, '{'); i >= 0 {
		prefix = prefix[:i]
	}
	return prefix + markerName + dbSuffix(db)
}

// dbSuffix ends a marker key: the db it guards.
func dbSuffix(db int) string { return ":db" + strconv.Itoa(db) }

// whyWords says in words why a node sits out.
func whyWords(why string) string {
	switch why {
	case "no-marker":
		return "its marker was missing (a first use, FLUSHALL or FLUSHDB, SWAPDB, a restart without data, or the marker deleted), so it may have forgotten locks"
	case "identity":
		return "its replication id changed (a restart with or without AOF, a failover or failback, a full sync), so it may have forgotten locks"
	case "clock-back":
		return "its clock stepped back behind a time it had seen"
	case "key-lost":
		return "a lock key was lost (evicted or deleted) while its lease ran"
	}
	return fmt.Sprintf("reason %q", why)
}

// shortID shortens a run_id or replication id for a detail line.
func shortID(id string) string { return truncate(id, 8) }

// sitOutNote is what the next lock does on a node whose marker is missing
// or vouches for other data: it sits out the rejoin delay (nothing with
// the rule off).
func sitOutNote(rejoin time.Duration) string {
	if rejoin <= 0 {
		return "the next lock writes a new marker (the data-loss rule is off: nothing is waited)"
	}
	return fmt.Sprintf("the next lock counts a loss, and the node grants nothing for the %s rejoin delay", rejoin)
}

// serverMayEvict reports whether the library refuses the server for its
// eviction policy: maxmemory set with an allkeys-* policy, or a
// configuration it cannot read (conf nil).
func serverMayEvict(conf map[string]string) bool {
	return conf == nil || conf["maxmemory"] != "0" && strings.HasPrefix(conf["maxmemory-policy"], "allkeys-")
}

// infoInScripts runs INFO replication inside a script, as the node's
// user: every granting script does, to read the server's identity. It
// returns nil when allowed.
func infoInScripts(ctx context.Context, c *redis.Client) error {
	return c.Eval(ctx, "return redis.call('INFO','replication')", nil).Err()
}

// serverNow is the server's clock in µs from INFO server_time_usec, or
// this host's when it cannot be read.
func serverNow(ctx context.Context, c *redis.Client) int64 {
	if s, err := c.Info(ctx, "server").Result(); err == nil {
		if us, err := strconv.ParseInt(infoMap(s)["server_time_usec"], 10, 64); err == nil {
			return us
		}
	}
	return time.Now().UnixMicro()
}

// fmtLocal formats a time in µs since the epoch as a local time.
func fmtLocal(us int64) string {
	return time.UnixMicro(us).Local().Format("2006-01-02 15:04:05 MST")
}

// usDur converts µs to a duration rounded to the millisecond.
func usDur(us int64) time.Duration {
	return (time.Duration(us) * time.Microsecond).Round(time.Millisecond)
}

// clockTick is how far a node's clock may be behind its marker's seen
// before the scripts count a step back (t_tick in scripts/trust.lua).
const clockTick = int64(time.Second / time.Microsecond)

// markerView is what one marker says now: its state, the detail and the
// trust fields it sets. now is the server's clock (µs); replid the
// server's master_replid ("" unknown); rejoin the rejoin delay in effect.
func markerView(st *trustState, raw string, found bool, replid string, now int64, rejoin time.Duration) (string, string) {
	if !found {
		st.State = trustNoMarker
		status := statusWarn
		if rejoin <= 0 {
			status = statusOK
		}
		return status, "no marker: " + sitOutNote(rejoin) + " (a first use; or FLUSHALL/FLUSHDB, SWAPDB, a restart without data)"
	}
	m, err := parseMarker(raw)
	if err != nil {
		st.State = trustBadMarker
		return statusFail, fmt.Sprintf("the marker key %s holds data that is not redlock's (%v): every lock on this node fails with WRONGTYPE; the library never overwrites it, so remove it if nothing else uses it", st.Marker, err)
	}
	st.ReplID = m.replid
	switch {
	case m.oldFormat:
		st.State = trustOtherServer
		return statusWarn, "the marker is older than Safety v4 and vouches for no replication id: " + sitOutNote(rejoin)
	case replid != "" && m.replid != replid:
		st.State = trustOtherServer
		return statusWarn, fmt.Sprintf("the marker vouches for replication id %s, the server's is %s (a restart, failover or full sync since it was written): %s",
			shortID(m.replid), shortID(replid), sitOutNote(rejoin))
	case now < m.seen-clockTick:
		st.State, st.Why = trustSittingOut, "clock-back"
		return statusWarn, fmt.Sprintf("the node's clock is %s behind the latest time its marker saw (%s): it stepped back; the next lock makes the node wait until its clock is past that time plus the rejoin delay",
			fmtDuration(usDur(m.seen-now)), fmtLocal(m.seen))
	}
	st.Since = time.UnixMicro(m.from).Local().Format(time.RFC3339)
	if m.from > now {
		why := m.why
		if why == "-" {
			why = "clock-back"
		}
		st.State, st.Why = trustSittingOut, why
		st.WaitSeconds = usDur(m.from - now).Seconds()
		return statusWarn, fmt.Sprintf("sitting out for %s more (until %s): %s; it grants no lock until then",
			fmtDuration(usDur(m.from-now)), fmtLocal(m.from), whyWords(why))
	}
	st.State = trustTrusted
	st.AgeSeconds = usDur(now - m.from).Seconds()
	return statusOK, fmt.Sprintf("trusted since %s (%s ago), for replication id %s", fmtLocal(m.from), fmtDuration(usDur(now-m.from)), shortID(m.replid))
}

// checkTrust adds the trust row: what the node's marker says (trusted
// since when, sitting out for how long and why, no marker yet, another
// replication id), and whether its user may run INFO inside a script (an
// ACL that forbids it is FAIL: every granting script reads the server's
// identity so). conf is nil when CONFIG GET was refused.
func checkTrust(ctx context.Context, r *nodeReport, t target, conf map[string]string, timeout time.Duration) {
	c := t.client
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, timeout) }
	sharded := t.kind == nodeurl.Cluster
	db := c.Options().DB
	if sharded {
		db = 0
	}
	st := &trustState{Marker: markerKey(t.prefix, db), MayEvict: serverMayEvict(conf)}
	if sharded {
		st.Marker = strings.TrimSuffix(st.Marker, markerName+dbSuffix(db)) + "{*}" + markerName + dbSuffix(db)
	}
	add := func(status, detail string) {
		r.checks = append(r.checks, check{Node: r.addr, Check: "trust", Status: status, Detail: detail, Trust: st})
	}

	cctx, cancel := call()
	scriptErr := infoInScripts(cctx, c)
	cancel()
	st.InfoInScripts = scriptErr == nil
	cctx, cancel = call()
	now := serverNow(cctx, c)
	cancel()
	replid := r.ident.replid

	var status, detail string
	switch {
	case r.ident.role == "slave":
		st.State = trustUnknown
		status, detail = statusWarn, "a replica: every granting script refuses here (REPLICA: a replica is never a vote), so its marker is not judged (see the role row)"
	case sharded:
		status, detail = slotMarkers(ctx, st, c, replid, now, t.rejoin, timeout)
	default:
		cctx, cancel = call()
		status, detail = dbMarker(cctx, st, c, replid, now, t.rejoin)
		cancel()
	}
	if t.rejoin < 0 {
		detail += "; the data-loss rule is off (--rejoin-delay 0): a node that lost data (restart, FLUSHALL, failover) grants at once"
		if status == statusOK {
			status = statusWarn
		}
	}
	switch {
	case conf == nil:
		detail += "; configuration unreadable (CONFIG GET refused): the library cannot tell whether the server evicts under allkeys-*"
	case st.MayEvict:
		detail += fmt.Sprintf("; maxmemory %s with maxmemory-policy %s: the library refuses this node (see the eviction row)", conf["maxmemory"], conf["maxmemory-policy"])
	}
	switch {
	case scriptErr == nil:
	case strings.Contains(strings.ToLower(reason(scriptErr)), "unknown command 'eval'"):
		// EVAL itself is gone: the scripts row FAILs; INFO is not the
		// question here, but it is not known to be fine either.
		if status != statusFail {
			status = statusWarn
		}
		detail = "INFO inside a script not checked: EVAL is renamed or disabled (see the scripts row). " + detail
	default:
		status = statusFail
		detail = fmt.Sprintf("not safe: INFO inside a script failed for this user (%s): every granting script reads the server's identity so, and this node grants no lock; grant +info (docs/security.md). ",
			truncate(reason(scriptErr), 120)) + detail
	}
	add(status, detail)
}

// dbMarker reads and judges the marker of a server that is not sharded.
func dbMarker(ctx context.Context, st *trustState, c *redis.Client, replid string, now int64, rejoin time.Duration) (string, string) {
	raw, err := c.Get(ctx, st.Marker).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return markerView(st, "", false, replid, now, rejoin)
	case err != nil && redis.HasErrorPrefix(err, "WRONGTYPE"):
		return markerView(st, "(not a string)", true, replid, now, rejoin)
	case err != nil:
		st.State = trustUnknown
		return statusWarn, fmt.Sprintf("cannot read the marker %s (GET: %s)", st.Marker, reason(err))
	}
	return markerView(st, raw, true, replid, now, rejoin)
}

// markerBatch is how many slot markers one round trip reads.
const markerBatch = 512

// maxSlotMarkers bounds the slot markers doctor reads on one cluster
// primary (there are at most 16384 slots).
const maxSlotMarkers = 16384

// slotMarkers reads a cluster primary's slot markers (SCAN for the
// pattern, then GET each) and summarizes them.
func slotMarkers(ctx context.Context, st *trustState, c *redis.Client, replid string, now int64, rejoin time.Duration, timeout time.Duration) (string, string) {
	keys, err := listSlotMarkers(ctx, st, c, timeout)
	if err != nil {
		st.State = trustUnknown
		return statusWarn, fmt.Sprintf("cannot list the slot markers %s (SCAN: %s)", st.Marker, reason(err))
	}
	if len(keys) == 0 {
		st.State = trustNoMarker
		status := statusWarn
		if rejoin <= 0 {
			status = statusOK
		}
		return status, "no slot markers yet: in each slot, " + sitOutNote(rejoin)
	}
	st.SlotMarkers = len(keys)
	tl := tallySlotMarkers(st, readSlotMarkers(ctx, c, keys, timeout), replid, now)
	return tl.summary(st, len(keys), now, rejoin)
}

// listSlotMarkers lists a cluster primary's slot markers (SCAN), at most
// maxSlotMarkers.
func listSlotMarkers(ctx context.Context, st *trustState, c *redis.Client, timeout time.Duration) ([]string, error) {
	var keys []string
	var cursor uint64
	suffix := markerName + dbSuffix(0)
	pattern := globEscape(strings.TrimSuffix(st.Marker, "{*}"+suffix)) + "{*}" + globEscape(suffix)
	for {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		ks, next, err := c.Scan(cctx, cursor, pattern, 1000).Result()
		cancel()
		if err != nil {
			return nil, err
		}
		keys = append(keys, ks...)
		if cursor = next; cursor == 0 || len(keys) >= maxSlotMarkers {
			return keys, nil
		}
	}
}

// readSlotMarkers GETs keys in batches, each bounded by timeout: a
// cluster vouched for in every slot has thousands of markers per primary.
func readSlotMarkers(ctx context.Context, c *redis.Client, keys []string, timeout time.Duration) []redis.Cmder {
	var cmds []redis.Cmder
	for lo := 0; lo < len(keys); lo += markerBatch {
		batch := keys[lo:min(lo+markerBatch, len(keys))]
		cctx, cancel := context.WithTimeout(ctx, timeout)
		got, _ := c.Pipelined(cctx, func(p redis.Pipeliner) error {
			for _, k := range batch {
				p.Get(cctx, k)
			}
			return nil
		})
		cancel()
		cmds = append(cmds, got...)
	}
	return cmds
}

// slotTally counts a cluster primary's slot markers by what they say.
type slotTally struct {
	waiting, bad, unread int
	lastErr              error
	longest              int64 // µs the longest sit-out has left
	longestWhy           string
	since                int64 // the latest trusted marker's from
}

// tallySlotMarkers judges each marker read (st counts those that vouch
// for another replication id).
func tallySlotMarkers(st *trustState, cmds []redis.Cmder, replid string, now int64) slotTally {
	var tl slotTally
	for _, cmd := range cmds {
		raw, err := cmd.(*redis.StringCmd).Result()
		if errors.Is(err, redis.Nil) {
			continue // gone since the SCAN
		}
		if err != nil && !redis.HasErrorPrefix(err, "WRONGTYPE") {
			tl.unread++
			tl.lastErr = err
			continue
		}
		m, perr := parseMarker(raw)
		switch {
		case err != nil || perr != nil:
			tl.bad++
		case m.oldFormat || replid != "" && m.replid != replid:
			st.SlotsOtherServer++
		case m.from > now:
			tl.waiting++
			if m.from-now > tl.longest {
				tl.longest, tl.longestWhy = m.from-now, m.why
			}
		default:
			tl.since = max(tl.since, m.from)
		}
	}
	return tl
}

// summary is the trust row of a cluster primary with n slot markers.
func (tl slotTally) summary(st *trustState, n int, now int64, rejoin time.Duration) (string, string) {
	st.SlotsWaiting = tl.waiting
	detail := plural(n, "slot marker")
	status := statusOK
	st.State = trustTrusted
	if tl.since > 0 {
		detail += fmt.Sprintf("; the latest trusted since %s (%s ago)", fmtLocal(tl.since), fmtDuration(usDur(now-tl.since)))
	}
	if st.SlotsOtherServer > 0 {
		status, st.State = statusWarn, trustOtherServer
		detail += fmt.Sprintf("; %d vouch for another replication id (a restart, failover or full sync since): in those slots, %s", st.SlotsOtherServer, sitOutNote(rejoin))
	}
	if tl.waiting > 0 {
		status, st.State, st.Why = statusWarn, trustSittingOut, tl.longestWhy
		st.WaitSeconds = usDur(tl.longest).Seconds()
		detail += fmt.Sprintf("; %d sitting out, the longest for %s more: %s", tl.waiting, fmtDuration(usDur(tl.longest)), whyWords(tl.longestWhy))
	}
	if tl.unread > 0 {
		status = statusWarn
		detail += fmt.Sprintf("; %d could not be read (%s)", tl.unread, reason(tl.lastErr))
	}
	if tl.bad > 0 {
		status, st.State = statusFail, trustBadMarker
		detail += fmt.Sprintf("; %d hold data that is not redlock's: locks in those slots fail with WRONGTYPE", tl.bad)
	}
	return status, detail
}

// globEscape escapes the glob characters of a SCAN MATCH pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
