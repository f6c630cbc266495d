package sqlsink

import (
	"strings"
	"testing"
)

// TestPublicPostgresURL: the DSN a server shows its clients keeps where
// the database is and drops every secret and every file of the server's.
func TestPublicPostgresURL(t *testing.T) {
	tests := []struct{ dsn, want string }{
		{"postgres://weir:s3cret@db.example:5432/sales?sslmode=verify-full&sslrootcert=/etc/weir/ca.pem&application_name=w",
			"postgres://weir@db.example:5432/sales?application_name=w&sslmode=verify-full"},
		{"postgresql://u@h/db?password=p&passfile=/root/.pgpass&sslkey=k.pem&sslcert=c.pem&sslpassword=x",
			"postgres://u@h/db"},
		{"postgres://127.0.0.1:5432/test?sslmode=disable", "postgres://127.0.0.1:5432/test?sslmode=disable"},
		{"host=db.example port=5433 user=weir password='a b' dbname=sales sslmode=require servicefile=/x",
			"postgres://weir@db.example:5433/sales?sslmode=require"},
		{"host=/var/run/postgresql dbname=test user=postgres", "postgres://postgres@/test?host=%2Fvar%2Frun%2Fpostgresql"},
		{"host=::1 port=5432 dbname=t", "postgres://[::1]:5432/t"},
	}
	for _, tc := range tests {
		got, err := PublicPostgresURL(tc.dsn)
		if err != nil || got != tc.want {
			t.Errorf("PublicPostgresURL(%q) = %q, %v; want %q", tc.dsn, got, err, tc.want)
		}
	}
	if _, err := PublicPostgresURL("host='unclosed"); err == nil {
		t.Error("a DSN that does not parse: no error")
	}
}

// TestStageTableFitsPostgres: a staging table's name fits PostgreSQL's 63
// bytes for targets of up to 39 bytes (a hash replaces the partition and
// run when the plain name would not fit), keeps the target's prefix, and
// differs between runs.
func TestStageTableFitsPostgres(t *testing.T) {
	const run = "2026-12-04T16:14:48-45a33e51"
	tests := []struct{ target, want string }{
		{"totals", "totals__stage_2026_12_02_2026_12_04T16_14_48_45a33e51"},
		{"public.daily_sales_totals_by_region", ""},
		{"a_table_name_of_exactly_39_bytes_______", ""},
	}
	for _, tc := range tests {
		got := StageTable(tc.target, "2026-12-02", run)
		_, name := splitTable(got)
		if len(name) > PostgresIdentifierLimit || !strings.HasPrefix(got, tc.target+"__stage_") || tc.want != "" && got != tc.want {
			t.Errorf("StageTable(%s) = %s (%d bytes)", tc.target, got, len(name))
		}
		if other := StageTable(tc.target, "2026-12-02", run+"x"); other == got {
			t.Errorf("StageTable(%s) is the same for two runs: %s", tc.target, got)
		}
	}
}
