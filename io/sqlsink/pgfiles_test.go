package sqlsink

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestPostgresFiles: the files of a DSN are found in both forms, with
// quoting, escapes, percent-encoding, a '?' in the password and repeated
// keys read as pgx reads them; relative files are resolved against the
// base directory and the rewritten DSN makes pgx read exactly those.
func TestPostgresFiles(t *testing.T) {
	base := t.TempDir()
	abs := func(p string) string { return filepath.Join(base, p) }
	for _, tc := range []struct {
		name    string
		dsn     string
		want    []DSNFile
		wantErr bool
	}{
		{name: "none", dsn: "postgres://u@127.0.0.1/db?sslmode=disable"},
		{name: "keyword none", dsn: "host=127.0.0.1 dbname=db"},
		{name: "empty", dsn: ""},
		{name: "url relative CA", dsn: "postgres://u@h/db?sslmode=verify-full&sslrootcert=certs/ca.pem",
			want: []DSNFile{{"sslrootcert", abs("certs/ca.pem")}}},
		{name: "url no query", dsn: "postgres://u@h/db", want: nil},
		{name: "url percent-encoded", dsn: "postgresql://h/db?sslrootcert=%2Fetc%2Fssl%2Fca.pem&sslcert=%2Fa%20b%2Fc.pem&sslkey=/k.pem",
			want: []DSNFile{{"sslrootcert", "/etc/ssl/ca.pem"}, {"sslcert", "/a b/c.pem"}, {"sslkey", "/k.pem"}}},
		{name: "url password with ?", dsn: "postgres://u:pa?ss@h/db?sslrootcert=/etc/x",
			want: []DSNFile{{"sslrootcert", "/etc/x"}}},
		{name: "url later wins", dsn: "postgres://h/db?sslrootcert=/a&sslrootcert=/b",
			want: []DSNFile{{"sslrootcert", "/b"}}},
		{name: "url spaces trimmed", dsn: "postgres://h/db? sslrootcert =/etc/x",
			want: []DSNFile{{"sslrootcert", "/etc/x"}}},
		{name: "system roots", dsn: "postgres://h/db?sslrootcert=system"},
		{name: "keyword quoted", dsn: `host=h sslrootcert='/a b/ca.pem' sslcert=c.pem sslkey='k\'s.pem'`,
			want: []DSNFile{{"sslrootcert", "/a b/ca.pem"}, {"sslcert", abs("c.pem")}, {"sslkey", abs("k's.pem")}}},
		{name: "keyword escaped space", dsn: `sslrootcert=/a\ b host=h`, want: []DSNFile{{"sslrootcert", "/a b"}}},
		{name: "keyword later wins", dsn: "host=h sslrootcert=/a sslrootcert=/b", want: []DSNFile{{"sslrootcert", "/b"}}},
		{name: "keyword spaces around =", dsn: "host=h sslrootcert = /etc/x", want: []DSNFile{{"sslrootcert", "/etc/x"}}},
		{name: "passfile and servicefile", dsn: "host=h passfile=../pw servicefile=/s.conf",
			want: []DSNFile{{"passfile", filepath.Join(filepath.Dir(base), "pw")}, {"servicefile", "/s.conf"}}},
		{name: "unterminated quote", dsn: "host=h sslrootcert='/x", wantErr: true},
		{name: "no =", dsn: "host", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, resolved, err := PostgresFiles(tc.dsn, base)
			if tc.wantErr {
				if !errors.Is(err, ErrConfig) {
					t.Fatalf("err %v, want ErrConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("files %v, want %v", got, tc.want)
			}
			// What pgx reads from the resolved DSN is what was found: the
			// root certificate of a missing file is named in its error.
			again, _, err := PostgresFiles(resolved, "/elsewhere")
			if err != nil || !reflect.DeepEqual(again, tc.want) {
				t.Fatalf("the resolved DSN %q gives %v (%v), want %v", resolved, again, err, tc.want)
			}
			for _, f := range tc.want {
				if f.Key != "sslrootcert" {
					continue
				}
				_, err := pgconn.ParseConfig(resolved)
				if err == nil || !strings.Contains(err.Error(), f.Path) {
					t.Errorf("pgx on %q: %v, want it to read %s", resolved, err, f.Path)
				}
			}
		})
	}
}

// TestPostgresFilesPgxReadsTheResolvedFile: a relative sslrootcert of a
// pipeline elsewhere is read from the base directory, not from the
// process's working directory.
func TestPostgresFilesPgxReadsTheResolvedFile(t *testing.T) {
	base := t.TempDir()
	for _, dsn := range []string{"postgres://u@127.0.0.1/db?sslmode=disable&sslrootcert=ca.pem", "host=127.0.0.1 sslmode=disable sslrootcert=ca.pem"} {
		_, resolved, err := PostgresFiles(dsn, base)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pgconn.ParseConfig(resolved); err == nil || !strings.Contains(err.Error(), "CA file") {
			t.Fatalf("pgx with no CA file in the base directory: %v", err)
		}
		if err := os.WriteFile(filepath.Join(base, "ca.pem"), []byte("not a certificate"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = pgconn.ParseConfig(resolved)
		if err == nil || !strings.Contains(err.Error(), "unable to add CA to cert pool") {
			t.Fatalf("pgx did not read the base directory's ca.pem: %v", err)
		}
		os.Remove(filepath.Join(base, "ca.pem"))
	}
}
