package service

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/runner/contract"
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
	t.Parallel()
	db := filepath.Join(t.TempDir(), "counts.sqlite")
	checkProgramMigration(t, programMigration{name: "counts", step: "CountPerKey", v1: countingProgram(db, "v1"),
		refused: migratingProgram(db, false), migrated: migratingProgram(db, true),
		fix: "weir.MigrateAccumulator", warning: errcode.AccumulatorMigrated, db: db})
}

// TestProgramRekey: a Go program's update that changes a combine's key
// type (string "k3" to int64 3) is refused (KEY_CODER_CHANGED, naming
// weir.RekeyFrom) until the step declares the re-key; then every stored
// key moves to its new key, also across a restart after the new job's own
// checkpoints (the moved keys are read as they are): every key's count is
// exact.
func TestProgramRekey(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "counts.sqlite")
	checkProgramMigration(t, programMigration{name: "counts", step: "CountPerKey", v1: countingProgram(db, "v1"),
		refused: countingProgram(db, "v3"), migrated: countingProgram(db, "v3-rekey"),
		fix: "weir.RekeyFrom", refusal: errcode.KeyCoderChanged, warning: errcode.StateRekeyed, db: db})
}

// programMigration is one Go program update across a type change of what
// a step stores, for checkProgramMigration.
type programMigration struct {
	name, step string
	// v1 runs first; refused changes the stored type without declaring
	// the migration, migrated declares it.
	v1, refused, migrated ProgramLoader
	// fix is what the refusal's fix names, refusal the refusal's code
	// (default STATE_CODER_CHANGED); warning the code of the accepted
	// update's warning.
	fix              string
	refusal, warning errcode.Code
	// db holds the counts table the programs write.
	db string
}

// checkProgramMigration runs m.v1 until it checkpointed, then updates it
// to m.refused (refused, naming m.fix, the registry unchanged), then to
// m.migrated (updated with the warning m.warning), restarts it after the
// new job's own checkpoints (its store then holds values it wrote, marked,
// beside old ones it has not touched), runs it to the end and checks that
// every key's count is exact.
func checkProgramMigration(t *testing.T, m programMigration) {
	t.Helper()
	dir := filepath.Dir(m.db)
	ctx := context.Background()
	clock := testClock{base: time.Now()}

	s := openProgramService(t, dir, clock, m.v1)
	st, err := s.StartProgram(ctx, ProgramRequest{Name: m.name, Program: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	j1 := st.Job
	waitFor(t, s, m.name, "a checkpoint", checkpointed(2))
	waitElements(t, s, m.name, m.step, 100)
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}

	s = openProgramService(t, dir, clock, m.refused)
	before := snapshotRegistry(t, s, m.name)
	st, err = s.StartProgram(ctx, ProgramRequest{Name: m.name, Update: true})
	if !hasCode(err, errcode.IncompatibleUpdate) || st == nil || st.Report == nil {
		t.Fatalf("update without the migration: %+v, %v; want INCOMPATIBLE_UPDATE", st, err)
	}
	var refusal string
	for _, f := range st.Report.Errors {
		if f.Code == cmp.Or(m.refusal, errcode.StateCoderChanged) {
			refusal = f.Fix
		}
	}
	if !strings.Contains(refusal, m.fix) {
		t.Errorf("the refusal's fix %q does not name %s: %+v", refusal, m.fix, st.Report.Errors)
	}
	if after := snapshotRegistry(t, s, m.name); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a refused update changed the registry:\nbefore %+v\nafter  %+v", before, after)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}

	s = openProgramService(t, dir, clock, m.migrated)
	st, err = s.StartProgram(ctx, ProgramRequest{Name: m.name, Update: true})
	if err != nil {
		t.Fatalf("update with the migration: %v", err)
	}
	j2 := st.Job
	if st.Action != ActionUpdated || j2.ReplacesJobID != j1.ID {
		t.Fatalf("update: action %s, replaces %q", st.Action, j2.ReplacesJobID)
	}
	warned := false
	for _, w := range st.Report.Warnings {
		warned = warned || w.Code == m.warning
	}
	if !warned {
		t.Errorf("the report has no %s warning: %+v", m.warning, st.Report.Warnings)
	}
	handover := waitFor(t, s, j2.ID, "the new job's handover checkpoint", checkpointed(1)).LastCheckpoint.Epoch
	waitFor(t, s, j2.ID, "checkpoints of the new job", checkpointed(handover+2))
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s = openProgramService(t, dir, clock, m.migrated)
	defer s.Close(ctx)
	if _, err := s.StartProgram(ctx, ProgramRequest{Name: m.name}); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if done := waitDone(t, s, j2.ID); done.State != record.StateDone {
		t.Fatalf("the new job ended %s: %s", done.State, done.Error)
	}
	if mt, err := s.Metrics(j2.ID); err == nil && mt != nil {
		for _, st := range mt.Steps {
			if st.Name == m.step && st.Rejects != 0 {
				t.Errorf("%s rejected %d stored values: %v", m.step, st.Rejects, st.RejectsByReason)
			}
		}
	}
	checkProgramCounts(t, m.db)
}

// checkProgramCounts checks that the counts table of db holds every one of
// the 7 keys with its exact count.
func checkProgramCounts(t *testing.T, db string) {
	t.Helper()
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

// tally is what the tallying program's next version keeps per key: the
// count and how many of its increments this version made.
type tally struct {
	N     int64
	Since int64
}

// tallyingCellProgram counts the events of each key in a StatefulParDo's
// cell (step Tally, cell count) and writes each key's count when its
// window ends (an event-time timer at the end of the global window, which
// the bounded input reaches when it is read). v1 keeps an int64; the next
// version a tally, declaring with migrate how a stored int64 becomes one.
// With inMap the count is the entry "n" of a MapState (of int64 values,
// then of tallies), else a ValueState.
func tallyingCellProgram(db string, next, migrate, inMap bool) ProgramLoader {
	return func(job weir.JobInfo) (*weir.Pipeline, error) {
		p := weir.NewJobPipeline(job)
		s := p.Root()
		ev := weir.Generate(s, "Events", weir.GenerateConfig{Count: programCount, Rate: 500}, func(i int64) weir.KV[string, int64] {
			return weir.KV[string, int64]{Key: fmt.Sprintf("k%d", i%7), Value: 1}
		})
		type ctx = weir.StateContext[string, weir.KV[string, int64]]
		end := weir.EventTimer("end")
		var (
			cells []weir.StateDecl
			add   func(c *ctx, v int64)
			count func(c *ctx) int64
			opts  []weir.StepOption
		)
		switch {
		case inMap && !next:
			cell := weir.MapState[string, int64]{ID: "count"}
			cells = []weir.StateDecl{cell}
			add = func(c *ctx, v int64) { n, _ := cell.Get(c, "n"); cell.Put(c, "n", n+v) }
			count = func(c *ctx) int64 { n, _ := cell.Get(c, "n"); return n }
		case inMap:
			cell := weir.MapState[string, tally]{ID: "count"}
			cells = []weir.StateDecl{cell}
			add = func(c *ctx, v int64) { t, _ := cell.Get(c, "n"); t.N, t.Since = t.N+v, t.Since+1; cell.Put(c, "n", t) }
			count = func(c *ctx) int64 { t, _ := cell.Get(c, "n"); return t.N }
		case !next:
			cell := weir.ValueState[int64]{ID: "count"}
			cells = []weir.StateDecl{cell}
			add = func(c *ctx, v int64) { n, _ := cell.Read(c); cell.Write(c, n+v) }
			count = func(c *ctx) int64 { n, _ := cell.Read(c); return n }
		default:
			cell := weir.ValueState[tally]{ID: "count"}
			cells = []weir.StateDecl{cell}
			add = func(c *ctx, v int64) { t, _ := cell.Read(c); t.N, t.Since = t.N+v, t.Since+1; cell.Write(c, t) }
			count = func(c *ctx) int64 { t, _ := cell.Read(c); return t.N }
		}
		if next && migrate {
			opts = append(opts, weir.MigrateState("count", func(n int64) (tally, error) { return tally{N: n}, nil }))
		}
		counts := weir.StatefulParDo(s, "Tally", ev, weir.StatefulFn[string, int64, weir.KV[string, int64]]{
			State: cells, Timers: []weir.TimerSpec{end},
			Process: func(c *ctx, v int64) error {
				add(c, v)
				end.Set(c, c.Window().MaxTimestamp())
				return nil
			},
			OnTimer: func(c *ctx, _ contract.Timer) error {
				c.Output(weir.KV[string, int64]{Key: c.Key(), Value: count(c)})
				return nil
			}}, opts...)
		return p, writeCounts(s, job, db, counts)
	}
}

// TestProgramStateMigration: a Go program's update that changes the type
// of a StatefulParDo's value cell (or of a map cell's values) is refused (STATE_CODER_CHANGED, naming
// weir.MigrateState) until the step declares the migration; then the new
// job reads the stored int64 counts through it (STATE_MIGRATED), and,
// restarted after checkpoints of its own, reads both what it stored
// (marked) and what it has not touched since: every key's count is exact.
func TestProgramStateMigration(t *testing.T) {
	t.Parallel()
	for _, inMap := range []bool{false, true} {
		name := "value cell"
		if inMap {
			name = "map cell"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "counts.sqlite")
			checkProgramMigration(t, programMigration{name: "tallies", step: "Tally", v1: tallyingCellProgram(db, false, false, inMap),
				refused: tallyingCellProgram(db, true, false, inMap), migrated: tallyingCellProgram(db, true, true, inMap),
				fix: "weir.MigrateState", warning: errcode.StateMigrated, db: db})
		})
	}
}
