package service

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service/record"
)

// TestPreflightRehearsal: weir_rehearse=required rehearses the new
// pipeline against the running job on the input its topic retains before
// anything changes: a wrong pipeline (max instead of sum) is refused with
// PARITY_FAILED, for a stop-and-replace and an in-place update alike, the
// job untouched, a parity_gate REFUSED event and the attempt recorded with
// the verdict; an equivalent pipeline (a step renamed) passes and the
// stop-and-replace goes on, its notes saying what was rehearsed.
func TestPreflightRehearsal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, b, clock := openParallel(t, dir)
	pipeline := gateYAML(fmt.Sprintf("{dsn: %s, table: totals, key: [key]}", filepath.Join(dir, "totals.sqlite")))
	old := submit(t, s, "sums", pipeline, dir)
	base := time.Now().Add(30 * time.Minute).Truncate(time.Minute)
	phase1 := parEvents(base, 0, 34, 1)
	publishPar(t, b, phase1)
	waitElements(t, s, old.ID, "Events", int64(len(phase1)))
	clock.advance(DefaultMinReplaceInterval)
	wrong := strings.Replace(pipeline, "{value: amount, fn: sum}", "{value: amount, fn: max}", 1)
	renamed := strings.NewReplacer("name: Sums", "name: Totals", "input: Sums", "input: Totals").Replace(pipeline)
	for _, tc := range []struct {
		name string
		opts []string
	}{
		{"stop-and-replace", []string{"update_strategy_parallel_job_update", "parallel_replace_job_max_stop_duration=5m", "weir_rehearse=required;since=1h"}},
		{"in-place", []string{"weir_rehearse=required"}},
	} {
		_, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: wrong, BaseDir: dir, ServiceOptions: tc.opts}})
		if errcode.Of(err) != errcode.ParityFailed || !strings.Contains(err.Error(), "difference(s)") || !strings.Contains(err.Error(), "was not changed") {
			t.Fatalf("%s with a wrong pipeline: %v (%s), want PARITY_FAILED", tc.name, err, errcode.Of(err))
		}
		if j, _ := s.Get("sums"); j.ID != old.ID || j.State != record.StateRunning || j.Replacement != nil {
			t.Fatalf("%s: the job after the refusal: %s %s %+v", tc.name, j.ID, j.State, j.Replacement)
		}
		if jobs, _ := s.List(StatusAll); len(jobs) != 1 {
			t.Fatalf("%s: %d jobs after the refusal, want the old one only", tc.name, len(jobs))
		}
	}
	evs := eventsOf(t, s, old.ID, record.EventParityGate)
	if len(evs) != 2 || evs[0].Details["outcome"] != "REFUSED" || evs[0].Severity != record.SeverityWarning {
		t.Fatalf("parity_gate events of the job: %+v, want two REFUSED", evs)
	}
	if n, _ := evs[0].Details["differing_rows"].(float64); n == 0 {
		t.Errorf("the REFUSED event has no differing rows: %+v", evs[0].Details)
	}
	_, attempts, err := s.History("sums")
	if err != nil {
		t.Fatal(err)
	}
	if len(attempts) != 2 || attempts[0].Rehearsal == nil || attempts[0].Rehearsal.Passed || attempts[0].Rehearsal.Differences == 0 || attempts[0].Rehearsal.Elements != int64(len(phase1)) {
		t.Fatalf("recorded attempts %+v, want two refused by the rehearsal over %d elements", attempts, len(phase1))
	}
	res, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: renamed, BaseDir: dir,
		ServiceOptions: []string{"update_strategy_parallel_job_update", "parallel_replace_job_max_stop_duration=5m", "weir_rehearse=required"}}})
	if err != nil {
		t.Fatalf("stop-and-replace by an equivalent pipeline: %v", err)
	}
	if res.Job == nil || res.Job.ReplacesJobID != old.ID || !strings.Contains(strings.Join(res.Notes, " "), "matched the running job's") {
		t.Fatalf("the replacement: %+v, notes %q", res.Job, res.Notes)
	}
	if evs := eventsOf(t, s, old.ID, record.EventParityGate); len(evs) != 3 || evs[2].Details["outcome"] != "PASSED" {
		t.Fatalf("parity_gate events after the pass: %+v", evs)
	}
}

// TestPreflightRehearsalSpills: a pre-flight rehearsal's recorded stretch
// takes the server's budget and spill directory (Options.RehearseTrace*,
// the server's --rehearse-trace-memory and --rehearse-trace-dir): over a
// stretch of about 2.5 MB under a budget of 1 byte, the trace spills, the
// verdict says how much, nothing is left in the directory, and the verdict
// is exactly the one of the same rehearsal in memory.
func TestPreflightRehearsalSpills(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, spill := t.TempDir(), t.TempDir()
	b := startBroker(t, dir, "par-events", "par-out")
	s, err := Open(ctx, Options{DataDir: filepath.Join(dir, "data"), CheckpointInterval: 50 * time.Millisecond,
		Clock: &shiftClock{base: time.Now()}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Broker: b,
		RehearseTraceMemory: 1, RehearseTraceDir: spill})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	pipeline := gateYAML(fmt.Sprintf("{dsn: %s, table: totals, key: [key]}", filepath.Join(dir, "totals.sqlite")))
	old := submit(t, s, "sums", pipeline, dir)
	// Keys of 800 bytes: 3,000 messages of about 850 bytes.
	evs := parEvents(time.Now().Add(30*time.Minute).Truncate(time.Minute), 0, 1000, 1)
	for i := range evs {
		evs[i].key += strings.Repeat("x", 800)
	}
	publishPar(t, b, evs)
	waitElements(t, s, old.ID, "Events", int64(len(evs)))
	wrong := strings.Replace(pipeline, "{value: amount, fn: sum}", "{value: amount, fn: max}", 1)
	update := func() *record.RehearsalVerdict {
		t.Helper()
		res, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: wrong, BaseDir: dir, ServiceOptions: []string{"weir_rehearse=required"}}})
		if errcode.Of(err) != errcode.ParityFailed || res == nil || res.Rehearsal == nil {
			t.Fatalf("an update with a wrong pipeline: %v (%s), want PARITY_FAILED with the verdict", err, errcode.Of(err))
		}
		if ents, err := os.ReadDir(spill); err != nil || len(ents) != 0 {
			t.Errorf("the rehearsal left %v in its spill directory (%v)", ents, err)
		}
		return res.Rehearsal
	}
	spilled := update()
	if spilled.TraceBytes < 2<<20 || spilled.TraceSpilledBytes == 0 || spilled.TraceBytes-spilled.TraceSpilledBytes > 1<<20 || spilled.Elements != int64(len(evs)) {
		t.Fatalf("under a budget of 1 byte: %d of the %d bytes of the stretch spilled over %d elements; want all but the last MiB of over 2 MiB, %d elements",
			spilled.TraceSpilledBytes, spilled.TraceBytes, spilled.Elements, len(evs))
	}
	evs2 := eventsOf(t, s, old.ID, record.EventParityGate)
	if n, _ := evs2[0].Details["trace_spilled_bytes"].(float64); int64(n) != spilled.TraceSpilledBytes {
		t.Errorf("the parity_gate event's trace_spilled_bytes: %v, want %d", evs2[0].Details["trace_spilled_bytes"], spilled.TraceSpilledBytes)
	}
	s.core.Opts.RehearseTraceMemory = 0 // the default, 256 MiB
	inMemory := update()
	if inMemory.TraceSpilledBytes != 0 || inMemory.TraceBytes != spilled.TraceBytes {
		t.Fatalf("in memory: %d of %d bytes spilled, want none of %d", inMemory.TraceSpilledBytes, inMemory.TraceBytes, spilled.TraceBytes)
	}
	a, b2 := *spilled, *inMemory
	a.Since, b2.Since, a.TraceSpilledBytes = time.Time{}, time.Time{}, 0
	if !reflect.DeepEqual(a, b2) || a.Differences == 0 {
		t.Errorf("the spilled rehearsal's verdict differs from the in-memory one's:\n got %+v\nwant %+v", a, b2)
	}
}
