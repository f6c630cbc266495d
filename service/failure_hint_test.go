package service

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/io/pubsub"
)

// TestFailedPubSubJobSaysHowToResume: a streaming job whose execution
// fails because its subscription was deleted (with force) under it is
// FAILED with an error that says so, names the last committed checkpoint
// and how to reprocess what came after.
func TestFailedPubSubJobSaysHowToResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b := startBroker(t, dir, "update-events")
	s := openServiceWithBroker(t, filepath.Join(dir, "data"), b)
	j := submit(t, s, "sums", fmt.Sprintf(pubsubUpdateYAML, "", "Events", filepath.Join(dir, "totals.sqlite")), dir)
	for i := range 5 {
		if _, err := b.Publish(ctx, "update-events", fmt.Appendf(nil, `{"key": "k%d", "amount": %d}`, i, i), nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, s, j.ID, "a checkpoint", checkpointed(2))
	if err := b.DeleteSubscription(ctx, pubsub.SubscriptionName("sums", "Events")); err != nil {
		t.Fatal(err)
	}
	j = waitState(t, s, j.ID, record.StateFailed)
	for _, want := range []string{"reading subscription sums--Events: subscription not found: it was deleted while the job read it",
		"up to checkpoint", "weir subscriptions create", "weir subscriptions seek"} {
		if !strings.Contains(j.Error, want) {
			t.Errorf("error %q lacks %q", j.Error, want)
		}
	}
}

// TestAssertEqualFailsAServerJob: a failed AssertEqual fails a server job,
// as Beam fails the pipeline; it is no dead letter.
func TestAssertEqualFailsAServerJob(t *testing.T) {
	t.Parallel()
	s := openService(t, t.TempDir())
	const assert = `pipeline:
  transforms:
    - type: Create
      name: Orders
      config:
        elements: [{a: 1}, {a: 2}]
    - type: AssertEqual
      name: Check
      input: Orders
      config:
        elements: [{a: 1}, {a: 3}]
`
	j := submit(t, s, "assert", assert, t.TempDir())
	j = waitState(t, s, j.ID, record.StateFailed)
	if !strings.Contains(j.Error, `assert_equal: AssertEqual "Check" (assert.yaml:7:13)`) || !strings.Contains(j.Error, `1 missing (expected, not in the input): {"a":3}`) {
		t.Errorf("error %q: want the failed AssertEqual", j.Error)
	}
	if j.DeadLetters != 0 {
		t.Errorf("dead letters %d, want 0", j.DeadLetters)
	}
}

// TestSourceIDConflictMetric: a job whose ReadFromPubSub de-duplicates by
// id_field counts a message that reuses an ID for other data (dropped) in
// its step's duplicate_id_conflicts; a plain repeat is not counted.
func TestSourceIDConflictMetric(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b := startBroker(t, dir, "id-events")
	s := openServiceWithBroker(t, filepath.Join(dir, "data"), b)
	const yaml = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Events
      config:
        topic: id-events
        schema: {id: string, amount: int}
        id_field: id
    - type: LogForTesting
      name: Log
      input: Events
`
	j := submit(t, s, "ids", yaml, dir)
	waitFor(t, s, j.ID, "a checkpoint", checkpointed(1))
	// Published without a message ID: the topic stores all four, the
	// source's dedupe window drops the last two.
	for _, m := range []string{`{"id": "a", "amount": 1}`, `{"id": "b", "amount": 2}`, `{"id": "a", "amount": 1}`, `{"id": "b", "amount": 3}`} {
		if _, err := b.Publish(ctx, "id-events", []byte(m), nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, s, j.ID, "the reused ID counted", func(j *record.Job) bool {
		m, err := s.Metrics(j.ID)
		if err != nil {
			return false
		}
		for _, st := range m.Steps {
			if st.Name == "Events" && st.DuplicateIDConflicts != nil {
				if *st.DuplicateIDConflicts != 1 {
					t.Fatalf("Events counts %d ID conflicts, want 1", *st.DuplicateIDConflicts)
				}
				return st.ElementsOut == 2
			}
		}
		return false
	})
}
