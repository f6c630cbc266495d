package sqlsink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/weir-dev/weir/mtime"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// sqliteRowsPerStmt bounds the rows of one multi-row INSERT (SQLite allows
// 32766 parameters per statement).
const sqliteRowsPerStmt = 32

// sqliteDB is the SQLite backend: one connection (SQLite has one writer),
// WAL, synchronous=FULL, busy_timeout and BEGIN IMMEDIATE transactions.
type sqliteDB struct {
	cfg *Config
	l   *layout
	db  *sql.DB
	// one inserts a single row, many sqliteRowsPerStmt rows.
	one, many *sql.Stmt
	args      []any
}

func newSQLite(cfg *Config, l *layout) *sqliteDB { return &sqliteDB{cfg: cfg, l: l} }

// sqliteDSN turns a path or a file: URI into a modernc DSN with the pragmas
// the sink needs (explicit pragmas in the DSN win).
func sqliteDSN(dsn string, cfg *Config) string {
	u := dsn
	if !strings.HasPrefix(u, "file:") {
		u = "file:" + u
	}
	// Pragmas are repeated _pragma parameters; add them by hand.
	u = addPragma(u, "busy_timeout", fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds()))
	u = addPragma(u, "journal_mode", "journal_mode(wal)")
	u = addPragma(u, "synchronous", "synchronous(full)")
	if !strings.Contains(u, "_txlock=") {
		u = appendParam(u, "_txlock=immediate")
	}
	return u
}

func addPragma(u, name, value string) string {
	if strings.Contains(u, "_pragma="+name) {
		return u
	}
	return appendParam(u, "_pragma="+value)
}

func appendParam(u, kv string) string {
	if strings.Contains(u, "?") {
		return u + "&" + kv
	}
	return u + "?" + kv
}

func (d *sqliteDB) open(ctx context.Context) error {
	if path := d.cfg.DSN; !strings.HasPrefix(path, "file:") && path != ":memory:" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("creating the directory of %s: %w", path, err)
		}
	}
	db, err := sql.Open("sqlite", sqliteDSN(d.cfg.DSN, d.cfg))
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return err
	}
	d.db = db
	return nil
}

func (d *sqliteDB) describe(ctx context.Context) (map[string]string, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT name, type FROM pragma_table_info(?)`, d.l.table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cols map[string]string
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return nil, err
		}
		if cols == nil {
			cols = map[string]string{}
		}
		cols[d.norm(name)] = typ
	}
	return cols, rows.Err()
}

func (d *sqliteDB) indexes(ctx context.Context) ([]string, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?`, d.l.table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, rows.Err()
}

func (d *sqliteDB) exec(ctx context.Context, stmts ...string) error {
	for _, q := range stmts {
		if _, err := d.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// norm: SQLite column names are case-insensitive.
func (d *sqliteDB) norm(name string) string { return strings.ToLower(name) }

func (d *sqliteDB) sqlType(k colKind) string {
	switch k {
	case kInt, kBool:
		return "INTEGER"
	case kFloat:
		return "REAL"
	}
	return "TEXT"
}

// affinity applies SQLite's column affinity rules to a declared type.
func affinity(decl string) string {
	t := strings.ToUpper(decl)
	switch {
	case strings.Contains(t, "INT"):
		return "INTEGER"
	case strings.Contains(t, "CHAR"), strings.Contains(t, "CLOB"), strings.Contains(t, "TEXT"):
		return "TEXT"
	case t == "", strings.Contains(t, "BLOB"):
		return "BLOB"
	case strings.Contains(t, "REAL"), strings.Contains(t, "FLOA"), strings.Contains(t, "DOUB"):
		return "REAL"
	}
	return "NUMERIC"
}

func (d *sqliteDB) compatible(k colKind, decl string) bool {
	a := affinity(decl)
	if a == "BLOB" { // no declared type: stores anything as given
		return true
	}
	switch k {
	case kInt, kBool:
		return a == "INTEGER" || a == "NUMERIC"
	case kFloat:
		return a == "REAL" || a == "NUMERIC"
	}
	return a == "TEXT"
}

// widenFloat keeps an INTEGER column as it is: SQLite stores a float in
// it as given (a whole-valued one as an integer, by the column's type
// affinity), and no SQLite version alters a column's type in place.
func (d *sqliteDB) widenFloat(_, _, decl string) (string, bool) {
	return "", affinity(decl) == "INTEGER"
}

// nullKey is the empty string, which is never an RFC 3339 timestamp.
func (d *sqliteDB) nullKey(role) string { return "''" }

func (d *sqliteDB) insertSQL(rows int) string {
	l := d.l
	ph := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(l.cols)), ", ") + ")"
	var b strings.Builder
	b.WriteString("INSERT INTO " + quoteTable(l.table) + " AS cur (" + columnList(l) + ") VALUES ")
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(ph)
	}
	b.WriteString(conflictClause(l, d))
	return b.String()
}

func (d *sqliteDB) ready(ctx context.Context, _ map[string]string) error {
	for _, st := range []*sql.Stmt{d.one, d.many} {
		if st != nil {
			st.Close() // of the table written before (a façade joined)
		}
	}
	var err error
	if d.one, err = d.db.PrepareContext(ctx, d.insertSQL(1)); err != nil {
		return err
	}
	d.many, err = d.db.PrepareContext(ctx, d.insertSQL(d.rowsPerStmt()))
	return err
}

func (d *sqliteDB) rowsPerStmt() int {
	return max(1, min(sqliteRowsPerStmt, 32766/len(d.l.cols)))
}

// bind converts a record value to what the SQLite column stores.
func sqliteValue(v any) any {
	switch x := v.(type) {
	case bool:
		if x {
			return int64(1)
		}
		return int64(0)
	case mtime.Time:
		return x.Format()
	}
	return v
}

func (d *sqliteDB) apply(ctx context.Context, b *batch) (skipped bool, err error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("beginning a transaction: %w", err)
	}
	defer func() {
		if err != nil || skipped {
			tx.Rollback()
		}
	}()
	if b.progress {
		var cur sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT epoch FROM `+ProgressTable+` WHERE sink_id = ?`, b.sinkID).Scan(&cur)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return false, fmt.Errorf("reading the progress of sink %s: %w", b.sinkID, err)
		}
		if cur.Valid && cur.Int64 >= b.epoch {
			return true, nil
		}
	}
	ncol := len(d.l.cols)
	per := d.rowsPerStmt()
	many, one := tx.StmtContext(ctx, d.many), tx.StmtContext(ctx, d.one)
	for i := 0; i < b.n; {
		stmt, n := one, 1
		if b.n-i >= per {
			stmt, n = many, per
		}
		args := d.args[:0]
		for _, v := range b.vals[i*ncol : (i+n)*ncol] {
			args = append(args, sqliteValue(v))
		}
		d.args = args
		if _, err := stmt.ExecContext(ctx, args...); err != nil {
			return false, err
		}
		i += n
	}
	clear(d.args)
	if b.progress {
		_, err := tx.ExecContext(ctx, `INSERT INTO `+ProgressTable+` (sink_id, epoch) VALUES (?, ?) `+
			`ON CONFLICT (sink_id) DO UPDATE SET epoch = excluded.epoch`, b.sinkID, b.epoch)
		if err != nil {
			return false, fmt.Errorf("recording the progress of sink %s: %w", b.sinkID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("committing: %w", err)
	}
	return false, nil
}

func (d *sqliteDB) close(context.Context) error {
	if d.db == nil {
		return nil
	}
	return d.db.Close()
}

func (d *sqliteDB) setLayout(l *layout) { d.l = l }

// facadeTx runs fn in one BEGIN IMMEDIATE transaction: it holds the file's
// write lock, which serialises façade changes.
func (d *sqliteDB) facadeTx(ctx context.Context, fn func(fx facadeExec) error) (err error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning a transaction: %w", err)
	}
	if err := fn(sqliteFx{tx}); err != nil {
		return errors.Join(err, rollbackErr(tx.Rollback()))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	return nil
}

func rollbackErr(err error) error {
	if err == nil || errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return fmt.Errorf("rolling back: %w", err)
}

// sqliteFx is a façade transaction on SQLite.
type sqliteFx struct{ tx *sql.Tx }

func (f sqliteFx) pg() bool { return false }

func (f sqliteFx) exec(ctx context.Context, q string, args ...any) error {
	if _, err := f.tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	return nil
}

func (f sqliteFx) query(ctx context.Context, q string, args ...any) ([][]any, error) {
	rows, err := f.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				vals[i] = string(b)
			}
		}
		out = append(out, vals)
	}
	return out, rows.Err()
}
