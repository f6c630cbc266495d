package core

import (
	"fmt"
	"testing"
	"time"

	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/service/record"
)

// TestSinkWaitEvents: the supervisor's samples of an execution's wait for
// its sinks become sink_backpressure events: the first wait at once, then
// at most one every SinkWaitEventEvery, each with the wait (per worker)
// and the time since the wait it tells began; no wait, no event.
func TestSinkWaitEvents(t *testing.T) {
	s := openCore(t, t.TempDir())
	t0 := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	type sample struct {
		at     time.Duration // after t0
		waited int64         // SinkWaitMillis, summed over 2 workers
	}
	tests := []struct {
		name    string
		samples []sample
		// want lists the events' waited_seconds and over_seconds.
		want [][2]float64
	}{
		{"no wait", []sample{{1 * time.Second, 0}, {2 * time.Second, 0}, {30 * time.Minute, 0}}, nil},
		{"the first wait at once", []sample{{1 * time.Second, 0}, {2 * time.Second, 800}}, [][2]float64{{0.4, 1}}},
		{"then once every 10 minutes", []sample{
			{1 * time.Second, 0}, {2 * time.Second, 1000}, // told
			{3 * time.Second, 3000}, {5 * time.Minute, 5000}, // held back
			{10*time.Minute + 2*time.Second, 5000}, // told: 4 s of 2 workers since 2 s
			{11 * time.Minute, 5000},               // nothing new
		}, [][2]float64{{0.5, 1}, {2, 10 * 60}}},
		{"a wait that comes back after a quiet spell", []sample{
			{1 * time.Second, 0}, {2 * time.Second, 2000}, // told
			{40 * time.Minute, 2000}, {41 * time.Minute, 4000}, // told: began at the previous sample
		}, [][2]float64{{1, 1}, {1, 60}}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jr := &Run{ID: fmt.Sprintf("job-%d", i), startedAt: t0, recorded: true}
			for _, sm := range tt.samples {
				s.noteSinkWait(jr, t0.Add(sm.at), &runner.Result{Workers: 2, SinkWaitMillis: sm.waited, BufferingSinks: true, SinkBufferedBytes: 99})
			}
			evs, err := s.ReadEvents(jr.ID, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != len(tt.want) {
				t.Fatalf("%d events, want %d: %+v", len(evs), len(tt.want), evs)
			}
			for k, ev := range evs {
				waited, _ := ev.Details["waited_seconds"].(float64)
				over, _ := ev.Details["over_seconds"].(float64)
				if ev.Type != record.EventSinkBackpressure || ev.Severity != record.SeverityWarning {
					t.Errorf("event %d: %s %s, want a sink_backpressure warning", k, ev.Type, ev.Severity)
				}
				if waited != tt.want[k][0] || over != tt.want[k][1] {
					t.Errorf("event %d: waited %v s over %v s, want %v over %v (%s)", k, waited, over, tt.want[k][0], tt.want[k][1], ev.Message)
				}
				if held, _ := ev.Details["held_bytes"].(float64); held != 99 {
					t.Errorf("event %d: held_bytes %v, want 99", k, ev.Details["held_bytes"])
				}
			}
		})
	}
}

// TestSinkWaitEventsAcrossARescale: the execution that replaces another
// of the same job (a rescale) keeps its pace: no second event before
// SinkWaitEventEvery has passed since the replaced execution's.
func TestSinkWaitEventsAcrossARescale(t *testing.T) {
	s := openCore(t, t.TempDir())
	t0 := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	res := func(waited int64) *runner.Result {
		return &runner.Result{Workers: 1, SinkWaitMillis: waited, BufferingSinks: true}
	}
	old := &Run{ID: "job-1", startedAt: t0, recorded: true}
	s.noteSinkWait(old, t0.Add(time.Second), res(0))
	s.noteSinkWait(old, t0.Add(2*time.Second), res(500)) // told
	// The rescale: a new execution, its counters from zero.
	jr := &Run{ID: "job-1", startedAt: t0.Add(time.Minute), recorded: true}
	inheritSinkWait(jr, old)
	s.noteSinkWait(jr, t0.Add(61*time.Second), res(0))
	s.noteSinkWait(jr, t0.Add(2*time.Minute), res(3000)) // held back
	s.noteSinkWait(jr, t0.Add(10*time.Minute+2*time.Second), res(3000))
	evs, err := s.ReadEvents("job-1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2 (one per execution, 10 minutes apart): %+v", len(evs), evs)
	}
	if waited, _ := evs[1].Details["waited_seconds"].(float64); waited != 3 {
		t.Errorf("the new execution's event: waited %v s, want 3 (%s)", waited, evs[1].Message)
	}
	if over, _ := evs[1].Details["over_seconds"].(float64); over != 9*60+1 {
		t.Errorf("the new execution's event: over %v s, want 541 (since the sample before its wait began)", over)
	}
}
