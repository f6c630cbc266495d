package service

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/service/record"
)

// usYAML reads events and upserts the latest amount per key into a
// staged SQLite table, as an int (%[2]s empty) or as a string.
const usYAML = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Events
      config:
        subscription: sr-sub
        schema: {key: string, amount: int, ts: string}
        timestamp_field: ts
    - type: MapToFields
      name: Last
      input: Events
      config:
        fields: {key: key, last: %[2]s}
    - type: WriteToSql
      name: WriteLast
      input: Last
      config: {driver: sqlite, dsn: %[1]q, table: last_amounts, key: [key], layout: staged, merge_interval: 0}
`

// TestUpdateChecksSinksTheOldJobSetUpMeanwhile: a sink sets its table up
// at its job's first commit. An update requested before the running
// job's first commit checked the new pipeline's sink against nothing; the
// running job then committed (setting up its staging table, the amounts as
// ints) before the update paused it, and the new job — writing strings,
// a conversion it does not declare — replaced it and could only fail at
// its own first commit. The update checks the sinks again once the old
// job can commit nothing more: it is refused and the job runs on.
func TestUpdateChecksSinksTheOldJobSetUpMeanwhile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "last.sqlite")
	b := startBroker(t, dir, "sr-events")
	if _, err := b.CreateSubscription(ctx, "sr-sub", "sr-events", pubsub.SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	// No periodic checkpoint: the running job commits when the test says.
	s, err := Open(ctx, Options{DataDir: filepath.Join(dir, "data"), CheckpointInterval: time.Hour,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Broker: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })

	v1 := fmt.Sprintf(usYAML, db, "amount")
	v2 := fmt.Sprintf(usYAML, db, `"string(amount)"`)
	j1 := submit(t, s, "last", v1, dir)
	evs := srEvents(8, 0, 1)
	publishEvents(t, b, evs)
	// Without periodic checkpoints the source reads a few messages (it
	// waits for acknowledgements): one is enough to commit.
	waitElements(t, s, j1.ID, "Events", 1)

	// Between the update's first check and its pause, the running job
	// commits for the first time, setting its staging table up.
	var committed error
	s.core.Hooks.Checked = func(id string) {
		jr := s.core.RunningJob(id)
		if jr == nil {
			committed = fmt.Errorf("job %s is not running", id)
			return
		}
		committed = s.core.Checkpoint(jr, nil)
	}
	_, err = s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "last", Pipeline: v2, PipelineFile: "last.yaml", BaseDir: dir}})
	if committed != nil {
		t.Fatalf("the running job's commit: %v", committed)
	}
	if err == nil || errcode.Of(err) != errcode.SQLSchemaChangeRefused || !strings.Contains(err.Error(), "convert: [last]") {
		t.Fatalf("update: %v (code %s), want %s naming the declaration it lacks", err, errcode.Of(err), errcode.SQLSchemaChangeRefused)
	}
	cur, err := s.Get("last")
	if err != nil {
		t.Fatal(err)
	}
	if cur.ID != j1.ID || cur.State != record.StateRunning || s.core.RunningJob(j1.ID) == nil {
		t.Fatalf("after the refused update the name is job %s %s, want %s running", cur.ID, cur.State, j1.ID)
	}
	// The job runs on, never paused: it still checkpoints.
	if err := s.core.Checkpoint(s.core.RunningJob(j1.ID), nil); err != nil {
		t.Fatalf("a checkpoint of the job after the refused update: %v", err)
	}
}
