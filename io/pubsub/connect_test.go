package pubsub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/weir-dev/weir/internal/natscluster"
	"github.com/weir-dev/weir/internal/testpki"
)

// natsServer starts an in-process NATS server with JetStream on a random
// loopback port, configured by cfg, and returns its client URL's host:port.
func natsServer(t *testing.T, cfg func(*server.Options)) string {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}
	cfg(opts)
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("the NATS server did not start")
	}
	t.Cleanup(s.Shutdown)
	return s.Addr().String()
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// roundTrip checks that b works: a topic, a publish, a pull.
func roundTrip(t *testing.T, b *Broker, name string) {
	t.Helper()
	ctx := tctx(t)
	if _, err := b.CreateTopic(ctx, name, TopicConfig{Retention: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateSubscription(ctx, name+"-sub", name, SubscriptionConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, name, []byte("hi"), nil, "1"); err != nil {
		t.Fatal(err)
	}
	msgs, err := b.Pull(ctx, name+"-sub", 10, true)
	if err != nil || len(msgs) != 1 || string(msgs[0].Data) != "hi" {
		t.Fatalf("pull: %+v %v", msgs, err)
	}
}

// TestConnectCredentials connects to real NATS servers that require
// user/password, an NKEY, a creds file (operator mode, JWTs made in the
// test), TLS with a CA made in the test, and mutual TLS: the right
// credentials work end to end, the wrong ones fail at once with an error
// that names the URL (never its password) and what was refused.
func TestConnectCredentials(t *testing.T) {
	dir := t.TempDir()

	// User and password.
	userAddr := natsServer(t, func(o *server.Options) { o.Username, o.Password = "weir", "s3cret-pass" })
	goodPass := writeFile(t, dir, "pass", "s3cret-pass\n")
	badPass := writeFile(t, dir, "badpass", "wrong")

	// NKEY.
	nkUser, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	nkPub, _ := nkUser.PublicKey()
	nkSeed, _ := nkUser.Seed()
	otherUser, _ := nkeys.CreateUser()
	otherSeed, _ := otherUser.Seed()
	nkeyAddr := natsServer(t, func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: nkPub}} })
	goodSeed := writeFile(t, dir, "user.nk", string(nkSeed))
	badSeed := writeFile(t, dir, "other.nk", string(otherSeed))

	// Creds (operator mode): operator → account (with JetStream) → user.
	op, _ := nkeys.CreateOperator()
	opPub, _ := op.PublicKey()
	opClaims := jwt.NewOperatorClaims(opPub)
	opJWT, err := opClaims.Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	if opClaims, err = jwt.DecodeOperatorClaims(opJWT); err != nil {
		t.Fatal(err)
	}
	creds := func(account nkeys.KeyPair, name string) string {
		u, _ := nkeys.CreateUser()
		upub, _ := u.PublicKey()
		useed, _ := u.Seed()
		uc := jwt.NewUserClaims(upub)
		ujwt, err := uc.Encode(account)
		if err != nil {
			t.Fatal(err)
		}
		b, err := jwt.FormatUserConfig(ujwt, useed)
		if err != nil {
			t.Fatal(err)
		}
		return writeFile(t, dir, name, string(b))
	}
	acc, _ := nkeys.CreateAccount()
	accPub, _ := acc.PublicKey()
	ac := jwt.NewAccountClaims(accPub)
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	accJWT, err := ac.Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	sys, _ := nkeys.CreateAccount()
	sysPub, _ := sys.PublicKey()
	sysJWT, err := jwt.NewAccountClaims(sysPub).Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	resolver := &server.MemAccResolver{}
	if err := resolver.Store(accPub, accJWT); err != nil {
		t.Fatal(err)
	}
	if err := resolver.Store(sysPub, sysJWT); err != nil {
		t.Fatal(err)
	}
	credsAddr := natsServer(t, func(o *server.Options) {
		o.TrustedOperators = []*jwt.OperatorClaims{opClaims}
		o.AccountResolver = resolver
		o.SystemAccount = sysPub
	})
	goodCreds := creds(acc, "user.creds")
	stranger, _ := nkeys.CreateAccount() // an account the server does not know
	badCreds := creds(stranger, "stranger.creds")

	// TLS, and mutual TLS.
	ca := testpki.NewCA(t, dir, "nats-ca")
	srvCert := ca.Server(t, "nats-server")
	client := ca.Client(t, "weir")
	otherCA := testpki.NewCA(t, t.TempDir(), "other-ca")
	tlsAddr := natsServer(t, func(o *server.Options) {
		cfg, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: srvCert.CertFile, KeyFile: srvCert.KeyFile})
		if err != nil {
			t.Fatal(err)
		}
		o.TLSConfig, o.TLS, o.TLSTimeout = cfg, true, 5
	})
	mtlsAddr := natsServer(t, func(o *server.Options) {
		cfg, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: srvCert.CertFile, KeyFile: srvCert.KeyFile, CaFile: ca.File, Verify: true})
		if err != nil {
			t.Fatal(err)
		}
		o.TLSConfig, o.TLS, o.TLSVerify, o.TLSTimeout = cfg, true, true, 5
	})

	for i, tc := range []struct {
		name    string
		url     string
		creds   Credentials
		wantErr error
		want    []string // in the error
		notWant []string
	}{
		{name: "password in the URL", url: "nats://weir:s3cret-pass@" + userAddr},
		{name: "user and password file", url: "nats://" + userAddr, creds: Credentials{User: "weir", PasswordFile: goodPass}},
		{name: "wrong password in the URL", url: "nats://weir:wrong-pass@" + userAddr, wantErr: ErrAuthRefused,
			want: []string{"nats://weir:xxxxx@" + userAddr, "refused", `user "weir"`, "Authorization Violation"}, notWant: []string{"wrong-pass"}},
		{name: "wrong password file", url: "nats://" + userAddr, creds: Credentials{User: "weir", PasswordFile: badPass}, wantErr: ErrAuthRefused,
			want: []string{"nats://" + userAddr, "refused", `user "weir"`, "--nats-password-file"}},
		{name: "no credentials", url: "nats://" + userAddr, wantErr: ErrAuthRefused,
			want: []string{"refused no credentials", "--nats-creds"}},
		{name: "nkey", url: "nats://" + nkeyAddr, creds: Credentials{NKeyFile: goodSeed}},
		{name: "wrong nkey", url: "nats://" + nkeyAddr, creds: Credentials{NKeyFile: badSeed}, wantErr: ErrAuthRefused,
			want: []string{"nats://" + nkeyAddr, "refused the NKEY seed of --nats-nkey " + badSeed}},
		{name: "nkey file not a seed", url: "nats://" + nkeyAddr, creds: Credentials{NKeyFile: goodPass}, wantErr: ErrInvalidConfig,
			want: []string{"--nats-nkey " + goodPass, "not an NKEY user seed"}},
		{name: "creds", url: "nats://" + credsAddr, creds: Credentials{CredsFile: goodCreds}},
		{name: "creds of an unknown account", url: "nats://" + credsAddr, creds: Credentials{CredsFile: badCreds}, wantErr: ErrAuthRefused,
			want: []string{"nats://" + credsAddr, "refused the credentials of --nats-creds " + badCreds}},
		{name: "missing creds file", url: "nats://" + credsAddr, creds: Credentials{CredsFile: filepath.Join(dir, "nope.creds")}, wantErr: ErrInvalidConfig,
			want: []string{"--nats-creds", "nope.creds"}},
		{name: "tls with the CA", url: "nats://" + tlsAddr, creds: Credentials{TLSCAFile: ca.File}},
		{name: "tls:// with the CA", url: "tls://" + tlsAddr, creds: Credentials{TLSCAFile: ca.File}},
		{name: "tls without the CA", url: "tls://" + tlsAddr, wantErr: ErrUnavailable,
			want: []string{"TLS with the NATS server at tls://" + tlsAddr, "--nats-tls-ca"}},
		{name: "tls with another CA", url: "nats://" + tlsAddr, creds: Credentials{TLSCAFile: otherCA.File}, wantErr: ErrUnavailable,
			want: []string{"TLS with the NATS server", "--nats-tls-ca", "x509"}},
		{name: "plain client, tls server", url: "nats://" + tlsAddr, wantErr: ErrUnavailable,
			want: []string{tlsAddr}},
		{name: "tls asked of a plain server", url: "nats://" + userAddr, creds: Credentials{User: "weir", PasswordFile: goodPass, TLSCAFile: ca.File}, wantErr: ErrUnavailable,
			want: []string{"does not offer TLS"}},
		{name: "mutual tls", url: "nats://" + mtlsAddr, creds: Credentials{TLSCAFile: ca.File, TLSCertFile: client.CertFile, TLSKeyFile: client.KeyFile}},
		{name: "mutual tls without a client certificate", url: "nats://" + mtlsAddr, creds: Credentials{TLSCAFile: ca.File}, wantErr: ErrUnavailable,
			want: []string{"nats://" + mtlsAddr, "--nats-tls-cert"}},
		{name: "two ways to authenticate", url: "nats://u:p@" + userAddr, creds: Credentials{NKeyFile: goodSeed}, wantErr: ErrInvalidConfig,
			want: []string{"--nats-nkey and a user in --nats-url"}},
		{name: "user without a password file", url: "nats://" + userAddr, creds: Credentials{User: "weir"}, wantErr: ErrInvalidConfig,
			want: []string{"--nats-user and --nats-password-file"}},
		{name: "cert without key", url: "nats://" + mtlsAddr, creds: Credentials{TLSCertFile: client.CertFile}, wantErr: ErrInvalidConfig,
			want: []string{"--nats-tls-cert and --nats-tls-key"}},
	} {
		topic := fmt.Sprintf("t%d", i)
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			b, err := ConnectWith(ctx, ConnectOptions{URL: tc.url, Credentials: tc.creds, Logger: testLogger()})
			if tc.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				defer b.Shutdown(context.Background())
				roundTrip(t, b, topic)
				return
			}
			if err == nil {
				b.Shutdown(context.Background())
				t.Fatalf("connected, want %v", tc.wantErr)
			}
			t.Log(err)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v, want errors.Is %v", err, tc.wantErr)
			}
			if ctx.Err() != nil {
				t.Errorf("the refusal took until the deadline (%s): %v", time.Since(start), err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error shows %q: %v", w, err)
				}
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                    "nats://127.0.0.1:4222",
		"nats://u:secret@h:1,nats://v:other@h:2":   "nats://u:xxxxx@h:1,nats://v:xxxxx@h:2",
		"tls://token@h:4222":                       "tls://xxxxx@h:4222",
		fmt.Sprintf("nats://%s@h", "user:pa%2Fss"): "nats://user:xxxxx@h",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestConnectWaitsForAStartingServer: with StartWait, a NATS server that
// does not answer yet (it starts after weir, as at a machine's boot) is
// tried again until it answers; without, or past the wait, the connection
// fails with ErrUnavailable. Refused credentials are not waited for.
func TestConnectWaitsForAStartingServer(t *testing.T) {
	t.Parallel()
	nc := natscluster.Start(t, 1, 0)
	url := nc.URLs()
	nc.StopServer(0)
	ctx := tctx(t)
	if _, err := ConnectWith(ctx, ConnectOptions{URL: url, Logger: testLogger()}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("connecting to a stopped server without StartWait: %v, want ErrUnavailable", err)
	}
	if _, err := ConnectWith(ctx, ConnectOptions{URL: url, Logger: testLogger(), StartWait: 600 * time.Millisecond}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("connecting to a server that stays stopped past StartWait: %v, want ErrUnavailable", err)
	}
	done := make(chan error, 1)
	go func() {
		b, err := ConnectWith(ctx, ConnectOptions{URL: url, Logger: testLogger(), StartWait: 5 * time.Minute})
		if err == nil {
			err = b.Shutdown(context.Background())
		}
		done <- err
	}()
	if err := nc.StartServer(0); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("connecting while the server starts: %v, want a connection once it answers", err)
	}
	// A refusal is an answer: not waited for (a wait would outlast the
	// test's context).
	authed := natsServer(t, func(o *server.Options) { o.Username, o.Password = "weir", "secret" })
	if _, err := ConnectWith(ctx, ConnectOptions{URL: "nats://weir:wrong@" + authed, Logger: testLogger(), StartWait: 5 * time.Minute}); !errors.Is(err, ErrAuthRefused) {
		t.Fatalf("connecting with a wrong password and a StartWait: %v, want ErrAuthRefused at once", err)
	}
}
