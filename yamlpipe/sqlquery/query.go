package sqlquery

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unicode"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
)

// DefaultTable is the name a single input goes by in a query, as in Beam.
const DefaultTable = "PCOLLECTION"

// ReasonSQLError is the reject reason of an element (per-row queries) or
// a window's rows (aggregating queries) the query failed on at run time.
const ReasonSQLError = "sql_error"

// CompileTimeout bounds the time Compile spends on a query (it runs it
// once on empty tables): a query that would not end, such as a recursive
// WITH without a stop, is refused instead of holding the load.
const CompileTimeout = 10 * time.Second

// RunTimeout bounds one run of a per-window query (a window's pane); a
// run that takes longer fails (ReasonSQLError). A per-row query reads one
// row and cannot loop: it has no deadline.
const RunTimeout = 5 * time.Minute

// MaxResultRows bounds the rows one run of a query may return (Query.MaxRows
// by default); a run that returns more fails (ReasonSQLError) instead of
// exhausting memory — a recursive WITH without an end, say.
const MaxResultRows = 1 << 21

// timeLayout is how timestamps are written into SQLite: its own date and
// time format, which its date functions read and which sorts as it reads.
const timeLayout = "2006-01-02 15:04:05.000"

// Table is one input of a query: the name the query reads it by and the
// schema of its rows.
type Table struct {
	Name   string
	Schema *row.Schema
}

// Query is a compiled query: what Compile found out about it at load.
type Query struct {
	// Text is the query as written.
	Text string
	// Tables are the inputs, in input order.
	Tables []Table
	// Out is the schema of the result rows.
	Out *row.Schema
	// PerRow says the query runs once per element (a projection or a
	// filter of one input); otherwise it runs once per window.
	PerRow bool
	// Aliases are extra names of the first table (a view): PCOLLECTION
	// when the single input has a name of its own.
	Aliases []string
	// MaxRows bounds the rows one run returns (MaxResultRows).
	MaxRows int
}

// Error is a query Compile refuses, with SQLite's reason.
type Error struct {
	Msg string
	Err error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Msg
	}
	return e.Msg + ": " + sqliteMessage(e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// sqliteMessage trims the driver's decoration ("SQL logic error: ... (1)")
// to SQLite's own message.
func sqliteMessage(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "SQL logic error: ")
	if i := strings.LastIndex(s, " ("); i > 0 && strings.HasSuffix(s, ")") {
		if _, err := strconv.Atoi(s[i+2 : len(s)-1]); err == nil {
			s = s[:i]
		}
	}
	return s
}

// Compile checks text against tables (their names unique, compared
// without case as SQLite does) and returns the compiled query.
func Compile(ctx context.Context, text string, tables []Table) (*Query, error) {
	if strings.TrimSpace(text) == "" {
		return nil, &Error{Msg: "the query is empty"}
	}
	if err := checkSelect(text); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, CompileTimeout)
	defer cancel()
	q := &Query{Text: text, Tables: tables, MaxRows: MaxResultRows}
	if len(tables) == 1 && !strings.EqualFold(tables[0].Name, DefaultTable) {
		q.Aliases = []string{DefaultTable}
	}
	seen := map[string]bool{}
	for _, t := range tables {
		k := strings.ToLower(t.Name)
		if seen[k] {
			return nil, &Error{Msg: fmt.Sprintf("two inputs are named %q (SQL names ignore case)", t.Name)}
		}
		seen[k] = true
	}
	db, err := q.open(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	// Compile runs the query once, on the empty tables: with the database
	// read-only, so that a statement that would change it fails here even
	// if it passed checkSelect and classify.
	if _, err := db.conn.ExecContext(ctx, "PRAGMA query_only = 1"); err != nil {
		return nil, fmt.Errorf("opening SQLite: %w", err)
	}
	perRow, err := q.classify(ctx, db)
	if err != nil {
		return nil, err
	}
	q.PerRow = perRow && len(tables) == 1
	rows, err := db.conn.QueryContext(ctx, text)
	if err != nil {
		if ctx.Err() != nil {
			return nil, &Error{Msg: fmt.Sprintf("the query did not start within %s", CompileTimeout), Err: err}
		}
		return nil, &Error{Msg: "the query does not compile", Err: err}
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, &Error{Msg: "reading the query's columns", Err: err}
	}
	if len(cts) == 0 {
		return nil, &Error{Msg: "the query returns no columns (is it a SELECT?)"}
	}
	fields := make([]row.Field, len(cts))
	used := map[string]bool{}
	for i, ct := range cts {
		name := ct.Name()
		if !identifier(name) && !quotedIn(text, name) {
			name = "EXPR$" + strconv.Itoa(i)
		}
		base := name
		for n := 0; used[strings.ToLower(name)]; n++ {
			// Calcite's way with a repeated name: id, id0, id1, ...
			name = base + strconv.Itoa(n)
		}
		used[strings.ToLower(name)] = true
		fields[i] = row.Field{Name: name, Type: q.columnType(ct.Name(), ct.DatabaseTypeName())}
	}
	if q.Out, err = row.NewSchema(fields...); err != nil {
		return nil, &Error{Msg: "the query's columns", Err: err}
	}
	return q, nil
}

// identifier reports whether s is a plain SQL name (a column read as is,
// or an alias), not the text of an expression.
func identifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || unicode.IsLetter(r) || (i > 0 && (unicode.IsDigit(r) || r == '$')) {
			continue
		}
		return false
	}
	return true
}

// quotedIn reports whether name appears quoted in text ("name", `name`
// or [name]): an alias written so, not an expression's text.
func quotedIn(text, name string) bool {
	for _, q := range []string{`"` + strings.ReplaceAll(name, `"`, `""`) + `"`, "`" + name + "`", "[" + name + "]"} {
		if strings.Contains(text, q) {
			return true
		}
	}
	return false
}

// columnType is the row type of result column name of declared type decl:
// the input field's type when the column reads a field straight through
// (SQLite reports the field's declared type then), else any.
func (q *Query) columnType(name, decl string) row.Type {
	decl = strings.ToUpper(decl)
	switch decl {
	case "INTEGER":
		return row.Of(row.KindInt)
	case "REAL":
		return row.Of(row.KindFloat)
	case "TEXT":
		return row.Of(row.KindString)
	case "BOOLEAN":
		return row.Of(row.KindBool)
	case "TIMESTAMP":
		return row.Of(row.KindTimestamp)
	}
	if strings.HasPrefix(decl, "JSON_") {
		// JSON_T_F: field F of table T, a row or a list.
		var ti, fi int
		if _, err := fmt.Sscanf(decl, "JSON_%d_%d", &ti, &fi); err == nil && ti < len(q.Tables) && fi < q.Tables[ti].Schema.Len() {
			return q.Tables[ti].Schema.Fields[fi].Type
		}
	}
	return row.Of(row.KindAny)
}

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

// Quote quotes a SQL name (a table or a column), doubling its quotes.
func Quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

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

// stateful are the opcodes of SQLite's compiled programs that make a query
// depend on more than one row: aggregates and window functions, sorting,
// DISTINCT and set operations, and LIMIT.
var stateful = map[string]bool{
	"AggStep": true, "AggStep1": true, "AggFinal": true, "AggValue": true, "AggInverse": true,
	"Count": true, "SorterOpen": true, "OpenEphemeral": true, "OpenAutoindex": true, "DecrJumpZero": true, "OffsetLimit": true,
}

// writes are the opcodes of programs that change a database: a query
// must not (checkSelect refuses such statements first; this is the second
// line).
var writes = map[string]bool{
	"OpenWrite": true, "Vacuum": true, "VCreate": true, "VDestroy": true, "VUpdate": true,
	"Destroy": true, "Clear": true, "CreateBtree": true, "ParseSchema": true, "DropTable": true, "JournalMode": true,
}

// checkSelect refuses anything but one SELECT statement (WITH ... SELECT
// and VALUES included): the first word must be SELECT, WITH or VALUES,
// and no semicolon may end a statement before the text's end.
func checkSelect(text string) error {
	s := strings.TrimSpace(text)
	for {
		switch {
		case strings.HasPrefix(s, "--"):
			if i := strings.IndexByte(s, '\n'); i >= 0 {
				s = strings.TrimSpace(s[i+1:])
				continue
			}
			s = ""
		case strings.HasPrefix(s, "/*"):
			if i := strings.Index(s, "*/"); i >= 0 {
				s = strings.TrimSpace(s[i+2:])
				continue
			}
			s = ""
		case strings.HasPrefix(s, "("):
			s = strings.TrimSpace(s[1:])
			continue
		}
		break
	}
	end := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsLetter(r) })
	if end < 0 {
		end = len(s)
	}
	switch strings.ToUpper(s[:end]) {
	case "SELECT", "WITH", "VALUES":
	default:
		return &Error{Msg: "Sql runs a SELECT statement (SELECT, WITH ... SELECT or VALUES), not " + strconv.Quote(firstWords(s))}
	}
	// One statement: a semicolon outside quotes and comments may only end it.
	var quote rune
	for i, r := range text {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"' || r == '`':
			quote = r
		case r == '[':
			quote = ']'
		case r == ';':
			if strings.TrimSpace(strings.TrimRight(strings.TrimSpace(text[i:]), ";")) != "" {
				return &Error{Msg: "Sql runs one statement; the query has a semicolon before its end"}
			}
		}
	}
	return nil
}

// firstWords returns the start of s, for messages.
func firstWords(s string) string {
	if len(s) > 20 {
		return s[:20] + "..."
	}
	return s
}

// classify reads the query's compiled program (EXPLAIN) and reports
// whether it can run once per row: it reads one table once and has no
// opcode of stateful.
func (q *Query) classify(ctx context.Context, d *db) (bool, error) {
	rows, err := d.conn.QueryContext(ctx, "EXPLAIN "+q.Text)
	if err != nil {
		return false, &Error{Msg: "the query does not compile", Err: err}
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return false, &Error{Msg: "reading the query's program", Err: err}
	}
	if len(cols) < 2 {
		return false, &Error{Msg: "the query is not a single statement"}
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	reads, perRow := 0, true
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return false, &Error{Msg: "reading the query's program", Err: err}
		}
		op := fmt.Sprint(vals[1])
		if b, ok := vals[1].([]byte); ok {
			op = string(b)
		}
		if stateful[op] {
			perRow = false
		}
		if writes[op] {
			return false, &Error{Msg: "the query changes the database (" + op + "): Sql runs a SELECT"}
		}
		if op == "OpenRead" {
			reads++
		}
	}
	if err := rows.Err(); err != nil {
		return false, &Error{Msg: "the query does not compile", Err: err}
	}
	return perRow && reads == 1, nil
}

// bind converts field value v of type t for SQLite.
func bind(v any, t row.Type) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case bool:
		if x {
			return int64(1), nil
		}
		return int64(0), nil
	case mtime.Time:
		return sqlTime(x), nil
	case int64, float64, string:
		return x, nil
	case int:
		return int64(x), nil
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, nil
		}
		return x.Float64()
	case []byte:
		return x, nil
	}
	switch t.Kind {
	case row.KindTimestamp:
		ts, err := row.ToTimestamp(v)
		if err != nil {
			return nil, err
		}
		return sqlTime(ts), nil
	}
	// Rows, lists and maps: JSON text.
	if r, ok := row.AsRow(v); ok {
		return string(row.AppendJSON(nil, r)), nil
	}
	return string(row.AppendJSONValue(nil, v)), nil
}

// sqlTime is t in timeLayout, as t.ToTime().Format(timeLayout), without
// reading the layout for each value (a tenth of the cost of loading a
// table of timestamps).
func sqlTime(t mtime.Time) string {
	tt := t.ToTime()
	y, mo, d := tt.Date()
	if y < 0 || y > 9999 {
		return tt.Format(timeLayout)
	}
	h, mi, s := tt.Clock()
	var b [len(timeLayout)]byte
	putDigits(b[0:4], y)
	b[4] = '-'
	putDigits(b[5:7], int(mo))
	b[7] = '-'
	putDigits(b[8:10], d)
	b[10] = ' '
	putDigits(b[11:13], h)
	b[13] = ':'
	putDigits(b[14:16], mi)
	b[16] = ':'
	putDigits(b[17:19], s)
	b[19] = '.'
	putDigits(b[20:23], tt.Nanosecond()/1e6)
	return string(b[:])
}

// putDigits writes v's last len(b) decimal digits into b, zero-padded.
func putDigits(b []byte, v int) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
}

// convert converts a value SQLite returned to type t.
func convert(v any, t row.Type) (any, error) {
	switch x := v.(type) {
	case []byte:
		v = string(x)
	case time.Time:
		// The driver reads a TIMESTAMP column's text as a time.
		v = mtime.FromTime(x)
	}
	if v == nil {
		return nil, nil
	}
	switch t.Kind {
	case row.KindInt:
		switch x := v.(type) {
		case int64:
			return x, nil
		case float64:
			if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
				return int64(x), nil
			}
		case string:
			if n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
				return n, nil
			}
		}
	case row.KindFloat:
		switch x := v.(type) {
		case float64:
			return x, nil
		case int64:
			return float64(x), nil
		case string:
			if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
				return f, nil
			}
		}
	case row.KindBool:
		switch x := v.(type) {
		case int64:
			return x != 0, nil
		case float64:
			return x != 0, nil
		case bool:
			return x, nil
		}
	case row.KindString:
		switch x := v.(type) {
		case string:
			return x, nil
		case int64:
			return strconv.FormatInt(x, 10), nil
		case float64:
			return strconv.FormatFloat(x, 'g', -1, 64), nil
		}
	case row.KindTimestamp:
		switch x := v.(type) {
		case mtime.Time:
			return x, nil
		case string:
			for _, layout := range []string{timeLayout, "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02", time.RFC3339Nano} {
				if tt, err := time.ParseInLocation(layout, x, time.UTC); err == nil {
					return mtime.FromTime(tt), nil
				}
			}
			return row.ToTimestamp(x)
		case int64:
			return row.ToTimestamp(x)
		}
	case row.KindRow, row.KindList:
		if s, ok := v.(string); ok {
			dec := json.NewDecoder(strings.NewReader(s))
			dec.UseNumber()
			var x any
			if err := dec.Decode(&x); err == nil {
				return row.FromJSON(x, t)
			}
		}
	case row.KindAny:
		return v, nil
	}
	return nil, fmt.Errorf("SQLite returned %v (%s) for a %s column", v, row.GoTypeName(v), t)
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
