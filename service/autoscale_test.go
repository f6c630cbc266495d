package service

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/internal/autoscale"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"
)

// load is the traffic the autoscaling test puts on a job: input arrives at
// rate elements a second, each of the job's real workers reads at most
// capacity a second, the rest waits. The job's worker count is read from
// its live execution, so a rescale the autoscaler applied is what the
// model sees next.
type load struct {
	rate, capacity float64
	last           time.Time
	backlog, read  float64
	idle           float64
	exec           time.Time
	// measured is the last real measurement of the execution.
	measured autoscale.Sample
}

func (l *load) sample(_ *record.Job, run *core.Run, now time.Time) (autoscale.Sample, bool) {
	real, ok := autoscale.Measure(run, now)
	if !ok {
		return real, false
	}
	l.measured = real
	if real.Execution != l.exec {
		// A new execution (a rescale): its counters start again.
		l.exec, l.read, l.idle, l.last = real.Execution, 0, 0, now
	}
	if sec := now.Sub(l.last).Seconds(); sec > 0 {
		can := float64(real.Workers) * l.capacity * sec
		want := l.rate*sec + l.backlog
		done := min(can, want)
		l.backlog, l.read = want-done, l.read+done
		l.idle += float64(real.Workers) * sec * 1e9 * (1 - done/can)
		l.last = now
	}
	return autoscale.Sample{Time: now, Workers: real.Workers, Read: int64(l.read), Backlog: int64(l.backlog),
		HasBacklog: true, IdleNanos: int64(l.idle), Execution: real.Execution}, true
}

// TestAutoscaling: a streaming job submitted with max_num_workers=3 is
// scaled by the service itself — the same job, rescaled in flight — up
// when its backlog grows (never above the maximum) and down when it is
// quiet (never below min_num_workers); every change is an `autoscaled`
// event with the figures it was decided from; the data it read meanwhile
// is exact; a job with autoscaling_algorithm NONE keeps its count.
func TestAutoscaling(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, b, clock := openWithBroker(t, dir)
	s.autoscale.Delays = autoscale.Settings{UpDelay: 10 * time.Second, DownDelay: time.Minute, Cooldown: 10 * time.Second, DrainTarget: time.Minute}
	db := filepath.Join(dir, "totals.sqlite")
	j, err := s.Submit(ctx, SubmitRequest{Name: "sums", Pipeline: fmt.Sprintf(srYAML, "10s", db), BaseDir: dir,
		Options: record.JobOptions{NumWorkers: 2, MinNumWorkers: 2, MaxNumWorkers: 3}})
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := s.Submit(ctx, SubmitRequest{Name: "fixed", Pipeline: strings.Replace(fmt.Sprintf(srYAML, "10s", filepath.Join(dir, "fixed.sqlite")), "subscription: sr-sub", "topic: sr-events", 1), BaseDir: dir,
		Options: record.JobOptions{NumWorkers: 1, MaxNumWorkers: 3, AutoscalingAlgorithm: record.AutoscalingNone}})
	if err != nil {
		t.Fatal(err)
	}
	evs := srEvents(200, 0, 1)
	publishEvents(t, b, evs)
	waitElements(t, s, j.ID, "Events", int64(len(evs)))
	waitFor(t, s, fixed.ID, "running", func(j *record.Job) bool { return j.State == record.StateRunning })

	l := &load{rate: 1000, capacity: 400}
	s.autoscale.Sample = func(j *record.Job, run *core.Run, now time.Time) (autoscale.Sample, bool) {
		if j.ID == fixed.ID {
			t.Errorf("the autoscaler measured job %s, whose autoscaling_algorithm is NONE", j.Name)
		}
		return l.sample(j, run, now)
	}
	workers := func() int {
		got, err := s.Get(j.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.Options.NumWorkers
	}
	tick := func() {
		t.Helper()
		clock.advance(5 * time.Second)
		s.autoscale.Tick(ctx)
	}

	tick()
	tick()
	if !l.measured.HasBacklog || l.measured.Workers != 2 {
		t.Fatalf("the real measurement of the Pub/Sub-fed job: %+v, want a backlog and 2 workers", l.measured)
	}
	// 1000/s against 2×400: the backlog grows; up to the maximum 3
	// (1000/(400×0.8) would be 4).
	for i := 0; i < 12 && workers() < 3; i++ {
		tick()
	}
	if w := workers(); w != 3 {
		t.Fatalf("with a growing backlog the job has %d workers, want the maximum 3", w)
	}
	for range 12 {
		tick()
	}
	if w := workers(); w != 3 {
		t.Fatalf("the job went to %d workers, above its maximum 3", w)
	}
	// Quiet: 100/s. Down after a minute, to the minimum 2, not below.
	l.rate = 100
	for i := 0; i < 60 && workers() > 2; i++ {
		tick()
	}
	if w := workers(); w != 2 {
		t.Fatalf("a quiet job has %d workers, want its minimum 2", w)
	}
	for range 20 {
		tick()
	}
	if w := workers(); w != 2 {
		t.Fatalf("the quiet job went to %d workers, below its minimum 2", w)
	}

	// The same job throughout, rescaled in flight: it still reads.
	got, err := s.Get(j.ID)
	if err != nil || got.State != record.StateRunning || got.ID != j.ID {
		t.Fatalf("after autoscaling: %+v %v", got, err)
	}
	more := srEvents(100, 20*time.Second, 5)
	publishEvents(t, b, more)
	waitElements(t, s, j.ID, "Events", int64(len(more)))

	// Every change is an event with its figures: 2→3 (up), 3→2 (down).
	_, events, err := s.Events(j.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var changes []string
	for _, e := range events {
		if e.Type != record.EventAutoscaled {
			continue
		}
		changes = append(changes, fmt.Sprintf("%v→%v", e.Details["from_workers"], e.Details["to_workers"]))
		for _, k := range []string{"reason", "backlog", "input_rate", "processing_rate", "utilization"} {
			if _, ok := e.Details[k]; !ok {
				t.Errorf("autoscaled event %q has no %s: %v", e.Message, k, e.Details)
			}
		}
	}
	if fmt.Sprint(changes) != "[2→3 3→2]" {
		t.Fatalf("autoscaled events %v, want [2→3 3→2]", changes)
	}
	// A new range without a count: the count moves into it at once.
	if _, err := s.UpdateOptions(ctx, j.ID, record.JobOptions{MinNumWorkers: 1, MaxNumWorkers: 1}); err != nil {
		t.Fatalf("a range below the job's count: %v", err)
	}
	if w := workers(); w != 1 {
		t.Fatalf("after the range [1, 1] the job has %d workers, want 1", w)
	}
	if got, _ := s.Get(fixed.ID); got.Options.NumWorkers != 1 {
		t.Fatalf("the job with autoscaling NONE has %d workers, want 1", got.Options.NumWorkers)
	}
}
