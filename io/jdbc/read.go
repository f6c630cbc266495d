package jdbc

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// Query returns the statement a read runs: query as given, or every row
// of table.
func Query(typ, table, query string) string {
	if strings.TrimSpace(query) != "" {
		return query
	}
	return "SELECT * FROM " + quote(typ, table)
}

// Describe returns the row schema of query's result, read from the
// database without fetching a row: each column a nullable field of the
// kind its database type maps to (integers int, floating and decimal
// numbers float, booleans bool, dates and timestamps timestamp, anything
// else string).
func Describe(ctx context.Context, t Target, init []string, query string) (*row.Schema, error) {
	db, err := open(t, init)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT * FROM ("+strings.TrimRight(strings.TrimSpace(query), ";")+") weir_q WHERE 1 = 0")
	if err != nil {
		return nil, fmt.Errorf("reading the columns of the query: %w", err)
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, fmt.Errorf("reading the columns of the query: %w", err)
	}
	fields := make([]row.Field, len(cts))
	for i, ct := range cts {
		fields[i] = row.Field{Name: ct.Name(), Type: row.Of(kindOf(ct.DatabaseTypeName()))}
	}
	s, err := row.NewSchema(fields...)
	if err != nil {
		return nil, fmt.Errorf("the query's columns: %w", err)
	}
	return s, nil
}

// kindOf maps a database type name (PostgreSQL's or MySQL's, as the
// drivers report them) to a row kind.
func kindOf(name string) row.Kind {
	n := strings.ToUpper(name)
	switch {
	case strings.Contains(n, "INT") || n == "SERIAL" || n == "BIGSERIAL" || n == "YEAR":
		return row.KindInt
	case strings.Contains(n, "FLOAT") || strings.Contains(n, "DOUBLE") || n == "REAL" || n == "NUMERIC" || n == "DECIMAL":
		return row.KindFloat
	case strings.HasPrefix(n, "BOOL"):
		return row.KindBool
	case strings.Contains(n, "TIMESTAMP") || n == "DATETIME" || n == "DATE":
		return row.KindTimestamp
	}
	return row.KindString
}

// Source reads the rows of one query once: a bounded source of one split.
type Source struct {
	t      Target
	init   []string
	query  string
	schema *row.Schema
}

// NewSource returns a source that runs query on t (after init) and emits
// each result row as a row of schema (Describe's), at the minimum event
// time in the global window, as Beam's ReadFromJdbc does.
func NewSource(t Target, init []string, query string, schema *row.Schema) *Source {
	return &Source{t: t, init: init, query: query, schema: schema}
}

// Schema returns the rows' schema.
func (s *Source) Schema() *row.Schema { return s.schema }

// Split implements contract.Source: one split.
func (s *Source) Split(ctx context.Context, _ int) ([]contract.SourceSplit, error) {
	return []contract.SourceSplit{&split{s: s}}, nil
}

type split struct {
	s    *Source
	db   *sql.DB
	rows *sql.Rows
	vals []any
	ptrs []any
	n    int64
	done bool
}

// Read implements contract.SourceSplit.
func (sp *split) Read(ctx context.Context, buf []contract.Element) (contract.ReadResult, error) {
	if sp.done {
		return contract.ReadResult{Watermark: mtime.MaxTimestamp, Done: true}, nil
	}
	if sp.rows == nil {
		db, err := open(sp.s.t, sp.s.init)
		if err != nil {
			return contract.ReadResult{}, err
		}
		sp.db = db
		rows, err := db.QueryContext(ctx, sp.s.query)
		if err != nil {
			return contract.ReadResult{}, fmt.Errorf("running the query: %w", err)
		}
		sp.rows = rows
		n := len(sp.s.schema.Fields)
		sp.vals, sp.ptrs = make([]any, n), make([]any, n)
		for i := range sp.vals {
			sp.ptrs[i] = &sp.vals[i]
		}
	}
	n := 0
	for n < len(buf) {
		if !sp.rows.Next() {
			if err := sp.rows.Err(); err != nil {
				return contract.ReadResult{N: n}, fmt.Errorf("reading the query's rows: %w", err)
			}
			sp.done = true
			return contract.ReadResult{N: n, Watermark: mtime.MaxTimestamp, Done: true}, nil
		}
		if err := sp.rows.Scan(sp.ptrs...); err != nil {
			return contract.ReadResult{N: n}, fmt.Errorf("reading row %d of the query: %w", sp.n+1, err)
		}
		sp.n++
		r := row.New(sp.s.schema)
		for i, f := range sp.s.schema.Fields {
			v, err := convert(sp.vals[i], f.Type.Kind)
			if err != nil {
				return contract.ReadResult{N: n}, fmt.Errorf("row %d of the query, column %s: %w", sp.n, f.Name, err)
			}
			r.Values[i] = v
		}
		buf[n] = contract.Element{Value: r, Time: mtime.MinTimestamp, Window: window.Global, Pane: window.NoFiring}
		n++
	}
	return contract.ReadResult{N: n, Watermark: mtime.MinTimestamp}, nil
}

// Close implements contract.SourceSplit.
func (sp *split) Close() error {
	if sp.rows != nil {
		sp.rows.Close()
	}
	if sp.db != nil {
		return sp.db.Close()
	}
	return nil
}

// convert turns a scanned value into the row value of kind k.
func convert(v any, k row.Kind) (any, error) {
	if v == nil {
		return nil, nil
	}
	if b, ok := v.([]byte); ok {
		v = string(b)
	}
	switch k {
	case row.KindInt:
		switch x := v.(type) {
		case int64:
			return x, nil
		case int32:
			return int64(x), nil
		case uint64:
			return int64(x), nil
		case string:
			return strconv.ParseInt(x, 10, 64)
		}
	case row.KindFloat:
		switch x := v.(type) {
		case float64:
			return x, nil
		case float32:
			return float64(x), nil
		case int64:
			return float64(x), nil
		case string:
			return strconv.ParseFloat(x, 64)
		}
	case row.KindBool:
		switch x := v.(type) {
		case bool:
			return x, nil
		case int64:
			return x != 0, nil
		case string:
			return strconv.ParseBool(x)
		}
	case row.KindTimestamp:
		if x, ok := v.(time.Time); ok {
			return mtime.FromTime(x), nil
		}
	case row.KindString:
		if x, ok := v.(string); ok {
			return x, nil
		}
		return fmt.Sprint(v), nil
	}
	return nil, fmt.Errorf("a %T value (%v) is not a %s", v, v, k)
}
