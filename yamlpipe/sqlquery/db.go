package sqlquery

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strconv"
	"strings"

	"github.com/weir-dev/weir/row"
)

// This file holds the database a query runs on: its tables and
// statements, the loading of a run's rows, the planner's statistics, and
// the run itself.

// declType is the SQLite column type of field fi of table ti.
func declType(ti, fi int, t row.Type) string {
	switch t.Kind {
	case row.KindInt:
		return "INTEGER"
	case row.KindFloat:
		return "REAL"
	case row.KindString:
		return "TEXT"
	case row.KindBool:
		return "BOOLEAN"
	case row.KindTimestamp:
		return "TIMESTAMP"
	case row.KindRow, row.KindList:
		return fmt.Sprintf("JSON_%d_%d", ti, fi)
	}
	return "" // any: no affinity, values kept as bound
}

// db is one in-memory database holding the query's tables, with the
// statements that fill, query and empty them.
type db struct {
	sqlDB *sql.DB
	conn  *sql.Conn
	// insert[i] inserts one row into table i, insertMany[i] insertBatch
	// rows: the driver's statements, run inside conn.Raw (database/sql's
	// checks of every argument were a tenth of a large query's time, and
	// bind gives the driver's types already); clear[i] empties table i.
	insert     []driver.StmtExecContext
	insertMany []driver.StmtExecContext
	clear      []*sql.Stmt
	query      *sql.Stmt
	// sizes holds the size class (sizeClass) of each table as SQLite's
	// planner was last told it (tellSizes); nil until it first was.
	sizes []int
	// args holds a load's arguments, kept from one run to the next.
	args []driver.NamedValue
	// broken says a run's transaction could not be rolled back: the
	// database is not to run another (Aggregator closes it).
	broken bool
	// closed says Close ran (a second Close does nothing).
	closed bool
}

// open creates an in-memory database with the query's tables (empty).
func (q *Query) open(ctx context.Context) (*db, error) {
	sdb, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return nil, fmt.Errorf("opening SQLite: %w", err)
	}
	// One connection: each connection to :memory: is a database of its own.
	sdb.SetMaxOpenConns(1)
	conn, err := sdb.Conn(ctx)
	if err != nil {
		sdb.Close()
		return nil, fmt.Errorf("opening SQLite: %w", err)
	}
	d := &db{sqlDB: sdb, conn: conn}
	for ti, t := range q.Tables {
		cols := make([]string, t.Schema.Len())
		marks := make([]string, t.Schema.Len())
		for fi, f := range t.Schema.Fields {
			cols[fi] = strings.TrimSpace(Quote(f.Name) + " " + declType(ti, fi, f.Type))
			marks[fi] = "?"
		}
		if len(cols) == 0 {
			d.Close()
			return nil, &Error{Msg: fmt.Sprintf("input %q has no fields", t.Name)}
		}
		if _, err := conn.ExecContext(ctx, "CREATE TABLE "+Quote(t.Name)+" ("+strings.Join(cols, ", ")+")"); err != nil {
			d.Close()
			return nil, &Error{Msg: fmt.Sprintf("input %q", t.Name), Err: err}
		}
		tuple := "(" + strings.Join(marks, ", ") + ")"
		ins, err := d.prepareRaw(ctx, "INSERT INTO "+Quote(t.Name)+" VALUES "+tuple)
		if err != nil {
			d.Close()
			return nil, &Error{Msg: fmt.Sprintf("input %q", t.Name), Err: err}
		}
		d.insert = append(d.insert, ins)
		many, err := d.prepareRaw(ctx, "INSERT INTO "+Quote(t.Name)+" VALUES "+strings.Repeat(tuple+", ", insertBatch-1)+tuple)
		if err != nil {
			d.Close()
			return nil, &Error{Msg: fmt.Sprintf("input %q", t.Name), Err: err}
		}
		d.insertMany = append(d.insertMany, many)
		clr, err := conn.PrepareContext(ctx, "DELETE FROM "+Quote(t.Name))
		if err != nil {
			d.Close()
			return nil, &Error{Msg: fmt.Sprintf("input %q", t.Name), Err: err}
		}
		d.clear = append(d.clear, clr)
	}
	for _, a := range q.Aliases {
		if _, err := conn.ExecContext(ctx, "CREATE VIEW "+Quote(a)+" AS SELECT * FROM "+Quote(q.Tables[0].Name)); err != nil {
			d.Close()
			return nil, &Error{Msg: fmt.Sprintf("naming input %q %s", q.Tables[0].Name, a), Err: err}
		}
	}
	return d, nil
}

// prepareRaw prepares text with the driver on d's connection.
func (d *db) prepareRaw(ctx context.Context, text string) (driver.StmtExecContext, error) {
	var st driver.StmtExecContext
	err := d.conn.Raw(func(dc any) error {
		pc, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("the SQLite driver's connection (%T) does not prepare with a context", dc)
		}
		ds, err := pc.PrepareContext(ctx, text)
		if err != nil {
			return err
		}
		if st, ok = ds.(driver.StmtExecContext); !ok {
			ds.Close()
			return fmt.Errorf("the SQLite driver's statement (%T) does not execute with a context", ds)
		}
		return nil
	})
	return st, err
}

// prepare prepares the query on d.
func (q *Query) prepare(ctx context.Context, d *db) error {
	st, err := d.conn.PrepareContext(ctx, q.Text)
	if err != nil {
		return &Error{Msg: "the query does not compile", Err: err}
	}
	d.query = st
	return nil
}

// Close releases the database.
func (d *db) Close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	for _, st := range append(d.clear, d.query) {
		if st != nil {
			st.Close()
		}
	}
	// The driver's statements are closed on the connection they belong to.
	d.conn.Raw(func(any) error {
		for _, st := range append(d.insert, d.insertMany...) {
			if c, ok := st.(io.Closer); ok {
				c.Close()
			}
		}
		return nil
	})
	return errors.Join(d.conn.Close(), d.sqlDB.Close())
}

// insertBatch is how many rows one multi-row INSERT loads.
const insertBatch = 64

// load inserts the rows of tables into d's tables, with the driver's
// statements (inside d.conn.Raw).
func (q *Query) load(ctx context.Context, d *db, tables [][]*row.Row) (err error) {
	args := d.args[:0]
	defer func() { d.args = args[:0] }()
	for ti, rs := range tables {
		for len(rs) >= insertBatch {
			args = args[:0]
			for _, r := range rs[:insertBatch] {
				if args, err = q.appendArgs(args, ti, r); err != nil {
					return err
				}
			}
			if _, err := d.insertMany[ti].ExecContext(ctx, args); err != nil {
				return fmt.Errorf("loading rows of %q: %s", q.Tables[ti].Name, sqliteMessage(err))
			}
			rs = rs[insertBatch:]
		}
		for _, r := range rs {
			args = args[:0]
			if args, err = q.appendArgs(args, ti, r); err != nil {
				return err
			}
			if _, err := d.insert[ti].ExecContext(ctx, args); err != nil {
				return fmt.Errorf("loading a row of %q: %s", q.Tables[ti].Name, sqliteMessage(err))
			}
		}
	}
	return nil
}

// appendArgs appends the SQLite values of row r of table ti to args,
// numbered on from the last.
func (q *Query) appendArgs(args []driver.NamedValue, ti int, r *row.Row) ([]driver.NamedValue, error) {
	sch := q.Tables[ti].Schema
	for fi, f := range sch.Fields {
		var v any
		if r.Schema == sch || r.Schema == nil {
			if fi < len(r.Values) {
				v = r.Values[fi]
			}
		} else {
			v, _ = r.Get(f.Name)
		}
		b, err := bind(v, f.Type)
		if err != nil {
			return args, fmt.Errorf("input %q, field %s: %w", q.Tables[ti].Name, f.Name, err)
		}
		args = append(args, driver.NamedValue{Ordinal: len(args) + 1, Value: b})
	}
	return args, nil
}

// planSizeFloor is the row count from which the planner is told a table's
// size: below it, a guess costs little whichever plan it picks.
const planSizeFloor = 1024

// sizeClass is the class of a table of n rows: 0 below planSizeFloor, then
// one per power of two.
func sizeClass(n int) int {
	if n < planSizeFloor {
		return 0
	}
	return bits.Len(uint(n))
}

// tellSizes gives SQLite's query planner the number of rows each table is
// about to hold, as ANALYZE would (a row per table in sqlite_stat1), when
// a table's size class changed since it was last told. Without it the
// planner assumes every table holds about a million rows, and may loop
// over the largest table, building a temporary index of the largest table
// for each of another's rows: a join of 60,000 auctions with 920,000 bids
// took three times as long that way. The query is planned again at its
// next step after the statistics change (SQLite re-prepares a statement
// whose schema changed), which is why they change only when a size class
// does.
func (q *Query) tellSizes(ctx context.Context, d *db, tables [][]*row.Row) error {
	changed := false
	for ti, rs := range tables {
		if c := sizeClass(len(rs)); d.sizes == nil {
			changed = changed || c > 0
		} else {
			changed = changed || c != d.sizes[ti]
		}
	}
	if !changed {
		return nil
	}
	classes := make([]int, len(tables))
	for ti, rs := range tables {
		classes[ti] = sizeClass(len(rs))
	}
	stmts := []string{"DELETE FROM sqlite_stat1"}
	if d.sizes == nil {
		stmts = append([]string{"ANALYZE"}, stmts...) // creates sqlite_stat1
	}
	for _, st := range stmts {
		if _, err := d.conn.ExecContext(ctx, st); err != nil {
			return fmt.Errorf("telling the planner the tables' sizes: %s", sqliteMessage(err))
		}
	}
	for ti, rs := range tables {
		if classes[ti] == 0 {
			continue
		}
		if _, err := d.conn.ExecContext(ctx, "INSERT INTO sqlite_stat1 VALUES (?, NULL, ?)", q.Tables[ti].Name, strconv.Itoa(len(rs))); err != nil {
			return fmt.Errorf("telling the planner the tables' sizes: %s", sqliteMessage(err))
		}
	}
	// Loads sqlite_stat1 again.
	if _, err := d.conn.ExecContext(ctx, "ANALYZE sqlite_schema"); err != nil {
		return fmt.Errorf("telling the planner the tables' sizes: %s", sqliteMessage(err))
	}
	d.sizes = classes
	return nil
}

// run loads rows (per table) into d, runs the query and returns its rows
// in schema q.Out, emptying the tables again.
func (q *Query) run(ctx context.Context, d *db, tables [][]*row.Row) (out []*row.Row, err error) {
	// The rows are loaded in one transaction (SQLite's commit of each
	// statement would be most of a row's cost otherwise), rolled back at
	// the end, which empties the tables for the next run; should the
	// rollback fail, they are emptied one by one. The planner is told the
	// tables' sizes first, outside the transaction, so that it keeps them.
	if err := q.tellSizes(ctx, d, tables); err != nil {
		return nil, err
	}
	if _, err := d.conn.ExecContext(ctx, "BEGIN"); err != nil {
		return nil, fmt.Errorf("loading the rows: %s", sqliteMessage(err))
	}
	defer func() {
		bg := context.Background() // ctx may be done: the tables must still be emptied
		if _, rerr := d.conn.ExecContext(bg, "ROLLBACK"); rerr == nil {
			return
		}
		d.broken = true
		for _, st := range d.clear {
			if _, cerr := st.ExecContext(bg); cerr != nil && err == nil {
				err = fmt.Errorf("emptying the query's tables: %s", sqliteMessage(cerr))
			}
		}
	}()
	if err := d.conn.Raw(func(any) error { return q.load(ctx, d, tables) }); err != nil {
		return nil, err
	}
	rows, err := d.query.QueryContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("running the query: %s", sqliteMessage(err))
	}
	defer rows.Close()
	n := q.Out.Len()
	vals := make([]any, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if len(out) == q.MaxRows {
			return nil, fmt.Errorf("the query returns more than %d rows", q.MaxRows)
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("reading the query's result: %s", sqliteMessage(err))
		}
		r := row.New(q.Out)
		for i, f := range q.Out.Fields {
			x, err := convert(vals[i], f.Type)
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", f.Name, err)
			}
			r.Values[i] = x
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("running the query: %s", sqliteMessage(err))
	}
	return out, nil
}
