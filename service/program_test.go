package service

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/io/sqlsink"
	"github.com/weir-dev/weir/row"
)

// programCount is the number of elements a counting program generates.
const programCount = 2100

// countingProgram returns a Go program's loader: programCount elements at
// 500/s with keys k0..k6, counted per key (one firing at the end) and
// upserted into the table counts of db. variant "v2" adds a stateless
// step and names the count Counts; "v3" keys the count by an integer.
func countingProgram(db, variant string) ProgramLoader {
	return func(job weir.JobInfo) (*weir.Pipeline, error) {
		p := weir.NewJobPipeline(job)
		s := p.Root()
		cfg := weir.GenerateConfig{Count: programCount, Rate: 500}
		var counts weir.PCollection[weir.KV[string, int64]]
		if variant == "v3" || variant == "v3-rekey" {
			ev := weir.Generate(s, "Events", cfg, func(i int64) weir.KV[int64, int64] { return weir.KV[int64, int64]{Key: i % 7, Value: 1} })
			var opts []weir.StepOption
			if variant == "v3-rekey" {
				// v1's keys are "k0".."k6": each moves to its number.
				opts = append(opts, weir.RekeyFrom(func(k string) (int64, error) { return strconv.ParseInt(strings.TrimPrefix(k, "k"), 10, 64) }))
			}
			c := weir.CombinePerKey(s, "CountPerKey", ev, weir.Sum[int64](), opts...)
			counts = weir.Map(s, "KeyAsString", c, func(kv weir.KV[int64, int64]) weir.KV[string, int64] {
				return weir.KV[string, int64]{Key: fmt.Sprintf("k%d", kv.Key), Value: kv.Value}
			})
		} else {
			ev := weir.Generate(s, "Events", cfg, func(i int64) weir.KV[string, int64] {
				return weir.KV[string, int64]{Key: fmt.Sprintf("k%d", i%7), Value: 1}
			})
			name := "CountPerKey"
			if variant == "v2" {
				ev = weir.Filter(s, "Valid", ev, func(kv weir.KV[string, int64]) bool { return kv.Value > 0 })
				name = "Counts"
			}
			counts = weir.CombinePerKey(s, name, ev, weir.Sum[int64]())
		}
		return p, writeCounts(s, job, db, counts)
	}
}

// writeCounts upserts per-key counts, through a step ToRow, into the table
// counts of db (step WriteCounts), as every counting program of these
// tests does.
func writeCounts(s weir.Scope, job weir.JobInfo, db string, counts weir.PCollection[weir.KV[string, int64]]) error {
	schema := row.MustSchema(row.Field{Name: "key", Type: row.Of(row.KindString)}, row.Field{Name: "n", Type: row.Of(row.KindInt)})
	rows := weir.Map(s, "ToRow", counts, func(kv weir.KV[string, int64]) *row.Row {
		return &row.Row{Schema: schema, Values: []any{kv.Key, kv.Value}}
	})
	sink, err := sqlsink.New(sqlsink.Config{DSN: db, Table: "counts", Key: []string{"key"}, SinkID: job.ID + "/WriteCounts",
		JobID: job.ID, Generation: job.Generation}, schema)
	if err != nil {
		return err
	}
	weir.Write(s, "WriteCounts", rows, sink, weir.WithSinkIdentity("sql", "sqlite:counts"))
	return nil
}

func openProgramService(t *testing.T, dir string, clock testClock, program ProgramLoader) *Service {
	t.Helper()
	s, err := Open(context.Background(), Options{DataDir: dir, CheckpointInterval: 50 * time.Millisecond,
		Clock: clock, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Program: program})
	if err != nil {
		t.Fatalf("opening the service: %v", err)
	}
	return s
}

// registrySnapshot is what a refused start must not change.
type registrySnapshot struct {
	Lineage record.Lineage
	Jobs    []string
	Epoch   uint64
}

func snapshotRegistry(t *testing.T, s *Service, name string) registrySnapshot {
	t.Helper()
	var snap registrySnapshot
	_ = s.core.Update(func(*Tx) error {
		snap = snapshotRegistryTx(t, s, name)
		return nil
	})
	return snap
}

// snapshotRegistryTx is snapshotRegistry within a Tx.
func snapshotRegistryTx(t *testing.T, s *Service, name string) registrySnapshot {
	t.Helper()
	l, err := s.core.ReadLineage(name)
	if err != nil {
		t.Fatal(err)
	}
	snap := registrySnapshot{Lineage: *l}
	err = s.core.Store.Scan("job/", func(_ string, v []byte) error {
		var j record.Job
		if err := json.Unmarshal(v, &j); err != nil {
			return err
		}
		snap.Jobs = append(snap.Jobs, j.ID+" "+j.State.String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := s.core.Store.LastCheckpoint(l.ActiveJobID); err == nil {
		snap.Epoch = rec.Epoch
	}
	return snap
}

// TestProgramStoredUpdate: a Go program's job is checkpointed and its
// service closed (as a process releasing its data directory); a build with
// another graph is refused without Update; an incompatible update is
// refused and changes nothing but the recorded attempt; a compatible
// update with a rename replaces the job in the store, and the new job
// finishes with exact per-key counts (state and source positions carried
// over, nothing counted twice).
func TestProgramStoredUpdate(t *testing.T) {
	t.Parallel()
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
	if st.Action != ActionSubmitted || j1.SDK != record.SDKGo || j1.Generation != 1 || j1.Pipeline != "" {
		t.Fatalf("first start: action %s, job sdk %q generation %d", st.Action, j1.SDK, j1.Generation)
	}
	waitFor(t, s, "counts", "a checkpoint", checkpointed(2))
	waitElements(t, s, "counts", "CountPerKey", 100)

	// The running process's check (POST /v1/process:release).
	graphOf := func(variant string) json.RawMessage {
		p, err := countingProgram(db, variant)(weir.JobInfo{Name: "counts"})
		if err != nil {
			t.Fatal(err)
		}
		b, err := p.Graph().Canonical()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	res, err := s.CheckRelease(ReleaseRequest{Name: "counts", Graph: graphOf("v3")})
	if !hasCode(err, errcode.IncompatibleUpdate) || res == nil || res.Report.Compatible {
		t.Fatalf("CheckRelease(v3) = %+v, %v; want INCOMPATIBLE_UPDATE with a report", res, err)
	}
	if res, err := s.CheckRelease(ReleaseRequest{Name: "counts", Graph: graphOf("v2"), Mapping: `{"CountPerKey":"Counts"}`}); err != nil || !res.Report.Compatible {
		t.Fatalf("CheckRelease(v2) = %+v, %v; want compatible", res, err)
	}
	if j, _ := s.Get("counts"); j.ID != j1.ID || j.State != record.StateRunning {
		t.Fatalf("after the checks the job is %s %s", j.ID, j.State)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// A service without the program leaves the job alone.
	s = openProgramService(t, dir, clock, nil)
	if ids := s.core.RunningIDs(); len(ids) != 0 {
		t.Fatalf("a service without the program runs %v", ids)
	}
	if j, _ := s.Get("counts"); j.State != record.StateRunning {
		t.Fatalf("a service without the program made the job %s", j.State)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Another graph without Update, then an incompatible update: refused,
	// nothing changes but the attempt.
	s = openProgramService(t, dir, clock, countingProgram(db, "v3"))
	before := snapshotRegistry(t, s, "counts")
	if _, err := s.StartProgram(ctx, ProgramRequest{Name: "counts"}); !hasCode(err, errcode.ProgramChanged) {
		t.Fatalf("start of another graph without Update: %v, want PROGRAM_CHANGED", err)
	}
	st, err = s.StartProgram(ctx, ProgramRequest{Name: "counts", Update: true})
	if !hasCode(err, errcode.IncompatibleUpdate) || st == nil || st.Report == nil || st.Report.Compatible || st.Job != nil {
		t.Fatalf("incompatible update: %+v, %v", st, err)
	}
	if after := snapshotRegistry(t, s, "counts"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a refused update changed the registry:\nbefore %+v\nafter  %+v", before, after)
	}
	if ids := s.core.RunningIDs(); len(ids) != 0 {
		t.Fatalf("a refused update runs %v", ids)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// The compatible update, with a rename.
	s = openProgramService(t, dir, clock, countingProgram(db, "v2"))
	defer s.Close(ctx)
	st, err = s.StartProgram(ctx, ProgramRequest{Name: "counts", Update: true, Mapping: `{"CountPerKey":"Counts"}`})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	j2 := st.Job
	if st.Action != ActionUpdated || j2.Generation != 2 || j2.ReplacesJobID != j1.ID {
		t.Fatalf("update: action %s, job generation %d replaces %q", st.Action, j2.Generation, j2.ReplacesJobID)
	}
	done := waitDone(t, s, j2.ID)
	if done.State != record.StateDone {
		t.Fatalf("the new job ended %s: %s", done.State, done.Error)
	}
	jobs, attempts, err := s.History("counts")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].State != record.StateUpdated || jobs[0].ReplacedByJobID != j2.ID || len(attempts) != 2 {
		t.Fatalf("history: %d jobs (first %s → %q), %d attempts", len(jobs), jobs[0].State, jobs[0].ReplacedByJobID, len(attempts))
	}
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT key, n, generation FROM counts ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := 0
	for rows.Next() {
		var k string
		var n, g int64
		if err := rows.Scan(&k, &n, &g); err != nil {
			t.Fatal(err)
		}
		got++
		if n != programCount/7 || g != 2 {
			t.Errorf("key %s: count %d generation %d, want %d and 2", k, n, g, programCount/7)
		}
	}
	if got != 7 {
		t.Errorf("%d keys in the table, want 7", got)
	}
}

// streamingProgram returns a Go program's loader of a streaming job: an
// unbounded generator counted per key (step count) into the table counts
// of db.
func streamingProgram(db, count string) ProgramLoader {
	return func(job weir.JobInfo) (*weir.Pipeline, error) {
		p := weir.NewJobPipeline(job)
		s := p.Root()
		ev := weir.Generate(s, "Events", weir.GenerateConfig{Rate: 500}, func(i int64) weir.KV[string, int64] {
			return weir.KV[string, int64]{Key: fmt.Sprintf("k%d", i%7), Value: 1}
		})
		return p, writeCounts(s, job, db, weir.CombinePerKey(s, count, ev, weir.Sum[int64]()))
	}
}

// TestProgramUpdateOfDrainingJob: the job that replaces a DRAINING job
// (here a Go program's, drained while no process ran it) is created
// draining through the state machine (PENDING → DRAINING), then drains to
// DRAINED; the old job ends UPDATED.
func TestProgramUpdateOfDrainingJob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "counts.sqlite")
	ctx := context.Background()
	clock := testClock{base: time.Now()}

	s := openProgramService(t, dir, clock, streamingProgram(db, "CountPerKey"))
	st, err := s.StartProgram(ctx, ProgramRequest{Name: "counts", Program: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	old := st.Job
	waitFor(t, s, old.ID, "a checkpoint", checkpointed(1))
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Without the program the job has no execution; a drain only records it.
	s = openProgramService(t, dir, clock, nil)
	if d, err := s.Drain(ctx, "counts"); err != nil || d.State != record.StateDraining {
		t.Fatalf("drain without the program: %+v %v", d, err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}

	s = openProgramService(t, dir, clock, streamingProgram(db, "Counts"))
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	st, err = s.StartProgram(ctx, ProgramRequest{Name: "counts", Program: "v2", Update: true, Mapping: `{"CountPerKey": "Counts"}`})
	if err != nil {
		t.Fatalf("update: %+v %v", st, err)
	}
	if st.Action != ActionUpdated || st.Job.ReplacesJobID != old.ID {
		t.Fatalf("update: action %s, job %+v", st.Action, st.Job)
	}
	nj := waitState(t, s, st.Job.ID, record.StateDrained)
	if want := []record.JobState{record.StatePending, record.StateDraining, record.StateDrained}; !equalStates(states(nj), want) {
		t.Errorf("history of the new job %v, want %v", states(nj), want)
	}
	if h := nj.History[1]; h.Reason != "replaces a draining job" || !h.Time.Equal(nj.History[0].Time) {
		t.Errorf("the DRAINING entry %+v", h)
	}
	if o, err := s.Get(old.ID); err != nil || o.State != record.StateUpdated || o.ReplacedByJobID != nj.ID {
		t.Errorf("old job: %+v %v", o, err)
	}
}
