package service

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service/record"
)

// countAcc is the accumulator of the counting program's next version: the
// count and how many inputs made it.
type countAcc struct {
	N    int64
	Adds int64
}

// countFn counts into a countAcc.
type countFn struct{}

func (countFn) CreateAccumulator() countAcc { return countAcc{} }
func (countFn) AddInput(a countAcc, v int64) countAcc {
	return countAcc{N: a.N + v, Adds: a.Adds + 1}
}
func (countFn) MergeAccumulators(a, b countAcc) countAcc {
	return countAcc{N: a.N + b.N, Adds: a.Adds + b.Adds}
}
func (countFn) ExtractOutput(a countAcc) int64 { return a.N }

// migratingProgram is countingProgram's v1 with its Sum[int64] replaced by
// countFn, whose accumulator is a countAcc: with migrate, the step
// declares how a stored int64 becomes one.
func migratingProgram(db string, migrate bool) ProgramLoader {
	return func(job weir.JobInfo) (*weir.Pipeline, error) {
		p := weir.NewJobPipeline(job)
		s := p.Root()
		ev := weir.Generate(s, "Events", weir.GenerateConfig{Count: programCount, Rate: 500}, func(i int64) weir.KV[string, int64] {
			return weir.KV[string, int64]{Key: fmt.Sprintf("k%d", i%7), Value: 1}
		})
		var opts []weir.StepOption
		if migrate {
			opts = append(opts, weir.MigrateAccumulator(func(total int64) (countAcc, error) {
				return countAcc{N: total}, nil
			}))
		}
		c := weir.CombinePerKey(s, "CountPerKey", ev, weir.CombineFn[int64, countAcc, int64](countFn{}), opts...)
		return p, writeCounts(s, job, db, c)
	}
}

// TestProgramAccumulatorMigration: a Go program's update that changes a
// combine's accumulator type is refused (STATE_CODER_CHANGED, naming
// weir.MigrateAccumulator) until the step declares the migration; then the
// new job reads the stored int64 counts through it, and, restarted after
// checkpoints of its own, reads both what it stored and what it migrated:
// every key's count is exact.
func TestProgramAccumulatorMigration(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "counts.sqlite")
	ctx := context.Background()
	clock := testClock{base: time.Now()}

	s := openProgramService(t, dir, clock, countingProgram(db, "v1"))
	st, err := s.StartProgram(ctx, ProgramRequest{Name: "counts", Program: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	j1 := st.Job
	waitFor(t, s, "counts", "a checkpoint", checkpointed(2))
	waitElements(t, s, "counts", "CountPerKey", 100)
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}

	s = openProgramService(t, dir, clock, migratingProgram(db, false))
	before := snapshotRegistry(t, s, "counts")
	st, err = s.StartProgram(ctx, ProgramRequest{Name: "counts", Update: true})
	if !hasCode(err, errcode.IncompatibleUpdate) || st == nil || st.Report == nil {
		t.Fatalf("update without the migration: %+v, %v; want INCOMPATIBLE_UPDATE", st, err)
	}
	var refusal string
	for _, f := range st.Report.Errors {
		if f.Code == errcode.StateCoderChanged {
			refusal = f.Fix
		}
	}
	if !strings.Contains(refusal, "weir.MigrateAccumulator") {
		t.Errorf("the refusal's fix %q does not name weir.MigrateAccumulator: %+v", refusal, st.Report.Errors)
	}
	if after := snapshotRegistry(t, s, "counts"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a refused update changed the registry:\nbefore %+v\nafter  %+v", before, after)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}

	s = openProgramService(t, dir, clock, migratingProgram(db, true))
	st, err = s.StartProgram(ctx, ProgramRequest{Name: "counts", Update: true})
	if err != nil {
		t.Fatalf("update with the migration: %v", err)
	}
	j2 := st.Job
	if st.Action != ActionUpdated || j2.ReplacesJobID != j1.ID {
		t.Fatalf("update: action %s, replaces %q", st.Action, j2.ReplacesJobID)
	}
	warned := false
	for _, w := range st.Report.Warnings {
		warned = warned || w.Code == errcode.AccumulatorMigrated
	}
	if !warned {
		t.Errorf("the report has no ACCUMULATOR_MIGRATED warning: %+v", st.Report.Warnings)
	}
	// A restart after the new job's own checkpoints: its store holds the
	// accumulators it wrote (marked) beside any it has not touched since.
	handover := waitFor(t, s, j2.ID, "the new job's handover checkpoint", checkpointed(1)).LastCheckpoint.Epoch
	waitFor(t, s, j2.ID, "checkpoints of the new job", checkpointed(handover+2))
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s = openProgramService(t, dir, clock, migratingProgram(db, true))
	defer s.Close(ctx)
	if _, err := s.StartProgram(ctx, ProgramRequest{Name: "counts"}); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if done := waitDone(t, s, j2.ID); done.State != record.StateDone {
		t.Fatalf("the new job ended %s: %s", done.State, done.Error)
	}
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT key, n FROM counts ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := 0
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		got++
		if n != programCount/7 {
			t.Errorf("key %s: count %d, want %d", k, n, programCount/7)
		}
	}
	if got != 7 {
		t.Errorf("%d keys in the table, want 7", got)
	}
}
