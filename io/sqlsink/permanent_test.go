package sqlsink

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestPermanent(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"postgres table dropped", fmt.Errorf("table t: committing epoch 3: %w", &pgconn.PgError{Code: "42P01", Message: `relation "t" does not exist`}), true},
		{"postgres column dropped", &pgconn.PgError{Code: "42703"}, true},
		{"postgres datatype mismatch", &pgconn.PgError{Code: "42804"}, true},
		{"postgres value out of range", &pgconn.PgError{Code: "22003"}, true},
		{"postgres not null violation", &pgconn.PgError{Code: "23502"}, true},
		{"postgres trigger raised", &pgconn.PgError{Code: "P0001", Message: "injected fault"}, false},
		{"postgres disk full", &pgconn.PgError{Code: "53100"}, false},
		{"postgres shutting down", &pgconn.PgError{Code: "57P01"}, false},
		{"connection refused", errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"), false},
		{"sqlite table dropped", errors.New("table totals: writing 3 rows: SQL logic error: no such table: totals (1)"), true},
		{"sqlite column dropped", errors.New("table totals has no column named n (1)"), true},
		{"sqlite disk full", errors.New("database or disk is full (13)"), false},
		{"sqlite busy", errors.New("database is locked (5) (SQLITE_BUSY)"), false},
		{"sqlite trigger raised", errors.New("injected fault (1811)"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, got := Permanent(tt.err)
			if got != tt.want {
				t.Errorf("Permanent(%v) = %v (%q), want %v", tt.err, got, reason, tt.want)
			}
			if got && reason == "" {
				t.Error("a permanent error without a reason")
			}
		})
	}
}
