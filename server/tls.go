package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// certReloader serves the API's TLS certificate and key, read again when
// either file changes (its size, modification time or identity), so a
// rotation needs no restart: write the new files (each through a temporary
// file renamed over the old one) and new connections get the new
// certificate. A pair that does not load after a change leaves the last
// good one in force and is logged; at start-up it is an error.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu struct {
		sync.Mutex
		cert      *tls.Certificate
		certStamp stamp
		keyStamp  stamp
		// failed holds the stamps of the last pair that failed to load,
		// not tried again until a file changes again.
		failed [2]stamp
	}
}

// stamp identifies a version of a file: its size and modification time.
type stamp struct {
	size  int64
	mtime time.Time
	ok    bool
}

func stampOf(path string) stamp {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}
	}
	return stamp{size: fi.Size(), mtime: fi.ModTime(), ok: true}
}

// newCertReloader loads the pair once, failing when it does not load.
func newCertReloader(certFile, keyFile string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: log}
	cs, ks := stampOf(certFile), stampOf(keyFile)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s and --tls-key %s: %w", certFile, keyFile, err)
	}
	r.mu.cert, r.mu.certStamp, r.mu.keyStamp = &cert, cs, ks
	return r, nil
}

// getCertificate is tls.Config.GetCertificate: the current pair, reloaded
// first when a file changed.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cs, ks := stampOf(r.certFile), stampOf(r.keyFile)
	r.mu.Lock()
	defer r.mu.Unlock()
	if (cs == r.mu.certStamp && ks == r.mu.keyStamp) || !cs.ok || !ks.ok {
		return r.mu.cert, nil
	}
	if [2]stamp{cs, ks} == r.mu.failed {
		return r.mu.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		// Likely a rotation half done (the certificate written, not yet the
		// key): keep serving the last good pair, try again on the next change.
		r.mu.failed = [2]stamp{cs, ks}
		r.log.Error("reloading the TLS certificate: keeping the previous one", "cert_file", r.certFile, "key_file", r.keyFile, "error", err)
		return r.mu.cert, nil
	}
	r.mu.cert, r.mu.certStamp, r.mu.keyStamp, r.mu.failed = &cert, cs, ks, [2]stamp{}
	r.log.Info("reloaded the TLS certificate", "cert_file", r.certFile)
	return r.mu.cert, nil
}

// tlsConfig returns the server's TLS configuration.
func (r *certReloader) tlsConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.getCertificate, NextProtos: []string{"h2", "http/1.1"}}
}

// ErrTLSConfig marks --tls-cert without --tls-key or the reverse.
var ErrTLSConfig = errors.New("TLS needs both --tls-cert and --tls-key")
