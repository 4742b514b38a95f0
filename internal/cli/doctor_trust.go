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

// The trust row: what a node's marker key says of its data (docs/design.md
// §6.2). Every server keeps one marker, "<prefix>~trust" (on a Redis
// Cluster node one per hash slot, "<prefix>{<slot tag>}~trust"), holding
// "<run_id> <evicted_keys> <from µs> <why>": the server whose data it
// vouches for, its evicted_keys when written, from when (on the node's
// clock) the node may grant, and why it had to wait ("-" once it may).

// markerName ends every marker key, as in redlock/calls.go.
const markerName = "~trust"

// Trust states of the --json trust object.
const (
	trustTrusted     = "trusted"      // the marker names this server and its time has passed
	trustSittingOut  = "sitting_out"  // the node grants nothing until the marker's time
	trustNoMarker    = "no_marker"    // the first lock will judge from INFO
	trustOtherServer = "other_server" // written by another server: the next lock judges from INFO
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
	// RunID is the server the marker vouches for.
	RunID string `json:"run_id,omitempty"`
	// Since is when the node became trusted (trusted) or will be
	// (sitting_out), in RFC 3339 local time; AgeSeconds how long ago,
	// WaitSeconds how long it still sits out.
	Since       string  `json:"since,omitempty"`
	AgeSeconds  float64 `json:"age_seconds,omitempty"`
	WaitSeconds float64 `json:"wait_seconds,omitempty"`
	// Why the node sits out, or last sat out: restarted, lost, evicted.
	Why string `json:"why,omitempty"`
	// MayEvict reports maxmemory with an evicting policy (or a
	// configuration CONFIG GET may not read): every lock then reads INFO
	// on this server.
	MayEvict bool `json:"may_evict"`
	// InfoInScripts reports that the node's user may call INFO inside a
	// script, which judging a loss needs.
	InfoInScripts bool `json:"info_in_scripts"`
	// SlotMarkers counts a cluster primary's slot markers, SlotsWaiting
	// those sitting out, SlotsOtherServer those written by another server.
	SlotMarkers      int `json:"slot_markers,omitempty"`
	SlotsWaiting     int `json:"slots_waiting,omitempty"`
	SlotsOtherServer int `json:"slots_other_server,omitempty"`
}

// marker is a parsed marker value.
type marker struct {
	runID   string
	evicted int64
	from    int64 // µs on the node's clock
	why     string
}

// markerRE is the marker's form, as scripts/trust.lua reads it.
var markerRE = regexp.MustCompile(`^(\S+) (\d+) (\d+) (\S+)$`)

// parseMarker parses a marker value; an error says it is not one.
func parseMarker(s string) (marker, error) {
	m := markerRE.FindStringSubmatch(s)
	if m == nil {
		return marker{}, fmt.Errorf("%q is not a marker (want \"RUN_ID EVICTED FROM_US WHY\")", truncate(s, 60))
	}
	ev, err1 := strconv.ParseInt(m[2], 10, 64)
	from, err2 := strconv.ParseInt(m[3], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return marker{}, fmt.Errorf("%q is not a marker: %w", truncate(s, 60), err)
	}
	return marker{runID: m[1], evicted: ev, from: from, why: m[4]}, nil
}

// truncate cuts s to n bytes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// markerKey is the marker of a server that is not sharded: the prefix up
// to its first brace (as the library cuts it from a lock key), then ~trust.
func markerKey(prefix string) string {
	if i := strings.IndexByte(prefix, '{'); i >= 0 {
		prefix = prefix[:i]
	}
	return prefix + markerName
}

// whyWords says in words why a node sits out.
func whyWords(why string) string {
	switch why {
	case "restarted":
		return "the server restarted without fsyncing every write, so it may have forgotten locks it granted before"
	case "lost":
		return "the server lost data while running (FLUSHALL or FLUSHDB, a failover to a replica, or its statistics reset), so it may have forgotten locks"
	case "evicted":
		return "the server evicted keys (maxmemory), perhaps lock keys"
	}
	return fmt.Sprintf("reason %q", why)
}

// shortID shortens a run_id for a detail line.
func shortID(id string) string { return truncate(id, 8) }

// judgeNote says what a lock's judgement from INFO would find now: a loss
// since the server started (it will then sit out the rejoin delay) or
// none. info holds the server, stats, replication and commandstats
// sections; nil when INFO failed.
func judgeNote(info map[string]string) string {
	if info == nil {
		return ""
	}
	var seen []string
	if ev := info["evicted_keys"]; ev != "" && ev != "0" {
		seen = append(seen, "evicted keys ("+ev+")")
	}
	if off := info["second_repl_offset"]; off != "" && off != "-1" {
		seen = append(seen, "a promotion from replica")
	}
	for _, c := range []string{"flushall", "flushdb", "swapdb", "config|resetstat"} {
		if _, ok := info["cmdstat_"+c]; ok {
			seen = append(seen, strings.ToUpper(c))
		}
	}
	if len(seen) == 0 {
		return "; INFO shows no loss since the server started"
	}
	return "; INFO shows " + strings.Join(seen, ", ") + " since the server started: it will then sit out for the rejoin delay"
}

// lossStatus is the status of a node whose next lock judges from INFO:
// WARN when INFO shows a loss (it will then sit out), else OK.
func lossStatus(info map[string]string) string {
	if strings.Contains(judgeNote(info), "sit out") {
		return statusWarn
	}
	return statusOK
}

// serverMayEvict reports whether the library counts the server as one that
// may evict: maxmemory set with a policy other than noeviction, or a
// configuration it cannot read (conf nil).
func serverMayEvict(conf map[string]string) bool {
	return conf == nil || conf["maxmemory"] != "0" && conf["maxmemory-policy"] != "noeviction"
}

// infoInScripts runs INFO inside a script, as the node's user: the
// library's scripts do to judge a loss. It returns nil when allowed.
func infoInScripts(ctx context.Context, c *redis.Client) error {
	return c.Eval(ctx, "return redis.call('INFO','server')", nil).Err()
}

// trustInfo reads the INFO sections the judgement uses (server, stats,
// replication, commandstats) as one map.
func trustInfo(ctx context.Context, c *redis.Client) (map[string]string, error) {
	s, err := c.Info(ctx, "server", "stats", "replication", "commandstats").Result()
	if err != nil {
		return nil, err
	}
	return infoMap(s), nil
}

// serverNow is the server's clock in µs from INFO server_time_usec, or
// this host's when it is missing.
func serverNow(info map[string]string) int64 {
	if us, err := strconv.ParseInt(info["server_time_usec"], 10, 64); err == nil {
		return us
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

// markerView is what one marker says now: its state, the detail and the
// trust fields it sets. now is the server's clock (µs); runID the server's;
// evicted its evicted_keys ("" unknown).
func markerView(st *trustState, raw string, found bool, runID, evicted string, mayEvict bool, now int64, info map[string]string) (string, string) {
	if !found {
		st.State = trustNoMarker
		return lossStatus(info), "no marker yet (the first lock will judge from INFO)" + judgeNote(info)
	}
	m, err := parseMarker(raw)
	if err != nil {
		st.State = trustBadMarker
		return statusFail, fmt.Sprintf("the marker key %s holds data that is not redlock's (%v): every lock on this node fails with WRONGTYPE; the library never overwrites it, so remove it if nothing else uses it", st.Marker, err)
	}
	st.RunID = m.runID
	if runID != "" && m.runID != runID {
		st.State = trustOtherServer
		return statusWarn, fmt.Sprintf("the marker names server %s, not this one (%s): a restart or failover since it was written; the next lock will judge from INFO%s",
			shortID(m.runID), shortID(runID), judgeNote(info))
	}
	st.Since = time.UnixMicro(m.from).Local().Format(time.RFC3339)
	if m.why != "-" && m.from > now {
		st.State, st.Why = trustSittingOut, m.why
		st.WaitSeconds = usDur(m.from - now).Seconds()
		return statusWarn, fmt.Sprintf("sitting out for %s more (until %s): %s; it grants no lock until then",
			fmtDuration(usDur(m.from-now)), fmtLocal(m.from), whyWords(m.why))
	}
	st.State = trustTrusted
	if m.why != "-" {
		st.Why = m.why
	}
	st.AgeSeconds = usDur(now - m.from).Seconds()
	detail := fmt.Sprintf("trusted since %s (%s ago)", fmtLocal(m.from), fmtDuration(usDur(now-m.from)))
	if m.why != "-" {
		detail += "; it sat out because " + whyWords(m.why)
	}
	if mayEvict && evicted != "" && evicted != strconv.FormatInt(m.evicted, 10) {
		st.State, st.Why = trustSittingOut, "evicted"
		return statusWarn, fmt.Sprintf("keys were evicted since the marker was written (evicted_keys %d, now %s): the next lock will make the node sit out for the rejoin delay", m.evicted, evicted)
	}
	return statusOK, detail
}

// checkTrust adds the trust row: what the node's marker says (trusted
// since when, sitting out for how long and why, no marker yet), whether
// the server may evict (every lock then reads INFO there), and whether its
// user may run INFO inside a script (an ACL that forbids it is FAIL: the
// node could not judge a loss). conf is nil when CONFIG GET was refused.
func checkTrust(ctx context.Context, r *nodeReport, t target, conf map[string]string, timeout time.Duration) {
	c := t.client
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, timeout) }
	st := &trustState{Marker: markerKey(t.prefix), MayEvict: serverMayEvict(conf)}
	sharded := t.kind == nodeurl.Cluster
	if sharded {
		st.Marker = strings.TrimSuffix(st.Marker, markerName) + "{*}" + markerName
	}
	add := func(status, detail string) {
		r.checks = append(r.checks, check{Node: r.addr, Check: "trust", Status: status, Detail: detail, Trust: st})
	}

	cctx, cancel := call()
	scriptErr := infoInScripts(cctx, c)
	cancel()
	st.InfoInScripts = scriptErr == nil
	cctx, cancel = call()
	info, infoErr := trustInfo(cctx, c)
	cancel()
	if infoErr != nil {
		info = nil
	}
	now := serverNow(info)
	evicted := ""
	if info != nil {
		evicted = info["evicted_keys"]
	}
	runID := r.runID

	var status, detail string
	switch {
	case t.rejoin < 0:
		st.State = trustUnknown
		status, detail = statusWarn, "the data-loss rule is off (--rejoin-delay 0): a node that lost data (restart, FLUSHALL, eviction, failover) grants at once"
	case sharded:
		status, detail = slotMarkers(ctx, st, c, runID, now, info, timeout)
	default:
		cctx, cancel = call()
		raw, err := c.Get(cctx, st.Marker).Result()
		cancel()
		switch {
		case errors.Is(err, redis.Nil):
			status, detail = markerView(st, "", false, runID, evicted, st.MayEvict, now, info)
		case err != nil && redis.HasErrorPrefix(err, "WRONGTYPE"):
			status, detail = markerView(st, "(not a string)", true, runID, evicted, st.MayEvict, now, info)
		case err != nil:
			st.State = trustUnknown
			status, detail = statusWarn, fmt.Sprintf("cannot read the marker %s (GET: %s)", st.Marker, reason(err))
		default:
			status, detail = markerView(st, raw, true, runID, evicted, st.MayEvict, now, info)
		}
	}
	switch {
	case conf == nil:
		detail += "; configuration unreadable (CONFIG GET refused): the library counts the server as one that may evict, so every lock reads INFO here"
	case st.MayEvict:
		detail += fmt.Sprintf("; maxmemory %s with maxmemory-policy %s: the server may evict keys, so every lock reads INFO here (and an eviction makes it sit out)",
			conf["maxmemory"], conf["maxmemory-policy"])
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
		detail = fmt.Sprintf("not safe: INFO inside a script failed for this user (%s): the node cannot judge a loss of data%s; grant +info (docs/security.md). ",
			truncate(reason(scriptErr), 120), map[bool]string{true: " and, evicting, grants no lock", false: ", so once its marker is gone it grants no lock"}[st.MayEvict]) + detail
	}
	add(status, detail)
}

// maxSlotMarkers bounds the slot markers doctor reads on one cluster
// primary (there are at most 16384 slots).
const maxSlotMarkers = 16384

// slotMarkers reads a cluster primary's slot markers (SCAN for the
// pattern, then GET each) and summarizes them.
func slotMarkers(ctx context.Context, st *trustState, c *redis.Client, runID string, now int64, info map[string]string, timeout time.Duration) (string, string) {
	var keys []string
	var cursor uint64
	for {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		ks, next, err := c.Scan(cctx, cursor, globEscape(strings.TrimSuffix(st.Marker, "{*}"+markerName))+"{*}"+markerName, 1000).Result()
		cancel()
		if err != nil {
			st.State = trustUnknown
			return statusWarn, fmt.Sprintf("cannot list the slot markers %s (SCAN: %s)", st.Marker, reason(err))
		}
		keys = append(keys, ks...)
		if cursor = next; cursor == 0 || len(keys) >= maxSlotMarkers {
			break
		}
	}
	if len(keys) == 0 {
		st.State = trustNoMarker
		return lossStatus(info), "no slot markers yet (the first lock in each slot will judge from INFO)" + judgeNote(info)
	}
	st.SlotMarkers = len(keys)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	cmds, _ := c.Pipelined(cctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Get(cctx, k)
		}
		return nil
	})
	cancel()
	var waiting, bad, unread int
	var longest int64
	var longestWhy string
	var since int64
	for _, cmd := range cmds {
		raw, err := cmd.(*redis.StringCmd).Result()
		if errors.Is(err, redis.Nil) {
			continue // gone since the SCAN
		}
		if err != nil && !redis.HasErrorPrefix(err, "WRONGTYPE") {
			unread++
			continue
		}
		m, perr := parseMarker(raw)
		switch {
		case err != nil || perr != nil:
			bad++
		case runID != "" && m.runID != runID:
			st.SlotsOtherServer++
		case m.why != "-" && m.from > now:
			waiting++
			if m.from-now > longest {
				longest, longestWhy = m.from-now, m.why
			}
		default:
			since = max(since, m.from)
		}
	}
	st.SlotsWaiting = waiting
	detail := plural(len(keys), "slot marker")
	status := statusOK
	st.State = trustTrusted
	if since > 0 {
		detail += fmt.Sprintf("; the latest trusted since %s (%s ago)", fmtLocal(since), fmtDuration(usDur(now-since)))
	}
	if st.SlotsOtherServer > 0 {
		status, st.State = statusWarn, trustOtherServer
		detail += fmt.Sprintf("; %d name another server (a restart or failover since): the next lock in those slots will judge from INFO%s", st.SlotsOtherServer, judgeNote(info))
	}
	if waiting > 0 {
		status, st.State, st.Why = statusWarn, trustSittingOut, longestWhy
		st.WaitSeconds = usDur(longest).Seconds()
		detail += fmt.Sprintf("; %d sitting out, the longest for %s more: %s", waiting, fmtDuration(usDur(longest)), whyWords(longestWhy))
	}
	if unread > 0 {
		status = statusWarn
		detail += fmt.Sprintf("; %d could not be read", unread)
	}
	if bad > 0 {
		status, st.State = statusFail, trustBadMarker
		detail += fmt.Sprintf("; %d hold data that is not redlock's: locks in those slots fail with WRONGTYPE", bad)
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
