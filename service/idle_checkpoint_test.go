package service

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// TestIdleJobSkipsCheckpoints: a streaming job that reads nothing takes no
// periodic checkpoint (it would persist nothing new) until its idle
// checkpoint interval passes; the first message makes it checkpoint again
// at the next interval.
func TestIdleJobSkipsCheckpoints(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := startBroker(t, dir, "orders")
	s, err := Open(context.Background(), Options{DataDir: dir, CheckpointInterval: 20 * time.Millisecond, IdleCheckpointInterval: time.Hour,
		Clock: testClock{base: time.Now()}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Broker: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	j := submit(t, s, "orders", `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Read
      config: {topic: orders, format: json, schema: {region: string, amount: int}}
    - type: Combine
      name: Totals
      input: Read
      windowing: {type: fixed, size: 1m}
      config:
        group_by: region
        combine: {total: {value: amount, fn: sum}}
`, dir)
	first := waitFor(t, s, j.ID, "its first checkpoint", checkpointed(1))
	// Twenty supervisor ticks (each notifies a change) without input: no
	// checkpoint.
	for range 20 {
		<-s.core.Changes.Next()
	}
	got, err := s.Get(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.LastCheckpoint.Epoch != first.LastCheckpoint.Epoch {
		t.Fatalf("an idle job checkpointed: epoch %d, then %d", first.LastCheckpoint.Epoch, got.LastCheckpoint.Epoch)
	}
	if _, err := b.Publish(context.Background(), "orders", []byte(`{"region":"N","amount":5}`), nil, ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, j.ID, "a checkpoint after input", checkpointed(got.LastCheckpoint.Epoch+1))
}
