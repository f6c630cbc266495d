package service

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/yamlpipe"
)

// sinkFaultYAML is a job whose windows close every few checkpoints, so
// that every commit carries rows.
const sinkFaultYAML = `pipeline:
  transforms:
    - type: Generate
      name: Events
      config: {count: 16000, rate: 2000, keys: 3, spacing: 1s, seed: 7}
    - type: Combine
      name: Sums
      input: Events
      windowing: {type: fixed, size: 1m}
      config:
        group_by: [key]
        combine:
          total: {value: amount, fn: sum}
          n: {value: amount, fn: count}
    - type: WriteToSql
      name: WriteTotals
      input: Sums
      config: {dsn: %s, table: totals, key: [key]}
`

func execSQL(t *testing.T, db string, stmts ...string) {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(20000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range stmts {
		if _, err := conn.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestSinkCommitFailure: a sink commit that fails for a reason that may
// pass (a trigger raises, as a database that is down or full would) keeps
// the job RUNNING with condition SINK_UNAVAILABLE, commits nothing while
// it lasts, and once the sink accepts again the job goes on and ends with
// exactly the totals of a run without a fault. A permanent refusal (the
// table was dropped) fails the job with a message that says how to resume.
func TestSinkCommitFailure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	odb := filepath.Join(dir, "oracle.sqlite")
	p, err := yamlpipe.Load("oracle.yaml", []byte(fmt.Sprintf(sinkFaultYAML, odb)), yamlpipe.Options{BaseDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := weir.Run(context.Background(), p, weir.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	want := tableRows(t, odb)
	s, err := Open(context.Background(), Options{DataDir: filepath.Join(dir, "data"), CheckpointInterval: 50 * time.Millisecond,
		Clock: testClock{base: time.Now()}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), StorageRetryInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())

	t.Run("passing", func(t *testing.T) {
		db := filepath.Join(dir, "passing.sqlite")
		j := submit(t, s, "passing", fmt.Sprintf(sinkFaultYAML, db), dir)
		waitFor(t, s, j.ID, "rows committed", func(*record.Job) bool { return committedRows(t, db) > 0 })
		execSQL(t, db, `CREATE TRIGGER fail_insert BEFORE INSERT ON totals BEGIN SELECT RAISE(ABORT, 'injected fault'); END`,
			`CREATE TRIGGER fail_update BEFORE UPDATE ON totals BEGIN SELECT RAISE(ABORT, 'injected fault'); END`)
		stopped := waitFor(t, s, j.ID, "the SINK_UNAVAILABLE condition", func(j *record.Job) bool { return j.Condition != nil })
		if stopped.Condition.Code != errcode.SinkUnavailable || stopped.State != record.StateRunning || !strings.Contains(stopped.Condition.Message, "injected fault") {
			t.Fatalf("after the sink failed: state %s, condition %+v; want RUNNING with SINK_UNAVAILABLE naming the cause", stopped.State, stopped.Condition)
		}
		atFault := tableRows(t, db)
		tried := func() time.Time {
			if jr := s.core.RunningJob(j.ID); jr != nil {
				if t, ok := jr.LastSinkRetry(); ok {
					return t
				}
			}
			return time.Time{}
		}
		for range 3 { // a few retries, failing
			last := tried()
			waitFor(t, s, j.ID, "another retry", func(j *record.Job) bool { return tried().After(last) })
		}
		if c := waitFor(t, s, j.ID, "the condition", func(*record.Job) bool { return true }).Condition; c == nil || !c.Since.Equal(stopped.Condition.Since) {
			t.Errorf("condition after the failed retries: %+v, want the first one's", c)
		}
		if got := tableRows(t, db); !slices.Equal(got, atFault) {
			t.Errorf("the table changed while its commits failed:\n%v\n%v", atFault, got)
		}
		execSQL(t, db, `DROP TRIGGER fail_insert`, `DROP TRIGGER fail_update`)
		waitFor(t, s, j.ID, "the condition to clear", func(j *record.Job) bool { return j.Condition == nil || j.State.Terminal() })
		done := waitDone(t, s, j.ID)
		if done.State != record.StateDone {
			t.Fatalf("job ended %s (%s)", done.State, done.Error)
		}
		if got := tableRows(t, db); !slices.Equal(got, want) {
			t.Errorf("totals after the sink came back:\n got %v\nwant %v", got, want)
		}
		_, evs, err := s.Events(j.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var set, cleared bool
		for _, e := range evs {
			if e.Type == record.EventConditionChanged && e.Details["code"] == string(errcode.SinkUnavailable) {
				set = set || e.Details["set"] == true
				cleared = cleared || e.Details["set"] == false
			}
		}
		if !set || !cleared {
			t.Errorf("condition_changed events for SINK_UNAVAILABLE: set %v, cleared %v", set, cleared)
		}
	})

	t.Run("final commit", func(t *testing.T) {
		// The sink refuses from the start until after the job ended: its
		// final commit fails (DONE, pending_commit), and the retry loop
		// commits it once the sink accepts, without a restart.
		db := filepath.Join(dir, "final.sqlite")
		j := submit(t, s, "final", fmt.Sprintf(sinkFaultYAML, db), dir)
		waitFor(t, s, j.ID, "rows committed", func(*record.Job) bool { return committedRows(t, db) > 0 })
		execSQL(t, db, `CREATE TRIGGER fail_insert BEFORE INSERT ON totals BEGIN SELECT RAISE(ABORT, 'injected fault'); END`,
			`CREATE TRIGGER fail_update BEFORE UPDATE ON totals BEGIN SELECT RAISE(ABORT, 'injected fault'); END`)
		// Pending and let go of: only a failed final commit gets there (a
		// successful one clears pending_commit before its execution ends).
		ended := waitFor(t, s, j.ID, "the end with a failed final commit", func(j *record.Job) bool {
			return j.State.Terminal() && j.PendingCommit && s.core.RunningJob(j.ID) == nil
		})
		if ended.State != record.StateDone {
			t.Fatalf("job ended %s (%s), want DONE with its final commit pending", ended.State, ended.Error)
		}
		execSQL(t, db, `DROP TRIGGER fail_insert`, `DROP TRIGGER fail_update`)
		waitFor(t, s, j.ID, "the final commit", func(j *record.Job) bool { return !j.PendingCommit })
		if got := tableRows(t, db); !slices.Equal(got, want) {
			t.Errorf("totals after the retried final commit:\n got %v\nwant %v", got, want)
		}
	})

	t.Run("permanent", func(t *testing.T) {
		db := filepath.Join(dir, "permanent.sqlite")
		j := submit(t, s, "permanent", fmt.Sprintf(sinkFaultYAML, db), dir)
		waitFor(t, s, j.ID, "rows committed", func(*record.Job) bool { return committedRows(t, db) > 0 })
		execSQL(t, db, `DROP TABLE totals`)
		failed := waitDone(t, s, j.ID)
		if failed.State != record.StateFailed {
			t.Fatalf("job ended %s after its table was dropped, want FAILED", failed.State)
		}
		for _, w := range []string{"for good", "the table does not exist", "--job-name permanent"} {
			if !strings.Contains(failed.Error, w) {
				t.Errorf("error %q does not say %q", failed.Error, w)
			}
		}
	})
}

// committedRows counts the rows of the totals table in db (0 while it does
// not exist yet).
func committedRows(t *testing.T, db string) int {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(20000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var n int
	if err := conn.QueryRow(`SELECT count(*) FROM totals`).Scan(&n); err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return 0
		}
		t.Fatal(err)
	}
	return n
}
