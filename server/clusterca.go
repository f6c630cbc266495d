package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"
)

// clusterCA is the CA of --cluster-tls-ca that a member trusts when it
// forwards a request to an https:// leader. The file is read again when it
// changes (its modification time or size), at the next connection, so that
// members trust a rotated CA without a restart. A file that is missing or
// holds no certificate while it is being replaced leaves the last CA read
// in force, with a warning.
type clusterCA struct {
	file string
	log  *slog.Logger

	mu   sync.Mutex // guards the fields below; a leaf
	mod  time.Time
	size int64
	pool *x509.CertPool
	// bad is the modification time of the last unreadable version warned
	// about, and missing says the file's absence was, so that each is
	// warned about once.
	bad     time.Time
	missing bool
}

// newClusterCA reads caFile; a file that cannot be read or holds no
// certificate is refused.
func newClusterCA(caFile string, log *slog.Logger) (*clusterCA, error) {
	c := &clusterCA{file: caFile, log: log}
	fi, err := os.Stat(caFile)
	if err == nil {
		err = c.load(fi)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: --cluster-tls-ca: %w", ErrClusterConfig, err)
	}
	return c, nil
}

// load reads the file as fi describes it; c.mu is held (or c is new).
func (c *clusterCA) load(fi os.FileInfo) error {
	b, err := os.ReadFile(c.file)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return fmt.Errorf("%s holds no PEM certificate", c.file)
	}
	c.pool, c.mod, c.size = pool, fi.ModTime(), fi.Size()
	return nil
}

// current returns the CA's certificates, read again when the file changed.
func (c *clusterCA) current() *x509.CertPool {
	fi, err := os.Stat(c.file)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if !c.missing {
			c.missing = true
			c.log.Warn("--cluster-tls-ca cannot be read: the member trusts the CA it read before", "file", c.file, "error", err.Error())
		}
		return c.pool
	}
	c.missing = false
	if !fi.ModTime().Equal(c.mod) || fi.Size() != c.size {
		if lerr := c.load(fi); lerr != nil && !fi.ModTime().Equal(c.bad) {
			c.bad = fi.ModTime()
			c.log.Warn("--cluster-tls-ca changed but cannot be read: the member trusts the CA it read before", "file", c.file, "error", lerr.Error())
		}
	}
	return c.pool
}

// verify checks the leader's certificate chain and name against the
// current CA, as crypto/tls does with RootCAs (tls.Config.VerifyConnection
// with InsecureSkipVerify, the documented way to choose the roots per
// connection).
func (c *clusterCA) verify(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return &tls.CertificateVerificationError{Err: fmt.Errorf("the leader presented no certificate")}
	}
	opts := x509.VerifyOptions{DNSName: cs.ServerName, Roots: c.current(), Intermediates: x509.NewCertPool()}
	for _, ic := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(ic)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates, Err: err}
	}
	return nil
}

// forwardTransport returns the transport of a member's forwards to the
// leader: trusting the CA in caFile (--cluster-tls-ca, read again when it
// changes) for an https:// leader, or the system's roots when caFile is
// empty.
func forwardTransport(caFile string, log *slog.Logger) (http.RoundTripper, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if caFile == "" {
		return t, nil
	}
	ca, err := newClusterCA(caFile, log)
	if err != nil {
		return nil, err
	}
	t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12,
		// Verified by VerifyConnection against the CA as it is now, not
		// skipped.
		InsecureSkipVerify: true, VerifyConnection: ca.verify}
	return t, nil
}
