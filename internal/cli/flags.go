package cli

import (
	"encoding/hex"
	"errors"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/e6344662/go-redlock/internal/nodeurl"
	"github.com/e6344662/go-redlock/internal/redact"
	"github.com/e6344662/go-redlock/redlock"
)

// envNodes is the environment variable that supplies --nodes.
const envNodes = "REDLOCK_NODES"

// globals holds the flags shared by every command.
type globals struct {
	nodes    []string
	prefix   string
	ttl      time.Duration
	timeout  time.Duration
	rejoin   time.Duration // 0 unless set: the default (the ttl)
	noRejoin bool          // --rejoin-delay 0
	queueTTL time.Duration // 0 unless set: the default (the ttl)
	noQueue  bool          // --queue-ttl 0
	noHand   bool          // --no-hand-over
	owner    string
	json     bool
}

// register adds the global flags to fs.
func (g *globals) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&g.nodes, "nodes", nil, "Redis node `URLs`, comma-separated or repeated: redis://[user:password@]host:port[/db], rediss:// (TLS), unix:///path, redis+cluster://seed:port?addr=seed2:port (a Redis Cluster) or redis+sentinel://sentinel:port?master_name=NAME&addr=sentinel2:port (a Sentinel group) (default $"+envNodes+")")
	fs.StringVar(&g.prefix, "prefix", redlock.DefaultKeyPrefix, "key prefix of the lock keys")
	fs.DurationVar(&g.ttl, "ttl", redlock.DefaultLeaseDuration, "lease duration (TTL of the lock keys)")
	fs.DurationVar(&g.timeout, "timeout", 0, "timeout of each call to one node (default min(5s, ttl/3))")
	fs.DurationVar(&g.rejoin, "rejoin-delay", 0, "keep a node that may have lost data (any restart, with or without AOF; FLUSHALL; a failover) out of the quorum for this long after the loss; at least this --ttl (shorter is a usage error) and every other client's --ttl on these nodes; 0 turns the wait off (default the ttl)")
	fs.DurationVar(&g.queueTTL, "queue-ttl", 0, "how long a waiter's place in the lock's fair wait queue lasts without renewal (a waiter that dies holds the lock up at most this long); 0 turns the queue off (default the ttl)")
	fs.BoolVar(&g.noHand, "no-hand-over", false, "a release only names the next waiter in the wait queue, which then tries, instead of handing it the lock")
	fs.StringVar(&g.owner, "owner", "", "label stored with the lock to show who holds it (default hostname:pid)")
	fs.BoolVar(&g.json, "json", false, "print one JSON object per result on stdout")
}

// validate checks the global timing flags. fs tells which flags were set.
func (g *globals) validate(fs *pflag.FlagSet) error {
	if err := positive("ttl", g.ttl); err != nil {
		return err
	}
	if fs.Changed("timeout") {
		if err := positive("timeout", g.timeout); err != nil {
			return err
		}
		if g.timeout >= g.ttl {
			return usageErrorf("--timeout %s must be shorter than --ttl %s", g.timeout, g.ttl)
		}
	}
	if fs.Changed("rejoin-delay") && g.rejoin < 0 {
		return usageErrorf("--rejoin-delay must be 0 (off) or a positive duration, got %s", g.rejoin)
	}
	if g.rejoin > 0 && g.rejoin < g.ttl {
		return usageErrorf("--rejoin-delay %s is shorter than --ttl %s: a node that lost data would grant again while a lease taken with this --ttl may still be valid; set --rejoin-delay to at least the longest --ttl of every client of these nodes, or 0 to turn the wait off", g.rejoin, g.ttl)
	}
	g.noRejoin = fs.Changed("rejoin-delay") && g.rejoin == 0
	if fs.Changed("queue-ttl") && g.queueTTL < 0 {
		return usageErrorf("--queue-ttl must be 0 (off) or a positive duration, got %s", g.queueTTL)
	}
	if g.queueTTL > 0 && g.queueTTL < 2*g.callTimeout() {
		return usageErrorf("--queue-ttl %s must be at least twice the node call timeout (%s)", g.queueTTL, g.callTimeout())
	}
	g.noQueue = fs.Changed("queue-ttl") && g.queueTTL == 0
	if g.prefix == "" {
		return usageErrorf("--prefix must not be empty")
	}
	if len(g.owner) > redlock.MaxOwnerLen {
		return usageErrorf("--owner is %d bytes, over the limit of %d", len(g.owner), redlock.MaxOwnerLen)
	}
	return nil
}

// callTimeout is the per-node call timeout in effect.
func (g *globals) callTimeout() time.Duration {
	if g.timeout > 0 {
		return g.timeout
	}
	return min(redlock.DefaultMaxNodeCallTimeout, g.ttl/3)
}

// config is the Locker configuration the flags describe.
func (g *globals) config() redlock.Config {
	cfg := redlock.Config{
		LeaseDuration:   g.ttl,
		NodeCallTimeout: g.timeout,
		KeyPrefix:       g.prefix,
		Owner:           g.owner,
		DisableHandOver: g.noHand,
	}
	if g.noRejoin {
		cfg.RejoinDelay = -1 // off
	} else {
		cfg.RejoinDelay = g.rejoin // 0: the ttl
	}
	if g.noQueue {
		cfg.QueueTTL = -1 // off
	} else {
		cfg.QueueTTL = g.queueTTL // 0: the ttl
	}
	return cfg
}

// rejoinDelay is the rejoin delay in effect: --rejoin-delay, or the ttl;
// negative when --rejoin-delay 0 turned it off.
func (g *globals) rejoinDelay() time.Duration {
	switch {
	case g.noRejoin:
		return -1
	case g.rejoin > 0:
		return g.rejoin
	}
	return g.ttl
}

// addSlotsFlag adds -n/--slots: the semaphore limit of run and status.
func addSlotsFlag(fs *pflag.FlagSet, slots *int) {
	fs.IntVarP(slots, "slots", "n", 1, "at most `K` holders at once: a semaphore of K slots RESOURCE#0..RESOURCE#K-1, each a lock with its own fencing token (1: a plain lock)")
}

// checkSlots rejects a semaphore limit outside [1, redlock.MaxSlots].
func checkSlots(k int) error {
	if k < 1 || k > redlock.MaxSlots {
		return usageErrorf("-n must be between 1 and %d, got %d", redlock.MaxSlots, k)
	}
	return nil
}

// positive rejects a zero or negative duration for --name.
func positive(name string, d time.Duration) error {
	if d <= 0 {
		return usageErrorf("--%s must be a positive duration, got %s", name, d)
	}
	return nil
}

// nodeURLs returns the node URLs from --nodes, or else from the environment
// (getenv), split at commas and trimmed, each checked for form; empty
// entries are skipped.
func (g *globals) nodeURLs(getenv func(string) string) ([]string, error) {
	raw := g.nodes
	if len(raw) == 0 {
		raw = []string{getenv(envNodes)}
	}
	var urls []string
	for _, r := range raw {
		for _, u := range strings.Split(r, ",") {
			if u = strings.TrimSpace(u); u == "" {
				continue
			}
			if err := checkURL(u); err != nil {
				return nil, err
			}
			urls = append(urls, u)
		}
	}
	if len(urls) == 0 {
		return nil, usageErrorf("no nodes: set --nodes or %s to redis:// URLs", envNodes)
	}
	return urls, nil
}

// rawURLs returns the node URLs of --nodes, or else of the environment
// (getenv), as given, split at commas and trimmed, whether or not they are
// well-formed: App.redact masks each where a message quotes it.
func (g *globals) rawURLs(getenv func(string) string) []string {
	raw := g.nodes
	if len(raw) == 0 && getenv != nil {
		raw = []string{getenv(envNodes)}
	}
	var out []string
	for _, r := range raw {
		for _, u := range strings.Split(r, ",") {
			if u = strings.TrimSpace(u); u != "" {
				out = append(out, u)
			}
		}
	}
	return out
}

// prepare is the first step of every command: it validates the global
// flags of cmd, then returns the first error among checks, the results of
// the command's own checks of its flags and arguments, in the order given.
// All of this happens before any network traffic.
func (a *App) prepare(cmd *cobra.Command, checks ...error) error {
	if err := a.g.validate(cmd.Flags()); err != nil {
		return err
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	return nil
}

// exactArgs accepts exactly the named positional arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usageErrorf("%s takes %s, got %d arguments", cmd.Name(), strings.Join(names, " "), len(args))
		}
		return nil
	}
}

// noArgs accepts no positional argument. The message shows them through
// redact.URL: a node URL given without --nodes carries its password.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) != 0 {
		shown := make([]string, len(args))
		for i, arg := range args {
			shown[i] = redact.URL(arg)
		}
		return usageErrorf("%s takes no arguments, got %q", cmd.Name(), shown)
	}
	return nil
}

// checkURL rejects a node URL that nodeurl.Parse, the one parser of node
// URLs (the library's, which redisnode.Dial uses), would refuse, or that
// names a port out of range, before any network traffic. The commonest
// mistakes get a message of their own (a missing scheme, white space, a
// foreign scheme, no host); the rest is the parser's reason. Messages show
// the URL through redact.URL, never its password.
func checkURL(raw string) error {
	shown := redact.URL(raw)
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok || scheme == "" {
		return usageErrorf("malformed node URL %s: missing redis:// scheme (want redis://host:port, rediss://host:port, redis+cluster://host:port or redis+sentinel://host:port?master_name=NAME)", shown)
	}
	if userinfo := userInfo(raw); scheme != "unix" && strings.ContainsAny(userinfo, "#/?") && !strings.Contains(userinfo, "=") {
		return usageErrorf("malformed node URL %s: the password (or user) holds a #, / or ? that is not percent-encoded: write # as %%23, / as %%2F and ? as %%3F", shown)
	}
	if p := dbPath(raw); p != "" && strings.HasPrefix(scheme, "redis") {
		if strings.Trim(p, "0123456789") != "" {
			return usageErrorf("malformed node URL %s: the path must be a database number such as /0 (a password goes before the host: redis://:PASSWORD@host:port)", shown)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		why := "not a URL"
		var ue *url.Error
		if errors.As(err, &ue) && !strings.Contains(ue.Err.Error(), `"`) {
			why = ue.Err.Error() // no quoted fragment, so no part of a password
		}
		return usageErrorf("malformed node URL %s: %s", shown, why)
	}
	if strings.ContainsAny(raw, " \t\r\n") {
		return usageErrorf("malformed node URL %s: contains white space", shown)
	}
	if !slices.Contains(nodeurl.Schemes, u.Scheme) {
		return usageErrorf("malformed node URL %s: scheme must be redis:// or rediss:// (a server), unix:// (a socket), redis+cluster:// (a Redis Cluster) or redis+sentinel:// (a Sentinel group; rediss+ for TLS)", shown)
	}
	if u.Host == "" && u.Scheme != "unix" {
		return usageErrorf("malformed node URL %s: no host", shown)
	}
	spec, err := nodeurl.Parse(raw)
	if err != nil {
		return usageErrorf("%s", err.Error()) // "malformed node URL <shown>: <reason>"
	}
	for _, addr := range specAddrs(spec) {
		if _, p, err := net.SplitHostPort(addr); err == nil {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return usageErrorf("malformed node URL %s: port %s out of range", shown, p)
			}
		}
	}
	return nil
}

// userInfo returns what stands between raw's "://" and its last "@" (the
// user information, with whatever a stray #, / or ? let into it); "" when
// raw has no "@" after "://".
func userInfo(raw string) string {
	i := strings.Index(raw, "://")
	at := strings.LastIndex(raw, "@")
	if i < 0 || at < i+len("://") {
		return ""
	}
	return raw[i+len("://") : at]
}

// dbPath returns the path of raw after the "/" that ends its host, up to
// the query or fragment: the database number of a redis:// URL; "" when
// there is none.
func dbPath(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return ""
	}
	host := i + len("://")
	if at := strings.LastIndex(raw, "@"); at >= host {
		host = at + 1
	}
	slash := strings.IndexByte(raw[host:], '/')
	if slash < 0 {
		return ""
	}
	p := raw[host+slash+1:]
	if end := strings.IndexAny(p, "?#"); end >= 0 {
		p = p[:end]
	}
	return p
}

// specAddrs returns the TCP addresses a parsed node URL names: the server,
// the cluster's seeds or the sentinels. A Unix socket has none.
func specAddrs(s *nodeurl.Spec) []string {
	switch s.Kind {
	case nodeurl.Cluster:
		return s.ClusterOptions.Addrs
	case nodeurl.Sentinel:
		return s.FailoverOptions.SentinelAddrs
	}
	if s.Options.Network == "unix" {
		return nil
	}
	return []string{s.Options.Addr}
}

// addWaitFlag adds --wait, of acquire and run, to fs.
func addWaitFlag(fs *pflag.FlagSet, wait *time.Duration) {
	fs.DurationVar(wait, "wait", 0, "wait up to this long for the lock (default: one attempt)")
}

// checkWait validates --wait when it was given.
func checkWait(cmd *cobra.Command, wait time.Duration) error {
	if cmd.Flags().Changed("wait") {
		return positive("wait", wait)
	}
	return nil
}

// checkResource rejects resource names the library would refuse, before
// any network traffic.
func checkResource(resource string) error {
	if resource == "" {
		return usageErrorf("empty resource name")
	}
	if len(resource) > redlock.MaxResourceLen {
		return usageErrorf("resource name is %d bytes, over the limit of %d", len(resource), redlock.MaxResourceLen)
	}
	if i := strings.IndexFunc(resource, unicode.IsControl); i >= 0 {
		return usageErrorf("resource name %q holds a control character (%q at byte %d): newlines, tabs and other control characters would break the one-line output; use printable characters", resource, resource[i:i+utf8.RuneLen([]rune(resource[i:])[0])], i)
	}
	return nil
}

// checkToken rejects a --token that cannot be a lock token (32 hex digits).
func checkToken(token string) error {
	if token == "" {
		return usageErrorf("--token is required (the token printed by acquire)")
	}
	if _, err := hex.DecodeString(token); err != nil || len(token) != 32 {
		return usageErrorf("--token must be 32 hex digits (the token printed by acquire), got %d characters", len(token))
	}
	return nil
}
