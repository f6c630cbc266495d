// Package testpki generates, for tests, a certificate authority and the
// server and client certificates it signs, written as PEM files: what a
// test of TLS (the API, NATS, PostgreSQL) needs without files checked in
// and without anything expiring in the repository.
//
// It may import only the standard library.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	// Cert is the CA's certificate.
	Cert *x509.Certificate
	// File is its PEM file.
	File string

	key    *ecdsa.PrivateKey
	dir    string
	serial atomic.Int64
}

// Pair names a certificate's and its key's PEM files.
type Pair struct {
	CertFile, KeyFile string
}

// NewCA makes a CA named name, writing its certificate to DIR/name.pem.
func NewCA(tb testing.TB, dir, name string) *CA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	ca := &CA{Cert: cert, File: filepath.Join(dir, name+".pem"), key: key, dir: dir}
	ca.serial.Store(1)
	writePEM(tb, ca.File, "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for localhost and 127.0.0.1 (and
// hosts, names or IPs), written to DIR/name.pem and DIR/name-key.pem.
func (ca *CA) Server(tb testing.TB, name string, hosts ...string) Pair {
	tb.Helper()
	return ca.issue(tb, name, x509.ExtKeyUsageServerAuth, append([]string{"localhost", "127.0.0.1"}, hosts...))
}

// Client issues a client certificate with common name name.
func (ca *CA) Client(tb testing.TB, name string) Pair {
	tb.Helper()
	return ca.issue(tb, name, x509.ExtKeyUsageClientAuth, nil)
}

func (ca *CA) issue(tb testing.TB, name string, usage x509.ExtKeyUsage, hosts []string) Pair {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	p := Pair{CertFile: filepath.Join(ca.dir, name+".pem"), KeyFile: filepath.Join(ca.dir, name+"-key.pem")}
	writePEM(tb, p.CertFile, "CERTIFICATE", der)
	writePEM(tb, p.KeyFile, "PRIVATE KEY", kder)
	return p
}

func writePEM(tb testing.TB, path, typ string, der []byte) {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
}
