package testutil_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/testutil"
)

func TestNewTLSCertsMakesACAAndAServerCertificate(t *testing.T) {
	c := testutil.NewTLSCerts(t)
	block, _ := pem.Decode(c.CAPEM)
	require.NotNil(t, block)
	ca, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	require.True(t, ca.IsCA)

	pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	for _, host := range []string{"127.0.0.1", "::1", "localhost"} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: c.ClientConfig().RootCAs, DNSName: host})
		require.NoError(t, err, host)
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: testutil.NewTLSCerts(t).ClientConfig().RootCAs, DNSName: "127.0.0.1"})
	require.Error(t, err, "another CA does not vouch for it")
}

func TestRedisWithTLSSpeaksOnlyTLS(t *testing.T) {
	ctx := ctxT(t)
	certs := testutil.NewTLSCerts(t)
	s := testutil.StartRedisServer(t, testutil.WithTLS(certs), testutil.WithPassword("tls-pw"))
	require.True(t, strings.HasPrefix(s.URL(), "rediss://"), s.URL())
	require.Equal(t, "0", configGet(t, s, "port"))
	require.NoError(t, s.Client().Set(ctx, "k", "v", 0).Err())

	// Plain TCP gets no Redis answer.
	plain := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: "tls-pw", MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer plain.Close()
	require.Error(t, plain.Ping(ctx).Err())

	// Restart waits for the TLS port, with the data.
	require.NoError(t, s.Restart())
	got, err := s.Do(ctx, "GET", "k").Text()
	require.NoError(t, err)
	require.Equal(t, "v", got)
	conn, err := tls.Dial("tcp", s.Addr(), certs.ClientConfig())
	require.NoError(t, err)
	require.NoError(t, conn.Close())
}

func TestACLHelpers(t *testing.T) {
	ctx := ctxT(t)
	require.Contains(t, testutil.LockerACL("app:[x]*"), `~app:\[x\]\**`)
	require.Contains(t, testutil.LockerACL("app:"), "&app:*")
	require.Contains(t, testutil.StoreACL("res:"), "~res:*")

	s := testutil.StartRedisServer(t)
	require.NoError(t, s.SetACLUser(ctx, "u", "pw-1", testutil.LockerACL("app:")...))
	opts, err := redis.ParseURL(s.UserURL("u", "pw-1"))
	require.NoError(t, err)
	c := redis.NewClient(opts)
	defer c.Close()
	require.NoError(t, c.Ping(ctx).Err())
	require.NoError(t, c.Set(ctx, "app:k", "v", 0).Err())
	require.ErrorContains(t, c.Set(ctx, "other:k", "v", 0).Err(), "NOPERM")
	require.ErrorContains(t, c.Do(ctx, "FLUSHALL").Err(), "NOPERM")

	host, _, err := net.SplitHostPort(s.Addr())
	require.NoError(t, err)
	require.Contains(t, s.UserURL("u", "pw-1"), "redis://u:pw-1@"+host)
	require.Error(t, s.SetACLUser(ctx, "bad", "pw", "+no-such-command"))
}
