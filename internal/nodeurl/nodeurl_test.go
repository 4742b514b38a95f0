package nodeurl_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/internal/nodeurl"
)

func TestParseKinds(t *testing.T) {
	for _, tc := range []struct {
		url        string
		kind       nodeurl.Kind
		name       string
		addrs      []string
		master, pw string
		tls        bool
	}{
		{url: "redis://127.0.0.1:6379/2", kind: nodeurl.Standalone, name: "127.0.0.1:6379", addrs: []string{"127.0.0.1:6379"}},
		{url: "rediss://:pw@h:6380", kind: nodeurl.Standalone, name: "h:6380", addrs: []string{"h:6380"}, pw: "pw", tls: true},
		{url: "unix:///run/redis.sock?db=1", kind: nodeurl.Standalone, name: "/run/redis.sock", addrs: []string{"/run/redis.sock"}},
		{url: "redis+cluster://:pw@10.0.0.1:7000?addr=10.0.0.2:7000&addr=10.0.0.3:7000", kind: nodeurl.Cluster,
			name: "cluster(10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000)", addrs: []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"}, pw: "pw"},
		{url: "rediss+cluster://c:7000", kind: nodeurl.Cluster, name: "cluster(c:7000)", addrs: []string{"c:7000"}, tls: true},
		{url: "redis+sentinel://s1:26379?master_name=orders&addr=s2:26379&password=pw", kind: nodeurl.Sentinel,
			name: "sentinel(orders@s1:26379,s2:26379)", addrs: []string{"s1:26379", "s2:26379"}, master: "orders", pw: "pw"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			s, err := nodeurl.Parse(tc.url)
			require.NoError(t, err)
			require.Equal(t, tc.kind, s.Kind)
			require.Equal(t, tc.name, s.Name)
			s.Tune()
			c := s.NewClient()
			defer func() { _ = c.Close() }()
			switch tc.kind {
			case nodeurl.Standalone:
				require.Equal(t, tc.addrs[0], s.Options.Addr)
				require.Equal(t, tc.pw, s.Options.Password)
				require.Equal(t, tc.tls, s.Options.TLSConfig != nil)
				require.True(t, s.Options.ContextTimeoutEnabled)
				require.Equal(t, -1, s.Options.MaxRetries)
			case nodeurl.Cluster:
				require.Equal(t, tc.addrs, s.ClusterOptions.Addrs)
				require.Equal(t, tc.pw, s.ClusterOptions.Password)
				require.Equal(t, tc.tls, s.ClusterOptions.TLSConfig != nil)
				require.True(t, s.ClusterOptions.ContextTimeoutEnabled)
			case nodeurl.Sentinel:
				require.Equal(t, tc.addrs, s.FailoverOptions.SentinelAddrs)
				require.Equal(t, tc.master, s.FailoverOptions.MasterName)
				require.Equal(t, tc.pw, s.FailoverOptions.Password)
				require.True(t, s.FailoverOptions.ContextTimeoutEnabled)
			}
		})
	}
}

// TestParseKeys: two URLs name the same node exactly when their keys are
// equal, whatever the order of seeds or sentinels.
func TestParseKeys(t *testing.T) {
	key := func(u string) string {
		s, err := nodeurl.Parse(u)
		require.NoError(t, err)
		return s.Key
	}
	require.Equal(t, key("redis+cluster://a:1?addr=b:1"), key("redis+cluster://b:1?addr=a:1&addr=b:1"))
	require.Equal(t, key("redis+sentinel://s:1?master_name=m&addr=t:1"), key("redis+sentinel://t:1?master_name=m&addr=s:1"))
	require.NotEqual(t, key("redis+sentinel://s:1?master_name=m"), key("redis+sentinel://s:1?master_name=n"))
	require.NotEqual(t, key("redis+sentinel://s:1?master_name=m"), key("redis+sentinel://other:1?master_name=m"), "the same master name in two groups")
	require.NotEqual(t, key("redis://h:1/0"), key("redis://h:1/1"))
	require.Equal(t, key("redis://h:1"), key("redis://h:1/0"))
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"127.0.0.1:6379", "missing scheme"},
		{"http://h:1", `unknown scheme "http"`},
		{"unix+cluster:///x", `unknown scheme "unix+cluster"`},
		{"redis+mesh://h:1", `unknown scheme "redis+mesh"`},
		{"redis+sentinel://:s3cret@s:1", "no master_name"},
		{"redis+sentinel://s:1?master_name=m&bogus=1&password=s3cret", "unexpected option"},
		{"redis+cluster://:s3cret@h:1?addr=nope", "unable to parse addr"},
		{"redis://:s3cret@h:1/db", "invalid database"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, err := nodeurl.Parse(tc.url)
			require.Error(t, err)
			require.True(t, errors.Is(err, nodeurl.ErrSyntax))
			require.Contains(t, err.Error(), tc.want)
			require.NotContains(t, err.Error(), "s3cret")
		})
	}
}
