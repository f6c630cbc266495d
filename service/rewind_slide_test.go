package service

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/io/pubsub"
)

// rwSlidingTruth is the ground truth of evs per key in sliding windows of
// size every period (windows aligned to the epoch, as weir's are).
func rwSlidingTruth(evs []rwEvent, size, period time.Duration) map[rwCell][2]int64 {
	out := map[rwCell][2]int64{}
	for _, e := range evs {
		last := e.at.Truncate(period)
		for start := last; start.After(e.at.Add(-size)); start = start.Add(-period) {
			c := rwCell{e.key, start, start.Add(size)}
			v := out[c]
			out[c] = [2]int64{v[0] + e.amount, v[1] + 1}
		}
	}
	return out
}

// TestStopAndReplaceRewindWindows: a re-reading stop-and-replace of a
// pipeline with sliding windows (20s every 10s), and with an early
// repeated trigger in accumulating mode, on SQLite and PostgreSQL, with
// data flowing and a consumer polling the table. At the cut the old job's
// watermark is ~35s, so the re-read skips event times before 20s (the
// windows containing 35s start at 20s and 30s); the window [10s,30s) had
// expired with its complete total in the table, yet the re-read gives it
// the events of [20s,30s): without the new job's ownership filter
// (rewindOwns) it would fire at the watermark with that partial total and
// overwrite the complete one (the consumer sees it go backwards, the final
// table differs). With an early trigger, the catch-up would fire partial
// panes every 7 elements over the old job's newer totals; the new job
// holds them (runner.Options.HoldPanesAtMinWatermark) until it has read
// the old job's last message. At the end every (key, window) equals the
// ground truth of every message published: the windows that start before
// 20s from the old job, the others from the new one.
func TestStopAndReplaceRewindWindows(t *testing.T) {
	t.Parallel()
	const sliding = "{type: sliding, size: 20s, period: 10s}"
	const early = "{type: sliding, size: 20s, period: 10s, accumulation_mode: accumulating, trigger: {type: after_watermark, early: {type: after_count, count: 7}}}"
	tests := []struct {
		name     string
		old, new string
	}{
		{"sliding", sliding, sliding},
		{"fixed to sliding with an early trigger", "{type: fixed, size: 10s}", early},
		{"sliding with an early trigger", early, early},
	}
	for _, driver := range []string{"sqlite", "postgres"} {
		for i, tc := range tests {
			t.Run(driver+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				dir := t.TempDir()
				s, b, clock := openRewindService(t, dir, nil)
				table := fmt.Sprintf("rw_win_%d_%d", i, time.Now().UnixNano()%1_000_000)
				db := openRWDB(t, driver, dir, table)
				pipeline := func(ws string) string {
					return strings.Replace(rwPipeline("10s", "key", db, table), "{type: fixed, size: 10s}", ws, 1)
				}
				old := submit(t, s, "sums", pipeline(tc.old), dir)
				// Phase 1: event times in [0s, 45s); the old job's watermark
				// ends at ~35s (10s of out-of-orderness).
				phase1 := rwEvents(450, 0, 45*time.Second, 1)
				publishRW(t, b, phase1)
				waitElements(t, s, old.ID, "Events", int64(len(phase1)))
				epoch := waitFor(t, s, old.ID, "a checkpoint", checkpointed(1)).LastCheckpoint.Epoch
				waitFor(t, s, old.ID, "a checkpoint after phase 1", checkpointed(epoch+1))
				// Phase 2, published while the flow runs, into the open
				// windows; phase 3 after the cut-over.
				phase2 := rwEvents(150, 35*time.Second, 9*time.Second, 1000)
				phase3 := rwEvents(200, 45*time.Second, 20*time.Second, 5000)
				all := append(append(append([]rwEvent{}, phase1...), phase2...), phase3...)
				want := rwSlidingTruth(all, 20*time.Second, 10*time.Second)
				truth := map[rwCell][2]int64{}
				for c, v := range want {
					truth[c] = v
				}
				if !strings.Contains(tc.old, "sliding") {
					for c, v := range rwTruth(all, 10*time.Second, false, srBase) {
						truth[c] = v
					}
				}
				w := watchRW(t, []*rwDB{db}, []map[rwCell][2]int64{truth})

				clock.advance(DefaultMinReplaceInterval)
				res, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: pipeline(tc.new), BaseDir: dir,
					ServiceOptions: []string{"update_strategy_parallel_job_update", "parallel_replace_job_max_stop_duration=1m"}}})
				if err != nil {
					t.Fatalf("stop-and-replace: %v", err)
				}
				nj := res.Job
				publishRW(t, b, phase2)
				fin := waitPhase(t, s, nj.ID)
				if fin.Replacement.Phase != record.PhaseCutOver || fin.State != record.StateRunning {
					t.Fatalf("new job after the flow: %s %+v (error %q)", fin.State, fin.Replacement, fin.Error)
				}
				skip := srBase.Add(20 * time.Second)
				if rp := fin.Replacement.RewindPoint; rp == nil || !rp.SkipBefore.Equal(skip) {
					t.Fatalf("rewind point %+v, want skip_before %s", rp, skip)
				}
				t.Logf("rewind point %+v", fin.Replacement.RewindPoint)
				waitFor(t, s, nj.ID, "its execution", func(j *record.Job) bool { return s.core.RunningJob(j.ID) != nil })
				publishRW(t, b, phase3)
				waitBacklog(t, s, b, "sr-sub")
				m, err := s.Metrics(nj.ID)
				if err != nil {
					t.Fatal(err)
				}
				for _, st := range m.Steps {
					if st.Name == "Events" && (st.RewindSkippedElements == nil || *st.RewindSkippedElements != 200) {
						t.Errorf("rewind_skipped_elements of Events: %v, want the 200 events before 20s", st.RewindSkippedElements)
					}
				}
				if _, err := s.Drain(ctx, nj.ID); err != nil {
					t.Fatal(err)
				}
				waitFor(t, s, nj.ID, "DRAINED and committed", func(j *record.Job) bool {
					return j.State == record.StateDrained && !j.PendingCommit || j.State.Terminal() && j.State != record.StateDrained
				})
				w.finish(t)

				got, gens, err := db.read(t)
				if err != nil {
					t.Fatal(err)
				}
				var diffs []string
				for c, v := range want {
					wantGen := nj.Generation
					if c.start.Before(skip) {
						wantGen = old.Generation // expired at the cut: the old job's final pane
						if !strings.Contains(tc.old, "sliding") {
							continue // the old pipeline had no such window
						}
					}
					if got[c] != v || gens[c] != wantGen {
						diffs = append(diffs, fmt.Sprintf("%s: table %v generation %d, truth %v generation %d", c, got[c], gens[c], v, wantGen))
					}
				}
				for c, v := range got {
					if _, ok := truth[c]; !ok {
						diffs = append(diffs, fmt.Sprintf("%s: %v in the table, not in the truth", c, v))
					}
					if gens[c] == nj.Generation && c.start.Before(skip) {
						diffs = append(diffs, fmt.Sprintf("%s: written by the new job although it expired before the cut", c))
					}
				}
				if rows, distinct, err := db.events(); err != nil || rows != int64(len(all)) || distinct != int64(len(all)) {
					diffs = append(diffs, fmt.Sprintf("append table: %d rows, %d distinct events, want %d of each (%v)", rows, distinct, len(all), err))
				}
				sort.Strings(diffs)
				if len(diffs) > 0 {
					t.Fatalf("%d differences:\n%s", len(diffs), strings.Join(diffs, "\n"))
				}
			})
		}
	}
}

// parSlidingTruth is the ground truth per "key@window start ms" of evs in
// sliding windows of 20s every 10s.
func parSlidingTruth(evs []srEvent) map[string]kwTotal {
	out := map[string]kwTotal{}
	for _, e := range evs {
		for start := e.at.Truncate(10 * time.Second); start.After(e.at.Add(-20 * time.Second)); start = start.Add(-10 * time.Second) {
			k := fmt.Sprintf("%s@%d", e.key, start.UnixMilli())
			v := out[k]
			out[k] = kwTotal{v.total + e.amount, v.n + 1}
		}
	}
	return out
}

// TestParallelReplaceRewindSliding: a re-reading parallel replacement
// (D = 0s) of a pipeline with sliding windows (20s every 10s) on SQLite
// and PostgreSQL. The old job's watermark is ~34s when the new
// subscription is positioned, so the re-read skips event times before 20s;
// the window [10s,30s) had expired in the old job with its complete total
// in the view, and the re-read gives the new job its events of [20s,30s)
// only. The new job (the newest generation, which the view prefers) must
// leave that window to the old job (rewindOwns on top of the cut-over
// rule): a consumer polling the view never sees a total go backwards, and
// at the end the view equals the ground truth of every message published.
func TestParallelReplaceRewindSliding(t *testing.T) {
	t.Parallel()
	for _, drv := range parDrivers() {
		t.Run(drv.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			s, b, clock := openParallel(t, dir)
			sinkCfg, view := drv.setup(t, dir)
			defer view.close()
			base := time.Now().Add(30 * time.Minute).Truncate(time.Minute)
			pipeline := strings.Replace(fmt.Sprintf(parYAML, sinkCfg), "{type: fixed, size: 10s}", "{type: sliding, size: 20s, period: 10s}", 1)
			pipeline = strings.Replace(pipeline, "    - type: WriteToPubSub\n      name: PublishTotals\n      input: Sums\n      config: {topic: par-out}\n", "", 1)
			old := submit(t, s, "sums", pipeline, dir)
			phase1 := parEvents(base, 0, 45, 1)
			publishPar(t, b, phase1)
			waitElements(t, s, old.ID, "Events", int64(len(phase1)))
			waitAcked(t, s, b, pubsub.SubscriptionName("sums", "Events"))
			epoch := waitFor(t, s, old.ID, "a checkpoint", checkpointed(1)).LastCheckpoint.Epoch
			waitFor(t, s, old.ID, "a checkpoint after phase 1", checkpointed(epoch+1))
			cons := startConsumer(s, view)
			clock.advance(DefaultMinReplaceInterval)
			res, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: pipeline, BaseDir: dir,
				ServiceOptions: []string{"update_strategy_parallel_job_update", "parallel_replace_job_min_parallel_pipelines_duration=0s", "parallel_replace_job_max_stop_duration=5m"}}})
			if err != nil {
				t.Fatalf("parallel replacement: %v", err)
			}
			nj := res.Job
			skip := base.Add(20 * time.Second)
			if rp := nj.Replacement.RewindPoint; rp == nil || !rp.SkipBefore.Equal(skip) {
				t.Fatalf("rewind point %+v, want skip_before %s", rp, skip)
			}
			phase2 := parEvents(base, 45, 70, 1000)
			publishPar(t, b, phase2)
			fin := waitFor(t, s, nj.ID, "CUT_OVER", func(j *record.Job) bool { return j.Replacement.Phase.Final() })
			if fin.Replacement.Phase != record.PhaseCutOver || fin.State != record.StateRunning {
				t.Fatalf("new job after the flow: %s %+v (error %q)", fin.State, fin.Replacement, fin.Error)
			}
			phase3 := parEvents(base, 70, 90, 5000)
			publishPar(t, b, phase3)
			waitElements(t, s, nj.ID, "Events", int64(len(phase2)+len(phase3)))
			// A re-reading job also counts what it re-read, so its count
			// reaches phase 2 and 3's early: wait until it has read the
			// topic's last message too (a drain stops reading).
			all := append(append(append([]srEvent{}, phase1...), phase2...), phase3...)
			waitReadSequence(t, s, nj.ID, "Events", uint64(len(all)))
			if _, err := s.Drain(ctx, nj.ID); err != nil {
				t.Fatal(err)
			}
			waitFor(t, s, nj.ID, "DRAINED and committed", func(j *record.Job) bool {
				return j.State == record.StateDrained && !j.PendingCommit || j.State.Terminal() && j.State != record.StateDrained
			})
			got := cons.finish(t)
			if diff := diffTotals(got, parSlidingTruth(all)); diff != "" {
				t.Fatalf("the view %s against the ground truth:\n%s", view.name, diff)
			}
		})
	}
}
