package service

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/io/pubsub"
)

// recipeYAML sums the amounts of topic recipe-events per key in the global
// window (fired at the drain) into an upserting SQLite table.
const recipeYAML = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Events
      config:
        topic: recipe-events
        schema: {key: string, amount: int}
    - type: Combine
      name: Sums
      input: Events
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

// publishRecipe publishes messages from..to (exclusive) over 5 keys, with
// amount i, and adds them to want (key → total, count).
func publishRecipe(t *testing.T, b *pubsub.Broker, from, to int, want map[string][2]int64) {
	t.Helper()
	for i := from; i < to; i++ {
		key := fmt.Sprintf("k%d", i%5)
		if _, err := b.Publish(context.Background(), "recipe-events", []byte(fmt.Sprintf(`{"key": %q, "amount": %d}`, key, i)), nil, ""); err != nil {
			t.Fatal(err)
		}
		if want != nil {
			w := want[key]
			want[key] = [2]int64{w[0] + int64(i), w[1] + 1}
		}
	}
}

// totalsTable reads the SQLite table totals of db as "key total n" lines,
// ordered by key.
func totalsTable(t *testing.T, db string) []string {
	t.Helper()
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	q, err := conn.Query(`SELECT key, total, n FROM totals ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var got []string
	for q.Next() {
		var key string
		var total, n int64
		if err := q.Scan(&key, &total, &n); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %d %d", key, total, n))
	}
	if err := q.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func rowsOf(want map[string][2]int64) []string {
	var out []string
	for k, w := range want {
		out = append(out, fmt.Sprintf("%s %d %d", k, w[0], w[1]))
	}
	sort.Strings(out)
	return out
}

// waitBacklog waits until subscription sub has nothing unacknowledged.
func waitBacklog(t *testing.T, s *Service, b *pubsub.Broker, sub string) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		changed := s.core.Changes.Next()
		info, err := b.Subscription(context.Background(), sub)
		if err == nil && info.Backlog == 0 {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("subscription %s keeps a backlog: %+v %v", sub, info, err)
		}
	}
}

// TestSnapshotSourcesReprocessing covers (d): a job snapshot with
// snapshot_sources takes a subscription snapshot at exactly the cut's
// position; after the job is cancelled and the subscription sought back
// to it, a new job of the name reprocesses exactly the messages after the
// cut — its totals and counts per key equal those of what was published
// after the cut, none before it, none twice. Deleting the job snapshot
// deletes the subscription snapshot.
func TestSnapshotSourcesReprocessing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := pubsub.StartEmbedded(ctx, pubsub.Options{StoreDir: filepath.Join(dir, "broker"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Shutdown(context.Background()) })
	if _, err := b.CreateTopic(ctx, "recipe-events", pubsub.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	s := openServiceWithBroker(t, filepath.Join(dir, "data"), b)
	db := filepath.Join(dir, "totals.sqlite")
	y := fmt.Sprintf(recipeYAML, db)
	sub := pubsub.SubscriptionName("sums", "Events")

	j := submit(t, s, "sums", y, dir)
	waitFor(t, s, j.ID, "RUNNING", func(j *record.Job) bool { return j.State == record.StateRunning })
	publishRecipe(t, b, 0, 400, nil)
	waitBacklog(t, s, b, sub)

	snap, err := s.CreateSnapshot(ctx, SnapshotRequest{Job: "sums", SnapshotSources: true})
	if err != nil {
		t.Fatalf("CreateSnapshot with sources: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if snap, err = s.WaitSnapshot(wctx, snap.ID); err != nil || snap.State != record.SnapshotReady {
		t.Fatalf("snapshot: %+v %v", snap, err)
	}
	if len(snap.PubsubMetadata) != 1 {
		t.Fatalf("pubsub_metadata = %+v, want one entry", snap.PubsubMetadata)
	}
	m := snap.PubsubMetadata[0]
	if m.Subscription != sub || m.Topic != "recipe-events" || m.SnapshotName != snap.ID+"--"+sub || m.ExpireTime.IsZero() {
		t.Fatalf("pubsub_metadata[0] = %+v", m)
	}
	var cutPos struct {
		StreamSeq uint64 `json:"stream_seq"`
	}
	if err := json.Unmarshal(snap.Positions["Events"][0], &cutPos); err != nil {
		t.Fatal(err)
	}
	ss, err := b.SubscriptionSnapshot(ctx, m.SnapshotName)
	if err != nil || ss.AckFloor != cutPos.StreamSeq || ss.Topic != "recipe-events" {
		t.Fatalf("subscription snapshot %+v %v, want ack floor %d (the cut's position)", ss, err, cutPos.StreamSeq)
	}

	// All 400 were acknowledged (at a checkpoint) before the cut.
	if cutPos.StreamSeq != 400 {
		t.Fatalf("the cut's position is %d, want 400", cutPos.StreamSeq)
	}
	// Messages after the cut; the job reads them too, then is cancelled.
	want := map[string][2]int64{}
	publishRecipe(t, b, 400, 700, want)
	waitBacklog(t, s, b, sub)
	cancelAndWait(t, s, j.ID)

	res, err := b.Seek(ctx, sub, pubsub.SeekTarget{Snapshot: m.SnapshotName})
	if err != nil {
		t.Fatalf("seek to the job snapshot's subscription snapshot: %v", err)
	}
	if res.Backlog != 300 {
		t.Fatalf("after the seek the backlog is %d, want 300 (the messages after the cut)", res.Backlog)
	}
	j2 := submit(t, s, "sums", y, dir)
	waitBacklog(t, s, b, sub)
	if _, err := s.Drain(ctx, j2.ID); err != nil {
		t.Fatal(err)
	}
	fin := waitFor(t, s, j2.ID, "DRAINED and committed", func(j *record.Job) bool {
		return j.State == record.StateDrained && !j.PendingCommit || j.State.Terminal() && j.State != record.StateDrained
	})
	if fin.State != record.StateDrained {
		t.Fatalf("the reprocessing job ended %s: %s", fin.State, fin.Error)
	}
	if got, want := totalsTable(t, db), rowsOf(want); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the reprocessing job's table (key total count):\n%s\nwhat was published after the cut:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	if _, err := s.DeleteSnapshot(snap.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SubscriptionSnapshot(ctx, m.SnapshotName); err == nil {
		t.Fatalf("the subscription snapshot %s outlived its job snapshot", m.SnapshotName)
	}
}

// TestSnapshotSourcesWithoutBroker: snapshot_sources on a service without
// a broker is refused before anything is recorded.
func TestSnapshotSourcesWithoutBroker(t *testing.T) {
	t.Parallel()
	s := openService(t, t.TempDir())
	_, err := s.CreateSnapshot(context.Background(), SnapshotRequest{Job: "none", SnapshotSources: true})
	if errcode.Of(err) != errcode.InvalidRequest {
		t.Fatalf("snapshot_sources without a broker: %v, want INVALID_REQUEST", err)
	}
	if list, err := s.ListSnapshots("", true); err != nil || len(list) != 0 {
		t.Fatalf("snapshots recorded: %v %v", list, err)
	}
}
