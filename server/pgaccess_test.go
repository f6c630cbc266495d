package server

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/internal/testpki"
)

// TestPipelinePostgresFiles: the certificate, key and password files a
// submitted pipeline's PostgreSQL dsn names must be inside --file-roots
// (PATH_NOT_ALLOWED naming the file, before the driver reads it), and
// are not the server's own credential files even inside a root (here the
// external NATS server's password file); a servicefile is refused; a
// relative sslrootcert is read from the pipeline's directory and, against
// the test PostgreSQL when there is one, the job runs.
func TestPipelinePostgresFiles(t *testing.T) {
	root, outside, dataDir := t.TempDir(), t.TempDir(), t.TempDir()
	ca := testpki.NewCA(t, outside, "pg-ca")
	if err := os.MkdirAll(filepath.Join(root, "certs"), 0o700); err != nil {
		t.Fatal(err)
	}
	inside := testpki.NewCA(t, filepath.Join(root, "certs"), "ca")
	natsPass := filepath.Join(root, "nats-pass")
	if err := os.WriteFile(natsPass, []byte("nats-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true, Username: "weir", Password: "nats-secret"})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("the NATS server did not start")
	}
	t.Cleanup(ns.Shutdown)

	p := openServing(t, Config{Listen: "127.0.0.1:0", DataDir: dataDir, FileRoots: []string{root, dataDir}, GenerateAuthToken: true,
		NATSURL: "nats://" + ns.Addr().String(), NATSCredentials: NATSCredentials{User: "weir", PasswordFile: natsPass}})
	c, err := client.NewClient(p.Address(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithToken(p.GeneratedToken())
	pg := func(dsn, table string) string {
		return fmt.Sprintf(`pipeline:
  transforms:
    - type: Create
      name: Rows
      config: {elements: [{a: 1}, {a: 2}]}
    - type: WriteToSql
      name: Write
      input: Rows
      config: {driver: postgres, dsn: %q, table: %s, key: [a]}
`, dsn, table)
	}
	for i, tc := range []struct {
		name     string
		dsn      string
		code     errcode.Code
		mentions []string
	}{
		{name: "sslrootcert outside", dsn: "postgres://u@127.0.0.1/db?sslmode=verify-full&sslrootcert=" + ca.File,
			code: errcode.PathNotAllowed, mentions: []string{"sslrootcert", ca.File, root, "--file-roots"}},
		{name: "sslrootcert /etc/shadow", dsn: "host=127.0.0.1 sslrootcert=/etc/shadow",
			code: errcode.PathNotAllowed, mentions: []string{"/etc/shadow"}},
		{name: "sslkey climbing out", dsn: "postgres://u@127.0.0.1/db?sslcert=c.pem&sslkey=../../../../../../etc/ssl/private/k.pem",
			code: errcode.PathNotAllowed, mentions: []string{"sslkey", "/etc/ssl/private/k.pem"}},
		{name: "sslcert quoted outside", dsn: fmt.Sprintf("host=127.0.0.1 sslcert='%s' sslkey=k.pem", filepath.Join(outside, "c.pem")),
			code: errcode.PathNotAllowed, mentions: []string{"sslcert", outside}},
		{name: "sslrootcert hidden behind a ? in the password", dsn: "postgres://u:pa?sslmode=disable@127.0.0.1/db?sslrootcert=/etc/passwd",
			code: errcode.PathNotAllowed, mentions: []string{"/etc/passwd"}},
		{name: "passfile: the server's NATS password", dsn: "host=127.0.0.1 passfile=" + natsPass,
			code: errcode.PathNotAllowed, mentions: []string{"passfile", "server's own files"}},
		{name: "servicefile", dsn: "host=127.0.0.1 service=x servicefile=" + filepath.Join(root, "svc.conf"),
			code: errcode.InvalidPipeline, mentions: []string{"servicefile", "--file-roots"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Submit(context.Background(), client.SubmitRequest{Name: fmt.Sprintf("pg-%d", i), Pipeline: pg(tc.dsn, "t"), PipelineFile: "pg.yaml", BaseDir: root})
			var ae *client.Error
			if !errors.As(err, &ae) || ae.Code != tc.code || ae.Status != 400 {
				t.Fatalf("submit = %v, want 400 %s", err, tc.code)
			}
			for _, m := range tc.mentions {
				if !strings.Contains(ae.Message, m) {
					t.Errorf("message %q does not mention %q", ae.Message, m)
				}
			}
		})
	}

	dsn := os.Getenv("WEIR_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Log("WEIR_TEST_POSTGRES_DSN is not set: the run against PostgreSQL is skipped")
		return
	}
	// A relative sslrootcert inside the root: read from the pipeline's
	// directory (pgx reads it even with sslmode=disable), the job runs.
	table := "netsec_pgfiles"
	conn, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	rel, err := filepath.Rel(root, inside.File)
	if err != nil {
		t.Fatal(err)
	}
	run := func(name, dsn string) {
		t.Helper()
		if _, err := conn.Exec("DROP TABLE IF EXISTS " + table); err != nil {
			t.Fatal(err)
		}
		res, err := c.Submit(context.Background(), client.SubmitRequest{Name: name, Pipeline: pg(dsn, table), PipelineFile: "pg.yaml", BaseDir: root})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var j *client.Job
		if !await.Until(30*time.Second, 10*time.Millisecond, func() bool {
			j, err = c.Get(context.Background(), res.ID)
			// DONE is recorded before the final commit (pending_commit).
			return err == nil && j.State.Terminal() && !j.PendingCommit
		}) {
			t.Fatalf("%s: the job did not end: %v %v", name, j, err)
		}
		if j.State != client.StateDone {
			t.Fatalf("job %s: %s (%s)", j.Name, j.State, j.Error)
		}
		var n int
		if err := conn.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil || n != 2 {
			t.Fatalf("%s: rows %d (%v), want 2", name, n, err)
		}
	}
	run("pg-inside", dsn+sep+"sslrootcert="+rel)
	defer conn.Exec("DROP TABLE IF EXISTS " + table)

	// TLS against the test server's own certificate (Debian's default
	// ssl = on with its self-signed snakeoil pair), when it has one: with
	// sslmode=verify-ca the sink connects only if sslrootcert holds the
	// certificate that signed the server's; a CA that did not sign it is
	// refused at submission, where the sink's check connects.
	var sslOn, certFile string
	if err := conn.QueryRow("SHOW ssl").Scan(&sslOn); err != nil || sslOn != "on" {
		t.Logf("the test PostgreSQL does not serve TLS (ssl=%q, %v): the TLS runs are skipped", sslOn, err)
		return
	}
	if err := conn.QueryRow("SHOW ssl_cert_file").Scan(&certFile); err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(certFile)
	if err != nil {
		t.Logf("the test PostgreSQL's certificate %s cannot be read here (%v): the TLS runs are skipped", certFile, err)
		return
	}
	if err := os.WriteFile(filepath.Join(root, "certs", "pg-server.pem"), pem, 0o600); err != nil {
		t.Fatal(err)
	}
	run("pg-verify-ca", dsn+sep+"sslmode=verify-ca&sslrootcert=certs/pg-server.pem")
	_, err = c.Submit(context.Background(), client.SubmitRequest{Name: "pg-wrong-ca", Pipeline: pg(dsn+sep+"sslmode=verify-ca&sslrootcert="+rel, table), PipelineFile: "pg.yaml", BaseDir: root})
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("verify-ca with a CA that did not sign the server's certificate: %v, want a certificate error", err)
	}
	t.Logf("verify-ca with another CA: %v", err)
}
