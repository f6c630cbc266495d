package sqlsink

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/weir-dev/weir/runner/contract"
)

// Permanent reports whether err, returned by Commit, is one that retrying
// the same commit cannot cure, with a short reason: the table or one of
// its columns is gone or no longer fits the rows (it was dropped or
// altered), the sink's user may not write it, or the database refuses
// the rows' values. The job service fails the job on such an error; any
// other commit error (a connection that broke, a database that is down,
// busy or out of disk, a trigger that raised) is taken as passing: the job
// keeps running without acknowledging past the last committed epoch and
// the commit is retried, carrying the uncommitted rows (see PreCommit).
//
// PostgreSQL errors are told apart by SQLSTATE: class 42 (undefined table
// or column, datatype mismatch, insufficient privilege, ...), class 22
// (data exception) and class 23 (integrity constraint violation) are
// permanent. SQLite reports no such classes, so its messages are read:
// "no such table", "no such column", "has no column named", "datatype
// mismatch", and a read-only database.
func Permanent(err error) (reason string, ok bool) {
	if err == nil {
		return "", false
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch {
		case pg.Code == "42P01":
			return "the table does not exist", true
		case pg.Code == "42703":
			return "a column does not exist", true
		case pg.Code == "42501":
			return "the sink's database user may not write the table", true
		case strings.HasPrefix(pg.Code, "42"):
			return "the table does not fit the rows (SQLSTATE " + pg.Code + ")", true
		case strings.HasPrefix(pg.Code, "22"):
			return "the database refuses a value of the rows (SQLSTATE " + pg.Code + ")", true
		case strings.HasPrefix(pg.Code, "23"):
			return "the rows violate a constraint of the table (SQLSTATE " + pg.Code + ")", true
		}
		return "", false
	}
	msg := err.Error()
	for _, p := range []struct{ text, reason string }{
		{"no such table", "the table does not exist"},
		{"no such column", "a column does not exist"},
		{"has no column named", "a column does not exist"},
		{"datatype mismatch", "the table does not fit the rows"},
		{"attempt to write a readonly database", "the database is read-only"},
	} {
		if strings.Contains(msg, p.text) {
			return p.reason, true
		}
	}
	return "", false
}

var _ contract.PermanentCommitter = (*Sink)(nil)

// PermanentCommitError reports whether err, from the sink's commit, is
// permanent (Permanent) (contract.PermanentCommitter).
func (s *Sink) PermanentCommitError(err error) (reason string, permanent bool) { return Permanent(err) }
