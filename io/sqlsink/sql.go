package sqlsink

import (
	"context"
	"strings"
)

// backend is one database dialect with its connection. Its methods are
// called with Sink.dbMu held, never concurrently.
type backend interface {
	// open connects; it is called once before any other method.
	open(ctx context.Context) error
	// describe returns the table's columns (normalised name -> declared
	// type), or nil when the table does not exist.
	describe(ctx context.Context) (map[string]string, error)
	// indexes returns the names of the table's indexes.
	indexes(ctx context.Context) ([]string, error)
	// exec runs DDL statements in order.
	exec(ctx context.Context, stmts ...string) error
	// norm normalises a column name for lookups in describe's map.
	norm(name string) string
	// sqlType is the column type created for kind k.
	sqlType(k colKind) string
	// compatible reports whether a column declared as decl can hold kind k.
	compatible(k colKind, decl string) bool
	// widenFloat says how a column declared decl, which holds ints, takes
	// floats from now on: the DDL to run ("" for none) and whether the
	// backend widens it in place at all.
	widenFloat(table, col, decl string) (stmt string, ok bool)
	// nullKey is the value the unique key uses for a null window bound.
	nullKey(r role) string
	// ready prepares statements (and staging tables) for apply; cols are the
	// table's columns as they now are.
	ready(ctx context.Context, cols map[string]string) error
	// apply writes a batch in one transaction. With b.progress it first
	// reads the sink's progress and, if the epoch is already committed,
	// changes nothing and returns skipped.
	apply(ctx context.Context, b *batch) (skipped bool, err error)
	// close disconnects.
	close(ctx context.Context) error
	// setLayout makes the backend write the table of l (a façade
	// generation's physical table); ready must run again.
	setLayout(l *layout)
	// facadeTx runs fn in one transaction that holds the database's façade
	// lock (SQLite: the write lock; PostgreSQL: an advisory lock).
	facadeTx(ctx context.Context, fn func(fx facadeExec) error) error
}

// batch is what one transaction writes: n rows of len(l.cols) values each
// (the records plus, for upsert, generation, job_id and updated_at).
type batch struct {
	vals     []any
	n        int
	progress bool
	sinkID   string
	epoch    int64
}

func createTableSQL(l *layout, be backend) string {
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS ")
	b.WriteString(quoteTable(l.table))
	b.WriteString(" (")
	for i, c := range l.cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(columnDef(c, be))
	}
	b.WriteString(")")
	return b.String()
}

func columnDef(c column, be backend) string {
	s := quoteIdent(c.name) + " " + be.sqlType(c.kind)
	if c.notNull {
		s += " NOT NULL"
	}
	return s
}

// conflictTarget is the unique key: the key columns, window bounds through
// COALESCE so that the global window's nulls compare equal.
func conflictTarget(l *layout, be backend) string {
	parts := make([]string, len(l.keys))
	for i, k := range l.keys {
		c := l.cols[k]
		parts[i] = quoteIdent(c.name)
		if c.role == roleWindowStart || c.role == roleWindowEnd {
			parts[i] = "COALESCE(" + parts[i] + ", " + be.nullKey(c.role) + ")"
		}
	}
	return strings.Join(parts, ", ")
}

func createIndexSQL(l *layout, be backend) string {
	return "CREATE UNIQUE INDEX IF NOT EXISTS " + quoteIdent(l.indexName()) + " ON " + quoteTable(l.table) +
		" (" + conflictTarget(l, be) + ")"
}

// columnList is the quoted, comma-separated list of all column names.
func columnList(l *layout) string {
	names := make([]string, len(l.cols))
	for i, c := range l.cols {
		names[i] = quoteIdent(c.name)
	}
	return strings.Join(names, ", ")
}

// conflictClause is the ON CONFLICT clause of the insert: DO NOTHING for
// append, a revision-guarded update for upsert. The target table is aliased
// cur.
//
// The upsert guard: within one generation a later pane replaces an earlier
// one (pane_index); across generations a complete revision replaces a cut-short
// one whatever their generations, a cut-short one never replaces a complete
// one, and otherwise the newer generation wins. A null pane_cut_short (rows
// written before the column existed) counts as complete.
func conflictClause(l *layout, be backend) string {
	s := " ON CONFLICT (" + conflictTarget(l, be) + ")"
	if !l.upsert {
		return s + " DO NOTHING"
	}
	var set []string
	for _, c := range l.cols {
		if c.key || c.role == roleWindowStart || c.role == roleWindowEnd {
			continue
		}
		q := quoteIdent(c.name)
		set = append(set, q+" = excluded."+q)
	}
	return s + " DO UPDATE SET " + strings.Join(set, ", ") + " WHERE " + newerRevision("excluded.", "cur.", true, true)
}

// completeTerm is a boolean expression (1/0 on SQLite) that is true when
// the row aliased a is complete: its pane_cut_short is false or null. When
// the row's table has no pane_cut_short column (has false), it is TRUE.
func completeTerm(a string, has bool) string {
	if !has {
		return "TRUE"
	}
	return "(COALESCE(" + a + quoteIdent(colPaneCut) + ", FALSE) = FALSE)"
}

// newerRevision is the condition under which the upsert row aliased n
// supersedes the row aliased o of the same key and window (see
// conflictClause); nHas and oHas say whether their tables have the
// pane_cut_short column.
func newerRevision(n, o string, nHas, oHas bool) string {
	g, p := quoteIdent(colGeneration), quoteIdent(colPaneIndex)
	return "(CASE WHEN " + n + g + " = " + o + g + " THEN " + n + p + " > " + o + p +
		" ELSE (" + completeTerm(n, nHas) + ", " + n + g + ") > (" + completeTerm(o, oHas) + ", " + o + g + ") END)"
}

const progressDDL = "CREATE TABLE IF NOT EXISTS " + ProgressTable + " (sink_id TEXT PRIMARY KEY, epoch BIGINT NOT NULL)"
