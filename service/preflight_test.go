package service

import (
	"context"
	"fmt"
	"path/filepath"
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
