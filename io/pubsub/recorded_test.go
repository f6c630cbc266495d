package pubsub

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/runner/contract"
)

// TestReadRetainedChangesNothing reads a topic's retained messages by
// time and by sequence, in pages, and checks that the subscription on the
// topic is left exactly as it was (nothing delivered, nothing
// acknowledged) and that no subscription was added.
func TestReadRetainedChangesNothing(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	if _, err := b.CreateTopic(ctx, "orders", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateSubscription(ctx, "orders-sub", "orders", SubscriptionConfig{}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := b.Publish(ctx, "orders", []byte(fmt.Sprintf(`{"region":"N","amount":%d,"ts":"2026-03-01T00:0%d:00Z"}`, i, i)), map[string]string{"k": "v"}, fmt.Sprintf("id-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// The subscription counts a published message a moment after the
	// publish is acknowledged: take "before" once it counts all ten.
	var before SubscriptionInfo
	if !await.Until(10*time.Second, 5*time.Millisecond, func() bool {
		s, err := b.Subscription(ctx, "orders-sub")
		if err != nil {
			t.Fatal(err)
		}
		before = s
		return s.NumPending == 10
	}) {
		t.Fatalf("the subscription counts %d pending messages, want the 10 published", before.NumPending)
	}
	all, err := b.ReadRetained(ctx, "orders", 0, time.Time{}, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Messages) != 10 || !all.Done || all.Messages[0].Sequence != 1 || all.Messages[9].ID != "id-9" || all.Messages[3].Attributes["k"] != "v" {
		t.Fatalf("read %d messages (done %v): %+v", len(all.Messages), all.Done, all.Messages)
	}
	// The middle: the publish time of the fifth message; the first message
	// published at or after it (the fifth, or an earlier one stamped the
	// same nanosecond).
	mid := all.Messages[4].PublishTime
	first := uint64(5)
	for first > 1 && !all.Messages[first-2].PublishTime.Before(mid) {
		first--
	}
	since, err := b.ReadRetained(ctx, "orders", 0, mid, time.Time{}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(since.Messages) != 3 || since.Messages[0].Sequence != first || since.Done || since.Next != first+3 {
		t.Fatalf("since the middle, 3 at most: %d messages from %d, next %d, done %v", len(since.Messages), since.Messages[0].Sequence, since.Next, since.Done)
	}
	rest, err := b.ReadRetained(ctx, "orders", since.Next, time.Time{}, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest.Messages) != int(10-first-2) || rest.Messages[0].Sequence != first+3 || !rest.Done {
		t.Fatalf("the rest: %d messages, done %v", len(rest.Messages), rest.Done)
	}
	until, err := b.ReadRetained(ctx, "orders", 0, time.Time{}, mid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(until.Messages) != int(first-1) || !until.Done {
		t.Fatalf("until the middle: %d messages, done %v", len(until.Messages), until.Done)
	}
	after, err := b.Subscription(ctx, "orders-sub")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("the subscription changed:\nbefore %+v\nafter  %+v", before, after)
	}
	subs, err := b.ListSubscriptions(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != 1 {
		t.Errorf("%d subscriptions after reading, want 1", len(subs))
	}

	// Decoded as a ReadFromPubSub source with a timestamp field would.
	src, err := NewSource(b, SourceConfig{Topic: "orders", Subscription: "x", Schema: orderSchema, TimestampField: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	e := src.DecodeRecorded(all.Messages[2])
	if e.Time.String() != "2026-03-01T00:02:00.000Z" || e.Source.Source != "orders" || e.Source.Offset != 3 {
		t.Errorf("decoded %v at %s from %s", e.Value, e.Time, e.Source)
	}
	bad := all.Messages[2]
	bad.Data = []byte(`{"region":`)
	if rj, ok := src.DecodeRecorded(bad).Value.(contract.Reject); !ok || rj.Reason != ReasonMalformedJSON {
		t.Errorf("a malformed message decoded as %v", src.DecodeRecorded(bad).Value)
	}
}
