package sqlsink

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/weir-dev/weir/mtime"
)

// stageTable is the per-connection temporary table each epoch is copied
// into before the upsert.
const stageTable = "weir_stage"

// pgDB is the PostgreSQL backend: one connection; each transaction copies
// its rows into a temporary staging table (COPY, binary) and moves them into
// the table with one INSERT ... SELECT ... ON CONFLICT.
type pgDB struct {
	cfg  *Config
	l    *layout
	conn *pgx.Conn
	// cols is the table's columns as Prepare left them, to cast staged
	// values to a pre-existing table's types.
	cols   map[string]string
	upsert string
	names  []string
	row    []any
}

func newPostgres(cfg *Config, l *layout) *pgDB { return &pgDB{cfg: cfg, l: l} }

func (d *pgDB) open(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, d.cfg.DSN)
	if err != nil {
		return err
	}
	d.conn = conn
	return nil
}

func (d *pgDB) describe(ctx context.Context) (map[string]string, error) {
	schema, name := splitTable(d.l.table)
	rows, err := d.conn.Query(ctx, `SELECT column_name, data_type FROM information_schema.columns
		WHERE table_schema = COALESCE(NULLIF($1, ''), current_schema()) AND table_name = $2`, schema, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cols map[string]string
	for rows.Next() {
		var n, t string
		if err := rows.Scan(&n, &t); err != nil {
			return nil, err
		}
		if cols == nil {
			cols = map[string]string{}
		}
		cols[n] = t
	}
	return cols, rows.Err()
}

func (d *pgDB) indexes(ctx context.Context) ([]string, error) {
	schema, name := splitTable(d.l.table)
	rows, err := d.conn.Query(ctx, `SELECT indexname FROM pg_indexes
		WHERE schemaname = COALESCE(NULLIF($1, ''), current_schema()) AND tablename = $2`, schema, name)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func (d *pgDB) exec(ctx context.Context, stmts ...string) error {
	for _, q := range stmts {
		if _, err := d.conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// norm: quoted PostgreSQL identifiers are case-sensitive.
func (d *pgDB) norm(name string) string { return name }

func (d *pgDB) sqlType(k colKind) string {
	switch k {
	case kInt:
		return "BIGINT"
	case kFloat:
		return "DOUBLE PRECISION"
	case kBool:
		return "BOOLEAN"
	case kTime:
		return "TIMESTAMPTZ"
	}
	return "TEXT"
}

// canonical is the information_schema data_type of sqlType(k).
func canonical(k colKind) string {
	switch k {
	case kInt:
		return "bigint"
	case kFloat:
		return "double precision"
	case kBool:
		return "boolean"
	case kTime:
		return "timestamp with time zone"
	}
	return "text"
}

func (d *pgDB) compatible(k colKind, decl string) bool {
	decl = strings.ToLower(decl)
	switch k {
	case kInt:
		return decl == "bigint" || decl == "numeric"
	case kFloat:
		return decl == "double precision" || decl == "real" || decl == "numeric"
	case kBool:
		return decl == "boolean"
	case kText:
		return decl == "text" || decl == "character varying"
	case kTime:
		return decl == "timestamp with time zone"
	case kJSON:
		return decl == "text" || decl == "character varying" || decl == "json" || decl == "jsonb"
	}
	return false
}

// widenFloat alters a bigint column to double precision in place (every
// int64 the sink wrote reads back as the same float up to 2^53).
func (d *pgDB) widenFloat(table, col, decl string) (string, bool) {
	if strings.ToLower(decl) != "bigint" {
		return "", false
	}
	return "ALTER TABLE " + quoteTable(table) + " ALTER COLUMN " + quoteIdent(col) + " TYPE double precision", true
}

func (d *pgDB) nullKey(r role) string {
	if r == roleWindowEnd {
		return "'infinity'::timestamptz"
	}
	return "'-infinity'::timestamptz"
}

func (d *pgDB) ready(ctx context.Context, cols map[string]string) error {
	l := d.l
	d.cols = cols
	var defs, sel []string
	d.names = d.names[:0]
	for _, c := range l.cols {
		q := quoteIdent(c.name)
		defs = append(defs, q+" "+d.sqlType(c.kind))
		d.names = append(d.names, c.name)
		if decl := strings.ToLower(cols[c.name]); decl != "" && decl != canonical(c.kind) {
			q = "CAST(" + q + " AS " + decl + ")"
		}
		sel = append(sel, q)
	}
	stage := "CREATE TEMP TABLE IF NOT EXISTS " + stageTable + " (" + strings.Join(defs, ", ") + ") ON COMMIT DELETE ROWS"
	if _, err := d.conn.Exec(ctx, stage); err != nil {
		return fmt.Errorf("creating the staging table: %w", err)
	}
	d.upsert = "INSERT INTO " + quoteTable(l.table) + " AS cur (" + columnList(l) + ") SELECT " +
		strings.Join(sel, ", ") + " FROM " + stageTable + conflictClause(l, d)
	d.row = make([]any, len(l.cols))
	return nil
}

// pgValue converts a record value for COPY into the staging table.
func pgValue(v any) any {
	t, ok := v.(mtime.Time)
	if !ok {
		return v
	}
	switch {
	case t <= mtime.MinTimestamp:
		return pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	case t >= mtime.MaxTimestamp:
		return pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	}
	return pgtype.Timestamptz{Time: t.ToTime(), Valid: true}
}

func (d *pgDB) reconnect(ctx context.Context) error {
	if d.conn != nil && !d.conn.IsClosed() {
		return nil
	}
	if err := d.open(ctx); err != nil {
		return fmt.Errorf("reconnecting: %w", err)
	}
	return d.ready(ctx, d.cols)
}

func (d *pgDB) apply(ctx context.Context, b *batch) (skipped bool, err error) {
	if err := d.reconnect(ctx); err != nil {
		return false, err
	}
	tx, err := d.conn.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("beginning a transaction: %w", err)
	}
	defer func() {
		if err != nil || skipped {
			tx.Rollback(ctx)
		}
	}()
	if b.progress {
		// One round trip that creates the progress row if needed, locks it
		// and reads it.
		var cur int64
		err := tx.QueryRow(ctx, `INSERT INTO `+ProgressTable+` AS p (sink_id, epoch) VALUES ($1, -1)
			ON CONFLICT (sink_id) DO UPDATE SET epoch = p.epoch RETURNING epoch`, b.sinkID).Scan(&cur)
		if err != nil {
			return false, fmt.Errorf("reading the progress of sink %s: %w", b.sinkID, err)
		}
		if cur >= b.epoch {
			return true, nil
		}
	}
	if b.n > 0 {
		ncol := len(d.l.cols)
		src := pgx.CopyFromSlice(b.n, func(i int) ([]any, error) {
			for j, v := range b.vals[i*ncol : (i+1)*ncol] {
				d.row[j] = pgValue(v)
			}
			return d.row, nil
		})
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{stageTable}, d.names, src); err != nil {
			return false, fmt.Errorf("copying into the staging table: %w", err)
		}
		if _, err := tx.Exec(ctx, d.upsert); err != nil {
			return false, err
		}
	}
	if b.progress {
		if _, err := tx.Exec(ctx, `UPDATE `+ProgressTable+` SET epoch = $2 WHERE sink_id = $1`, b.sinkID, b.epoch); err != nil {
			return false, fmt.Errorf("recording the progress of sink %s: %w", b.sinkID, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("committing: %w", err)
	}
	return false, nil
}

func (d *pgDB) close(ctx context.Context) error {
	if d.conn == nil || d.conn.IsClosed() {
		return nil
	}
	return d.conn.Close(ctx)
}

func (d *pgDB) setLayout(l *layout) { d.l = l }

// facadeLockKey is the transaction-scoped advisory lock that serialises
// façade changes on a PostgreSQL database.
const facadeLockKey = 0x77656972_66616364 // "weirfacd"

// facadeTx runs fn in one transaction holding the façade advisory lock.
func (d *pgDB) facadeTx(ctx context.Context, fn func(fx facadeExec) error) error {
	if d.conn == nil || d.conn.IsClosed() {
		if err := d.open(ctx); err != nil {
			return fmt.Errorf("reconnecting: %w", err)
		}
		if d.l != nil && d.row != nil {
			if err := d.ready(ctx, d.cols); err != nil {
				return fmt.Errorf("reconnecting: %w", err)
			}
		}
	}
	tx, err := d.conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("beginning a transaction: %w", err)
	}
	fx := pgFx{tx}
	if err := fx.exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(facadeLockKey)); err != nil {
		return errors.Join(err, tx.Rollback(ctx))
	}
	if err := fn(fx); err != nil {
		return errors.Join(err, tx.Rollback(ctx))
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	return nil
}

// pgFx is a façade transaction on PostgreSQL.
type pgFx struct{ tx pgx.Tx }

func (f pgFx) pg() bool { return true }

func (f pgFx) exec(ctx context.Context, q string, args ...any) error {
	if _, err := f.tx.Exec(ctx, q, args...); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	return nil
}

func (f pgFx) query(ctx context.Context, q string, args ...any) ([][]any, error) {
	rows, err := f.tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		out = append(out, vals)
	}
	return out, rows.Err()
}
