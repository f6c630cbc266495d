package sqlquery

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

var clicks = row.MustSchema(
	row.Field{Name: "user", Type: row.Of(row.KindString)},
	row.Field{Name: "ms", Type: row.Of(row.KindInt)},
	row.Field{Name: "ok", Type: row.Of(row.KindBool)},
	row.Field{Name: "at", Type: row.Of(row.KindTimestamp)},
	row.Field{Name: "tags", Type: row.ListOf(row.Of(row.KindString))},
)

func TestCompile(t *testing.T) {
	tests := []struct {
		query  string
		perRow bool
		out    string // the output schema
	}{
		{"SELECT * FROM PCOLLECTION WHERE ms > 2", true, "{user:string,ms:int,ok:bool,at:timestamp,tags:list<string>}"},
		{"SELECT user, ms + 1, ok AND ms > 3 AS big FROM PCOLLECTION", true, "{user:string,EXPR$1:any,big:any}"},
		{"SELECT * FROM PCOLLECTION WHERE user IN ('a', 'b')", true, "{user:string,ms:int,ok:bool,at:timestamp,tags:list<string>}"},
		{"select user from pcollection", true, "{user:string}"},
		{"SELECT user, sum(ms) AS s FROM PCOLLECTION GROUP BY user", false, "{user:string,s:any}"},
		{"SELECT count(*) FROM PCOLLECTION", false, "{EXPR$0:any}"},
		{"SELECT DISTINCT user FROM PCOLLECTION", false, "{user:string}"},
		{"SELECT user FROM PCOLLECTION ORDER BY ms", false, "{user:string}"},
		{"SELECT user FROM PCOLLECTION LIMIT 3", false, "{user:string}"},
		{"SELECT user, row_number() OVER (ORDER BY ms) AS r FROM PCOLLECTION", false, "{user:string,r:any}"},
		{"SELECT a.user, b.user FROM PCOLLECTION a JOIN PCOLLECTION b ON a.ms = b.ms", false, "{user:string,user0:string}"},
		{"SELECT user FROM PCOLLECTION WHERE ms > (SELECT avg(ms) FROM PCOLLECTION)", false, "{user:string}"},
		{"SELECT user FROM PCOLLECTION UNION SELECT user FROM PCOLLECTION", false, "{user:string}"},
		{"WITH w AS (SELECT user FROM PCOLLECTION WHERE ok) SELECT * FROM w", true, "{user:string}"},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			q, err := Compile(context.Background(), tc.query, []Table{{Name: DefaultTable, Schema: clicks}})
			if err != nil {
				t.Fatal(err)
			}
			if q.PerRow != tc.perRow {
				t.Errorf("PerRow = %v, want %v", q.PerRow, tc.perRow)
			}
			if got := q.Out.String(); got != tc.out {
				t.Errorf("Out = %s, want %s", got, tc.out)
			}
		})
	}
}

func TestCompileRefuses(t *testing.T) {
	tests := []struct{ query, want string }{
		{"", "the query is empty"},
		{"DELETE FROM PCOLLECTION", "Sql runs a SELECT statement"},
		{"VACUUM INTO '/tmp/x.db'", "Sql runs a SELECT statement"},
		{"ATTACH DATABASE '/tmp/x.db' AS x", "Sql runs a SELECT statement"},
		{"  -- a comment\n  INSERT INTO PCOLLECTION VALUES (1)", "Sql runs a SELECT statement"},
		{"WITH x AS (SELECT 1) DELETE FROM PCOLLECTION", "changes the database"},
		{"WITH x AS (SELECT 1) INSERT INTO PCOLLECTION (user) SELECT 'a' FROM x", "changes the database"},
		{"SELECT 1; DELETE FROM PCOLLECTION", "Sql runs one statement"},
		{"SELECT nope FROM PCOLLECTION", "no such column: nope"},
		{"SELECT * FROM other", "no such table: other"},
		{"SELEC user FROM PCOLLECTION", "Sql runs a SELECT statement"},
		{"SELECT user FROM PCOLLECTION WHERE", "incomplete input"},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			_, err := Compile(context.Background(), tc.query, []Table{{Name: DefaultTable, Schema: clicks}})
			var qe *Error
			if err == nil || !errors.As(err, &qe) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want an *Error containing %q", err, tc.want)
			}
		})
	}
	// Two inputs of one name (SQL names ignore case).
	if _, err := Compile(context.Background(), "SELECT 1", []Table{{Name: "a", Schema: clicks}, {Name: "A", Schema: clicks}}); err == nil {
		t.Error("two inputs named a and A were accepted")
	}
	// A semicolon inside a string is not the end of a statement.
	if _, err := Compile(context.Background(), "SELECT user FROM PCOLLECTION WHERE user <> 'a;b';", []Table{{Name: DefaultTable, Schema: clicks}}); err != nil {
		t.Errorf("a quoted semicolon: %v", err)
	}
}

// Values cross into SQLite and back with their types: bools, timestamps
// (compared and computed on as SQLite's date and time text), lists.
func TestRoundTrip(t *testing.T) {
	q, err := Compile(context.Background(),
		"SELECT user, ok, at, tags, datetime(at, '+1 hour') AS later, at > '2026-03-01 10:00:00' AS after FROM PCOLLECTION WHERE NOT ok OR ms = 0",
		[]Table{{Name: DefaultTable, Schema: clicks}})
	if err != nil {
		t.Fatal(err)
	}
	if !q.PerRow {
		t.Fatal("want a per-row query")
	}
	at := mtime.Time(1772359500123) // 2026-03-01T10:05:00.123Z
	in := &row.Row{Schema: clicks, Values: []any{"u1", int64(0), true, at, []any{"x", "y"}}}
	fn := q.newRowFn(t)
	var got []contract.Element
	pc := contract.NewProcessContext(context.Background(), emitter(func(e contract.Element) { got = append(got, e) }), nil, nil, 0)
	e := contract.Element{Value: in, Time: at, Window: window.Global}
	if err := fn.Process(&pc, e); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("got %d rows, want 1", len(got))
	}
	r := got[0].Value.(*row.Row)
	want := `{"user":"u1","ok":true,"at":"2026-03-01T10:05:00.123Z","tags":["x","y"],"later":"2026-03-01 11:05:00","after":1}`
	if s := string(row.AppendJSON(nil, r)); s != want {
		t.Errorf("row = %s\nwant  %s", s, want)
	}
	if got[0].Time != at {
		t.Errorf("time = %v, want the element's %v", got[0].Time, at)
	}
	// A null stays null; a row the query drops emits nothing.
	got = nil
	if err := fn.Process(&pc, contract.Element{Value: &row.Row{Schema: clicks, Values: []any{nil, int64(5), true, nil, nil}}}); err != nil || len(got) != 0 {
		t.Errorf("a filtered row: %d rows, err %v", len(got), err)
	}
	if err := fn.Process(&pc, contract.Element{Value: &row.Row{Schema: clicks, Values: []any{nil, int64(5), nil, nil, nil}}}); err != nil || len(got) != 0 {
		// NOT NULL OR 5 = 0 is NULL: not true, dropped.
		t.Errorf("a null row: %d rows, err %v", len(got), err)
	}
}

// emitter collects emitted elements.
type emitter func(e contract.Element)

func (f emitter) Emit(_ int, e contract.Element) { f(e) }

// newRowFn returns a worker's copy of the per-row step of q.
func (q *Query) newRowFn(t *testing.T) *RowFn {
	t.Helper()
	return (&RowFn{Q: q}).Clone().(*RowFn)
}

// The per-window aggregation keeps its rows in checkpoint state (join's)
// and gives the same result after a round trip through it.
func TestAggregatorState(t *testing.T) {
	q, err := Compile(context.Background(), "SELECT user, sum(ms) AS total, count(*) AS n FROM PCOLLECTION GROUP BY user ORDER BY user", []Table{{Name: DefaultTable, Schema: clicks}})
	if err != nil {
		t.Fatal(err)
	}
	a := NewAggregator(q, func(dst []byte, v any) []byte { return append(dst, row.AppendJSONValue(nil, v)...) })
	union := row.MustSchema(row.Field{Name: "tag", Type: row.Of(row.KindInt)}, row.Field{Name: "in0", Type: row.RowOf(clicks)})
	acc := a.NewAccumulator()
	for i, u := range []string{"a", "b", "a"} {
		r := &row.Row{Schema: clicks, Values: []any{u, int64(i + 1), true, nil, nil}}
		e := &contract.Element{Value: &row.Row{Schema: union, Values: []any{int64(0), r}}}
		acc = a.AddInput(acc, e)
	}
	b, err := a.EncodeState("", acc)
	if err != nil {
		t.Fatal(err)
	}
	back, err := a.DecodeState("", b)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"rows":[{"user":"a","total":4,"n":2},{"user":"b","total":2,"n":1}],"error":null}`
	for _, x := range []any{acc, back} {
		out := a.Output(nil, x, window.Global, window.PaneInfo{})
		if s := string(row.AppendJSON(nil, out.(*row.Row))); s != want {
			t.Errorf("output = %s\nwant     %s", s, want)
		}
	}
}

// A run that would not end is bounded: more rows than MaxRows fail it.
func TestRunBounded(t *testing.T) {
	q, err := Compile(context.Background(), "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x, user FROM c, PCOLLECTION", []Table{{Name: DefaultTable, Schema: clicks}})
	if err != nil {
		t.Fatal(err)
	}
	q.MaxRows = 1000
	a := NewAggregator(q, nil)
	acc := a.NewAccumulator()
	union := row.MustSchema(row.Field{Name: "tag", Type: row.Of(row.KindInt)}, row.Field{Name: "in0", Type: row.RowOf(clicks)})
	acc = a.AddInput(acc, &contract.Element{Value: &row.Row{Schema: union, Values: []any{int64(0), &row.Row{Schema: clicks, Values: []any{"u", int64(1), true, nil, nil}}}}})
	out := a.Output(nil, acc, window.Global, window.PaneInfo{}).(*row.Row)
	if msg, _ := out.Values[1].(string); !strings.Contains(msg, "the query returns more than 1000 rows (over the window's 1 rows)") {
		t.Errorf("output = %v, want the bound's error", out)
	}
	var got []contract.Element
	pc := contract.NewProcessContext(context.Background(), emitter(func(e contract.Element) { got = append(got, e) }), nil, nil, 0)
	err = EmitFn{}.Process(&pc, contract.Element{Value: out})
	var ee *contract.ElementError
	if !errors.As(err, &ee) || ee.Reason != ReasonSQLError || len(got) != 0 {
		t.Errorf("EmitFn: err %v, %d rows; want a %s reject", err, len(got), ReasonSQLError)
	}
}

// TestPlannerToldTheSizes runs a join of two tables whose sizes change
// from run to run on one database: each run's answer is right though the
// planner's statistics (and so the prepared statements) changed before it,
// and once told, the planner looks the larger table's rows up in the
// smaller one, not the other way round.
func TestPlannerToldTheSizes(t *testing.T) {
	ctx := context.Background()
	items := row.MustSchema(row.Field{Name: "id", Type: row.Of(row.KindInt)}, row.Field{Name: "floor", Type: row.Of(row.KindInt)})
	offers := row.MustSchema(row.Field{Name: "item", Type: row.Of(row.KindInt)}, row.Field{Name: "price", Type: row.Of(row.KindInt)})
	const text = `SELECT i.id AS id, max(o.price) AS best FROM items i JOIN offers o ON o.item = i.id
		WHERE o.price >= i.floor GROUP BY i.id`
	q, err := Compile(ctx, text, []Table{{Name: "items", Schema: items}, {Name: "offers", Schema: offers}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := q.openPrepared(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, tc := range []struct{ items, offers int }{{10, 50}, {2000, 40000}, {10, 50}, {1100, 3000}, {3000, 1100}} {
		var tables [2][]*row.Row
		for i := range tc.items {
			tables[0] = append(tables[0], &row.Row{Schema: items, Values: []any{int64(i), int64(i % 7)}})
		}
		want := map[int64]int64{}
		for i := range tc.offers {
			item, price := int64(i*7919%tc.items), int64(i*104729%1000)
			tables[1] = append(tables[1], &row.Row{Schema: offers, Values: []any{item, price}})
			if price >= item%7 && price > want[item]-1 {
				want[item] = price
			}
		}
		out, err := q.run(ctx, d, tables[:])
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if len(out) != len(want) {
			t.Errorf("%+v: %d rows, want %d", tc, len(out), len(want))
		}
		for _, r := range out {
			if id, best := r.Values[0].(int64), r.Values[1].(int64); want[id] != best {
				t.Errorf("%+v: item %d best %d, want %d", tc, id, best, want[id])
			}
		}
		if plan := queryPlan(t, d, text); tc.items > planSizeFloor && tc.offers > planSizeFloor {
			smaller := map[bool]string{true: "i", false: "o"}[tc.items < tc.offers]
			if !strings.Contains(plan, "SEARCH "+smaller+" USING AUTOMATIC") {
				t.Errorf("%+v: plan\n%s\nlooks rows up in %s's automatic index", tc, plan, map[string]string{"i": "o", "o": "i"}[smaller])
			}
		}
	}
}

// queryPlan is SQLite's plan for text on d, one step a line.
func queryPlan(t *testing.T, d *db, text string) string {
	t.Helper()
	rows, err := d.conn.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+text)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, unused any
		var step string
		if err := rows.Scan(&id, &parent, &unused, &step); err != nil {
			t.Fatal(err)
		}
		b.WriteString(step + "\n")
	}
	return b.String()
}

// TestSQLTime checks the timestamps bound to SQLite against the standard
// library's formatting of the same layout, across eras and milliseconds.
func TestSQLTime(t *testing.T) {
	times := []mtime.Time{0, 1, 999, 1000, -1, -1000, -86_400_001, 1436918400000, 1436918400123,
		mtime.FromTime(time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC)),
		mtime.FromTime(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)),
		mtime.FromTime(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)),
		mtime.FromTime(time.Date(-1, 6, 1, 0, 0, 0, 0, time.UTC)),
		mtime.FromTime(time.Date(2024, 2, 29, 12, 30, 45, 7e6, time.UTC)),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10_000 {
		times = append(times, mtime.Time(rng.Int64N(1<<46)-1<<45))
	}
	for _, ts := range times {
		if got, want := sqlTime(ts), ts.ToTime().UTC().Format(timeLayout); got != want {
			t.Errorf("sqlTime(%d) = %q, want %q", int64(ts), got, want)
		}
	}
}

// TestAggregatorReusesItsDatabases runs panes of one per-window query one
// after the other and then at once: each answer is right, a database that
// ran a pane runs the next (emptied; its planner statistics changing with
// the panes' sizes), a pane whose query fails closes its database, and no
// more databases stay open than may run at once.
func TestAggregatorReusesItsDatabases(t *testing.T) {
	ctx := context.Background()
	q, err := Compile(ctx, "SELECT user, json(user) AS j, sum(ms) AS total FROM PCOLLECTION GROUP BY user ORDER BY user", []Table{{Name: DefaultTable, Schema: clicks}})
	if err != nil {
		t.Fatal(err)
	}
	a := NewAggregator(q, func(dst []byte, v any) []byte { return append(dst, row.AppendJSONValue(nil, v)...) })
	union := row.MustSchema(row.Field{Name: "tag", Type: row.Of(row.KindInt)}, row.Field{Name: "in0", Type: row.RowOf(clicks)})
	// pane runs the query over n rows of users "[0]" to "[keys-1]" (JSON
	// text; "bad" is not, and fails the query) and checks each total.
	pane := func(n, keys int, user func(i int) string) (ok bool, msg string) {
		acc := a.NewAccumulator()
		want := map[string]int64{}
		for i := range n {
			u := user(i % keys)
			want[u] += int64(i)
			r := &row.Row{Schema: clicks, Values: []any{u, int64(i), true, nil, nil}}
			acc = a.AddInput(acc, &contract.Element{Value: &row.Row{Schema: union, Values: []any{int64(0), r}}})
		}
		out := a.Output(nil, acc, window.Global, window.PaneInfo{}).(*row.Row)
		if e, _ := out.Values[1].(string); e != "" {
			return false, e
		}
		rs, _ := out.Values[0].([]any)
		if len(rs) != len(want) {
			return false, fmt.Sprintf("%d rows, want %d", len(rs), len(want))
		}
		for _, x := range rs {
			r := x.(*row.Row)
			if u := r.Values[0].(string); r.Values[2] != want[u] {
				return false, fmt.Sprintf("user %s total %v, want %d", u, r.Values[2], want[u])
			}
		}
		return true, ""
	}
	jsonUser := func(i int) string { return fmt.Sprintf("[%d]", i) }
	var first *db
	for i, n := range []int{10, 5000, 3, 2000, 40} {
		if ok, msg := pane(n, 7, jsonUser); !ok {
			t.Fatalf("pane %d of %d rows: %s", i, n, msg)
		}
		if len(a.dbs.free) != 1 {
			t.Fatalf("after pane %d: %d idle databases, want 1", i, len(a.dbs.free))
		}
		if i == 0 {
			first = a.dbs.free[0]
		} else if a.dbs.free[0] != first {
			t.Errorf("pane %d ran on a new database", i)
		}
	}
	if ok, msg := pane(5, 2, func(i int) string { return []string{"bad", "[1]"}[i] }); ok || !strings.Contains(msg, "JSON") {
		t.Errorf("a pane with a user that is not JSON: ok %v, %q; want the query's error", ok, msg)
	}
	if len(a.dbs.free) != 0 {
		t.Errorf("the failed pane's database is idle again (%d idle)", len(a.dbs.free))
	}
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for g := range 16 {
		wg.Go(func() {
			if ok, msg := pane(50+g*300, 1+g%5, jsonUser); !ok {
				errs <- msg
			}
		})
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Error(msg)
	}
	if n := len(a.dbs.free); n < 1 || n > a.dbs.max {
		t.Errorf("%d idle databases after 16 panes at once, want 1 to %d", n, a.dbs.max)
	}
	a.dbs.closeAll()
	if ok, msg := pane(10, 3, jsonUser); !ok {
		t.Errorf("a pane after the idle databases closed: %s", msg)
	}
}

// TestRunEndsWithItsContext: a pane's query that would run until
// RunTimeout (five minutes) ends once the run's context is cancelled — a
// job's cancel or a server's stop does not wait for it — failing the pane
// with the cancellation.
func TestRunEndsWithItsContext(t *testing.T) {
	q, err := Compile(context.Background(), "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) AS n FROM PCOLLECTION, c", []Table{{Name: DefaultTable, Schema: clicks}})
	if err != nil {
		t.Fatal(err)
	}
	a := NewAggregator(q, nil)
	acc := a.NewAccumulator()
	union := row.MustSchema(row.Field{Name: "tag", Type: row.Of(row.KindInt)}, row.Field{Name: "in0", Type: row.RowOf(clicks)})
	acc = a.AddInput(acc, &contract.Element{Value: &row.Row{Schema: union, Values: []any{int64(0), &row.Row{Schema: clicks, Values: []any{"u", int64(1), true, nil, nil}}}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *row.Row, 1)
	go func() { done <- a.OutputContext(ctx, nil, acc, window.Global, window.PaneInfo{}).(*row.Row) }()
	select {
	case out := <-done:
		t.Fatalf("the endless query ended by itself: %v", out)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	select {
	case out := <-done:
		if msg, _ := out.Values[1].(string); !strings.Contains(msg, "interrupted") && !strings.Contains(msg, "context canceled") {
			t.Errorf("output = %v, want the cancellation's error", out)
		}
	case <-time.After(time.Minute): // RunTimeout is five
		t.Fatal("the query did not end with its context")
	}
}
