package service

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/service/record"
)

// sqlTransformYAML sums each user's orders per one-minute window with
// Beam YAML's Sql (a GROUP BY: run per window, its rows kept in the job's
// checkpointed state) and keeps only big orders with a second Sql (a
// filter: run per element), into SQLite table totals and bigs of %s.
const sqlTransformYAML = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Orders
      config: {topic: sql-orders, schema: {user: string, amount: int, ts: timestamp}, timestamp_field: ts, max_out_of_orderness: 0s, idle_timeout: 1h}
    - type: Sql
      name: Totals
      input: Orders
      windowing: {type: fixed, size: 60s}
      config:
        query: "SELECT user, sum(amount) AS total, count(*) AS n FROM PCOLLECTION GROUP BY user"
    - type: Sql
      name: Big
      input: Orders
      config:
        query: "SELECT user, amount FROM PCOLLECTION WHERE amount >= 10"
    - type: WriteToSql
      name: WriteTotals
      input: Totals
      config: {dsn: %[1]s, table: totals, key: [user]}
    - type: WriteToSql
      name: WriteBig
      input: Big
      config: {dsn: %[1]s, table: bigs}
`

// TestSqlTransformStateSurvivesRestart: the rows a Sql GROUP BY holds for
// an open window are in the job's checkpoints; after the server stops and
// starts again the window's total counts the orders of both sides of the
// restart, once each.
func TestSqlTransformStateSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b := startBroker(t, dir, "sql-orders")
	dataDir := filepath.Join(dir, "data")
	s := openServiceWithBroker(t, dataDir, b)
	db := filepath.Join(dir, "out.sqlite")
	j := submit(t, s, "sqltotals", fmt.Sprintf(sqlTransformYAML, db), dir)
	at := func(sec int) string {
		return time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).Add(time.Duration(sec) * time.Second).Format("2006-01-02T15:04:05.000Z")
	}
	publish := func(user string, amount, sec int) {
		t.Helper()
		msg := fmt.Sprintf(`{"user": %q, "amount": %d, "ts": %q}`, user, amount, at(sec))
		if _, err := b.Publish(ctx, "sql-orders", []byte(msg), nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	publish("alice", 5, 10)
	publish("alice", 12, 20)
	publish("bob", 3, 30)
	waitElements(t, s, j.ID, "Totals/group", 3)
	cur, err := s.Get(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	var epoch uint64
	if cur.LastCheckpoint != nil {
		epoch = cur.LastCheckpoint.Epoch
	}
	waitFor(t, s, j.ID, "a checkpoint holding the window's rows", checkpointed(epoch+2))
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}

	s = openServiceWithBroker(t, dataDir, b)
	<-s.Recovered()
	waitFor(t, s, j.ID, "RUNNING again", func(j *record.Job) bool { return j.State == record.StateRunning })
	publish("alice", 1, 40)
	publish("carol", 20, 95) // closes [0s, 60s)
	waitBacklog(t, s, b, pubsub.SubscriptionName("sqltotals", "Orders"))
	if _, err := s.Drain(ctx, "sqltotals"); err != nil {
		t.Fatal(err)
	}
	if fin := waitFor(t, s, j.ID, "DRAINED and committed", drainedAndCommitted); fin.State != record.StateDrained {
		t.Fatalf("after the drain: %s", fin.State)
	}
	want := []string{at(0) + " alice 18 3", at(0) + " bob 3 1", at(60) + " carol 20 1"}
	if got := sqliteRows(t, db, `SELECT window_start, user, total, n FROM totals ORDER BY window_start, user`); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("totals (window_start user total n):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got, want := sqliteRows(t, db, `SELECT user, amount FROM bigs ORDER BY user`), []string{"alice 12", "carol 20"}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("bigs: %q, want %q", got, want)
	}
}

// sqliteRows runs query on SQLite database db and returns each row's columns
// joined by spaces.
func sqliteRows(t *testing.T, db, query string) []string {
	t.Helper()
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	q, err := conn.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	cols, err := q.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for q.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := q.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			parts[i] = fmt.Sprint(v)
		}
		got = append(got, strings.Join(parts, " "))
	}
	if err := q.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestCancelEndsALongSqlPane: a job whose Sql pane runs a query that
// would go on until its five-minute bound is cancelled at once — the
// run's cancellation ends the query — instead of after the query.
func TestCancelEndsALongSqlPane(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openService(t, filepath.Join(dir, "data"))
	j := submit(t, s, "endless", `pipeline:
  transforms:
    - type: Create
      name: Clicks
      config: {elements: [{user: a}, {user: b}, {user: c}]}
    - type: Sql
      name: Endless
      input: Clicks
      config:
        query: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) AS n FROM PCOLLECTION, c"
    - type: LogForTesting
      input: Endless
`, dir)
	// Once the window's rows are in, its pane runs the endless query.
	waitElements(t, s, j.ID, "Endless/group", 3)
	if _, err := s.Cancel(context.Background(), j.ID); err != nil {
		t.Fatal(err)
	}
	if got := waitState(t, s, j.ID, record.StateCancelled); got.State != record.StateCancelled {
		t.Fatalf("job %s, want CANCELLED", got.State)
	}
}
