// Package sqlquery runs Beam YAML's Sql transform: a SQL query over the
// rows of one or more inputs, evaluated by an embedded SQLite database
// (modernc.org/sqlite, the driver weir's SQLite sinks already use), so the
// query language is SQLite's SELECT.
//
// Compile checks a query against its inputs' schemas on an empty
// in-memory database when the pipeline loads: a query that does not
// compile is refused then, and its result columns become the output
// schema (a column read straight from an input keeps that field's type,
// a computed one is typed any; an unnamed expression is named EXPR$N as
// Beam's Calcite names it). Compile also reads the compiled program to
// decide how the query runs:
//
//   - a query that reads one input once and neither aggregates, sorts,
//     deduplicates nor limits (a projection or a filter) runs once per
//     element (RowFn): each result row keeps its element's timestamp,
//     window and pane, as Beam SQL's per-row evaluation does;
//   - any other query (GROUP BY, aggregates, DISTINCT, ORDER BY, LIMIT,
//     window functions, joins of several inputs, subqueries over an input)
//     runs once per window of its inputs (Aggregator): the window's rows
//     are collected, per input, in the runner's checkpointed state, and
//     when the window's pane fires the query runs over them and EmitFn
//     emits the result rows in that window, at its end.
//
// Values cross into SQLite as ints (INTEGER), floats (REAL), strings
// (TEXT), bools (0 and 1 in a BOOLEAN column), timestamps (TEXT
// 'YYYY-MM-DD HH:MM:SS.SSS' in UTC, SQLite's date and time format, in a
// TIMESTAMP column) and nested rows and lists (JSON text); they come back
// converted to the output field's type.
//
// It may import row, mtime, runner/contract, window, yamlpipe/join,
// modernc.org/sqlite and the standard library.
package sqlquery
