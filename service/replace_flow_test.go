package service

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/io/pubsub"
)

// srYAML reads a named subscription, sums amounts per key in fixed windows
// of event time (%s: the size) and upserts the totals into SQLite (%s).
const srYAML = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Events
      config:
        subscription: sr-sub
        schema: {key: string, amount: int, ts: string}
        timestamp_field: ts
    - type: Combine
      name: Sums
      input: Events
      windowing: {type: fixed, size: %s}
      config:
        group_by: [key]
        combine:
          total: {value: amount, fn: sum}
          n: {value: amount, fn: count}
    - type: WriteToSql
      name: WriteTotals
      input: Sums
      config: {dsn: %s, table: totals, key: [key]}
`

// srEvent is one published message of the stop-and-replace scenarios.
type srEvent struct {
	key    string
	amount int64
	at     time.Time
}

// srBase is the event time the scenarios' windows count from.
var srBase = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// srEvents returns n events of keys k0..k2 spread over [from, from+10s).
func srEvents(n int, from time.Duration, seed int64) []srEvent {
	out := make([]srEvent, n)
	for i := range out {
		out[i] = srEvent{key: fmt.Sprintf("k%d", i%3), amount: seed + int64(i), at: srBase.Add(from + time.Duration(i%10)*time.Second)}
	}
	return out
}

func publishEvents(t *testing.T, b *pubsub.Broker, evs []srEvent) {
	t.Helper()
	publishTo(t, b, "sr-events", evs)
}

// publishTo publishes evs to topic as JSON {key, amount, ts}.
func publishTo(t *testing.T, b *pubsub.Broker, topic string, evs []srEvent) {
	t.Helper()
	for _, e := range evs {
		msg := fmt.Sprintf(`{"key": %q, "amount": %d, "ts": %q}`, e.key, e.amount, e.at.Format(time.RFC3339))
		if _, err := b.Publish(context.Background(), topic, []byte(msg), nil, ""); err != nil {
			t.Fatal(err)
		}
	}
}

// truth is the ground truth "key window_start total n" of evs in windows
// of size.
func truth(evs []srEvent, size time.Duration) []string {
	type kw struct {
		key   string
		start time.Time
	}
	sums := map[kw][2]int64{}
	for _, e := range evs {
		k := kw{e.key, e.at.Truncate(size)}
		v := sums[k]
		sums[k] = [2]int64{v[0] + e.amount, v[1] + 1}
	}
	var out []string
	for k, v := range sums {
		out = append(out, fmt.Sprintf("%s %s %d %d", k.key, k.start.Format("2006-01-02T15:04:05.000Z"), v[0], v[1]))
	}
	sort.Strings(out)
	return out
}

// totalsByGeneration reads the table as "key window_start total n" lines
// and the generation of each line.
func totalsByGeneration(t *testing.T, db string) ([]string, map[string]int64) {
	t.Helper()
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT key, window_start, total, n, generation FROM totals ORDER BY key, window_start`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	return scanTotals(t, rows)
}

// scanTotals reads rows of (key, window_start, total, n, generation) as
// sorted "key window_start total n" lines and the generation of each
// line; the caller closes rows.
func scanTotals(t *testing.T, rows sqlRows) ([]string, map[string]int64) {
	t.Helper()
	var out []string
	gens := map[string]int64{}
	for rows.Next() {
		var key, start string
		var total, n, gen int64
		if err := rows.Scan(&key, &start, &total, &n, &gen); err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%s %s %d %d", key, start, total, n)
		out = append(out, line)
		gens[line] = gen
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out, gens
}

func openWithBroker(t *testing.T, dir string) (*Service, *pubsub.Broker, *shiftClock) {
	t.Helper()
	ctx := context.Background()
	b := startBroker(t, dir, "sr-events")
	if _, err := b.CreateSubscription(ctx, "sr-sub", "sr-events", pubsub.SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	clock := &shiftClock{base: time.Now()}
	s, err := Open(ctx, Options{DataDir: filepath.Join(dir, "data"), CheckpointInterval: 50 * time.Millisecond,
		Clock: clock, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Broker: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, b, clock
}

// waitPhase waits until job ref's replacement reaches a final phase.
func waitPhase(t *testing.T, s *Service, ref string) *record.Job {
	t.Helper()
	return waitFor(t, s, ref, "the end of the replacement flow", func(j *record.Job) bool {
		return j.Replacement != nil && j.Replacement.Phase.Final() && (j.State != record.StatePending)
	})
}

// TestStopAndReplace: with data flowing (Pub/Sub in, windowed sums, an
// upsert SQLite sink), a stop-and-replace — by the same name (option 1)
// and by a new name (option 2, by name and by ID), with a compatible and
// an incompatible pipeline (another window size), with and without
// preallocation — drains the old job, starts the new one at once and
// continues from where the old one stopped: every (key, window) total in
// the table equals the ground truth of the pipeline that emitted it, the
// newer generation owns the windows it emitted, and the job records tell
// the flow.
func TestStopAndReplace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		newName string // "" the same name
		byID    bool
		size    string // the new pipeline's window size
		opts    []string
		topic   bool // both pipelines read the topic (a subscription named after the job) instead of sr-sub
	}{
		{name: "same name compatible", size: "10s"},
		{name: "same name new window size", size: "20s"},
		{name: "same name no preallocation", size: "10s", opts: []string{"parallel_replace_job_preallocate_compute_resources=false"}},
		{name: "new name", newName: "sums-v2", size: "10s"},
		{name: "new name by ID with a new window size", newName: "sums-v2", byID: true, size: "20s"},
		{name: "new name reading a topic", newName: "sums-v2", size: "10s", topic: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			s, b, clock := openWithBroker(t, dir)
			db := filepath.Join(dir, "totals.sqlite")
			pipeline := func(size string) string {
				y := fmt.Sprintf(srYAML, size, db)
				if tc.topic {
					y = strings.Replace(y, "subscription: sr-sub", "topic: sr-events", 1)
				}
				return y
			}
			old := submit(t, s, "sums", pipeline("10s"), dir)
			phase1 := srEvents(300, 0, 1)
			publishEvents(t, b, phase1)
			waitElements(t, s, old.ID, "Events", int64(len(phase1)))
			clock.advance(DefaultMinReplaceInterval)
			req := SubmitRequest{Name: "sums", Pipeline: pipeline(tc.size), BaseDir: dir,
				ServiceOptions: append([]string{"parallel_replace_job_max_stop_duration=5m", "weir_replace_rewind=false"}, tc.opts...)}
			var nj *record.Job
			if tc.newName == "" {
				req.ServiceOptions = append(req.ServiceOptions, "update_strategy_parallel_job_update")
				res, err := s.Update(ctx, UpdateRequest{SubmitRequest: req})
				if err != nil {
					t.Fatalf("stop-and-replace: %v", err)
				}
				nj = res.Job
			} else {
				req.Name = tc.newName
				target := "parallel_replace_job_name=sums"
				if tc.byID {
					target = "parallel_replace_job_id=" + old.ID
				}
				req.ServiceOptions = append(req.ServiceOptions, target)
				var err error
				if nj, err = s.Submit(ctx, req); err != nil {
					t.Fatalf("stop-and-replace under a new name: %v", err)
				}
			}
			if nj.State != record.StatePending || nj.ReplacesJobID != old.ID || nj.Generation != old.Generation+1 || nj.Replacement == nil || nj.Replacement.Phase != record.PhaseDrainingOld {
				t.Fatalf("new job: %s replaces %q generation %d replacement %+v", nj.State, nj.ReplacesJobID, nj.Generation, nj.Replacement)
			}
			// The new job is the name's active job from its creation.
			if got, _ := s.Get(nj.Name); got.ID != nj.ID {
				t.Fatalf("the name %s resolves to %s, want the new job %s", nj.Name, got.ID, nj.ID)
			}
			// Published once the old job stopped reading (with
			// weir_replace_rewind=false a window that spans the cut would be
			// split between the jobs): the new job reads every one.
			waitFor(t, s, old.ID, "DRAINED", func(j *record.Job) bool { return j.State.Terminal() })
			phase2 := srEvents(300, 20*time.Second, 1000)
			publishEvents(t, b, phase2)
			fin := waitPhase(t, s, nj.ID)
			if fin.Replacement.Phase != record.PhaseCutOver || fin.State != record.StateRunning || fin.Replacement.StopWindowMillis == nil {
				t.Fatalf("new job after the flow: %s %+v (error %q)", fin.State, fin.Replacement, fin.Error)
			}
			// Under a new name the old job's subscription of a topic source,
			// which the service created, is deleted once the new job's is
			// positioned; a named one (sr-sub) is the user's and stays.
			oldSub := "sr-sub"
			if tc.topic {
				oldSub = pubsub.SubscriptionName("sums", "Events")
			}
			_, err := b.Subscription(ctx, oldSub)
			if deleted := tc.topic && tc.newName != ""; deleted != errors.Is(err, pubsub.ErrSubscriptionNotFound) {
				t.Errorf("the old job's subscription %s after the cut-over: %v, want deleted = %v", oldSub, err, deleted)
			}
			if hs := fin.Replacement.Handover; tc.topic && tc.newName != "" && (len(hs) != 1 || !hs[0].Positioned || !hs[0].OldDeleted || hs[0].Old != oldSub) {
				t.Errorf("handover record %+v, want %s positioned from and then deleted", hs, oldSub)
			}
			o, _ := s.Get(old.ID)
			if o.State != record.StateDrained || o.ReplacedByJobID != nj.ID || o.Replacement == nil || o.Replacement.Phase != record.PhaseCutOver || o.Replacement.Strategy != record.StrategyStopAndReplace {
				t.Fatalf("old job after the flow: %s replaced by %q %+v", o.State, o.ReplacedByJobID, o.Replacement)
			}
			// Each job's events record the phases it went through.
			for _, id := range []string{old.ID, nj.ID} {
				if got, want := phaseEvents(t, s, id), []string{"DRAINING_OLD", "CUT_OVER"}; !slices.Equal(got, want) {
					t.Errorf("job %s: replacement_phase events %v, want %v", id, got, want)
				}
			}
			// RUNNING is recorded just before the execution is registered.
			waitFor(t, s, nj.ID, "its execution", func(j *record.Job) bool { return s.core.RunningJob(j.ID) != nil })
			waitElements(t, s, nj.ID, "Events", int64(len(phase2)))
			if _, err := s.Drain(ctx, nj.ID); err != nil {
				t.Fatal(err)
			}
			waitFor(t, s, nj.ID, "DRAINED and committed", drainedAndCommitted)
			// The new job read exactly what the old one had not: its
			// subscription (its own, under a new name with a topic source)
			// started where the old job's stopped.
			if m, err := s.Metrics(nj.ID); err != nil {
				t.Fatal(err)
			} else {
				for _, st := range m.Steps {
					if st.Name == "Events" && st.ElementsIn != int64(len(phase2)) {
						t.Errorf("the new job read %d messages, want the %d published after the old job stopped", st.ElementsIn, len(phase2))
					}
				}
			}
			newSize, _ := time.ParseDuration(tc.size)
			want := append(truth(phase1, 10*time.Second), truth(phase2, newSize)...)
			sort.Strings(want)
			got, gens := totalsByGeneration(t, db)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("the table (key window total n):\n%s\nground truth:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			for _, line := range truth(phase2, newSize) {
				if gens[line] != nj.Generation {
					t.Errorf("row %q has generation %d, want the new job's %d", line, gens[line], nj.Generation)
				}
			}
			for _, line := range truth(phase1, 10*time.Second) {
				if gens[line] != old.Generation {
					t.Errorf("row %q has generation %d, want the old job's %d", line, gens[line], old.Generation)
				}
			}
		})
	}
}

// TestStopAndReplaceDrainTimeout: a drain longer than the maximum stop
// duration cancels the old job (default), or, with
// cancel_on_drain_timeout=false, keeps it and says so in both records. The
// old job's end is held open (a test hook) until the timeout is recorded.
func TestStopAndReplaceDrainTimeout(t *testing.T) {
	t.Parallel()
	for _, cancel := range []bool{true, false} {
		t.Run(fmt.Sprintf("cancel=%v", cancel), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			release := make(chan struct{})
			var hold atomic.Value // the old job's ID
			clock := &shiftClock{base: time.Now()}
			s, err := open(ctx, Options{DataDir: filepath.Join(dir, "data"), CheckpointInterval: 50 * time.Millisecond,
				Clock: clock, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}, Hooks{Finishing: func(id string) {
				if v, _ := hold.Load().(string); v == id {
					<-release
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			old := submit(t, s, "sums", streamingYAML, dir)
			hold.Store(old.ID)
			waitFor(t, s, old.ID, "a checkpoint", checkpointed(1))
			clock.advance(DefaultMinReplaceInterval)
			res, err := s.Update(ctx, UpdateRequest{SubmitRequest: streamingReq("sums", dir, "update_strategy_parallel_job_update",
				"parallel_replace_job_max_stop_duration=1m", "weir_replace_rewind=false",
				fmt.Sprintf("parallel_replace_job_cancel_on_drain_timeout=%v", cancel))})
			if err != nil {
				t.Fatal(err)
			}
			clock.advance(time.Minute)
			waitFor(t, s, res.Job.ID, "the drain timeout recorded", func(j *record.Job) bool { return j.Replacement.DrainTimedOut })
			if cancel {
				waitFor(t, s, old.ID, "CANCELLING", func(j *record.Job) bool { return j.State == record.StateCancelling })
			}
			close(release)
			fin := waitPhase(t, s, res.Job.ID)
			o, _ := s.Get(old.ID)
			if fin.Replacement.Phase != record.PhaseCutOver || fin.State != record.StateRunning || len(fin.Replacement.Notes) == 0 {
				t.Fatalf("new job: %s %+v", fin.State, fin.Replacement)
			}
			if cancel && (o.State != record.StateCancelled || !strings.Contains(fin.Replacement.Notes[0], "was cancelled")) {
				t.Fatalf("old job %s, notes %q; want CANCELLED", o.State, fin.Replacement.Notes)
			}
			if !cancel && (o.State != record.StateDrained || !strings.Contains(o.Replacement.Notes[0], "both jobs are kept")) {
				t.Fatalf("old job %s, notes %q; want DRAINED and kept", o.State, o.Replacement.Notes)
			}
		})
	}
}

// phaseEvents returns the phases of job id's replacement_phase events, in
// order.
func phaseEvents(t *testing.T, s *Service, id string) []string {
	t.Helper()
	var phases []string
	for _, e := range eventsOf(t, s, id, record.EventReplacementPhase) {
		phases = append(phases, fmt.Sprint(e.Details["phase"]))
	}
	return phases
}
