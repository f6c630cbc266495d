package service

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/io/pubsub"
)

// hoYAML reads topic ho-a (through the subscription the service names
// after the job) and the user's named subscription ho-sub of topic ho-b,
// sums both per key in fixed 10s windows of event time (no idle
// advancement: the watermark follows event time) and upserts the totals
// into table totals of %s.
const hoYAML = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: A
      config: {topic: ho-a, schema: {key: string, amount: int, ts: string}, timestamp_field: ts, idle_timeout: 24h}
    - type: ReadFromPubSub
      name: B
      config: {subscription: ho-sub, schema: {key: string, amount: int, ts: string}, timestamp_field: ts, idle_timeout: 24h}
    - type: Flatten
      name: Both
      input: [A, B]
    - type: Combine
      name: Sums
      input: Both
      windowing: {type: fixed, size: 10s}
      config:
        group_by: [key]
        combine:
          total: {value: amount, fn: sum}
          n: {value: amount, fn: count}
    - type: WriteToSql
      name: WriteTotals
      input: Sums
      config: {dsn: %q, table: totals, key: [key]}
`

// TestStopAndReplaceNewNameTopicAndNamed: a stop-and-replace under a new
// name (re-reading retained input, the default) of a job that reads a
// topic and a named subscription. The topic's subscription, the old
// job's, is handed over to the new job's own (sums-v2--A) at the rewind
// point and then deleted; the named subscription ho-sub, the user's, is
// read by the new job itself, re-read from the rewind point too, and kept.
// The windows open at the cut (the old job's watermark, 10s of allowed
// out-of-orderness behind its newest event at 24s, was at 14s) get more
// messages on both topics after the old job stopped, and
// the new job's total for each — which wins in the table — counts every
// message of both topics: every (key, window) total equals the ground
// truth.
func TestStopAndReplaceNewNameTopicAndNamed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, b, clock := openParallel(t, dir) // its broker, with topics of our own
	for _, topic := range []string{"ho-a", "ho-b"} {
		if _, err := b.CreateTopic(ctx, topic, pubsub.TopicConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.CreateSubscription(ctx, "ho-sub", "ho-b", pubsub.SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "totals.sqlite")
	p := fmt.Sprintf(hoYAML, db)
	var all []srEvent
	publish := func(topic string, evs []srEvent) {
		t.Helper()
		for _, e := range evs {
			msg := fmt.Sprintf(`{"key": %q, "amount": %d, "ts": %q}`, e.key, e.amount, e.at.Format(time.RFC3339))
			if _, err := b.Publish(ctx, topic, []byte(msg), nil, ""); err != nil {
				t.Fatal(err)
			}
		}
		all = append(all, evs...)
	}
	old := submit(t, s, "sums", p, dir)
	a1, b1 := parEvents(srBase, 0, 25, 1), parEvents(srBase, 0, 25, 500)
	publish("ho-a", a1)
	publish("ho-b", b1)
	waitElements(t, s, old.ID, "A", int64(len(a1)))
	waitElements(t, s, old.ID, "B", int64(len(b1)))
	waitAcked(t, s, b, pubsub.SubscriptionName("sums", "A"))
	waitAcked(t, s, b, "ho-sub")
	clock.advance(DefaultMinReplaceInterval)
	nj, err := s.Submit(ctx, SubmitRequest{Name: "sums-v2", Pipeline: p, BaseDir: dir,
		ServiceOptions: []string{"parallel_replace_job_name=sums", "parallel_replace_job_max_stop_duration=5m"}})
	if err != nil {
		t.Fatalf("stop-and-replace under a new name: %v", err)
	}
	waitFor(t, s, old.ID, "DRAINED", func(j *record.Job) bool { return j.State.Terminal() })
	a2, b2 := parEvents(srBase, 25, 40, 2000), parEvents(srBase, 25, 40, 3000)
	publish("ho-a", a2)
	publish("ho-b", b2)
	fin := waitPhase(t, s, nj.ID)
	hs := fin.Replacement.Handover
	if fin.Replacement.Phase != record.PhaseCutOver || fin.State != record.StateRunning || len(hs) != 1 || hs[0].Step != "A" || hs[0].Old != "sums--A" ||
		hs[0].New != "sums-v2--A" || !hs[0].Positioned || !hs[0].OldDeleted {
		t.Fatalf("new job after the flow: %s %+v (error %q)", fin.State, fin.Replacement, fin.Error)
	}
	if rp := fin.Replacement.RewindPoint; rp == nil || len(rp.Sources) != 2 || rp.FromTime.After(srBase.Add(20*time.Second)) {
		t.Fatalf("rewind point %+v, want both sources re-read from %s or earlier", rp, srBase.Add(20*time.Second))
	}
	if _, err := b.Subscription(ctx, "sums--A"); !errors.Is(err, pubsub.ErrSubscriptionNotFound) {
		t.Errorf("the old job's subscription sums--A after the cut-over: %v, want deleted", err)
	}
	if _, err := b.Subscription(ctx, "ho-sub"); err != nil {
		t.Errorf("the user's subscription ho-sub after the cut-over: %v, want kept", err)
	}
	waitAcked(t, s, b, "sums-v2--A")
	waitAcked(t, s, b, "ho-sub")
	if _, err := s.Drain(ctx, nj.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, nj.ID, "DRAINED and committed", drainedAndCommitted)
	view := sqliteView(t, db)
	defer view.close()
	if diff := diffTotals(startConsumer(s, view).finish(t), parTruth(all)); diff != "" {
		t.Fatalf("the table against the ground truth:\n%s", diff)
	}
}
