package sqlquery

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

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

// Quote quotes a SQL name (a table or a column), doubling its quotes.
func Quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

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
