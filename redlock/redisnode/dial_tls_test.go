package redisnode_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
	"github.com/e6344662/go-redlock/testutil"
)

// tlsMargin is how long past its bound a failed TLS dial may take on a
// loaded machine. Before Dial bounded the handshake by its context, these
// dials took the URL's dial_timeout (30s here).
const tlsMargin = 5 * time.Second

// fakeServer listens on a loopback port and gives every connection to
// serve, in its own goroutine; it stops and waits for them when the test
// ends. It returns the address.
func fakeServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { serve(c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// silent reads and drops what the client sends and never answers: a
// server that accepts TCP connections but never answers the handshake.
func silent(c net.Conn) { _, _ = io.Copy(io.Discard, c) }

// plainRESP answers whatever it reads with a RESP error, as a server
// without TLS answers a TLS ClientHello it cannot parse.
func plainRESP(c net.Conn) {
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
		if _, err := c.Write([]byte("-ERR unknown command\r\n")); err != nil {
			return
		}
	}
}

// TestDialBoundsTheTLSHandshakeByItsContext: rediss:// against a server
// that accepts the connection but never answers the handshake returns
// when Dial's context ends, not after the URL's dial timeout, and the
// error says that the TLS handshake timed out and that the server may not
// speak TLS.
func TestDialBoundsTheTLSHandshakeByItsContext(t *testing.T) {
	t.Parallel()
	addr := fakeServer(t, silent)
	ctx, cancel := context.WithTimeout(testutil.Context(t), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	nodes, err := redisnode.Dial(ctx, "rediss://"+addr+"?dial_timeout=30s")
	took := time.Since(start)
	require.Nil(t, nodes)
	require.Less(t, took, 300*time.Millisecond+tlsMargin)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.ErrorIs(t, err, redisnode.ErrTLSHandshake)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "TLS handshake timed out")
	require.ErrorContains(t, err, "it may not speak TLS on this port")
}

// TestDialBoundsTheTLSHandshakeByTheDialTimeout: without a deadline on
// the context, the URL's dial_timeout bounds the handshake.
func TestDialBoundsTheTLSHandshakeByTheDialTimeout(t *testing.T) {
	t.Parallel()
	addr := fakeServer(t, silent)
	start := time.Now()
	_, err := redisnode.Dial(testutil.Context(t), "rediss://"+addr+"?dial_timeout=300ms")
	require.Less(t, time.Since(start), 300*time.Millisecond+tlsMargin)
	require.ErrorIs(t, err, redisnode.ErrTLSHandshake)
	require.ErrorContains(t, err, "TLS handshake timed out")
}

// TestDialNamesATLSHandshakeWithAPlainServer: a server that answers the
// ClientHello in plain RESP makes the handshake fail at once, and the
// error says the answer was not TLS.
func TestDialNamesATLSHandshakeWithAPlainServer(t *testing.T) {
	t.Parallel()
	addr := fakeServer(t, plainRESP)
	ctx, cancel := context.WithTimeout(testutil.Context(t), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := redisnode.Dial(ctx, "rediss://"+addr)
	require.Less(t, time.Since(start), tlsMargin, "no need to wait for a timeout")
	require.ErrorIs(t, err, redisnode.ErrTLSHandshake)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "the server answered, but not in TLS: it may not speak TLS on this port")
}

// TestDialBoundsTheTLSHandshakeOfEveryKind: a Cluster URL with TLS gets
// the bounded handshake too. A Sentinel URL's Dial is bounded by the URL's
// dial_timeout only: go-redis dials the sentinels in the background
// under that timeout alone, and closing the client (Dial closes it when
// it fails) waits for that dial.
func TestDialBoundsTheTLSHandshakeOfEveryKind(t *testing.T) {
	t.Parallel()
	addr := fakeServer(t, silent)
	for _, tc := range []struct {
		url   string
		bound time.Duration
	}{
		{"rediss+cluster://" + addr + "?dial_timeout=30s", 300 * time.Millisecond},
		{"rediss+sentinel://" + addr + "?master_name=locks&dial_timeout=1s", time.Second},
	} {
		ctx, cancel := context.WithTimeout(testutil.Context(t), 300*time.Millisecond)
		start := time.Now()
		_, err := redisnode.Dial(ctx, tc.url)
		cancel()
		require.Less(t, time.Since(start), tc.bound+tlsMargin, tc.url)
		require.ErrorIs(t, err, redlock.ErrNoQuorum, tc.url)
	}
}

// TestDialSpeaksTLS: the bounded handshake still connects to a real
// redis-server over TLS, and a Locker works through it.
func TestDialSpeaksTLS(t *testing.T) {
	t.Parallel()
	path := testutil.RedisServerPath(t)
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	cmd := exec.Command(path, "--port", "0", "--tls-port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", cert, "--tls-auth-clients", "no",
		"--save", "", "--appendonly", "no", "--dir", dir)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Skipf("redis-server: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	ctx := testutil.Context(t)
	u := fmt.Sprintf("rediss://127.0.0.1:%d?skip_verify=true", port)
	var nodes redisnode.Nodes
	require.Eventually(t, func() bool {
		nodes, err = redisnode.Dial(ctx, u)
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "redis-server with TLS did not start (built without TLS?)")
	defer nodes.Close()
	l, err := redlock.New(nodes, redlock.Config{RejoinDelay: -1}) // a fresh server
	require.NoError(t, err)
	defer l.Close()
	lease, err := l.TryAcquire(ctx, "over-tls")
	require.NoError(t, err)
	require.NoError(t, lease.Release(ctx))
}

// writeSelfSigned writes a self-signed certificate for 127.0.0.1 and its
// key to dir, and returns their paths.
func writeSelfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(priv)
	require.NoError(t, err)
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return cert, key
}
