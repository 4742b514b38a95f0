// Package nodeurl parses the URL of one Redlock node: a standalone Redis
// server, a Redis Cluster, or a primary managed by Redis Sentinel. It is
// the one parser of node URLs, used by redisnode.Dial and by redlock-cli
// (including doctor), and it leaves the syntax of each kind to go-redis's
// own parser:
//
//	redis://[user:password@]host:port[/db][?option=value]     standalone (rediss:// for TLS)
//	unix://[user:password@]/path/to/redis.sock[?db=N]            standalone over a Unix socket
//	redis+cluster://[user:password@]seed:port[?addr=seed2:port&addr=...]
//	                                                              a Redis Cluster (rediss+cluster:// for TLS)
//	redis+sentinel://[sentinel-user:sentinel-password@]sentinel:port?master_name=NAME[&addr=sentinel2:port...][&password=...]
//	                                                              a Sentinel-managed primary (rediss+sentinel:// for TLS)
//
// The "+cluster" and "+sentinel" forms are read by go-redis's
// ParseClusterURL and ParseFailoverURL (with the scheme's suffix removed),
// so every query option those accept is accepted here. In a Sentinel URL
// the user information authenticates to the sentinels; the primary's own
// credentials are the username= and password= options.
package nodeurl

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/internal/redact"
)

// Kind is the kind of deployment a node URL names.
type Kind int

const (
	// Standalone is one Redis server (redis://, rediss://, unix://).
	Standalone Kind = iota
	// Cluster is one Redis Cluster, reached through seed addresses.
	Cluster
	// Sentinel is one replicated group whose primary Sentinel names.
	Sentinel
)

// String names the kind as the URL schemes do.
func (k Kind) String() string {
	switch k {
	case Cluster:
		return "cluster"
	case Sentinel:
		return "sentinel"
	}
	return "standalone"
}

// ErrSyntax marks a node URL that cannot be parsed. Messages never hold a
// password.
var ErrSyntax = errors.New("malformed node URL")

// Spec is a parsed node URL. Exactly one of Options, ClusterOptions and
// FailoverOptions is set, by Kind.
type Spec struct {
	Kind Kind
	// Name is how the node is shown: host:port, the socket path,
	// cluster(seed,...) or sentinel(name@sentinel,...). It holds no
	// password.
	Name string
	// Key identifies what the URL points at before any connection: two
	// URLs with the same Key name the same node (same server and database,
	// same cluster seeds, same master name and sentinels).
	Key string

	Options         *redis.Options
	ClusterOptions  *redis.ClusterOptions
	FailoverOptions *redis.FailoverOptions
}

// Schemes lists the URL schemes Parse accepts.
var Schemes = []string{"redis", "rediss", "unix", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel"}

// Parse reads one node URL. Errors wrap ErrSyntax and show the URL with its
// passwords hidden.
func Parse(raw string) (*Spec, error) {
	raw = strings.TrimSpace(raw)
	s, err := parse(raw)
	if err != nil {
		shown := redact.URL(raw)
		return nil, fmt.Errorf("%w %s: %s", ErrSyntax, shown, why(raw, shown, err))
	}
	return s, nil
}

// why explains err, the failure to parse raw, without a secret: when raw
// holds one, the reason is the parser's verdict on shown (raw with its
// secrets masked), if that fails too, or else a generic hint.
func why(raw, shown string, err error) string {
	if shown == raw {
		return redact.URLError(raw, err)
	}
	if _, err2 := parse(shown); err2 != nil {
		var ue *url.Error
		if errors.As(err2, &ue) {
			err2 = ue.Err // url.Error repeats the whole URL
		}
		return redact.String(err2.Error())
	}
	return redact.URLError(raw, err)
}

// parse is Parse with errors that may quote raw.
func parse(raw string) (*Spec, error) {
	want := "want one of " + strings.Join(Schemes, "://, ") + "://"
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("missing scheme (%s)", want)
	}
	base, kind, _ := strings.Cut(scheme, "+")
	if (base != "redis" && base != "rediss" && base != "unix") || (kind != "" && base == "unix") {
		return nil, fmt.Errorf("unknown scheme %q (%s)", scheme, want)
	}
	bare := base + "://" + rest
	switch kind {
	case "":
		o, err := redis.ParseURL(bare)
		if err != nil {
			return nil, err
		}
		return &Spec{Kind: Standalone, Name: o.Addr, Key: fmt.Sprintf("%s/%d", o.Addr, o.DB), Options: o}, nil
	case "cluster":
		o, err := redis.ParseClusterURL(bare)
		if err != nil {
			return nil, err
		}
		seeds := sortedUnique(o.Addrs)
		return &Spec{Kind: Cluster, Name: "cluster(" + strings.Join(o.Addrs, ",") + ")", Key: "cluster " + strings.Join(seeds, ","), ClusterOptions: o}, nil
	case "sentinel":
		o, err := redis.ParseFailoverURL(bare)
		if err != nil {
			return nil, err
		}
		if o.MasterName == "" {
			return nil, errors.New("no master_name (a Sentinel URL names the primary: ?master_name=NAME)")
		}
		sentinels := sortedUnique(o.SentinelAddrs)
		return &Spec{
			Kind:            Sentinel,
			Name:            "sentinel(" + o.MasterName + "@" + strings.Join(o.SentinelAddrs, ",") + ")",
			Key:             fmt.Sprintf("sentinel %s@%s/%d", o.MasterName, strings.Join(sentinels, ","), o.DB),
			FailoverOptions: o,
		}, nil
	}
	return nil, fmt.Errorf("unknown scheme %q (%s)", scheme, want)
}

func sortedUnique(addrs []string) []string {
	s := slices.Clone(addrs)
	slices.Sort(s)
	return slices.Compact(s)
}

// Tune sets the options a Redlock node needs unless the URL set them: the
// client honours context deadlines (the Locker bounds every call), does not
// retry commands (the Locker retries across nodes, within the lease's
// validity) and dials once per attempt. A cluster still follows MOVED and
// ASK redirects (max_redirects).
func (s *Spec) Tune() {
	switch s.Kind {
	case Standalone:
		tune(&s.Options.ContextTimeoutEnabled, &s.Options.MaxRetries, &s.Options.DialerRetries)
	case Cluster:
		o := s.ClusterOptions
		tune(&o.ContextTimeoutEnabled, &o.MaxRetries, &o.DialerRetries)
	case Sentinel:
		o := s.FailoverOptions
		tune(&o.ContextTimeoutEnabled, &o.MaxRetries, &o.DialerRetries)
	}
}

// tune applies Tune's defaults to one kind of options. go-redis reads 0 as
// "unset" (3 retries, 5 dials); -1 turns retries off.
func tune(contextTimeout *bool, maxRetries, dialerRetries *int) {
	*contextTimeout = true
	if *maxRetries == 0 {
		*maxRetries = -1
	}
	if *dialerRetries == 0 {
		*dialerRetries = 1
	}
}

// NewClient returns a go-redis client for the node: a *redis.Client for a
// standalone server or a Sentinel group, a *redis.ClusterClient for a
// cluster. It does not connect.
func (s *Spec) NewClient() redis.UniversalClient {
	switch s.Kind {
	case Cluster:
		return redis.NewClusterClient(s.ClusterOptions)
	case Sentinel:
		return redis.NewFailoverClient(s.FailoverOptions)
	}
	return redis.NewClient(s.Options)
}
