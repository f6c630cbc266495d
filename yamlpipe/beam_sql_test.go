package yamlpipe

import (
	"strings"
	"testing"
)

// sqlClicks is a pipeline prefix: clicks stamped with their field t
// (seconds), in step Clicks.
const sqlClicks = `pipeline:
  transforms:
    - type: Create
      name: Raw
      config:
        elements:
          - {user: u1, page: home, ms: 12, t: 10}
          - {user: u1, page: cart, ms: 30, t: 70}
          - {user: u2, page: home, ms: 7, t: 20}
          - {user: u2, page: help, ms: 5, t: 50}
          - {user: u1, page: help, ms: 1, t: 80}
    - type: AssignTimestamps
      name: Clicks
      input: Raw
      config: {timestamp: t}
`

func TestSql(t *testing.T) {
	tests := []struct {
		name, steps string
		want        []string
	}{
		{
			// A filter runs per element: each row keeps its timestamp.
			name: "filter keeps timestamps",
			steps: `    - type: Sql
      input: Clicks
      config:
        query: "SELECT user, page FROM PCOLLECTION WHERE page <> 'home'"
    - type: ExtractWindowingInfo
      input: Sql
      config:
        fields: [timestamp]
    - type: LogForTesting
      input: ExtractWindowingInfo
`,
			want: []string{`{"user": "u1", "page": "cart", "timestamp": "1970-01-01T00:01:10.000Z"}`, `{"user": "u2", "page": "help", "timestamp": "1970-01-01T00:00:50.000Z"}`, `{"user": "u1", "page": "help", "timestamp": "1970-01-01T00:01:20.000Z"}`},
		},
		{
			// GROUP BY runs per window; its rows are in their window.
			name: "group by within windows",
			steps: `    - type: Sql
      input: Clicks
      windowing: {type: fixed, size: 60s}
      config:
        query: "SELECT user, count(*) AS n, sum(ms) AS total FROM PCOLLECTION GROUP BY user"
    - type: ExtractWindowingInfo
      input: Sql
      config:
        fields: [window_start]
    - type: LogForTesting
      input: ExtractWindowingInfo
`,
			want: []string{
				`{"user": "u1", "n": 1, "total": 12, "window_start": "1970-01-01T00:00:00.000Z"}`,
				`{"user": "u2", "n": 2, "total": 12, "window_start": "1970-01-01T00:00:00.000Z"}`,
				`{"user": "u1", "n": 2, "total": 31, "window_start": "1970-01-01T00:01:00.000Z"}`,
			},
		},
		{
			// Unnamed expressions are named as Beam's Calcite names them;
			// a column read as is keeps its type.
			name: "expression names",
			steps: `    - type: Sql
      input: Clicks
      config:
        query: "SELECT upper(user), ms * 2, page FROM PCOLLECTION WHERE ms > 10"
    - type: LogForTesting
      input: Sql
`,
			want: []string{`{"EXPR$0": "U1", "EXPR$1": 24, "page": "home"}`, `{"EXPR$0": "U1", "EXPR$1": 60, "page": "cart"}`},
		},
		{
			// DISTINCT and ORDER BY ... LIMIT need every row: per window
			// (here the global one of a bounded input).
			name: "distinct and limit",
			steps: `    - type: Sql
      name: Pages
      input: Clicks
      config:
        query: "SELECT DISTINCT page FROM PCOLLECTION"
    - type: Sql
      name: Top
      input: Clicks
      config:
        query: "SELECT user, ms FROM PCOLLECTION ORDER BY ms DESC LIMIT 2"
    - type: LogForTesting
      input: Pages
    - type: LogForTesting
      input: Top
`,
			want: []string{`{"page": "cart"}`, `{"page": "help"}`, `{"page": "home"}`, `{"user": "u1", "ms": 30}`, `{"user": "u1", "ms": 12}`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lines, _ := runLogged(t, sqlClicks+tc.steps, 2)
			wantLines(t, lines, tc.want...)
		})
	}
}

// Several named inputs are tables by their names; the query joins them.
func TestSqlJoinsNamedInputs(t *testing.T) {
	src := joinPairInputs + `    - type: Sql
      input: {users: Users, orders: Orders, cities: Cities}
      config:
        query: >-
          SELECT o.oid, u.name, c.cname
          FROM orders o JOIN users u ON o.user = u.uid
          LEFT JOIN cities c ON u.city = c.id
    - type: LogForTesting
      input: Sql
`
	lines, _ := runLogged(t, src, 2)
	wantLines(t, lines, `{"oid": 100, "name": "ann", "cname": "paris"}`, `{"oid": 101, "name": "ann", "cname": "paris"}`)
}

// Nested rows and lists go in as JSON and come back typed; bools as bools.
func TestSqlNestedValues(t *testing.T) {
	src := `pipeline:
  type: chain
  transforms:
    - type: Create
      config:
        elements:
          - {name: a, tags: [x, y], pos: {x: 1, y: 2}, ok: true}
          - {name: b, tags: [], pos: {x: 3, y: 4}, ok: false}
    - type: Sql
      config:
        query: "SELECT name, tags, pos, ok, json_extract(pos, '$.x') AS px, NOT ok AS nok FROM PCOLLECTION"
    - type: LogForTesting
`
	lines, _ := runLogged(t, src, 1)
	wantLines(t, lines,
		`{"name": "a", "tags": ["x", "y"], "pos": {"x": 1, "y": 2}, "ok": true, "px": 1, "nok": 0}`,
		`{"name": "b", "tags": [], "pos": {"x": 3, "y": 4}, "ok": false, "px": 3, "nok": 1}`)
}

// A query that fails at run time makes its element (per row) or its
// window's rows (per window) a reject with reason sql_error, sent to the
// error output; the other rows go on.
func TestSqlRuntimeErrorsAreRejects(t *testing.T) {
	src := `pipeline:
  transforms:
    - type: Create
      name: In
      config:
        elements:
          - {k: a, b: 5}
          - {k: b, b: -9223372036854775808}
    - type: Sql
      name: Abs
      input: In
      config:
        query: "SELECT k, abs(b) AS b FROM PCOLLECTION"
        error_handling: {output: bad}
    - type: Sql
      name: Total
      input: In
      config:
        query: "SELECT sum(abs(b)) AS s FROM PCOLLECTION"
        error_handling: {output: bad}
    - type: LogForTesting
      input: Abs
      config: {prefix: 'abs: '}
    - type: MapToFields
      name: AbsBad
      input: Abs.bad
      config:
        language: python
        fields: {reason: error.reason}
    - type: MapToFields
      name: TotalBad
      input: Total.bad
      config:
        language: python
        fields: {reason: error.reason, message: error.message}
    - type: LogForTesting
      input: AbsBad
      config: {prefix: 'abs error: '}
    - type: LogForTesting
      input: Total
      config: {prefix: 'total: '}
    - type: LogForTesting
      input: TotalBad
      config: {prefix: 'total error: '}
`
	lines, _ := runLogged(t, src, 1)
	var got []string
	for _, l := range lines {
		if i := strings.Index(l, `"message": "`); i >= 0 {
			if !strings.Contains(l, "integer overflow") || !strings.Contains(l, "over the window's 2 rows") {
				t.Errorf("message of %s: want SQLite's integer overflow and the window's row count", l)
			}
			l = l[:i] + "...}"
		}
		got = append(got, l)
	}
	wantLines(t, got, `abs: {"k": "a", "b": 5}`, `abs error: {"reason": "sql_error"}`, `total error: {"reason": "sql_error", ...}`)
}

func TestSqlLoadErrors(t *testing.T) {
	clicks := sqlClicks + "    - type: Sql\n      input: Clicks\n"
	loadErr(t, clicks+"      config: {}\n", "Sql needs config.query")
	loadErr(t, clicks+"      config: {query: \"SELECT nope FROM PCOLLECTION\"}\n", "Sql query: the query does not compile: no such column: nope")
	loadErr(t, clicks+"      config: {query: \"DELETE FROM PCOLLECTION\"}\n", `Sql runs a SELECT statement (SELECT, WITH ... SELECT or VALUES), not "DELETE FROM PCOLLECT...`)
	loadErr(t, clicks+"      config: {query: \"WITH x AS (SELECT 1) DELETE FROM PCOLLECTION\"}\n", "the query changes the database")
	loadErr(t, clicks+"      config: {query: \"SELECT 1; DROP TABLE PCOLLECTION\"}\n", "Sql runs one statement")
	loadErr(t, clicks+"      config: {query: \"SELECT * FROM PCOLLECTION\", dialect: zetasql}\n", `Sql dialect "zetasql" is not supported`)
	loadErr(t, sqlClicks+"    - type: Sql\n      input: [Clicks, Raw]\n      config: {query: \"SELECT 1\"}\n", "Sql with several inputs names them")
	// An unbounded input in the global window: an aggregate would never fire.
	gen := "pipeline:\n  transforms:\n    - type: Generate\n      name: G\n      config: {rate: 10}\n    - type: Sql\n      input: G\n"
	loadErr(t, gen+"      config: {query: \"SELECT key, count(*) FROM PCOLLECTION GROUP BY key\"}\n", "is unbounded in the global window without a trigger")
	// A filter of the same input is fine.
	if _, err := Load("p.yaml", []byte(gen+"      config: {query: \"SELECT key FROM PCOLLECTION WHERE amount > 3\"}\n"), Options{BaseDir: t.TempDir()}); err != nil {
		t.Errorf("a per-row query over an unbounded input: %v", err)
	}
}
