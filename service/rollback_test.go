package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/internal/rollback"
	"github.com/weir-dev/weir/service/record"

	"github.com/jackc/pgx/v5"

	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/io/sqlsink"
	"github.com/weir-dev/weir/state"
)

// rbYAML is srYAML with an optional step before the windowed sums (%s: the
// step, %s: the combine's input) and a sink of %s (driver), %s (dsn) and
// %s (table).
const rbYAML = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Events
      config:
        subscription: sr-sub
        schema: {key: string, amount: int, ts: string}
        timestamp_field: ts
%s    - type: Combine
      name: Sums
      input: %s
      windowing: {type: fixed, size: 10s}
      config:
        group_by: [key]
        combine:
          total: {value: amount, fn: sum}
          n: {value: amount, fn: count}
    - type: WriteToSql
      name: WriteTotals
      input: Sums
      config: {driver: %s, dsn: %q, table: %s, key: [key]}
`

// rbSink is the table a rollback scenario writes: its DSN and table name
// for the pipeline, and a reader of "key window_start total n" lines with
// each line's generation.
type rbSink struct {
	driver, dsn, table string
	read               func(t *testing.T) ([]string, map[string]int64)
}

func rbSinks(t *testing.T, dir string) map[string]func(t *testing.T) rbSink {
	return map[string]func(t *testing.T) rbSink{
		"sqlite": func(t *testing.T) rbSink {
			db := filepath.Join(dir, "totals.sqlite")
			return rbSink{driver: "sqlite", dsn: db, table: "totals", read: func(t *testing.T) ([]string, map[string]int64) { return totalsByGeneration(t, db) }}
		},
		"postgres": func(t *testing.T) rbSink {
			dsn := os.Getenv("WEIR_TEST_POSTGRES_DSN")
			if dsn == "" {
				dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
			}
			ctx := context.Background()
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			conn, err := pgx.Connect(cctx, dsn)
			if err != nil {
				t.Skipf("PostgreSQL is not reachable at %s (set WEIR_TEST_POSTGRES_DSN): %v", dsn, err)
			}
			table := fmt.Sprintf("rollback_totals_%d", time.Now().UnixNano()%1e9)
			t.Cleanup(func() {
				_, _ = conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
				_ = conn.Close(context.Background())
			})
			return rbSink{driver: "postgres", dsn: dsn, table: table, read: func(t *testing.T) ([]string, map[string]int64) {
				t.Helper()
				rows, err := conn.Query(ctx, `SELECT key, to_char(window_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), total, n, generation FROM `+table)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				return scanTotals(t, rows)
			}}
		},
	}
}

// rbPipelines returns v1 (the windowed sums) and v2 (the same, summing
// only even amounts: a compatible update whose totals differ).
func rbPipelines(sink rbSink) (v1, v2 string) {
	v1 = fmt.Sprintf(rbYAML, "", "Events", sink.driver, sink.dsn, sink.table)
	v2 = fmt.Sprintf(rbYAML, "    - type: Filter\n      name: EvenOnly\n      input: Events\n      config: {keep: \"amount % 2 == 0\"}\n", "EvenOnly", sink.driver, sink.dsn, sink.table)
	return v1, v2
}

// openRollback opens a service with a broker (topic sr-events,
// subscription sr-sub) and the given rollback retention.
func openRollback(t *testing.T, dir string, retention time.Duration) (*Service, *pubsub.Broker, *shiftClock) {
	t.Helper()
	ctx := context.Background()
	b := startBroker(t, dir, "sr-events")
	if _, err := b.CreateSubscription(ctx, "sr-sub", "sr-events", pubsub.SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	clock := &shiftClock{base: time.Now()}
	s, err := Open(ctx, Options{DataDir: filepath.Join(dir, "data"), CheckpointInterval: 50 * time.Millisecond,
		Clock: clock, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Broker: b, RollbackRetention: retention})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, b, clock
}

// rollbackSnapshotOf waits for the READY rollback snapshot of job id.
func rollbackSnapshotOf(t *testing.T, s *Service, name, id string) *record.Snapshot {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		next := s.core.Changes.Next()
		snaps, err := s.ListSnapshots(name, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, sn := range snaps {
			if sn.Kind == record.SnapshotKindRollback && sn.SourceJobID == id {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				sn, err = s.WaitSnapshot(ctx, sn.ID)
				cancel()
				if err != nil || sn.State != record.SnapshotReady {
					t.Fatalf("rollback snapshot of job %s: %+v %v", id, sn, err)
				}
				return sn
			}
		}
		select {
		case <-next:
		case <-deadline.C:
			t.Fatalf("job %s has no rollback snapshot", id)
		}
	}
}

// replaceV2 replaces the running v1 of "sums" by v2: in place, or by a
// stop-and-replace with a plain continuation. It returns the new job once
// it runs.
func replaceV2(t *testing.T, s *Service, clock *shiftClock, how, v2, dir string) *record.Job {
	t.Helper()
	ctx := context.Background()
	req := SubmitRequest{Name: "sums", Pipeline: v2, BaseDir: dir}
	if how == HowStopAndReplace {
		clock.advance(DefaultMinReplaceInterval)
		req.ServiceOptions = []string{"update_strategy_parallel_job_update", "parallel_replace_job_max_stop_duration=5m", "weir_replace_rewind=false"}
	}
	res, err := s.Update(ctx, UpdateRequest{SubmitRequest: req})
	if err != nil {
		t.Fatalf("%s to v2: %v", how, err)
	}
	j := res.Job
	if how == HowStopAndReplace {
		j = waitPhase(t, s, j.ID)
		if j.Replacement.Phase != record.PhaseCutOver {
			t.Fatalf("stop-and-replace ended %+v", j.Replacement)
		}
	}
	return waitFor(t, s, j.ID, "its execution", func(j *record.Job) bool { return s.core.RunningJob(j.ID) != nil })
}

// TestRollback: with data flowing (Pub/Sub in, windowed accumulating sums,
// an upsert SQL sink on SQLite and PostgreSQL), v1 is replaced by v2 (in
// place, or by a stop-and-replace) and input keeps coming; a validate-only
// rollback reports what would be re-read and changes nothing; the rollback
// then starts v1 again as generation 3 from the rollback snapshot, which
// re-reads the input since the snapshot: every (key, window) total in the
// table equals v1's ground truth for all the input, written by generation
// 3, and the history tells it all.
func TestRollback(t *testing.T) {
	t.Parallel()
	type variant struct{ how, change string }
	var variants []variant
	for _, how := range []string{HowInPlaceUpdate, HowStopAndReplace} {
		variants = append(variants, variant{how, "filter"})
	}
	// An update that renames an output in place (renamed_from) renames
	// the table's column; the rollback renames it back, so v1's rows
	// keep their values under total.
	variants = append(variants, variant{HowInPlaceUpdate, "rename"})
	// An update that re-keys the state in place (k1's windows merge into
	// k0's): the rollback snapshot must hold the keys as v1 kept them, or
	// generation 3's k0 and k1 totals would be off.
	variants = append(variants, variant{HowInPlaceUpdate, "rekey"})
	// An update that declares the Combine's outputs in another order,
	// with a new one first: v2 keeps v1's accumulator slots (its graph
	// records them); the rollback snapshot holds v1's state, which v1
	// reads in its own order again.
	variants = append(variants, variant{HowInPlaceUpdate, "reorder"})
	// An update that writes a latest output as a string on a staged table
	// that declares the conversion (convert): the rollback converts it
	// back, the view serving v2's strings as ints.
	variants = append(variants, variant{HowInPlaceUpdate, "convert"})
	for _, vr := range variants {
		how := vr.how
		for _, driver := range []string{"sqlite", "postgres"} {
			name := how + "/" + driver
			if vr.change != "filter" {
				name += "/" + vr.change
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				dir := t.TempDir()
				sink := rbSinks(t, dir)[driver](t)
				s, b, clock := openRollback(t, dir, 0)
				v1, v2 := rbPipelines(sink)
				if vr.change == "rekey" {
					// A table keyed by the re-keyed key is staged: the update
					// serves v1's rows under their new keys behind the view,
					// and the rollback puts them back.
					stage := func(y string) string {
						return strings.Replace(y, "key: [key]}", "key: [key], layout: staged, merge_interval: 0}", 1)
					}
					v1 = stage(v1)
					merge := `key == 'k1' ? 'k0' : key`
					v2 = fmt.Sprintf(rbYAML, "    - type: MapToFields\n      name: Merged\n      input: Events\n      config:\n        fields: {key: \""+merge+"\", amount: amount, ts: ts}\n",
						"Merged", sink.driver, sink.dsn, sink.table)
					v2 = strings.Replace(v2, "      windowing: {type: fixed, size: 10s}\n", "      windowing: {type: fixed, size: 10s}\n      migrations:\n        rekey: {from: [key], key: {key: \""+merge+"\"}}\n", 1)
					v2 = stage(v2)
				}
				if vr.change == "reorder" {
					v2 = strings.Replace(v1, "          total: {value: amount, fn: sum}\n          n: {value: amount, fn: count}\n",
						"          biggest: {value: amount, fn: max}\n          n: {value: amount, fn: count}\n          total: {value: amount, fn: sum}\n", 1)
					if v2 == v1 {
						t.Fatal("the reorder changed nothing")
					}
				}
				if vr.change == "convert" {
					stage := func(y string) string {
						y = strings.Replace(y, "key: [key]}", "key: [key], layout: staged, merge_interval: 0}", 1)
						return strings.Replace(y, "n: {value: amount, fn: count}\n", "n: {value: amount, fn: count}\n          last: {value: amount, fn: latest}\n", 1)
					}
					v1 = stage(v1)
					v2 = fmt.Sprintf(rbYAML, "    - type: MapToFields\n      name: Texted\n      input: Events\n      config:\n        fields: {key: key, amount: amount, ts: ts, amount_s: \"string(amount)\"}\n",
						"Texted", sink.driver, sink.dsn, sink.table)
					v2 = strings.Replace(stage(v2), "last: {value: amount, fn: latest}", "last: {value: amount_s, fn: latest}", 1)
					v2 = strings.Replace(v2, "merge_interval: 0}", "merge_interval: 0, convert: [last]}", 1)
				}
				if vr.change == "rename" {
					v2 = strings.Replace(strings.Replace(v1, "total: {value: amount, fn: sum}", "amount_total: {value: amount, fn: sum}", 1),
						"      config:\n        group_by: [key]\n", "      migrations: {accumulators: {amount_total: {renamed_from: total}}}\n      config:\n        group_by: [key]\n", 1)
				}
				j1 := submit(t, s, "sums", v1, dir)
				phase1 := srEvents(300, 0, 1)
				publishEvents(t, b, phase1)
				waitElements(t, s, j1.ID, "Events", int64(len(phase1)))
				j2 := replaceV2(t, s, clock, how, v2, dir)
				snap := rollbackSnapshotOf(t, s, "sums", j1.ID)
				if snap.ReplacedByJobID != j2.ID || snap.Generation != 1 || snap.TTL != "1d" {
					t.Fatalf("rollback snapshot: %+v", rollback.SnapshotView(snap))
				}
				// Input the window [0s,10s) already holds state for, and a new window.
				phase2 := append(srEvents(150, 0, 1000), srEvents(150, 10*time.Second, 2000)...)
				publishEvents(t, b, phase2)
				waitElements(t, s, j2.ID, "Events", int64(len(phase2)))
				if vr.change == "rekey" {
					// v2's sink, once it writes, moves v1's members aside
					// behind the view, served under their new keys.
					waitStaged(t, s, sqlsink.StagedTarget{Driver: sink.driver, DSN: sink.dsn, Table: sink.table}, j2.ID, "re-keyed by (key, window_start, window_end)")
				}

				vo, err := s.Rollback(ctx, RollbackRequest{Name: "sums", ValidateOnly: true})
				if err != nil {
					t.Fatalf("validate-only rollback: %v", err)
				}
				if vo.Job != nil || vo.ToGeneration != 1 || vo.NewGeneration != 3 || vo.Snapshot.ID != snap.ID ||
					len(vo.Sources) != 1 || !vo.Sources[0].Retained || vo.Sources[0].Messages != uint64(len(phase2)) ||
					len(vo.Windows) != 1 || vo.Windows[0].KeysWithState != 3 || vo.Windows[0].Windowing != "fixed 10s" {
					t.Fatalf("validate-only report: %+v sources %+v windows %+v", vo, vo.Sources, vo.Windows)
				}
				if cur, _ := s.Get("sums"); cur.ID != j2.ID || cur.State != record.StateRunning {
					t.Fatalf("validate-only changed the name: %s %s", cur.ID, cur.State)
				}
				if jobs, _, _ := s.History("sums"); len(jobs) != 2 {
					t.Fatalf("validate-only created a job: %d jobs", len(jobs))
				}

				rb, err := s.Rollback(ctx, RollbackRequest{Name: "sums"})
				if err != nil {
					t.Fatalf("rollback: %v", err)
				}
				nj := rb.Job
				if nj == nil || nj.Generation != 3 || nj.ReplacesJobID != j2.ID || nj.Replacement.Strategy != record.StrategyRollback || nj.Pipeline != v1 {
					t.Fatalf("rollback job: %+v", nj)
				}
				fin := waitPhase(t, s, nj.ID)
				if fin.Replacement.Phase != record.PhaseCutOver || fin.State != record.StateRunning {
					t.Fatalf("rollback flow ended %s %+v (%s)", fin.State, fin.Replacement, fin.Error)
				}
				waitFor(t, s, nj.ID, "its execution", func(j *record.Job) bool { return s.core.RunningJob(j.ID) != nil })
				// Everything since the snapshot is read again.
				waitElements(t, s, nj.ID, "Events", int64(len(phase2)))
				phase3 := srEvents(90, 20*time.Second, 5000)
				publishEvents(t, b, phase3)
				waitElements(t, s, nj.ID, "Events", int64(len(phase2)+len(phase3)))
				if _, err := s.Drain(ctx, nj.ID); err != nil {
					t.Fatal(err)
				}
				waitFor(t, s, nj.ID, "DRAINED and committed", drainedAndCommitted)
				all := append(append(append([]srEvent{}, phase1...), phase2...), phase3...)
				want := truth(all, 10*time.Second)
				got, gens := sink.read(t)
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Fatalf("the table (key window total n):\n%s\nv1's ground truth:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				for _, line := range got {
					if gens[line] != 3 {
						t.Errorf("row %q has generation %d, want the rollback job's 3", line, gens[line])
					}
				}
				if vr.change == "rekey" {
					// The rollback undid the re-key: v1's members are back,
					// v2's staging table is gone.
					info := describeStaged(t, sink)
					var members []string
					for _, m := range info.Members {
						members = append(members, m.Table)
					}
					want := []string{sink.table + "__principal", sink.table + "__staging_v1", sink.table + "__staging_v3"}
					if strings.Contains(info.View, "re-keyed") || strings.Join(members, " ") != strings.Join(want, " ") {
						t.Fatalf("after the rollback the staged table has members %v (want %v): %s", members, want, info.View)
					}
				}
				if o, _ := s.Get(j2.ID); o.State != record.StateDrained || o.ReplacedByJobID != nj.ID {
					t.Errorf("the rolled-back job: %s replaced by %q", o.State, o.ReplacedByJobID)
				}

				h, err := s.LineageHistory("sums")
				if err != nil {
					t.Fatal(err)
				}
				if len(h) != 3 || h[0].How != HowCreate || h[1].How != how || h[2].How != HowRollback || h[2].RolledBackToGeneration != 1 {
					t.Fatalf("history: %+v", h)
				}
				if len(h[0].RollbackPoints) != 1 || h[0].RollbackPoints[0].SnapshotID != snap.ID || len(h[1].RollbackPoints) != 1 {
					t.Fatalf("rollback points: gen 1 %+v, gen 2 %+v", h[0].RollbackPoints, h[1].RollbackPoints)
				}
				var phases []string
				for _, p := range h[2].Phases {
					phases = append(phases, string(p.Phase))
				}
				if strings.Join(phases, " ") != "PREPARING DRAINING_OLD CUT_OVER" || h[2].StopWindowMillis == nil {
					t.Fatalf("rollback phases %v, stop window %v", phases, h[2].StopWindowMillis)
				}
			})
		}
	}
}

// TestRollbackRefusals: every refusal changes nothing — the running job
// stays, no job is created: no rollback snapshot (a job that was never
// replaced), a generation that has none, input the topic no longer holds
// (REWIND_BEYOND_RETENTION), and a snapshot deleted once the retention
// passed (ROLLBACK_SNAPSHOT_EXPIRED) — while the retention never deletes a
// rollback snapshot before the new job has run that long.
func TestRollbackRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	sink := rbSinks(t, dir)["sqlite"](t)
	s, b, clock := openRollback(t, dir, time.Hour)
	v1, v2 := rbPipelines(sink)
	j1 := submit(t, s, "sums", v1, dir)
	unchanged := func(t *testing.T, running string, jobs int) {
		t.Helper()
		if cur, _ := s.Get("sums"); cur.ID != running || cur.State != record.StateRunning {
			t.Fatalf("the name's job is %s %s, want %s RUNNING", cur.ID, cur.State, running)
		}
		if js, _, _ := s.History("sums"); len(js) != jobs {
			t.Fatalf("%d jobs, want %d", len(js), jobs)
		}
	}
	refused := func(t *testing.T, req RollbackRequest, code errcode.Code) {
		t.Helper()
		_, err := s.Rollback(ctx, req)
		if errcode.Of(err) != code {
			t.Fatalf("rollback %+v: %v, want %s", req, err, code)
		}
	}
	publishEvents(t, b, srEvents(30, 0, 1))
	waitElements(t, s, j1.ID, "Events", 30)
	refused(t, RollbackRequest{Name: "sums"}, errcode.NoRollbackSnapshot)
	unchanged(t, j1.ID, 1)
	refused(t, RollbackRequest{Name: "nosuch"}, errcode.JobNotFound)

	j2 := replaceV2(t, s, clock, HowInPlaceUpdate, v2, dir)
	snap := rollbackSnapshotOf(t, s, "sums", j1.ID)
	refused(t, RollbackRequest{Name: "sums", ToGeneration: 2}, errcode.NoRollbackSnapshot)
	unchanged(t, j2.ID, 2)

	// The retention: kept until the new job has run an hour.
	clock.advance(59 * time.Minute)
	if err := s.snaps.ExpireSnapshots(); err != nil {
		t.Fatal(err)
	}
	if sn, _ := s.GetSnapshot(snap.ID); sn.State != record.SnapshotReady {
		t.Fatalf("after 59m the rollback snapshot is %s", sn.State)
	}

	// Input since the snapshot that the topic no longer holds.
	publishEvents(t, b, srEvents(30, 0, 100))
	waitElements(t, s, j2.ID, "Events", 30)
	ti, err := b.Topic(ctx, "sr-events")
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.JetStream().Stream(ctx, ti.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := s.Rollback(ctx, RollbackRequest{Name: "sums", ValidateOnly: true})
	if errcode.Of(err) != errcode.RewindBeyondRetention || res == nil || res.Sources[0].Retained {
		t.Fatalf("validate-only rollback past the retention: %+v %v", res, err)
	}
	refused(t, RollbackRequest{Name: "sums"}, errcode.RewindBeyondRetention)
	unchanged(t, j2.ID, 2)

	clock.advance(2 * time.Minute)
	if err := s.snaps.ExpireSnapshots(); err != nil {
		t.Fatal(err)
	}
	if sn, _ := s.GetSnapshot(snap.ID); sn.State != record.SnapshotDeleted {
		t.Fatalf("after the retention the rollback snapshot is %s", sn.State)
	}
	_, err = s.Rollback(ctx, RollbackRequest{Name: "sums"})
	if errcode.Of(err) != errcode.RollbackSnapshotExpired {
		t.Fatalf("rollback after the retention: %v", err)
	}
	var se *Error
	if !errors.As(err, &se) || !strings.Contains(err.Error(), snap.ID) {
		t.Fatalf("the refusal does not name the snapshot: %v", err)
	}
	unchanged(t, j2.ID, 2)
}

// TestRollbackDuringOverlap: weir jobs rollback during a parallel
// replacement's overlap is a real rollback: validate-only says what it
// would do and changes nothing; then the new job is cancelled and the old
// one kept (the name's active job again, going on), and a consumer of the
// view never sees a double count or a total going backwards; after the
// old job drained every total equals the ground truth.
func TestRollbackDuringOverlap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc := startParScenario(t)
	s, old := sc.s, sc.old
	cons := sc.acked(t)
	nj := sc.update(t, parallelOverlapOptions...)
	phase2 := sc.overlap(t, nj)

	if _, err := s.Rollback(ctx, RollbackRequest{Name: "sums", ToGeneration: old.Generation + 5}); errcode.Of(err) != errcode.RollbackUnavailable {
		t.Fatalf("a rollback during the overlap to another generation: %v", err)
	}
	vo, err := s.Rollback(ctx, RollbackRequest{Name: "sums", ValidateOnly: true})
	if err != nil || vo.Job != nil || vo.ToGeneration != old.Generation || vo.Current.ID != nj.ID {
		t.Fatalf("validate-only rollback during the overlap: %+v %v", vo, err)
	}
	if n, _ := s.Get(nj.ID); n.State != record.StateRunning || n.Replacement.Phase != record.PhaseOverlap {
		t.Fatalf("validate-only changed the new job: %s %s", n.State, n.Replacement.Phase)
	}
	rb, err := s.Rollback(ctx, RollbackRequest{Name: "sums"})
	if err != nil {
		t.Fatalf("rollback during the overlap: %v", err)
	}
	if rb.Job == nil || rb.Job.ID != old.ID || rb.Job.State != record.StateRunning {
		t.Fatalf("the rollback kept %+v, want job %s RUNNING", rb.Job, old.ID)
	}
	n, _ := s.Get(nj.ID)
	if n.State != record.StateCancelled || n.Replacement.Phase != record.PhaseRolledBack {
		t.Fatalf("the new job after the rollback: %s %s", n.State, n.Replacement.Phase)
	}
	if a, _ := s.Get("sums"); a.ID != old.ID {
		t.Fatalf("the name resolves to %s, want the old job %s", a.ID, old.ID)
	}
	sc.drainToTruth(t, cons, old.ID, len(sc.phase1)+len(phase2), phase2)
	h, err := s.LineageHistory("sums")
	if err != nil || len(h) != 2 || h[1].How != HowParallel || h[1].Phases[len(h[1].Phases)-1].Phase != record.PhaseRolledBack {
		t.Fatalf("history: %+v %v", h, err)
	}
}

// TestRollbackAfterParallel: after a parallel replacement cut over, the
// rollback starts the old generation again from the rollback snapshot cut
// when its drain began: behind the façade view, whose consumer never sees
// a double count or a total going backwards, every total ends equal to
// the ground truth, and the history lists create, parallel, rollback.
func TestRollbackAfterParallel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc := startParScenario(t)
	s, b, clock, dir, old := sc.s, sc.b, sc.clock, sc.dir, sc.old
	cons := sc.acked(t)
	res := sc.update(t, "parallel_replace_job_min_parallel_pipelines_duration=0s")
	// Data that moves the old job's watermark past the cut-over window.
	phase2 := parEvents(sc.base, 35, 70, 1000)
	publishPar(t, b, phase2)
	nj := waitPhase(t, s, res.ID)
	if nj.Replacement.Phase != record.PhaseCutOver {
		t.Fatalf("the parallel replacement ended %+v (%s)", nj.Replacement, nj.Error)
	}
	snap := rollbackSnapshotOf(t, s, "sums", old.ID)
	waitElements(t, s, nj.ID, "Events", int64(len(phase2)))
	rb, err := s.Rollback(ctx, RollbackRequest{Name: "sums"})
	if err != nil {
		t.Fatalf("rollback after the parallel replacement: %+v %v", rb, err)
	}
	if rb.Snapshot.ID != snap.ID || rb.Job.Generation != nj.Generation+1 {
		t.Fatalf("rollback: snapshot %s (want %s), generation %d", rb.Snapshot.ID, snap.ID, rb.Job.Generation)
	}
	fin := waitPhase(t, s, rb.Job.ID)
	if fin.Replacement.Phase != record.PhaseCutOver || fin.State != record.StateRunning {
		t.Fatalf("the rollback ended %s %+v (%s)", fin.State, fin.Replacement, fin.Error)
	}
	// The parallel job's own subscription: once the rollback drained the
	// job, nothing reads it or can read it (the rollback job reads the
	// name's own), and the sweep deletes it; the one the rollback job
	// reads stays (issue 22 item 7).
	checkParallelSubscriptionSwept(t, s, b, nj, fin)
	all := sc.drainToTruth(t, cons, fin.ID, 0, phase2)
	h, err := s.LineageHistory("sums")
	if err != nil || len(h) != 3 || h[1].How != HowParallel || h[2].How != HowRollback || h[2].RolledBackToGeneration != old.Generation {
		t.Fatalf("history: %+v %v", h, err)
	}
	// The rollback came during the parallel flow's compaction wait, so its
	// driver stopped: the façade sweep compacts the generations instead —
	// after a restart too, once the retention has passed.
	table := nj.Replacement.Parallel.Tables[0]
	target := s.replace.FacadeTarget(table)
	if gens, err := (sqlsink.Admin{}).FacadeGenerations(ctx, target); err != nil || len(gens) != 3 {
		t.Fatalf("façade generations before the retention passed: %+v %v, want the old job's, the parallel job's and the rollback job's", gens, err)
	}
	if sw, err := s.replace.FacadeSweeps(); err != nil || len(sw) != 1 || sw[0].Table.Table != table.Table {
		t.Fatalf("façade sweep entries: %+v %v, want one for %s", sw, err, table.Table)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	clock.advance(DefaultRollbackRetention + time.Minute)
	s = reopenParallel(t, dir, b, clock)
	waitSwept(t, s)
	gens, err := (sqlsink.Admin{}).FacadeGenerations(ctx, s.replace.FacadeTarget(table))
	if err != nil || len(gens) != 1 || gens[0].Generation != rb.Job.Generation {
		t.Fatalf("façade generations after the sweep: %+v %v, want the rollback job's %d only", gens, err, rb.Job.Generation)
	}
	after := startConsumer(s, sc.view)
	if diff := diffTotals(after.finish(t), parTruth(all)); diff != "" {
		t.Fatalf("the view after the sweep against the ground truth:\n%s", diff)
	}
}

// reopenParallel opens the service of openParallel again on dir (after
// a Close: a restart).
func reopenParallel(t *testing.T, dir string, b *pubsub.Broker, clock *shiftClock) *Service {
	t.Helper()
	s, err := Open(context.Background(), Options{DataDir: filepath.Join(dir, "data"), CheckpointInterval: 50 * time.Millisecond,
		Clock: clock, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Broker: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	<-s.Recovered()
	return s
}

// waitSwept waits until the service has no façade sweep entry left.
func waitSwept(t *testing.T, s *Service) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		changed := s.core.Changes.Next() // the sweep's writes are changes
		sw, err := s.replace.FacadeSweeps()
		if err == nil && len(sw) == 0 {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("façade sweep entries left: %+v %v", sw, err)
		}
	}
}

// TestRollbackHeld: a rollback snapshot past its expire time is kept while
// the job that replaced its job has run less than the retention (its TTL)
// on the service's clock, or has not run yet; a user's snapshot, or one
// whose replacing job ended without running, is not.
func TestRollbackHeld(t *testing.T) {
	t.Parallel()
	s, _ := openShifted(t, t.TempDir())
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	jobs := []*record.Job{
		{ID: "ran", Name: "sums", State: record.StateRunning, History: []record.StateChange{{State: record.StatePending, Time: t0}, {State: record.StateRunning, Time: t0.Add(time.Hour)}}},
		{ID: "waits", Name: "sums", State: record.StatePending, History: []record.StateChange{{State: record.StatePending, Time: t0}}},
		{ID: "never", Name: "sums", State: record.StateFailed, History: []record.StateChange{{State: record.StatePending, Time: t0}, {State: record.StateFailed, Time: t0}}},
	}
	w := &state.Write{}
	for _, j := range jobs {
		if err := core.PutJSON(w, record.JobKey(j.ID), j); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.core.Apply(w); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		snap record.Snapshot
		now  time.Time
		want bool
	}{
		{"new job ran less than the retention", record.Snapshot{Kind: record.SnapshotKindRollback, TTL: "2h", ReplacedByJobID: "ran"}, t0.Add(2*time.Hour + 59*time.Minute), true},
		{"new job ran the retention", record.Snapshot{Kind: record.SnapshotKindRollback, TTL: "2h", ReplacedByJobID: "ran"}, t0.Add(3 * time.Hour), false},
		{"new job not started", record.Snapshot{Kind: record.SnapshotKindRollback, TTL: "2h", ReplacedByJobID: "waits"}, t0.Add(48 * time.Hour), true},
		{"new job ended without running", record.Snapshot{Kind: record.SnapshotKindRollback, TTL: "2h", ReplacedByJobID: "never"}, t0.Add(48 * time.Hour), false},
		{"a user's snapshot", record.Snapshot{TTL: "2h", ReplacedByJobID: "ran"}, t0.Add(time.Hour), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.snaps.RollbackHeld(&tc.snap, tc.now); got != tc.want {
				t.Errorf("rollbackHeld = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRollbackRequestID: a rollback with --request-id is idempotent as a
// submission is: a refusal retried is the same refusal, a retry of the
// rollback (also after a restart) answers the same rollback job, read
// anew, and never rolls back a second time; the same ID with another
// request, or an ID a submission used, is REQUEST_ID_REUSED; once
// RequestIDRetention has passed, the ID is new again.
func TestRollbackRequestID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	sink := rbSinks(t, dir)["sqlite"](t)
	s, b, clock := openRollback(t, dir, 0)
	v1, v2 := rbPipelines(sink)
	j1 := submit(t, s, "sums", v1, dir)
	phase1 := srEvents(300, 0, 1)
	publishEvents(t, b, phase1)
	waitElements(t, s, j1.ID, "Events", int64(len(phase1)))

	// A refusal (no rollback snapshot yet) is kept and answered again.
	refused := RollbackRequest{Name: "sums", RequestID: "rb-refused"}
	for i := range 2 {
		if _, err := s.Rollback(ctx, refused); errcode.Of(err) != errcode.NoRollbackSnapshot {
			t.Fatalf("attempt %d of a rollback with no snapshot: %v, want %s", i+1, err, errcode.NoRollbackSnapshot)
		}
	}
	j2 := replaceV2(t, s, clock, HowInPlaceUpdate, v2, dir)
	rollbackSnapshotOf(t, s, "sums", j1.ID)
	// The same ID after the snapshot exists still gets the first answer.
	if _, err := s.Rollback(ctx, refused); errcode.Of(err) != errcode.NoRollbackSnapshot {
		t.Fatalf("a retry of the refused rollback: %v, want the first answer %s", err, errcode.NoRollbackSnapshot)
	}

	req := RollbackRequest{Name: "sums", RequestID: "rb-1"}
	first, err := s.Rollback(ctx, req)
	if err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if first.Job == nil || first.Job.Generation != 3 || first.Job.ReplacesJobID != j2.ID {
		t.Fatalf("rollback job: %+v", first.Job)
	}
	steps := []struct {
		name string
		do   func() (*RollbackResult, error)
		code errcode.Code
	}{
		{"retry during the flow", func() (*RollbackResult, error) { return s.Rollback(ctx, req) }, ""},
		{"same ID, another request", func() (*RollbackResult, error) {
			return s.Rollback(ctx, RollbackRequest{Name: "sums", ToGeneration: 1, RequestID: "rb-1"})
		}, errcode.RequestIDReused},
		{"retry once the rollback job runs", func() (*RollbackResult, error) {
			waitPhase(t, s, first.Job.ID)
			return s.Rollback(ctx, req)
		}, ""},
		{"retry after a restart", func() (*RollbackResult, error) {
			// The rollback snapshot the rollback's drain cut of job j2 is
			// copied first: a restart while it is copied fails it (as
			// documented), and the validate-only rollback at the end goes
			// back to it. Under load the copy (paced) outlasted the steps
			// before, and the test failed.
			rollbackSnapshotOf(t, s, "sums", j2.ID)
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
			s = reopenParallel(t, dir, b, clock)
			return s.Rollback(ctx, req)
		}, ""},
	}
	for _, st := range steps {
		res, err := st.do()
		if st.code != "" {
			if errcode.Of(err) != st.code {
				t.Fatalf("%s: %v, want code %s", st.name, err, st.code)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v, want the first answer", st.name, err)
		}
		if res == nil || res.Job == nil || res.Job.ID != first.Job.ID || res.NewGeneration != first.NewGeneration || res.Snapshot == nil || res.Snapshot.ID != first.Snapshot.ID {
			t.Fatalf("%s: answered %+v, want the first rollback's job %s", st.name, res, first.Job.ID)
		}
		if jobs, _, _ := s.History("sums"); len(jobs) != 3 {
			t.Fatalf("%s: %d jobs of sums, want 3 (no second rollback)", st.name, len(jobs))
		}
	}
	if cur, _ := s.Get("sums"); cur.ID != first.Job.ID {
		t.Fatalf("the name's active job is %s, want the rollback job %s", cur.ID, first.Job.ID)
	}
	// An ID a submission used names that submission.
	if _, err := s.Submit(ctx, SubmitRequest{Name: "other", Pipeline: statelessYAML, BaseDir: dir, RequestID: "sub-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rollback(ctx, RollbackRequest{Name: "sums", RequestID: "sub-1"}); errcode.Of(err) != errcode.RequestIDReused {
		t.Fatalf("a rollback with a submission's request ID: %v, want %s", err, errcode.RequestIDReused)
	}
	if _, err := s.Rollback(ctx, RollbackRequest{Name: "sums", RequestID: "not an id!"}); errcode.Of(err) != errcode.InvalidRequest {
		t.Fatalf("an invalid request ID: %v, want %s", err, errcode.InvalidRequest)
	}
	// After the retention the ID is new: another request under it runs
	// (a validate-only one here) instead of REQUEST_ID_REUSED. The same
	// clock move expires the rollback snapshots, whose sweep runs beside
	// the request: its own answer is then a validate-only report (not
	// swept yet) or ROLLBACK_SNAPSHOT_EXPIRED (swept before or while it
	// read the snapshot) — never the first request's, nor a corruption.
	clock.advance(RequestIDRetention + time.Minute)
	vo, err := s.Rollback(ctx, RollbackRequest{Name: "sums", ValidateOnly: true, RequestID: "rb-1"})
	switch {
	case err == nil && vo.ValidateOnly && vo.Job == nil:
	case errcode.Of(err) == errcode.RollbackSnapshotExpired:
		t.Logf("the rollback snapshot expired first: %v", err)
	default:
		t.Fatalf("another request under an ID past the retention: %+v %v, want its own validate-only report or %s", vo, err, errcode.RollbackSnapshotExpired)
	}
}

// checkParallelSubscriptionSwept checks that the subscriptions parallel
// job nj read in place of its name's own are deleted by the sweep once
// rollback job rb replaced it, and that those rb reads are kept, read by it.
func checkParallelSubscriptionSwept(t *testing.T, s *Service, b *pubsub.Broker, nj, rb *record.Job) {
	t.Helper()
	ctx := context.Background()
	if len(nj.Replacement.Parallel.Subscriptions) == 0 {
		t.Fatalf("the parallel job has no subscription of its own: %+v", nj.Replacement.Parallel)
	}
	waitLetGo(t, s, nj.ID)
	uses, err := s.SubscriptionUses()
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range nj.Replacement.Parallel.Subscriptions {
		// Listed until a sweep (maybe the server's own, running meanwhile)
		// deleted it.
		if u, ok := uses[ps.New]; ok && (u.MadeBy.ID != nj.ID || u.Kept != "") {
			t.Errorf("the parallel job's subscription %s after the rollback: %+v, want made by %s and kept for nothing", ps.New, u, nj.ID)
		}
	}
	if _, err := s.replace.SweepSubscriptions(ctx); err != nil {
		t.Fatal(err)
	}
	uses, err = s.SubscriptionUses()
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range nj.Replacement.Parallel.Subscriptions {
		if u, ok := uses[ps.New]; ok {
			t.Errorf("the swept subscription %s is still listed: %+v", ps.New, u)
		}
		if _, err := b.Subscription(ctx, ps.New); err == nil {
			t.Errorf("the parallel job's subscription %s outlived the rollback", ps.New)
		}
		sub := pubsub.SubscriptionName(rb.Name, ps.Step)
		if _, err := b.Subscription(ctx, sub); err != nil {
			t.Errorf("the rollback job's subscription %s: %v", sub, err)
		}
		if u := uses[sub]; len(u.ReadBy) != 1 || u.ReadBy[0].ID != rb.ID {
			t.Errorf("the rollback job's subscription %s: %+v, want read by %s", sub, u, rb.ID)
		}
	}
}

// describeStaged describes the staged table of sink.
func describeStaged(t *testing.T, sink rbSink) sqlsink.StagedInfo {
	t.Helper()
	info, err := sqlsink.DescribeStaged(context.Background(), sqlsink.StagedTarget{Driver: sink.driver, DSN: sink.dsn, Table: sink.table})
	if err != nil {
		t.Fatal(err)
	}
	return info
}
