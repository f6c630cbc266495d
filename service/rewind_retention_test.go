package service

import (
	"cmp"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-dev/weir/io/pubsub"
)

// purgeTopicBefore drops every message of topic sr-events before stream
// sequence keep, as retention, a size limit or a purge would.
func purgeTopicBefore(t *testing.T, b *pubsub.Broker, keep uint64) {
	t.Helper()
	ctx := context.Background()
	js, err := jetstream.New(b.Conn())
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "WEIR_TOPIC_sr-events") // topic T is stream WEIR_TOPIC_T
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSequence(keep)); err != nil {
		t.Fatal(err)
	}
}

// TestRewindRetentionGap: the new job of a re-reading replacement
// (update_strategy_parallel_job_update, which stops and replaces with a
// re-read here, as in TestRewindCatchUp) is still catching up (it has not read the old job's last
// message, sequence 300) when the topic drops every message up to it. The
// catch-up cannot reach the hold sequence any more: it ends anyway, with
// a catch_up_expired warning event counting the messages the re-read lost
// (and the same count in the source's catch_up metrics), whether the job
// is drained while it holds, keeps running, or reads newer messages past
// the gap; when only the front of the re-read is gone, it goes on past the
// gap to the old job's last message, with the same event. On the code
// before the fix the drain (and the running job's hold at −∞) never
// ended, and reading past a gap lost the messages without a word.
func TestRewindRetentionGap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// drainHeld drains while the job still holds; otherwise the test
		// waits for the catch-up to end first.
		drainHeld bool
		// after: messages published after the purge (past the gap).
		after int
		// keep: the purge keeps the messages from this sequence on (0:
		// from the one after the old job's last).
		keep uint64
	}{
		{name: "drain", drainHeld: true},
		{name: "running", drainHeld: false},
		{name: "drain_newer_messages", drainHeld: true, after: 30},
		// Only the front of the re-read is gone: it goes on past the gap
		// and holds until the old job's last message, as usual.
		{name: "drain_front_gap", drainHeld: true, keep: 201},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			s, b, clock := openCatchUpService(t, dir, nil)
			table := fmt.Sprintf("rw_gap_%d_%d", i, time.Now().UnixNano()%1_000_000)
			db := openRWDB(t, "sqlite", dir, table)
			yaml := rwPipeline("10s", "key", db, table)
			old := submit(t, s, "sums", yaml, dir)
			phase1 := rwEvents(300, 0, 30*time.Second, 1)
			publishRW(t, b, phase1)
			checkpointRead(t, s, "sums", old.ID, len(phase1), "the old job to read phase 1")

			clock.advance(DefaultMinReplaceInterval)
			res, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: yaml, BaseDir: dir,
				ServiceOptions: []string{"update_strategy_parallel_job_update", "parallel_replace_job_max_stop_duration=1m"}}})
			if err != nil {
				t.Fatalf("parallel replacement: %v", err)
			}
			nj := waitPhase(t, s, res.Job.ID)
			if nj.Replacement.Phase != record.PhaseCutOver || nj.Replacement.RewindPoint == nil {
				t.Fatalf("new job after the flow: %s %+v (error %q)", nj.State, nj.Replacement, nj.Error)
			}
			hold := nj.Replacement.RewindPoint.Sources[0].LastSequence
			if hold != uint64(len(phase1)) {
				t.Fatalf("the old job's last sequence %d, want %d", hold, len(phase1))
			}
			checkpointUntil(t, s, "sums", "its execution", func() bool { return s.core.RunningJob(nj.ID) != nil })
			checkpointUntil(t, s, "sums", "the catch-up to get under way", func() bool {
				c := catchUpOfJob(t, s, nj.ID)
				return c != nil && c.ReadSequence >= 140
			})
			// No checkpoint from here on until the purge: the subscription
			// delivers at most catchUpAck messages past the last one, so
			// the job is still catching up.
			c := catchUpOfJob(t, s, nj.ID)
			if c == nil || c.CaughtUp || c.ReadSequence >= hold {
				t.Fatalf("catch_up of the new job before the purge: %+v, want catching up to %d", c, hold)
			}
			readBefore := c.ReadSequence
			keep := cmp.Or(tc.keep, hold+1)
			purgeTopicBefore(t, b, keep)
			if tc.after > 0 {
				publishRW(t, b, rwEvents(tc.after, 30*time.Second, 3*time.Second, 1000))
			}

			if !tc.drainHeld {
				checkpointUntil(t, s, "sums", "the catch-up to end without the dropped messages", func() bool {
					c := catchUpOfJob(t, s, nj.ID)
					return c != nil && c.CaughtUp
				})
			}
			if _, err := s.Drain(ctx, nj.ID); err != nil {
				t.Fatalf("drain: %v", err)
			}
			checkpointUntil(t, s, "sums", "DRAINED and committed", func() bool {
				j, err := s.Get(nj.ID)
				return err == nil && (j.State == record.StateDrained && !j.PendingCommit || j.State.Terminal() && j.State != record.StateDrained)
			})
			if j, _ := s.Get(nj.ID); j.State != record.StateDrained {
				t.Fatalf("job %s ended %s (%s), want DRAINED", j.ID, j.State, j.Error)
			}

			got := eventsOf(t, s, nj.ID, record.EventCatchUpExpired)
			if len(got) != 1 {
				_, evs, _ := s.Events(nj.ID, 0, 0)
				t.Fatalf("%d catch_up_expired events, want 1 (events: %+v)", len(got), evs)
			}
			e := got[0]
			first, _ := e.Details["first_seq"].(float64)
			last, _ := e.Details["last_seq"].(float64)
			n, _ := e.Details["expired_messages"].(float64)
			next, _ := e.Details["next_seq"].(float64)
			if e.Severity != record.SeverityWarning || uint64(last) != keep-1 || uint64(first) <= readBefore || n != last-first+1 || uint64(next) != keep {
				t.Errorf("catch_up_expired event %+v: want a warning for sequences after %d through %d, going on at %d", e, readBefore, keep-1, keep)
			}
			t.Logf("event: %s", e.Message)
			if c := catchUpOfJob(t, s, nj.ID); c == nil || !c.CaughtUp || c.ExpiredMessages != uint64(n) {
				t.Errorf("catch_up of the drained job: %+v, want caught up with %v expired messages", c, n)
			}
		})
	}
}
