package sqlsink

import (
	"errors"
	"strings"
	"testing"
)

// TestHostPolicy: a PostgreSQL DSN may name only allowed hosts (issue 11
// item 4), however the DSN spells them; the check connects to nothing.
func TestHostPolicy(t *testing.T) {
	t.Setenv("PGHOST", "")
	def, err := NewHostPolicy(DefaultAllowedHosts)
	if err != nil {
		t.Fatal(err)
	}
	lan, err := NewHostPolicy([]string{"db.internal", "10.1.0.0/16", "192.0.2.7"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		p       *HostPolicy
		dsn     string
		refused string // the host named in the error; "" when allowed
	}{
		{name: "loopback URL", p: def, dsn: "postgres://u@127.0.0.1:5432/db"},
		{name: "localhost keywords", p: def, dsn: "host=localhost port=5432 dbname=db"},
		{name: "IPv6 loopback", p: def, dsn: "postgres://u@[::1]:5432/db"},
		{name: "unix socket", p: def, dsn: "host=/var/run/postgresql dbname=db"},
		{name: "another host", p: def, dsn: "postgres://u@203.0.113.9:5432/db", refused: "203.0.113.9"},
		{name: "a host name", p: def, dsn: "postgres://u@evil.example:6379/db", refused: "evil.example"},
		{name: "a fallback host", p: def, dsn: "postgres://u@127.0.0.1,203.0.113.9/db", refused: "203.0.113.9"},
		{name: "keyword list", p: def, dsn: "host=localhost,metadata.internal dbname=db", refused: "metadata.internal"},
		{name: "a name in the list", p: lan, dsn: "postgres://u@DB.internal/db"},
		{name: "an address in a prefix", p: lan, dsn: "postgres://u@10.1.200.3/db"},
		{name: "an address outside the prefix", p: lan, dsn: "postgres://u@10.2.0.1/db", refused: "10.2.0.1"},
		{name: "a single address", p: lan, dsn: "host=192.0.2.7"},
		{name: "loopback when not listed", p: lan, dsn: "postgres://u@127.0.0.1/db", refused: "127.0.0.1"},
		{name: "a socket when localhost is not listed", p: lan, dsn: "host=/tmp", refused: "/tmp"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.CheckDSN(tc.dsn)
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("CheckDSN(%q) = %v, want nil", tc.dsn, err)
				}
				return
			}
			var he *HostError
			if !errors.As(err, &he) || !errors.Is(err, ErrHostNotAllowed) || he.Host != tc.refused {
				t.Fatalf("CheckDSN(%q) = %v, want a HostError for %s", tc.dsn, err, tc.refused)
			}
			if msg := err.Error(); !strings.Contains(msg, "--allowed-sql-hosts") || !strings.Contains(msg, "no connection") {
				t.Errorf("message %q does not name the flag and say nothing connected", msg)
			}
		})
	}
	if err := (*HostPolicy)(nil).CheckDSN("postgres://u@203.0.113.9/db"); err != nil {
		t.Errorf("a nil policy refused a host: %v", err)
	}
	if err := def.CheckDSN("postgres://u@[bad/db"); err == nil || errors.Is(err, ErrHostNotAllowed) {
		t.Errorf("an unparsable DSN: %v, want a configuration error", err)
	}
	for _, bad := range []string{"host:5432", "user@host", "a b"} {
		if _, err := NewHostPolicy([]string{bad}); err == nil {
			t.Errorf("NewHostPolicy accepted %q", bad)
		}
	}
}

// TestSQLitePath: the file a SQLite DSN opens, for plain paths and file:
// URIs with query parameters (which were misread as relative paths).
func TestSQLitePath(t *testing.T) {
	tests := []struct {
		dsn, base          string
		wantPath, wantDSN  string
		wantMemory, errors bool
	}{
		{dsn: "out.db", base: "/w", wantPath: "/w/out.db", wantDSN: "/w/out.db"},
		{dsn: "/abs/out.db", base: "/w", wantPath: "/abs/out.db", wantDSN: "/abs/out.db"},
		{dsn: "../up.db", base: "/w/x", wantPath: "/w/up.db", wantDSN: "/w/up.db"},
		{dsn: "file:rel.db?_pragma=foreign_keys(1)", base: "/w", wantPath: "/w/rel.db", wantDSN: "file:/w/rel.db?_pragma=foreign_keys(1)"},
		{dsn: "file:/etc/app.db?mode=rw", base: "/w", wantPath: "/etc/app.db", wantDSN: "file:/etc/app.db?mode=rw"},
		{dsn: "file:///etc/app.db", base: "/w", wantPath: "/etc/app.db", wantDSN: "file:/etc/app.db"},
		{dsn: "file://localhost/etc/app.db", base: "/w", wantPath: "/etc/app.db", wantDSN: "file:/etc/app.db"},
		{dsn: "file:/etc/%61pp.db", base: "/w", wantPath: "/etc/app.db", wantDSN: "file:/etc/app.db"},
		{dsn: "file:a%20b.db", base: "/w", wantPath: "/w/a b.db", wantDSN: "file:/w/a%20b.db"},
		{dsn: ":memory:", wantMemory: true, wantDSN: ":memory:"},
		{dsn: "file:x?mode=memory&cache=shared", wantMemory: true, wantDSN: "file:x?mode=memory&cache=shared"},
		{dsn: "file://otherhost/etc/app.db", errors: true},
		{dsn: "file:x.db?vfs=unix-none", errors: true},
		{dsn: "file:?mode=rw", errors: true},
	}
	for _, tc := range tests {
		t.Run(tc.dsn, func(t *testing.T) {
			p, dsn, mem, err := SQLitePath(tc.dsn, tc.base)
			if tc.errors {
				if err == nil {
					t.Fatalf("SQLitePath(%q) = %q, want an error", tc.dsn, p)
				}
				return
			}
			if err != nil || p != tc.wantPath || dsn != tc.wantDSN || mem != tc.wantMemory {
				t.Fatalf("SQLitePath(%q) = %q, %q, %v, %v; want %q, %q, %v", tc.dsn, p, dsn, mem, err, tc.wantPath, tc.wantDSN, tc.wantMemory)
			}
		})
	}
}
