package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TLSCerts is a throwaway certificate authority and a server certificate it
// signed for 127.0.0.1, ::1 and localhost, written as PEM files in a test's
// temporary directory. Use it with WithTLS to start a redis-server that
// speaks only TLS, and ClientConfig to trust it.
type TLSCerts struct {
	// CAFile, CertFile and KeyFile are the PEM files of the CA certificate,
	// the server certificate and the server's private key.
	CAFile, CertFile, KeyFile string
	// CAPEM is the CA certificate in PEM form, as in CAFile.
	CAPEM []byte

	pool *x509.CertPool
}

// NewTLSCerts generates a fresh CA (ECDSA P-256, valid for a day) and a
// server certificate signed by it, with crypto/x509, and writes them into
// a new directory under t.TempDir(). Every call makes an unrelated CA, so a
// second NewTLSCerts is the "wrong CA" for the first one's server.
func NewTLSCerts(t testing.TB) *TLSCerts {
	t.Helper()
	c, err := newTLSCerts(t.TempDir())
	if err != nil {
		t.Fatalf("testutil.NewTLSCerts: %v", err)
	}
	return c
}

func newTLSCerts(dir string) (*TLSCerts, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "redlock test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create server certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}

	c := &TLSCerts{
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "server.pem"),
		KeyFile:  filepath.Join(dir, "server-key.pem"),
		CAPEM:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pool:     x509.NewCertPool(),
	}
	c.pool.AddCert(caCert)
	files := []struct {
		path string
		data []byte
	}{
		{c.CAFile, c.CAPEM},
		{c.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})},
		{c.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n.Add(n, big.NewInt(1))
}

// ClientConfig returns a TLS client configuration that trusts only this CA
// (TLS 1.2 or later). Each call returns a new value.
func (c *TLSCerts) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: c.pool, MinVersion: tls.VersionTLS12}
}

// WithTLS makes the server speak TLS only: "port 0" (no plain TCP) and
// "tls-port" on the server's port, with c's certificate and CA, and
// "tls-auth-clients no" (clients need no certificate of their own). The
// server's Client, Node and Do then use TLS trusting c's CA, and its URL
// becomes rediss://.
func WithTLS(c *TLSCerts) Option {
	return func(o *redisOptions) { o.tls = c }
}

// confLines renders the TLS part of redis.conf for a server on port.
func (c *TLSCerts) confLines(port int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "port 0\ntls-port %d\n", port)
	fmt.Fprintf(&b, "tls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\n",
		confQuote(c.CertFile), confQuote(c.KeyFile), confQuote(c.CAFile))
	b.WriteString("tls-auth-clients no\n")
	return b.String()
}
