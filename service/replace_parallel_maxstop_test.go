package service

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/io/pubsub"
)

// TestParallelZeroMaxStop: a parallel replacement with
// parallel_replace_job_max_stop_duration=0s gives the old job's drain no
// time once D passed: the old job is cancelled at once (default), or,
// with cancel_on_drain_timeout=false, both are kept and the records say
// so, exactly like a stop-and-replace's 0s. The old code stored 0 for
// "no maximum" too and waited for the drain forever. The old job's end
// is held open (a test hook) and the clock never moves, so only a 0s
// maximum can time the drain out.
func TestParallelZeroMaxStop(t *testing.T) {
	t.Parallel()
	for _, cancel := range []bool{true, false} {
		t.Run(fmt.Sprintf("cancel=%v", cancel), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			b := startBroker(t, dir, "par-events", "par-out")
			release := make(chan struct{})
			released := false
			defer func() {
				if !released {
					close(release)
				}
			}()
			var hold atomic.Value // the old job's ID
			clock := &shiftClock{base: time.Now()}
			s, err := open(ctx, Options{DataDir: filepath.Join(dir, "data"), CheckpointInterval: 50 * time.Millisecond,
				Clock: clock, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Broker: b}, Hooks{Finishing: func(id string) {
				if v, _ := hold.Load().(string); v == id {
					<-release
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			sinkCfg, view := parDrivers()[0].setup(t, dir)
			defer view.close()
			base := time.Now().Add(30 * time.Minute).Truncate(time.Minute)
			pipeline := fmt.Sprintf(parYAML, sinkCfg)
			old := submit(t, s, "sums", pipeline, dir)
			hold.Store(old.ID)
			phase1 := parEvents(base, 0, 34, 1)
			publishPar(t, b, phase1)
			waitElements(t, s, old.ID, "Events", int64(len(phase1)))
			waitAcked(t, s, b, pubsub.SubscriptionName("sums", "Events"))
			clock.advance(DefaultMinReplaceInterval)
			res, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: pipeline, BaseDir: dir,
				ServiceOptions: []string{"update_strategy_parallel_job_update", "parallel_replace_job_min_parallel_pipelines_duration=0s",
					"parallel_replace_job_max_stop_duration=0s", fmt.Sprintf("parallel_replace_job_cancel_on_drain_timeout=%v", cancel)}}})
			if err != nil {
				t.Fatal(err)
			}
			if lim, ok := res.Job.Replacement.MaxStop(); !ok || lim != 0 {
				t.Fatalf("the record's maximum stop duration: %s %v, want 0s", lim, ok)
			}
			// The pipeline publishes, so the drain also waits for the old
			// watermark to pass the cut-over window: events past it.
			publishPar(t, b, parEvents(base, 35, 70, 1000))
			nj := waitFor(t, s, res.Job.ID, "the drain timeout recorded", func(j *record.Job) bool { return j.Replacement.DrainTimedOut })
			if nj.Replacement.Phase != record.PhaseDrainingOld || len(nj.Replacement.Notes) == 0 || !strings.Contains(nj.Replacement.Notes[len(nj.Replacement.Notes)-1], "within 0s") {
				t.Fatalf("new job during the drain: %+v", nj.Replacement)
			}
			if cancel {
				waitFor(t, s, old.ID, "CANCELLING", func(j *record.Job) bool { return j.State == record.StateCancelling })
			} else if o, _ := s.Get(old.ID); o.State != record.StateDraining || !strings.Contains(strings.Join(o.Replacement.Notes, "\n"), "both jobs keep running") {
				t.Fatalf("old job %s, notes %q; want DRAINING and kept", o.State, o.Replacement.Notes)
			}
			released = true
			close(release)
			fin := waitFor(t, s, res.Job.ID, "the cut-over", func(j *record.Job) bool { return j.Replacement.Phase.Final() })
			o, _ := s.Get(old.ID)
			if fin.Replacement.Phase != record.PhaseCutOver || fin.State != record.StateRunning {
				t.Fatalf("new job: %s %+v", fin.State, fin.Replacement)
			}
			if want := map[bool]record.JobState{true: record.StateCancelled, false: record.StateDrained}[cancel]; o.State != want {
				t.Fatalf("old job %s, want %s", o.State, want)
			}
		})
	}
}

// TestReplacementMaxStop: the record's maximum stop duration, including
// records written before has_max_stop (a parallel 0 meant none).
func TestReplacementMaxStop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		rep  record.Replacement
		want time.Duration
		ok   bool
	}{
		{"parallel without the option", record.Replacement{Strategy: record.StrategyParallel}, 0, false},
		{"parallel 0s", record.Replacement{Strategy: record.StrategyParallel, HasMaxStop: true}, 0, true},
		{"parallel 5m", record.Replacement{Strategy: record.StrategyParallel, MaxStopMillis: 300000, HasMaxStop: true}, 5 * time.Minute, true},
		{"old parallel record with 5m", record.Replacement{Strategy: record.StrategyParallel, MaxStopMillis: 300000}, 5 * time.Minute, true},
		{"stop-and-replace 0s", record.Replacement{Strategy: record.StrategyStopAndReplace}, 0, true},
		{"rollback", record.Replacement{Strategy: record.StrategyRollback, MaxStopMillis: 1000}, time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := tc.rep.MaxStop(); got != tc.want || ok != tc.ok {
				t.Fatalf("MaxStop() = %s %v, want %s %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
