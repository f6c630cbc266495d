package pubsub_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/yamlpipe"
)

const dedupePipeline = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: In
      config: {topic: in, schema: {k: int, id: string}, id_field: id}
    - type: WriteToPubSub
      name: Out
      input: In
      config: {topic: out}
`

// TestInPlaceUpdateHandsOverDedupeIDs: at an in-place update (an execution
// paused at a checkpoint, a new one started from it adopting the old one),
// the runner hands the old ReadFromPubSub source's memory of message IDs
// to the new source: the new source reads nothing back from the topic (the
// read-back that paused every de-duplicating job's update), and a message
// republished after the update with an ID read before it is still dropped.
func TestInPlaceUpdateHandsOverDedupeIDs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, err := pubsub.StartEmbedded(ctx, pubsub.Options{StoreDir: dir + "/broker", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Shutdown(ctx) })
	for _, topic := range []string{"in", "out"} {
		if _, err := b.CreateTopic(ctx, topic, pubsub.TopicConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	job := &yamlpipe.JobEnv{Name: "dedupe-job", ID: "job-1", Generation: 1, DataDir: dir, Broker: b}
	load := func() *contract.Program {
		p, err := yamlpipe.Load("p.yaml", []byte(dedupePipeline), yamlpipe.Options{BaseDir: dir, Job: job})
		if err != nil {
			t.Fatal(err)
		}
		return p.Program()
	}
	publish := func(k int, id string) {
		if _, err := b.Publish(ctx, "in", []byte(fmt.Sprintf(`{"k": %d, "id": %q}`, k, id)), nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	emitted := func(x *runner.Execution, n int64) {
		t.Helper()
		if !await.Until(30*time.Second, 5*time.Millisecond, func() bool { return x.Metrics().Step("In").ElementsOut >= n }) {
			t.Fatalf("the source emitted %d elements, want %d", x.Metrics().Step("In").ElementsOut, n)
		}
	}
	x, err := runner.Start(ctx, load(), runner.Options{NumWorkers: 1, Checkpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	publish(1, "a")
	publish(2, "b")
	emitted(x, 2)
	cp, err := x.Pause(ctx)
	if err != nil {
		t.Fatal(err)
	}
	prog := load()
	x2, err := runner.Start(ctx, prog, runner.Options{NumWorkers: 1, Checkpoints: true,
		Restore: &contract.Restore{Epoch: cp.Epoch, Positions: cp.Positions},
		Adopt:   &runner.Adoption{From: x, Steps: map[string]string{}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	x.Cancel()
	x.Wait()
	defer func() {
		x2.Cancel()
		x2.Wait()
	}()
	publish(3, "a") // a publisher's retry across the update
	publish(4, "c")
	emitted(x2, 1)
	// Once a checkpoint covers c (sequence 4), both were handled.
	sub := pubsub.SubscriptionName("dedupe-job", "In")
	if !await.Until(30*time.Second, 5*time.Millisecond, func() bool {
		cp, err := x2.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := x2.Commit(ctx, cp); err != nil {
			t.Fatal(err)
		}
		info, err := b.Subscription(ctx, sub)
		return err == nil && info.AckFloor >= 4
	}) {
		t.Fatal("no checkpoint of the new execution covered the messages published after the update")
	}
	if got := x2.Metrics().Step("In").ElementsOut; got != 1 {
		t.Errorf("the new execution emitted %d elements, want 1 (c; the retried a dropped)", got)
	}
	src := prog.Code["In"].(*pubsub.Source)
	if rb := src.ReadBack(); rb.Resumes != 0 {
		t.Errorf("the new source read the IDs back from the topic (%+v): the handover did not happen", rb)
	}
}
