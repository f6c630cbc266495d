package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/io/pubsub"
)

// catchUpAck is the subscription's cap of delivered, unacknowledged
// messages in the catch-up scenarios: with checkpoints only when the test
// takes them, a re-reading job reads at most this many messages past its
// last checkpoint, so it is still catching up whenever the test acts.
const catchUpAck = 20

// openCatchUpService opens a service over dir with an embedded broker
// (topic sr-events, subscription sr-sub from the beginning, at most
// catchUpAck messages in flight) and no periodic checkpoints: the test
// takes them (takeCheckpoint). b, when not nil, is the broker to reuse (a
// restart of the service).
func openCatchUpService(t *testing.T, dir string, b *pubsub.Broker) (*Service, *pubsub.Broker, *shiftClock) {
	t.Helper()
	ctx := context.Background()
	if b == nil {
		b = startBroker(t, dir, "sr-events")
		if _, err := b.CreateSubscription(ctx, "sr-sub", "sr-events", pubsub.SubscriptionConfig{FromBeginning: true, MaxAckPending: catchUpAck}); err != nil {
			t.Fatal(err)
		}
	}
	clock := &shiftClock{base: time.Now()}
	s, err := open(ctx, Options{DataDir: filepath.Join(dir, "data"), CheckpointInterval: time.Hour,
		Clock: clock, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Broker: b}, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, b, clock
}

// takeCheckpoint takes a checkpoint of the live execution of name, which
// acknowledges what it read and lets the subscription deliver more. It
// reports whether a checkpoint was written.
func takeCheckpoint(t *testing.T, s *Service, name string) bool {
	t.Helper()
	v, ok := s.core.Live.Load(name)
	if !ok {
		return false // between executions
	}
	err := s.core.Checkpoint(v.(*Run), nil)
	if err != nil && !errors.Is(err, core.ErrNotWritten) {
		t.Logf("checkpoint of %s: %v", name, err)
	}
	return err == nil
}

// catchUpOfJob returns the catch-up progress of step Events of job ref.
func catchUpOfJob(t *testing.T, s *Service, ref string) *record.SourceCatchUp {
	t.Helper()
	m, err := s.Metrics(ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range m.Steps {
		if st.Name == "Events" {
			return st.CatchUp
		}
	}
	return nil
}

// checkpointUntil takes checkpoints of name's live execution until cond
// holds. A checkpoint needs no pause before the next: its barrier enters
// the source between two reads, so each checkpoint waits for the read in
// progress, which ends once the job has read what the previous checkpoint
// let the subscription deliver (or found nothing within the source's
// fetch wait). Where no checkpoint is written (between executions, or the
// job is ending), it waits for the service's next change instead.
//
// A new execution becomes live (runningJob, Service.live) after the
// registry write that records it RUNNING, and the service notifies again
// then (superviseLocked), so the wait cannot miss it.
func checkpointUntil(t *testing.T, s *Service, name, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		changed := s.core.Changes.Next()
		if cond() {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		default:
		}
		if takeCheckpoint(t, s, name) {
			continue // the checkpoint waited for the job's read
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// checkpointRead checkpoints job name until job id's source Events has
// read n elements, and then once more, so that a checkpoint holds them all.
func checkpointRead(t *testing.T, s *Service, name, id string, n int, what string) {
	t.Helper()
	checkpointUntil(t, s, name, what, func() bool {
		m, err := s.Metrics(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range m.Steps {
			if st.Name == "Events" && st.ElementsIn >= int64(n) {
				return true
			}
		}
		return false
	})
	takeCheckpoint(t, s, name)
}

// TestRewindCatchUp: the new job of a re-reading stop-and-replace keeps
// its guarantee when it is updated in place, rescaled, restarted or
// drained while it is still catching up (it has not yet read the old
// job's last message). With data flowing (Pub/Sub in, a windowed
// accumulating Combine, an upsert WriteToSql on SQLite and PostgreSQL),
// a consumer polling the table never sees a total go backwards or count
// an element twice; at the end every window the new job owns holds the
// ground truth, and the window that had expired before the cut keeps the
// old job's complete total. The catch-up's progress shows in the source's
// metrics (catch_up) and ends caught up.
//
// On the code before the fix, the in-place update lost the re-read (the
// updated job neither skipped the expired window's messages nor held
// its panes, and wrote a partial total over the old job's complete one)
// and the drain fired the half-read windows at once, replacing the old
// job's totals with partial ones.
func TestRewindCatchUp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// ops happen in turn while the job catches up: update (in place),
		// rescale, restart (of the service), drain.
		ops []string
		// atSeq: the first operation happens once the catching-up job has
		// read at least this far (0: at once).
		atSeq uint64
	}{
		{name: "update", ops: []string{"update"}},
		{name: "update twice", ops: []string{"update", "update"}},
		{name: "update then restart", ops: []string{"update", "restart"}},
		{name: "rescale", ops: []string{"rescale"}, atSeq: 140},
		{name: "restart", ops: []string{"restart"}, atSeq: 140},
		{name: "drain", ops: []string{"drain"}, atSeq: 140},
	}
	for _, driver := range []string{"sqlite", "postgres"} {
		for i, tc := range tests {
			t.Run(driver+"/"+strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				dir := t.TempDir()
				s, b, clock := openCatchUpService(t, dir, nil)
				table := fmt.Sprintf("rw_catchup_%d_%d", i, time.Now().UnixNano()%1_000_000)
				db := openRWDB(t, driver, dir, table)
				yaml := rwPipeline("10s", "key", db, table)
				old := submit(t, s, "sums", yaml, dir)
				// Event times in [0s, 30s): the old job's watermark ends at
				// 19.9s, window [0s,10s) expired (its 100 messages are skipped
				// by the re-read), [10s,20s) and [20s,30s) open; the re-read
				// starts at sequence 1 and holds until sequence 300.
				phase1 := rwEvents(300, 0, 30*time.Second, 1)
				publishRW(t, b, phase1)
				checkpointRead(t, s, "sums", old.ID, len(phase1), "the old job to read phase 1")
				w := watchRW(t, []*rwDB{db}, []map[rwCell][2]int64{rwTruth(phase1, 10*time.Second, false, srBase)})

				clock.advance(DefaultMinReplaceInterval)
				res, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: yaml, BaseDir: dir,
					ServiceOptions: []string{"update_strategy_parallel_job_update", "parallel_replace_job_max_stop_duration=1m"}}})
				if err != nil {
					t.Fatalf("stop-and-replace: %v", err)
				}
				nj := waitPhase(t, s, res.Job.ID)
				if nj.Replacement.Phase != record.PhaseCutOver || nj.Replacement.RewindPoint == nil {
					t.Fatalf("new job after the flow: %s %+v (error %q)", nj.State, nj.Replacement, nj.Error)
				}
				if last := nj.Replacement.RewindPoint.Sources[0].LastSequence; last != uint64(len(phase1)) {
					t.Fatalf("the old job's last sequence %d, want %d", last, len(phase1))
				}
				checkpointUntil(t, s, "sums", "its execution", func() bool { return s.core.RunningJob(nj.ID) != nil })
				checkpointUntil(t, s, "sums", "the catch-up to reach the operation's point", func() bool {
					c := catchUpOfJob(t, s, nj.ID)
					return c != nil && c.ReadSequence >= tc.atSeq
				})
				c := catchUpOfJob(t, s, nj.ID)
				if c == nil || c.CaughtUp || c.HoldUntil != uint64(len(phase1)) || c.ReadSequence >= c.HoldUntil {
					t.Fatalf("catch_up of the new job before the %s: %+v, want catching up to %d", tc.ops[0], c, len(phase1))
				}
				last := nj // the job that runs at the end
				drained := false
				for n, op := range tc.ops {
					switch op {
					case "update":
						ur, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: yaml, BaseDir: dir}})
						if err != nil {
							t.Fatalf("in-place update (operation %d): %v", n+1, err)
						}
						if ur.Job.CatchUp == nil || ur.Job.CatchUp.FromJobID != nj.ID || ur.Job.Replacement != nil {
							t.Errorf("updated job (operation %d): catch_up %+v, replacement %+v; want the catch-up of %s carried on", n+1, ur.Job.CatchUp, ur.Job.Replacement, nj.ID)
						}
						last = ur.Job
					case "rescale":
						if _, err := s.UpdateOptions(ctx, last.ID, record.JobOptions{NumWorkers: 2}); err != nil {
							t.Fatalf("rescale: %v", err)
						}
					case "restart":
						if err := s.Close(ctx); err != nil {
							t.Fatalf("closing the service: %v", err)
						}
						s, _, _ = openCatchUpService(t, dir, b)
						id := last.ID
						checkpointUntil(t, s, "sums", "the resumed execution", func() bool { return s.core.RunningJob(id) != nil })
						if j, err := s.Get(id); err != nil || (j.Replacement == nil) == (j.CatchUp == nil) {
							t.Errorf("resumed job %s: replacement %+v, catch_up %+v; want the one it had", id, j.Replacement, j.CatchUp)
						}
					case "drain":
						if _, err := s.Drain(ctx, last.ID); err != nil {
							t.Fatalf("drain: %v", err)
						}
						drained = true
					}
					if c := catchUpOfJob(t, s, last.ID); !drained && (c == nil || c.CaughtUp || c.HoldUntil != uint64(len(phase1))) {
						t.Errorf("catch_up after the %s: %+v, want still catching up to %d", op, c, len(phase1))
					}
				}
				checkpointUntil(t, s, "sums", "the catch-up to end", func() bool {
					if drained {
						j, err := s.Get(last.ID)
						return err == nil && j.State.Terminal()
					}
					c := catchUpOfJob(t, s, last.ID)
					if c == nil { // not re-reading (the code before the fix): caught up once the backlog is read
						info, err := b.Subscription(ctx, "sr-sub")
						return err == nil && info.Backlog == 0
					}
					return c.CaughtUp
				})
				if !drained {
					if _, err := s.Drain(ctx, last.ID); err != nil {
						t.Fatal(err)
					}
				}
				checkpointUntil(t, s, "sums", "DRAINED and committed", func() bool {
					j, err := s.Get(last.ID)
					return err == nil && (j.State == record.StateDrained && !j.PendingCommit || j.State.Terminal() && j.State != record.StateDrained)
				})
				if j, _ := s.Get(last.ID); j.State != record.StateDrained {
					t.Fatalf("job %s ended %s (%s), want DRAINED", j.ID, j.State, j.Error)
				}
				w.finish(t)

				got, gens, err := db.read(t)
				if err != nil {
					t.Fatal(err)
				}
				var diffs []string
				for c, v := range rwTruth(phase1, 10*time.Second, false, srBase) {
					wantGen := last.Generation
					if c.start.Equal(srBase) {
						wantGen = old.Generation // expired before the cut: the old job's, complete
					}
					if got[c] != v || gens[c] != wantGen {
						diffs = append(diffs, fmt.Sprintf("%s: table %v of generation %d, want %v of generation %d", c, got[c], gens[c], v, wantGen))
					}
				}
				if rows, distinct, err := db.events(); err != nil || rows != int64(len(phase1)) || distinct != int64(len(phase1)) {
					diffs = append(diffs, fmt.Sprintf("append table: %d rows, %d distinct events, want %d of each (%v)", rows, distinct, len(phase1), err))
				}
				sort.Strings(diffs)
				if len(diffs) > 0 {
					t.Fatalf("%d differences:\n%s", len(diffs), strings.Join(diffs, "\n"))
				}
			})
		}
	}
}
