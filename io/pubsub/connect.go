package pubsub

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weir-dev/weir/mtime"
)

// This file connects to an external NATS server (--nats-url) with the
// credentials and TLS settings of Credentials.

// Credentials are how weir authenticates to an external NATS server and
// which TLS it expects of it. At most one of CredsFile, NKeyFile and a
// user (User, or the user of the URL) is set. The zero value sends no
// credentials and uses TLS only when the URL's scheme is tls:// (or the
// server requires it), verified against the system's roots.
type Credentials struct {
	// CredsFile is a NATS .creds file: a user JWT and its NKEY seed
	// (--nats-creds), as `nsc generate creds` writes it.
	CredsFile string
	// NKeyFile holds an NKEY user seed, SU... (--nats-nkey).
	NKeyFile string
	// User is the user name of user/password authentication
	// (--nats-user); the password is read from PasswordFile. A URL with
	// nats://user:pass@host carries both instead.
	User string
	// PasswordFile holds the password of User (--nats-password-file);
	// one trailing newline is ignored.
	PasswordFile string
	// TLSCAFile is a PEM file of the CA certificates that verify the
	// server's certificate (--nats-tls-ca); setting it turns TLS on.
	TLSCAFile string
	// TLSCertFile and TLSKeyFile, both or neither, are the client
	// certificate and key of mutual TLS (--nats-tls-cert, --nats-tls-key).
	TLSCertFile, TLSKeyFile string
}

// Files returns the credential and key files named (for a server to keep
// them out of the pipelines' reach).
func (c Credentials) Files() []string {
	var out []string
	for _, f := range []string{c.CredsFile, c.NKeyFile, c.PasswordFile, c.TLSKeyFile} {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

// ReplicasAuto is the ConnectOptions.Replicas that follows the NATS
// server: three replicas on a NATS cluster, one on a single server.
const ReplicasAuto = -1

// ConnectOptions configure Connect.
type ConnectOptions struct {
	// URL is the server's URL, e.g. nats://127.0.0.1:4222 or
	// tls://nats.example.com:4222; several may be given, comma-separated.
	// Required.
	URL string
	// Credentials authenticate weir and configure TLS.
	Credentials Credentials
	// Logger receives the broker's logs. Default slog.Default().
	Logger *slog.Logger
	// Replicas is how many NATS servers keep each stream and bucket the
	// broker creates (topics, subscriptions' records, snapshots); 0: one;
	// ReplicasAuto: three when the server is part of a NATS cluster, one
	// otherwise. A weir cluster on a NATS cluster of three keeps three, so
	// that the loss of one NATS server loses nothing and stops nothing.
	Replicas int
	// UnreachableAfter is the SourceConfig.UnreachableAfter of the
	// sources read through the broker that set none: how long their
	// reads ride out a lost connection. Default DefaultUnreachableAfter.
	UnreachableAfter time.Duration
	// StartWait is how long ConnectWith keeps trying a server that does
	// not answer (nothing listens, no route: it may be starting, as after
	// a machine's boot), logging once that it waits; 0: it fails at the
	// first attempt. Refused credentials and failed TLS fail at once.
	StartWait time.Duration
}

// startRetry is how often ConnectWith tries again within StartWait.
const startRetry = 250 * time.Millisecond

// Validate reports options that cannot work, naming the flags concerned.
// It reads no file.
func (o ConnectOptions) Validate() error {
	if o.URL == "" {
		return fmt.Errorf("no NATS URL: %w", ErrInvalidConfig)
	}
	c := o.Credentials
	urlUser := false
	for _, u := range strings.Split(o.URL, ",") {
		pu, err := url.Parse(strings.TrimSpace(u))
		if err == nil && pu.User != nil {
			urlUser = true
		}
	}
	var kinds []string
	if c.CredsFile != "" {
		kinds = append(kinds, "--nats-creds")
	}
	if c.NKeyFile != "" {
		kinds = append(kinds, "--nats-nkey")
	}
	if c.User != "" {
		kinds = append(kinds, "--nats-user")
	}
	if urlUser {
		kinds = append(kinds, "a user in --nats-url")
	}
	if len(kinds) > 1 {
		return fmt.Errorf("%s: give one way to authenticate to NATS: %w", strings.Join(kinds, " and "), ErrInvalidConfig)
	}
	if (c.User == "") != (c.PasswordFile == "") {
		return fmt.Errorf("--nats-user and --nats-password-file go together: %w", ErrInvalidConfig)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return fmt.Errorf("--nats-tls-cert and --nats-tls-key go together: %w", ErrInvalidConfig)
	}
	return nil
}

// RedactURL returns url with the secrets of its user parts replaced by
// "xxxxx", for messages and logs: a user's password, or a user part
// without a password, which NATS takes as a token.
func RedactURL(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			if _, ok := u.User.Password(); !ok {
				u.User = url.User("xxxxx")
				parts[i] = u.String()
				continue
			}
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}

// describe says which credentials a connection presents.
func (o ConnectOptions) describe() string {
	c := o.Credentials
	switch {
	case c.CredsFile != "":
		return "the credentials of --nats-creds " + c.CredsFile
	case c.NKeyFile != "":
		return "the NKEY seed of --nats-nkey " + c.NKeyFile
	case c.User != "":
		return fmt.Sprintf("user %q (--nats-user, --nats-password-file %s)", c.User, c.PasswordFile)
	}
	for _, p := range strings.Split(o.URL, ",") {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			if _, ok := u.User.Password(); !ok {
				return "the token of --nats-url"
			}
			return fmt.Sprintf("user %q of --nats-url", u.User.Username())
		}
	}
	return "no credentials (give --nats-creds, --nats-nkey, or --nats-user and --nats-password-file)"
}

// natsOptions turns the credentials into nats.go options, reading their
// files first so that a missing or malformed file is named.
func (o ConnectOptions) natsOptions() ([]nats.Option, error) {
	c := o.Credentials
	var opts []nats.Option
	readable := func(flag, f string) error {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("%s: %w: %w", flag, ErrInvalidConfig, err)
		}
		if len(strings.TrimSpace(string(b))) == 0 {
			return fmt.Errorf("%s %s is empty: %w", flag, f, ErrInvalidConfig)
		}
		return nil
	}
	switch {
	case c.CredsFile != "":
		if err := readable("--nats-creds", c.CredsFile); err != nil {
			return nil, err
		}
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	case c.NKeyFile != "":
		if err := readable("--nats-nkey", c.NKeyFile); err != nil {
			return nil, err
		}
		opt, err := nats.NkeyOptionFromSeed(c.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey %s: not an NKEY user seed: %w: %w", c.NKeyFile, ErrInvalidConfig, err)
		}
		opts = append(opts, opt)
	case c.User != "":
		b, err := os.ReadFile(c.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("--nats-password-file: %w: %w", ErrInvalidConfig, err)
		}
		opts = append(opts, nats.UserInfo(c.User, strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")))
	}
	if c.TLSCAFile != "" {
		b, err := os.ReadFile(c.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("--nats-tls-ca: %w: %w", ErrInvalidConfig, err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--nats-tls-ca %s holds no PEM certificate: %w", c.TLSCAFile, ErrInvalidConfig)
		}
		opts = append(opts, nats.RootCAs(c.TLSCAFile))
	}
	if c.TLSCertFile != "" {
		if _, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile); err != nil {
			return nil, fmt.Errorf("--nats-tls-cert %s and --nats-tls-key %s: %w: %w", c.TLSCertFile, c.TLSKeyFile, ErrInvalidConfig, err)
		}
		opts = append(opts, nats.ClientCert(c.TLSCertFile, c.TLSKeyFile))
	}
	return opts, nil
}

// explain words a failed connection: refused credentials (ErrAuthRefused),
// a TLS failure (with what to check) or an unreachable server
// (ErrUnavailable).
func (o ConnectOptions) explain(url string, err error) error {
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked),
		errors.Is(err, nats.ErrAccountAuthExpired), strings.Contains(strings.ToLower(err.Error()), "authorization violation"):
		return fmt.Errorf("the NATS server at %s refused %s: %w: %w", url, o.describe(), ErrAuthRefused, err)
	case errors.Is(err, nats.ErrSecureConnRequired):
		return fmt.Errorf("the NATS server at %s requires TLS: use a tls:// URL or give --nats-tls-ca: %w: %w", url, ErrUnavailable, err)
	case errors.Is(err, nats.ErrSecureConnWanted):
		return fmt.Errorf("the NATS server at %s does not offer TLS, which --nats-tls-ca, --nats-tls-cert or a tls:// URL asks for: %w: %w", url, ErrUnavailable, err)
	case isTLSError(err):
		hint := "check --nats-tls-ca (the CA that signed the server's certificate) and that the URL's host name is in it"
		if o.Credentials.TLSCertFile == "" {
			hint += "; a server that requires client certificates needs --nats-tls-cert and --nats-tls-key"
		}
		return fmt.Errorf("TLS with the NATS server at %s failed (%s): %w: %w", url, hint, ErrUnavailable, err)
	}
	return fmt.Errorf("connecting to %s: %w: %w", url, ErrUnavailable, err)
}

// isTLSError reports certificate and handshake failures.
func isTLSError(err error) bool {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
		verify   *tls.CertificateVerificationError
		alert    tls.AlertError
	)
	if errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &record) ||
		errors.As(err, &verify) || errors.As(err, &alert) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "tls: ") || strings.Contains(s, "tls error") || strings.Contains(s, "x509: ")
}

// Connect connects to an external NATS server with JetStream enabled, at url
// (e.g. nats://127.0.0.1:4222), without credentials of its own (url may
// carry a user and password). See ConnectWith.
func Connect(ctx context.Context, url string, logger *slog.Logger) (*Broker, error) {
	return ConnectWith(ctx, ConnectOptions{URL: url, Logger: logger})
}

// ConnectWith connects to an external NATS server with JetStream enabled,
// authenticating and verifying TLS as o.Credentials say. It blocks until
// connected, ctx is done or the connection failed; it fails with
// ErrInvalidConfig for options or files that cannot work, ErrAuthRefused
// when the server refuses the credentials, and ErrUnavailable when the
// server cannot be reached, TLS fails or the server has no JetStream. The
// errors name the URL (its password hidden).
func ConnectWith(ctx context.Context, o ConnectOptions) (*Broker, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	shown := RedactURL(o.URL)
	creds, err := o.natsOptions()
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", shown, err)
	}
	timeout := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("connecting to %s: %w: %w", shown, ErrUnavailable, context.DeadlineExceeded)
	}
	type result struct {
		nc  *nats.Conn
		err error
	}
	var r result
	deadline := time.Now().Add(o.StartWait)
	for attempt := 0; ; attempt++ {
		ch := make(chan result, 1)
		go func() {
			opts := append([]nats.Option{nats.Name("weir"), nats.Timeout(timeout), nats.MaxReconnects(-1)}, creds...)
			nc, err := nats.Connect(o.URL, opts...)
			ch <- result{nc, err}
		}()
		select {
		case r = <-ch:
		case <-ctx.Done():
			go func() {
				if r := <-ch; r.nc != nil {
					r.nc.Close()
				}
			}()
			return nil, fmt.Errorf("connecting to %s: %w: %w", shown, ErrUnavailable, ctx.Err())
		}
		if r.err == nil {
			break
		}
		err := o.explain(shown, r.err)
		if !errors.Is(r.err, nats.ErrNoServers) || !time.Now().Add(startRetry).Before(deadline) {
			return nil, err
		}
		if attempt == 0 {
			logger.Warn(fmt.Sprintf("the NATS server does not answer yet: trying again for up to %s", o.StartWait), "url", shown, "error", r.err.Error())
		}
		t := time.NewTimer(startRetry)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (waited for it until cancelled: %w)", err, ctx.Err())
		}
	}
	b, err := newBroker(r.nc, nil, logger, mtime.WallClock{})
	if err != nil {
		r.nc.Close()
		return nil, err
	}
	b.unreachableAfter = o.UnreachableAfter
	switch {
	case o.Replicas == ReplicasAuto && r.nc.ConnectedClusterName() != "":
		b.replicas = 3
	case o.Replicas > 1:
		b.replicas = o.Replicas
	}
	if _, err := b.js.AccountInfo(ctx); err != nil {
		r.nc.Close()
		return nil, fmt.Errorf("checking JetStream on %s (is it enabled, for this user's account too?): %w: %w", shown, ErrUnavailable, err)
	}
	b.log.Info("connected to external broker", "url", shown, "server_version", r.nc.ConnectedServerVersion(), "tls", r.nc.TLSRequired())
	return b, nil
}
