package service

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/io/sqlsink"
	"github.com/weir-dev/weir/service/record"
)

// gateYAML is parYAML without its Pub/Sub output (the parity gate holds
// back SQL rows only, and refuses a pipeline that publishes).
func gateYAML(sinkCfg string) string {
	p := fmt.Sprintf(parYAML, sinkCfg)
	return p[:strings.Index(p, "    - type: WriteToPubSub")]
}

// genConsumer polls the view at every change of the service and records
// a violation for every row of a forbidden generation it ever reads, and
// for a (key, window) twice in one read.
type genConsumer struct {
	viewPoller
	forbidden atomic.Int64 // a generation no read may return; 0 none
	last      map[string]kwTotal
	gens      map[int64]int // rows read per generation, over every read
}

func startGenConsumer(t *testing.T, s *Service, path string) *genConsumer {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c := &genConsumer{last: map[string]kwTotal{}, gens: map[int64]int{}}
	c.start(s, func() { c.poll(db) })
	return c
}

func (c *genConsumer) poll(db *sql.DB) {
	rows, err := db.QueryContext(context.Background(), `SELECT key, window_start, total, n, generation FROM totals`)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.violations = append(c.violations, "read: "+err.Error())
		return
	}
	defer rows.Close()
	c.reads++
	seen := map[string]kwTotal{}
	for rows.Next() {
		var key, start string
		var total, n, gen int64
		if err := rows.Scan(&key, &start, &total, &n, &gen); err != nil {
			c.violations = append(c.violations, "scan: "+err.Error())
			return
		}
		ts, _ := time.Parse(time.RFC3339Nano, start)
		k := fmt.Sprintf("%s@%d", key, ts.UnixMilli())
		if _, dup := seen[k]; dup {
			c.violations = append(c.violations, "twice in one read: "+k)
		}
		seen[k] = kwTotal{total, n}
		c.gens[gen]++
		if f := c.forbidden.Load(); f != 0 && gen == f {
			c.violations = append(c.violations, fmt.Sprintf("read %d: %s total %d from generation %d, held back", c.reads, k, total, gen))
		}
	}
	if err := rows.Err(); err != nil {
		c.violations = append(c.violations, "read: "+err.Error())
		return
	}
	c.last = seen
}

// gateEvents returns the parity_gate events of job id.
func gateEvents(t *testing.T, s *Service, id string) []record.Event {
	t.Helper()
	return eventsOf(t, s, id, record.EventParityGate)
}

// TestParallelParityGate: a parallel replacement gated on parity
// (weir_cutover_gate=parity) against a running job, with a real service,
// broker and SQLite table.
//
//   - An equivalent new pipeline (its combine step renamed) cuts over: the
//     gate passes once 2 consecutive complete windows of both jobs' tables
//     agree, with a parity_gate PASSED event carrying the figures, and the
//     flow goes on to CUT_OVER; the view ends with the ground truth.
//   - A wrong new pipeline (max instead of sum) never agrees: the gate
//     holds, recording the differing rows, and at its deadline (10m of
//     the service's clock, advanced by the test) aborts: the new job is cancelled, its
//     generation dropped from the view, the old job keeps RUNNING and
//     the name's active job, the flow FAILED with the report on both
//     jobs; a reader polling the view all through never read a row of
//     the wrong job's generation, and the old job's totals stay the
//     ground truth.
//
// A validate-only request with the gate changes nothing.
func TestParallelParityGate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		wrong, restart bool
	}{{"equivalent pipeline cuts over", false, false}, {"wrong pipeline aborts", true, false}, {"wrong pipeline aborts after a restart", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			s, b, clock := openParallel(t, dir)
			db := filepath.Join(dir, "totals.sqlite")
			pipeline := gateYAML(fmt.Sprintf("{dsn: %s, table: totals, key: [key]}", db))
			base := time.Now().Add(30 * time.Minute).Truncate(time.Minute)
			old := submit(t, s, "sums", pipeline, dir)
			phase1 := parEvents(base, 0, 34, 1)
			publishPar(t, b, phase1)
			waitElements(t, s, old.ID, "Events", int64(len(phase1)))
			waitAcked(t, s, b, pubsub.SubscriptionName("sums", "Events"))
			cons := startGenConsumer(t, s, db)
			clock.advance(DefaultMinReplaceInterval)

			newPipeline := strings.NewReplacer("name: Sums", "name: Totals", "input: Sums", "input: Totals").Replace(pipeline)
			if tc.wrong {
				newPipeline = strings.Replace(pipeline, "{value: amount, fn: sum}", "{value: amount, fn: max}", 1)
			}
			opts := []string{"update_strategy_parallel_job_update", "parallel_replace_job_min_parallel_pipelines_duration=0s", "weir_replace_rewind=false",
				"weir_cutover_gate=parity", "weir_parity_windows=2", "weir_parity_deadline=10m"}
			req := UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: newPipeline, BaseDir: dir, ServiceOptions: opts}}

			// Validate only: nothing changes.
			vreq := req
			vreq.ValidateOnly = true
			vres, err := s.Update(ctx, vreq)
			if err != nil {
				t.Fatalf("validate-only parallel replacement with the parity gate: %v", err)
			}
			if !strings.Contains(strings.Join(vres.Notes, " "), "2 consecutive complete windows") {
				t.Errorf("validate-only notes %q do not describe the gate", vres.Notes)
			}
			if jobs, _ := s.List(StatusAll); len(jobs) != 1 {
				t.Fatalf("%d jobs after a validate-only request, want the old one only", len(jobs))
			}
			if j, _ := s.Get("sums"); j.ID != old.ID || j.Replacement != nil || j.State != record.StateRunning {
				t.Fatalf("the old job after a validate-only request: %s %s %+v", j.ID, j.State, j.Replacement)
			}

			res, err := s.Update(ctx, req)
			if err != nil {
				t.Fatalf("parallel replacement with the parity gate: %v", err)
			}
			nj := res.Job
			if g := nj.Replacement.Parallel.Gate; g == nil || g.Windows != 2 || g.Budget != 0 || g.DeadlineMillis != 600000 {
				t.Fatalf("the flow's gate %+v, want 2 windows, budget 0, deadline 10m", g)
			}
			if tc.wrong {
				cons.forbidden.Store(nj.Generation)
			}
			// Both jobs read seconds 35 to 89: windows [40s, 50s) to [60s,
			// 70s), after the cut-over time (33s), complete in both.
			phase2 := parEvents(base, 35, 90, 1000)
			publishPar(t, b, phase2)
			waitElements(t, s, nj.ID, "Events", int64(len(phase2)))

			if !tc.wrong {
				fin := waitFor(t, s, nj.ID, "CUT_OVER", func(j *record.Job) bool { return j.Replacement.Phase.Final() })
				g := fin.Replacement.Parallel.Gate
				if fin.Replacement.Phase != record.PhaseCutOver || g.Outcome != record.GatePassed || !g.Revealed || g.Last.Agreed < 2 || g.Last.Differing != 0 || g.Last.RowsCompared < 6 {
					t.Fatalf("the flow after the gate: %s, gate %+v", fin.Replacement.Phase, g)
				}
				evs := gateEvents(t, s, nj.ID)
				if len(evs) == 0 || evs[len(evs)-1].Details["outcome"] != string(record.GatePassed) || !strings.Contains(evs[len(evs)-1].Message, "parity gate passed") {
					t.Fatalf("parity_gate events %+v, want the last PASSED", evs)
				}
				if n, _ := evs[len(evs)-1].Details["differing_rows"].(float64); n != 0 {
					t.Errorf("the PASSED event's differing rows %v", evs[len(evs)-1].Details["differing_rows"])
				}
				if len(gateEvents(t, s, old.ID)) == 0 {
					t.Errorf("the old job has no parity_gate event")
				}
				phase3 := parEvents(base, 90, 100, 5000)
				publishPar(t, b, phase3)
				waitElements(t, s, nj.ID, "Events", int64(len(phase2)+len(phase3)))
				if _, err := s.Drain(ctx, nj.ID); err != nil {
					t.Fatal(err)
				}
				waitFor(t, s, nj.ID, "DRAINED and committed", drainedAndCommitted)
				cons.end(t)
				all := append(append(append([]srEvent{}, phase1...), phase2...), phase3...)
				if d := diffTotals(cons.last, parTruth(all)); d != "" {
					t.Fatalf("the view against the ground truth:\n%s", d)
				}
				if cons.gens[nj.Generation] == 0 {
					t.Errorf("the reader never read a row of the new generation %d after the gate passed (rows per generation %v)", nj.Generation, cons.gens)
				}
				return
			}

			// The wrong pipeline: the gate holds with differing rows.
			holding := waitFor(t, s, nj.ID, "the gate holding with differing rows", func(j *record.Job) bool {
				g := j.Replacement.Parallel.Gate
				return j.Replacement.Phase.Final() || g.Last.Differing > 0 && g.Last.WindowsCompared >= 2
			})
			if holding.Replacement.Phase != record.PhaseOverlap || holding.Replacement.Parallel.Gate.Outcome != record.GateHolding {
				t.Fatalf("the flow while the outputs differ: %s, gate %+v", holding.Replacement.Phase, holding.Replacement.Parallel.Gate)
			}
			if o, _ := s.Get(old.ID); o.State != record.StateRunning {
				t.Fatalf("the old job is %s while the gate holds", o.State)
			}
			gens, err := (sqlsink.Admin{}).FacadeGenerations(ctx, s.replace.FacadeTarget(holding.Replacement.Parallel.Tables[0]))
			if err != nil || len(gens) != 2 {
				t.Fatalf("façade generations while the gate holds: %+v %v, want the old and the held new one", gens, err)
			}
			if tc.restart {
				// The service restarts while the gate holds: the flow
				// resumes from its record, the new generation still held
				// back, the gate's figures kept.
				cons.end(t)
				if err := s.Close(ctx); err != nil {
					t.Fatal(err)
				}
				if s, err = Open(ctx, Options{DataDir: filepath.Join(dir, "data"), CheckpointInterval: 50 * time.Millisecond,
					Clock: clock, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Broker: b}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close(context.Background()) })
				cons = startGenConsumer(t, s, db)
				cons.forbidden.Store(nj.Generation)
				for _, id := range []string{old.ID, nj.ID} {
					waitFor(t, s, id, "its execution resumed", func(j *record.Job) bool { return s.core.RunningJob(j.ID) != nil })
				}
				if j, _ := s.Get(nj.ID); j.Replacement.Phase != record.PhaseOverlap || j.Replacement.Parallel.Gate.Outcome != record.GateHolding || j.Replacement.Parallel.Gate.Last.Differing == 0 {
					t.Fatalf("the flow after the restart: %s, gate %+v", j.Replacement.Phase, j.Replacement.Parallel.Gate)
				}
			}
			clock.advance(10 * time.Minute) // the service's clock: no wait, no race with a slow machine
			fin := waitFor(t, s, nj.ID, "the flow's end", func(j *record.Job) bool { return j.Replacement.Phase.Final() })
			g := fin.Replacement.Parallel.Gate
			if fin.Replacement.Phase != record.PhaseFailed || fin.State != record.StateCancelled || g.Outcome != record.GateAborted || g.DecisionTime == nil ||
				!strings.Contains(g.Report, "parity gate aborted") || g.Last.Differing == 0 || len(g.Last.Examples) == 0 {
				t.Fatalf("the new job after the deadline: %s, flow %s, gate %+v", fin.State, fin.Replacement.Phase, g)
			}
			if !strings.Contains(strings.Join(fin.Replacement.Notes, " "), "parity gate aborted") {
				t.Errorf("the flow's notes %q lack the gate's report", fin.Replacement.Notes)
			}
			o, _ := s.Get(old.ID)
			if o.State != record.StateRunning || o.Replacement.Phase != record.PhaseFailed || o.Replacement.Parallel.Gate.Outcome != record.GateAborted {
				t.Fatalf("the old job after the abort: %s, flow %+v", o.State, o.Replacement)
			}
			if a, _ := s.Get("sums"); a.ID != old.ID {
				t.Fatalf("the name resolves to %s, want the old job %s", a.ID, old.ID)
			}
			// The lineage (weir jobs history, GET .../lineage) keeps the report.
			hist, err := s.LineageHistory("sums")
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, h := range hist {
				if h.JobID == nj.ID {
					found = h.ParityGate != nil && h.ParityGate.Outcome == record.GateAborted && strings.Contains(strings.Join(h.Notes, " "), "parity gate aborted")
				}
			}
			if !found {
				t.Errorf("the lineage of sums does not show the aborted gate of job %s: %+v", nj.ID, hist)
			}
			for _, id := range []string{nj.ID, old.ID} {
				evs := gateEvents(t, s, id)
				last := evs[len(evs)-1]
				if last.Details["outcome"] != string(record.GateAborted) || last.Severity != record.SeverityWarning {
					t.Errorf("job %s: last parity_gate event %+v, want ABORTED", id, last)
				}
				if n, _ := last.Details["differing_rows"].(float64); n == 0 {
					t.Errorf("job %s: the ABORTED event has no differing rows: %+v", id, last.Details)
				}
			}
			gens, err = (sqlsink.Admin{}).FacadeGenerations(ctx, s.replace.FacadeTarget(fin.Replacement.Parallel.Tables[0]))
			if err != nil || len(gens) != 1 || gens[0].Generation != old.Generation {
				t.Fatalf("façade generations after the abort: %+v %v, want the old job's alone", gens, err)
			}
			// The old job goes on; its totals are the ground truth.
			phase3 := parEvents(base, 90, 100, 5000)
			publishPar(t, b, phase3)
			waitElements(t, s, old.ID, "Events", int64(len(phase1)+len(phase2)+len(phase3)))
			if _, err := s.Drain(ctx, old.ID); err != nil {
				t.Fatal(err)
			}
			waitFor(t, s, old.ID, "DRAINED and committed", drainedAndCommitted)
			cons.end(t)
			all := append(append(append([]srEvent{}, phase1...), phase2...), phase3...)
			if d := diffTotals(cons.last, parTruth(all)); d != "" {
				t.Fatalf("the view against the ground truth:\n%s", d)
			}
			t.Logf("rows read per generation: %v", cons.gens)
		})
	}
}

// TestParallelParityGateRefusals: the parity gate holds back SQL rows and
// compares SQL outputs, so a pipeline that publishes to Pub/Sub is refused
// with the gate before anything changes.
func TestParallelParityGateRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, _, clock := openParallel(t, dir)
	sinkCfg, view := parDrivers()[0].setup(t, dir)
	view.close()
	p := fmt.Sprintf(parYAML, sinkCfg)
	old := submit(t, s, "sums", p, dir)
	clock.advance(DefaultMinReplaceInterval)
	_, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: p, BaseDir: dir,
		ServiceOptions: []string{"update_strategy_parallel_job_update", "parallel_replace_job_min_parallel_pipelines_duration=0s", "weir_cutover_gate=parity"}}})
	if errcode.Of(err) != errcode.ReplacementUnavailable || !strings.Contains(err.Error(), "publish to Pub/Sub") || !strings.Contains(err.Error(), "was not changed") {
		t.Fatalf("got %v (%s), want REPLACEMENT_UNAVAILABLE about Pub/Sub", err, errcode.Of(err))
	}
	if j, _ := s.Get("sums"); j.ID != old.ID || j.State != record.StateRunning || j.Replacement != nil {
		t.Fatalf("the old job after the refusal: %s %s %+v", j.ID, j.State, j.Replacement)
	}
	if jobs, _ := s.List(StatusAll); len(jobs) != 1 {
		t.Fatalf("%d jobs after the refusal, want the old one only", len(jobs))
	}
}
