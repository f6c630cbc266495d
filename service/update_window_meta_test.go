package service

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/state"
)

// windowMetaYAML joins per user and one-minute window the sales total of
// a topic (its flag big appended after the Combine's fields) with the
// visit count of another, into an upserting SQLite table. %[1]s is
// "language: python" (Combines written for Beam, whose rows are the
// group_by fields and the aggregates, the window and pane being metadata)
// or a comment (weir's Combines, whose rows also have window_start,
// window_end and pane fields, as weir 8e672fd gave a windowed Combine with
// language too); %[2]s is the database.
const windowMetaYAML = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Sales
      config: {topic: wm-sales, schema: {user: string, amount: int, ts: timestamp}, timestamp_field: ts, max_out_of_orderness: 0s, idle_timeout: 1h}
    - type: ReadFromPubSub
      name: Visits
      config: {topic: wm-visits, schema: {user: string, ts: timestamp}, timestamp_field: ts, max_out_of_orderness: 0s, idle_timeout: 1h}
    - type: Combine
      name: SumPerUser
      input: Sales
      windowing: {type: fixed, size: 60s}
      config:
        %[1]s
        group_by: user
        combine:
          total: {value: amount, fn: sum}
    - type: MapToFields
      name: Flag
      input: SumPerUser
      config:
        append: true
        fields: {big: "total >= 10"}
    - type: Combine
      name: VisitsPerUser
      input: Visits
      windowing: {type: fixed, size: 60s}
      config:
        %[1]s
        group_by: user
        combine:
          visits: {value: user, fn: count}
    - type: Join
      name: Joined
      input: {s: Flag, v: VisitsPerUser}
      config:
        equalities: user
        fields: {s: [user, total, big], v: [visits]}
    - type: WriteToSql
      name: WriteJoined
      input: Joined
      config: {dsn: %[2]s, table: joined, key: [user]}
`

// TestUpdateJoinStoredBeforeWindowMetadata: a running job whose stored
// graph predates window and pane becoming element metadata (its Combines'
// rows carry window_start, window_end and pane, and so do the rows its
// Join stores) is updated in place by the pipeline whose Combines have
// Beam's rows. The Join holds one window's sales rows at the update (the
// visits' watermark keeps the window open); after the update more visits
// close it. The check warns (STORED_WINDOW_FIELDS_DROPPED for the Join,
// COMBINE_FN_CHANGED for the count) and lets the update go ahead; the
// joined rows are exactly those the new pipeline gives for all the input.
//
// Two ways the old rows reach the new Join (big sat after the window
// fields in the old rows, so a row read by position would be wrong):
//   - in memory: the update adopts the running old-shape execution's state;
//   - after an upgrade: the server stops, its job's pipeline is today's
//     file (as when the binary that loads it changed) while its stored
//     graph stays the old one, the server restarts (the job resumes,
//     reading the old rows from the store), then the update runs.
func TestUpdateJoinStoredBeforeWindowMetadata(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		upgrade bool
	}{{"in memory", false}, {"after an upgrade", true}} {
		t.Run(tc.name, func(t *testing.T) { testUpdateJoinStoredBeforeWindowMetadata(t, tc.upgrade) })
	}
}

func testUpdateJoinStoredBeforeWindowMetadata(t *testing.T, upgrade bool) {
	ctx := context.Background()
	dir := t.TempDir()
	b := startBroker(t, dir, "wm-sales", "wm-visits")
	dataDir := filepath.Join(dir, "data")
	open := func() *Service { return openServiceWithBroker(t, dataDir, b) }
	s := open()
	db := filepath.Join(dir, "joined.sqlite")
	oldYAML := fmt.Sprintf(windowMetaYAML, "# weir's Combine", db)
	newYAML := fmt.Sprintf(windowMetaYAML, "language: python", db)

	j := submit(t, s, "joined", oldYAML, dir)
	stored, err := graph.Parse(j.Graph)
	if err != nil {
		t.Fatal(err)
	}
	if st := stored.Step("Joined/group"); st == nil || st.StoredCoder == nil || !strings.Contains(st.StoredCoder.String(), "window_start:timestamp,window_end:timestamp,pane:row") {
		t.Fatalf("the running job's Join does not store rows with window fields: %+v", st)
	}
	publish := func(topic string, msgs ...string) {
		t.Helper()
		for _, m := range msgs {
			if _, err := b.Publish(ctx, topic, []byte(m), nil, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	at := func(sec int) string {
		return time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).Add(time.Duration(sec) * time.Second).Format("2006-01-02T15:04:05.000Z")
	}
	sale := func(user string, amount, sec int) string {
		return fmt.Sprintf(`{"user": %q, "amount": %d, "ts": %q}`, user, amount, at(sec))
	}
	visit := func(user string, sec int) string { return fmt.Sprintf(`{"user": %q, "ts": %q}`, user, at(sec)) }

	// Window [0s, 60s): the sales close it (a sale at 90s moves their
	// watermark past it), the visits do not, so the Join stores the
	// window's two sales rows.
	publish("wm-sales", sale("alice", 5, 10), sale("alice", 7, 20), sale("bob", 3, 30), sale("carol", 4, 90))
	publish("wm-visits", visit("alice", 15), visit("alice", 25), visit("bob", 20))
	waitElements(t, s, j.ID, "Joined/group", 2)
	waitElements(t, s, j.ID, "VisitsPerUser", 3)

	if upgrade {
		// A checkpoint after the Join stored the rows, then the server
		// stops; the job's record gets today's file, its graph stays.
		cur, err := s.Get(j.ID)
		if err != nil {
			t.Fatal(err)
		}
		var epoch uint64
		if cur.LastCheckpoint != nil {
			epoch = cur.LastCheckpoint.Epoch
		}
		waitFor(t, s, j.ID, "a checkpoint after the Join's rows", checkpointed(epoch+2))
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		st, err := state.Open(filepath.Join(dataDir, "state"), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := st.Get(record.JobKey(j.ID))
		if err != nil {
			t.Fatal(err)
		}
		var rec record.Job
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		rec.Pipeline = newYAML
		w := &state.Write{}
		if err := core.PutJSON(w, record.JobKey(j.ID), &rec); err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(st.Apply(w), st.Close()); err != nil {
			t.Fatal(err)
		}
		s = open()
		<-s.Recovered()
		waitFor(t, s, j.ID, "RUNNING again", func(j *record.Job) bool { return j.State == record.StateRunning })
	}

	res, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "joined", Pipeline: newYAML, BaseDir: dir}})
	if err != nil {
		var text strings.Builder
		if res != nil {
			_ = res.Report.WriteText(&text)
		}
		t.Fatalf("update: %v\n%s", err, text.String())
	}
	var warnings []string
	for _, w := range res.Report.Warnings {
		warnings = append(warnings, w.Step+" "+string(w.Code))
	}
	if got, want := strings.Join(warnings, ", "), "Joined/group STORED_WINDOW_FIELDS_DROPPED, VisitsPerUser COMBINE_FN_CHANGED"; got != want {
		t.Errorf("warnings: %s, want %s", got, want)
	}
	j = res.Job

	// After the update: one more visit in the open window, then visits
	// past it close it; carol's second window gets a sale and a visit.
	publish("wm-visits", visit("alice", 40), visit("carol", 95), visit("dave", 100))
	publish("wm-sales", sale("carol", 6, 100))
	waitBacklog(t, s, b, pubsub.SubscriptionName("joined", "Sales"))
	waitBacklog(t, s, b, pubsub.SubscriptionName("joined", "Visits"))
	if _, err := s.Drain(ctx, "joined"); err != nil {
		t.Fatal(err)
	}
	fin := waitFor(t, s, j.ID, "DRAINED and committed", drainedAndCommitted)
	if fin.State != record.StateDrained {
		t.Fatalf("after the drain: %s", fin.State)
	}
	want := []string{
		at(0) + " alice 12 true 3",
		at(0) + " bob 3 false 1",
		at(60) + " carol 10 true 1",
	}
	if got := joinedTable(t, db); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the table holds (window_start user total big visits):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// joinedTable reads the rows of TestUpdateJoinStoredBeforeWindowMetadata's
// table, sorted by window and user.
func joinedTable(t *testing.T, db string) []string {
	t.Helper()
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	q, err := conn.Query(`SELECT window_start, user, total, big, visits FROM joined ORDER BY window_start, user`)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var got []string
	for q.Next() {
		var start, user string
		var total, visits int64
		var big bool
		if err := q.Scan(&start, &user, &total, &big, &visits); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s %d %t %d", start, user, total, big, visits))
	}
	if err := q.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}
