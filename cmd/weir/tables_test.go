package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/weir-dev/weir/internal/await"
)

// stagedOrdersPipeline is ordersPipeline writing layout: staged, merged
// only on demand; extra adds fields to the orders' schema.
func stagedOrdersPipeline(sub, db, extra string) string {
	p := strings.Replace(ordersPipeline(sub, db), "mode: append,", "mode: append, layout: staged, merge_interval: 0,", 1)
	return strings.Replace(p, "amount: int}", "amount: int"+extra+"}", 1)
}

// TestCLITables drives `weir tables list|describe|merge` against a real
// server running a job whose WriteToSql sink uses layout: staged: the rows
// land in the staging table, a merge on demand moves them into the
// principal table (an event and a metric say so), the view serves every
// row once throughout; an in-place update adding a nullable field adds the
// column to the staging and principal tables, and the rows written before
// read null in it.
func TestCLITables(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	work := t.TempDir()
	db := filepath.Join(work, "orders.db")
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(work, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v1 := write("v1.yaml", stagedOrdersPipeline("orders-job", db, ""))
	// v2 adds a field and merges every second.
	v2 := write("v2.yaml", strings.Replace(stagedOrdersPipeline("orders-job", db, ", note: string"), "merge_interval: 0", "merge_interval: 1s", 1))
	// v3 renames amount to total.
	v3 := write("v3.yaml", strings.Replace(stagedOrdersPipeline("orders-job", db, ", note: string"), "amount: int", "total: int", 1))
	for _, c := range []cliCase{
		{name: "topic", args: []string{"topics", "create", "orders"}},
		{name: "subscription", args: []string{"subscriptions", "create", "orders-job", "--topic", "orders", "--from-beginning"}},
		{name: "no tables yet", args: []string{"tables", "list", "--format", "json"}, wantStdout: []string{"[]"}},
	} {
		c.check(t, srv.cli(work, c.args...))
	}
	if r := srv.cli(work, "run", v1, "--job-name", "orders-sink"); r.code != ExitOK {
		t.Fatalf("run: exit %d\n%s\nserver log:\n%s", r.code, r.stderr, srv.log())
	}
	publish := func(first, n int) {
		t.Helper()
		r := runCLIStdin(t, work, orderLines(first, n), "topics", "publish", "orders", "--id-field", "order_id", "--server", srv.url)
		cliCase{args: []string{"topics", "publish"}, wantStdout: []string{"Published"}}.check(t, r)
	}
	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// viewRows waits until the view serves n rows, each order once.
	viewRows := func(n int64) {
		t.Helper()
		var rows, distinct int64
		if await.Until(30*time.Second, 20*time.Millisecond, func() bool {
			err := conn.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT order_id) FROM orders`).Scan(&rows, &distinct)
			if rows > distinct {
				t.Fatalf("the view serves %d rows for %d orders", rows, distinct)
			}
			return err == nil && rows == n && distinct == n
		}) {
			return
		}
		t.Fatalf("the view serves %d rows (%d distinct), want %d\nserver log:\n%s", rows, distinct, n, srv.log())
	}
	plain := write("plain.yaml", strings.Replace(ordersPipeline("orders-plain", db), "table: orders,", "table: plainorders,", 1))
	for _, args := range [][]string{{"subscriptions", "create", "orders-plain", "--topic", "orders", "--from-beginning"}, {"run", plain, "--job-name", "plain-sink"}} {
		if r := srv.cli(work, args...); r.code != ExitOK {
			t.Fatalf("%v: exit %d\n%s", args, r.code, r.stderr)
		}
	}
	publish(0, 5)
	viewRows(5)
	if !await.Until(30*time.Second, 20*time.Millisecond, func() bool {
		var n int64
		return conn.QueryRow(`SELECT COUNT(*) FROM plainorders`).Scan(&n) == nil && n == 5
	}) {
		t.Fatalf("plainorders never held 5 rows")
	}

	steps := []cliCase{
		{name: "list", args: []string{"tables", "list"}, wantStdout: []string{"NAME", "LAYOUT", "LAST_MERGE", "orders", "staged", "sqlite", "orders-sink",
			"orders__principal:0,orders__staging_v1:5"}},
		{name: "describe before a merge", args: []string{"tables", "describe", "orders"}, wantStdout: []string{
			"Layout:", "staged", "orders__principal (principal): 0 rows", "orders__staging_v1 (staging, generation 1): 5 rows",
			"order_id", "View:", "per element_id", "Merges:", "none yet"}},
		{name: "merge", args: []string{"tables", "merge", "orders"}, wantStdout: []string{"Merged 5 rows into orders__principal", "orders__staging_v1:5"}},
		{name: "merge again", args: []string{"tables", "merge", "orders", "--format", "json"}, wantStdout: []string{`"rows": 0`, `"principal": "orders__principal"`}},
		{name: "describe after", args: []string{"tables", "describe", "orders"}, wantStdout: []string{
			"orders__principal (principal): 5 rows", "orders__staging_v1 (staging, generation 1): 0 rows", "Merge:", "5 rows in"}},
		{name: "list after", args: []string{"tables", "list", "--format", "json"}, wantStdout: []string{`"layout": "staged"`, `"rows": 5`}},
		{name: "unknown table", args: []string{"tables", "describe", "nope"}, wantCode: ExitFailure, wantStderr: []string{"(TABLE_NOT_FOUND)", "tables: orders"}},
		{name: "merge unknown table", args: []string{"tables", "merge", "nope"}, wantCode: ExitFailure, wantStderr: []string{"(TABLE_NOT_FOUND)"}},
		{name: "merge a plain table", args: []string{"tables", "merge", "plainorders"}, wantCode: ExitFailure, wantStderr: []string{"(TABLE_NOT_STAGED)", "layout table"}},
		{name: "list with a plain table", args: []string{"tables", "list"}, wantStdout: []string{"plainorders", "table", "plain-sink", "plainorders:5"}},
		{name: "events", args: []string{"jobs", "logs", "orders-sink"}, wantStdout: []string{"table_merged", "merged 5 rows of the staged table orders into orders__principal"}},
	}
	for _, st := range steps {
		st.check(t, srv.cli(work, st.args...))
	}
	viewRows(5)
	if m := scrapeMetrics(t, srv.url); !strings.Contains(m, `weir_sql_merges_total{result="ok",table="orders"} 2`) ||
		!strings.Contains(m, `weir_sql_merge_rows_total{table="orders"} 5`) {
		t.Errorf("/metrics lacks the merges of table orders:\n%s", m)
	}

	// The amount written as a string from the next version on: weir check
	// against the running job (generation 1, whose staging table the
	// next version does not write) refuses it undeclared, naming the
	// declaration, and passes it declared (convert), as the update would.
	v4 := strings.Replace(stagedOrdersPipeline("orders-job", db, ""), "amount: int", "amount: string", 1)
	undeclared := write("v4.yaml", v4)
	declared := write("v4c.yaml", strings.Replace(v4, "merge_interval: 0,", "merge_interval: 0, convert: [amount],", 1))
	cliCase{name: "check an undeclared conversion", args: []string{"check", "orders-sink", undeclared}, wantCode: ExitInvalidPipeline,
		wantStderr: []string{"column amount", "add convert: [amount] to the WriteToSql config", "(SQL_SCHEMA_CHANGE_REFUSED)"}}.check(t, srv.cli(work, "check", "orders-sink", undeclared))
	cliCase{name: "check a declared conversion", args: []string{"check", "orders-sink", declared}, wantStdout: []string{"compatible"}}.check(t, srv.cli(work, "check", "orders-sink", declared))

	// An additive change: a new nullable field, updated in place.
	if r := srv.cli(work, "run", v2, "--job-name", "orders-sink", "--update"); r.code != ExitOK {
		t.Fatalf("update: exit %d\n%s\nserver log:\n%s", r.code, r.stderr, srv.log())
	}
	publish(5, 2)
	r := runCLIStdin(t, work, `{"order_id": "o7", "region": "WEST", "amount": 70, "note": "gift"}`+"\n",
		"topics", "publish", "orders", "--id-field", "order_id", "--server", srv.url)
	cliCase{args: []string{"topics", "publish"}, wantStdout: []string{"Published 1 message"}}.check(t, r)
	viewRows(8)
	var nulls, noted int64
	if err := conn.QueryRow(`SELECT COUNT(*) FILTER (WHERE note IS NULL), COUNT(note) FROM orders`).Scan(&nulls, &noted); err != nil {
		t.Fatalf("reading the new column through the view: %v", err)
	}
	if nulls != 7 || noted != 1 {
		t.Errorf("the view reads %d nulls and %d notes in the new column, want 7 nulls (the orders without one) and 1 note", nulls, noted)
	}
	// The sink merges by itself every merge_interval: a table_merged event
	// of its step.
	if !await.Until(30*time.Second, 100*time.Millisecond, func() bool {
		r := srv.cli(work, "jobs", "logs", "orders-sink", "--format", "json")
		return strings.Contains(r.stdout, `"step":"WriteOrders"`) || strings.Contains(r.stdout, `"step": "WriteOrders"`)
	}) {
		t.Fatalf("no periodic merge of table orders in the job's events:\n%s", srv.cli(work, "jobs", "logs", "orders-sink").stdout)
	}
	// A rename is refused, naming the column; the job runs on untouched.
	r = srv.cli(work, "run", v3, "--job-name", "orders-sink", "--update")
	if r.code == ExitOK || !strings.Contains(r.stderr, "SQL_SCHEMA_CHANGE_REFUSED") || !strings.Contains(r.stderr, "column amount") ||
		!strings.Contains(r.stderr, "field total is new") {
		t.Fatalf("update renaming amount: exit %d, want a refusal naming the column\n%s", r.code, r.stderr)
	}
	publish(8, 1)
	viewRows(9)
	nulls = 0
	if err := conn.QueryRow(`SELECT COUNT(*) FROM orders WHERE amount IS NULL`).Scan(&nulls); err != nil || nulls != 0 {
		t.Errorf("after the refused rename, %d orders read no amount (%v)", nulls, err)
	}
	r = srv.cli(work, "tables", "describe", "orders")
	cliCase{name: "describe after the update", wantStdout: []string{"note"}}.check(t, r)
	for _, tb := range []string{"orders__principal"} {
		var n int
		if err := conn.QueryRow(`SELECT COUNT(*) FROM pragma_table_info('` + tb + `') WHERE name = 'note'`).Scan(&n); err != nil || n != 1 {
			t.Errorf("%s has no column note after the update (%v)", tb, err)
		}
	}
}
