package yamlpipe

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/state"
)

const sqlFaultPipeline = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Orders
      config:
        topic: orders
        schema: {region: string, amount: int, ts: timestamp}
        timestamp_field: ts
    - type: Combine
      name: Totals
      input: Orders
      windowing: {type: fixed, size: 1m}
      config:
        group_by: [region]
        combine: {total: {value: amount, fn: sum}, n: {value: amount, fn: count}}
    - type: WriteToSql
      name: WriteTotals
      input: Totals
      config:
        driver: %s
        dsn: %s
        table: %s
        key: [region]
`

// faultDB is the sink's database with a way to make its commits fail for
// real (a trigger that raises on every row written) and to clear the fault.
type faultDB struct {
	driver, dsn, table string
	exec               func(q string) error
	// totals returns per region the sum of totals and of counts.
	totals func() (map[string]int64, int64)
	// progress is the sink's stored epoch (-1 when none).
	progress func(sinkID string) int64
}

func newFaultDB(t *testing.T, driver string) *faultDB {
	t.Helper()
	ctx := context.Background()
	f := &faultDB{driver: driver, table: fmt.Sprintf("fault_totals_%d", os.Getpid()%100000)}
	query := func(q string, args ...any) [][]any { return nil }
	switch driver {
	case "sqlite":
		f.dsn = filepath.Join(t.TempDir(), "out.sqlite")
		db, err := sql.Open("sqlite", f.dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		f.exec = func(q string) error { _, err := db.Exec(q); return err }
		query = func(q string, args ...any) [][]any {
			t.Helper()
			rows, err := db.Query(q, args...)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			defer rows.Close()
			var out [][]any
			for rows.Next() {
				var a, b, c any
				if err := rows.Scan(&a, &b, &c); err != nil {
					t.Fatal(err)
				}
				out = append(out, []any{a, b, c})
			}
			return out
		}
	case "postgres":
		f.dsn = os.Getenv("WEIR_TEST_POSTGRES_DSN")
		if f.dsn == "" {
			f.dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(cctx, f.dsn)
		if err != nil {
			t.Skipf("PostgreSQL is not reachable at %s (set WEIR_TEST_POSTGRES_DSN): %v", f.dsn, err)
		}
		f.exec = func(q string) error { _, err := conn.Exec(ctx, q); return err }
		query = func(q string, args ...any) [][]any {
			t.Helper()
			rows, err := conn.Query(ctx, q, args...)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			defer rows.Close()
			var out [][]any
			for rows.Next() {
				v, err := rows.Values()
				if err != nil {
					t.Fatal(err)
				}
				for len(v) < 3 {
					v = append(v, nil)
				}
				out = append(out, v)
			}
			return out
		}
		drop := func() {
			f.exec("DROP TABLE IF EXISTS " + f.table)
			f.exec("DROP FUNCTION IF EXISTS " + f.table + "_fail()")
			f.exec("DELETE FROM weir_sink_progress WHERE sink_id LIKE 'fault-job-%'")
		}
		drop()
		t.Cleanup(func() { drop(); conn.Close(ctx) })
	}
	f.totals = func() (map[string]int64, int64) {
		got := map[string]int64{}
		var n int64
		for _, r := range query(`SELECT region, CAST(SUM(total) AS BIGINT), CAST(SUM(n) AS BIGINT) FROM ` + f.table + ` GROUP BY region`) {
			got[r[0].(string)] = r[1].(int64)
			n += r[2].(int64)
		}
		return got, n
	}
	f.progress = func(sinkID string) int64 {
		ph := "?"
		if driver == "postgres" {
			ph = "$1"
		}
		rows := query(`SELECT epoch, NULL, NULL FROM weir_sink_progress WHERE sink_id = `+ph, sinkID)
		if len(rows) == 0 {
			return -1
		}
		return rows[0][0].(int64)
	}
	return f
}

// breakCommits installs a trigger that makes every write to the table fail.
func (f *faultDB) breakCommits(t *testing.T) {
	t.Helper()
	var stmts []string
	if f.driver == "sqlite" {
		for _, op := range []string{"INSERT", "UPDATE"} {
			stmts = append(stmts, fmt.Sprintf(`CREATE TRIGGER %s_fail_%s BEFORE %s ON %s BEGIN SELECT RAISE(ABORT, 'injected fault: the disk is full'); END`,
				f.table, strings.ToLower(op), op, f.table))
		}
	} else {
		stmts = []string{
			`CREATE OR REPLACE FUNCTION ` + f.table + `_fail() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'injected fault: the disk is full'; END $$ LANGUAGE plpgsql`,
			`CREATE TRIGGER ` + f.table + `_fail BEFORE INSERT OR UPDATE ON ` + f.table + ` FOR EACH ROW EXECUTE FUNCTION ` + f.table + `_fail()`,
		}
	}
	for _, q := range stmts {
		if err := f.exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// clearFault drops the triggers.
func (f *faultDB) clearFault(t *testing.T) {
	t.Helper()
	stmts := []string{`DROP TRIGGER ` + f.table + `_fail_insert`, `DROP TRIGGER ` + f.table + `_fail_update`}
	if f.driver == "postgres" {
		stmts = []string{`DROP TRIGGER ` + f.table + `_fail ON ` + f.table}
	}
	for _, q := range stmts {
		if err := f.exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestFailedSQLCommitIsNotAcknowledged (issue 12, item 1): a real job reads
// Pub/Sub into a windowed Combine and a SQL sink, with checkpoints in a real
// state store. Once a checkpoint's sink commit fails for real (a trigger
// raises), the subscription stays acknowledged only up to the last
// committed checkpoint, the table and the sink's progress stay at it; after
// the fault clears, the job restarts from its last durable checkpoint
// (whose sink parts are committed then), drains, and the table holds
// exactly the ground truth: nothing acknowledged was lost.
func TestFailedSQLCommitIsNotAcknowledged(t *testing.T) {
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			f := newFaultDB(t, driver)
			b := ordersBroker(t, dir)
			store, err := state.Open(filepath.Join(dir, "state"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			src := fmt.Sprintf(sqlFaultPipeline, driver, f.dsn, f.table)
			job := &JobEnv{Name: "fault-job", ID: "fault-job-" + driver, Generation: 1, DataDir: dir, Broker: b}
			sinkID := job.ID + "/WriteTotals"
			load := func() *contract.Program {
				t.Helper()
				p, err := Load("p.yaml", []byte(src), Options{BaseDir: dir, Job: job})
				if err != nil {
					t.Fatal(err)
				}
				return p.Program()
			}
			x, err := runner.Start(ctx, load(), runner.Options{NumWorkers: 2, Checkpoints: true})
			if err != nil {
				t.Fatal(err)
			}
			sub := pubsub.SubscriptionName(job.Name, "Orders")
			if !await.Until(30*time.Second, 5*time.Millisecond, func() bool { _, err := b.Subscription(ctx, sub); return err == nil }) {
				t.Fatalf("the split did not create subscription %s", sub)
			}
			want := map[string]int64{}
			base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
			publish := func(from, to int) {
				t.Helper()
				for i := from; i < to; i++ {
					region := []string{"NORTH", "WEST", "EAST"}[i%3]
					msg := fmt.Sprintf(`{"region": %q, "amount": %d, "ts": %q}`, region, i, base.Add(time.Duration(i)*time.Second).Format(time.RFC3339))
					if _, err := b.Publish(ctx, "orders", []byte(msg), nil, ""); err != nil {
						t.Fatal(err)
					}
					want[region] += int64(i)
				}
			}
			read := func(x *runner.Execution, n int64) {
				t.Helper()
				if !await.Until(30*time.Second, 5*time.Millisecond, func() bool { return x.Metrics().Step("Totals").ElementsIn >= n }) {
					t.Fatalf("the job read %d elements, want %d", x.Metrics().Step("Totals").ElementsIn, n)
				}
			}
			// checkpoint takes a checkpoint, makes it durable, then commits
			// the sinks and acknowledges the sources (what the service does).
			checkpoint := func(x *runner.Execution) (uint64, error) {
				t.Helper()
				cp, err := x.Checkpoint(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := store.WriteCheckpoint(job.Name, job.ID, cp, nil); err != nil {
					t.Fatal(err)
				}
				return cp.Epoch, x.Commit(ctx, cp)
			}
			ackFloor := func() uint64 {
				t.Helper()
				info, err := b.Subscription(ctx, sub)
				if err != nil {
					t.Fatal(err)
				}
				return info.AckFloor
			}

			publish(0, 400)
			read(x, 400)
			epoch1, err := checkpoint(x)
			if err != nil {
				t.Fatal(err)
			}
			if !await.Until(30*time.Second, 5*time.Millisecond, func() bool { return ackFloor() == 400 }) {
				t.Fatalf("after the first commit the subscription is acknowledged to %d, want 400", ackFloor())
			}
			before, _ := f.totals()

			f.breakCommits(t)
			publish(400, 700)
			read(x, 700)
			epoch2, err := checkpoint(x)
			if err == nil || !strings.Contains(err.Error(), "injected fault") {
				t.Fatalf("commit of checkpoint %d with a failing table: %v, want the injected fault", epoch2, err)
			}
			// A second try while the fault lasts fails alike, and neither
			// acknowledges anything past the last committed checkpoint.
			if _, err := checkpoint(x); err == nil {
				t.Fatal("a commit succeeded while the table still fails")
			}
			if got := ackFloor(); got != 400 {
				t.Fatalf("after the failed commits the subscription is acknowledged to %d, want 400 (the last committed checkpoint)", got)
			}
			if got := f.progress(sinkID); got != int64(epoch1) {
				t.Fatalf("the sink's progress is %d after the failed commits, want %d", got, epoch1)
			}
			if after, _ := f.totals(); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("the table changed during the failed commits: %v, was %v", after, before)
			}
			// The job fails (the service cancels it); the fault clears.
			x.Cancel()
			x.Wait()
			f.clearFault(t)

			prog := load()
			rs, last, err := store.Restore(job.Name, job.ID)
			if err != nil || rs == nil {
				t.Fatalf("restore: %v", err)
			}
			if err := runner.CommitRestored(ctx, prog, last); err != nil {
				t.Fatalf("committing the restored checkpoint %d: %v", last.Epoch, err)
			}
			x, err = runner.Start(ctx, prog, runner.Options{NumWorkers: 2, Checkpoints: true, Restore: rs})
			if err != nil {
				t.Fatal(err)
			}
			publish(700, 900)
			read(x, 200) // the unacknowledged 400..700 were checkpointed already
			if _, err := checkpoint(x); err != nil {
				t.Fatal(err)
			}
			x.Drain()
			if _, err := x.Wait(); err != nil {
				t.Fatal(err)
			}
			if _, err := checkpoint(x); err != nil {
				t.Fatal(err)
			}
			if err := x.CloseSinks(ctx); err != nil {
				t.Fatal(err)
			}
			got, n := f.totals()
			for r, w := range want {
				if got[r] != w {
					t.Errorf("%s: table total %d, ground truth %d", r, got[r], w)
				}
			}
			if n != 900 {
				t.Errorf("the table counts %d elements, want 900 (each exactly once)", n)
			}
			if !await.Until(30*time.Second, 5*time.Millisecond, func() bool { return ackFloor() == 900 }) {
				t.Errorf("at the end the subscription is acknowledged to %d, want 900", ackFloor())
			}
		})
	}
}
