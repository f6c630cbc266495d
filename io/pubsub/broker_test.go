package pubsub

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/await"
)

func TestTopicsAndSubscriptions(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	steps := []struct {
		name    string
		do      func() error
		wantErr error
	}{
		{"create topic", func() error { _, err := b.CreateTopic(ctx, "orders", TopicConfig{}); return err }, nil},
		{"create it again", func() error { _, err := b.CreateTopic(ctx, "orders", TopicConfig{}); return err }, ErrTopicExists},
		{"create a second topic", func() error {
			_, err := b.CreateTopic(ctx, "payments", TopicConfig{Retention: time.Hour})
			return err
		}, nil},
		{"bad topic name", func() error { _, err := b.CreateTopic(ctx, "a*b", TopicConfig{}); return err }, ErrInvalidName},
		{"empty topic name", func() error { _, err := b.CreateTopic(ctx, "", TopicConfig{}); return err }, ErrInvalidName},
		{"topic name starting with '-'", func() error { _, err := b.CreateTopic(ctx, "-x", TopicConfig{}); return err }, ErrInvalidName},
		{"duplicate window over retention", func() error {
			_, err := b.CreateTopic(ctx, "bad", TopicConfig{Retention: time.Minute, DuplicateWindow: time.Hour})
			return err
		}, ErrInvalidConfig},
		{"delete missing topic", func() error { return b.DeleteTopic(ctx, "nope") }, ErrTopicNotFound},
		{"describe missing topic", func() error { _, err := b.Topic(ctx, "nope"); return err }, ErrTopicNotFound},
		{"subscription on missing topic", func() error {
			_, err := b.CreateSubscription(ctx, "s1", "nope", SubscriptionConfig{})
			return err
		}, ErrTopicNotFound},
		{"create subscription", func() error { _, err := b.CreateSubscription(ctx, "s1", "orders", SubscriptionConfig{}); return err }, nil},
		{"same name on another topic", func() error {
			_, err := b.CreateSubscription(ctx, "s1", "payments", SubscriptionConfig{})
			return err
		}, ErrSubscriptionExists},
		{"ensure on the wrong topic", func() error {
			_, err := b.EnsureSubscription(ctx, "s1", "payments", SubscriptionConfig{})
			return err
		}, ErrSubscriptionExists},
		{"ensure existing", func() error { _, err := b.EnsureSubscription(ctx, "s1", "orders", SubscriptionConfig{}); return err }, nil},
		{"second subscription", func() error {
			_, err := b.CreateSubscription(ctx, "s2", "payments", SubscriptionConfig{})
			return err
		}, nil},
		{"bad subscription name", func() error { _, err := b.CreateSubscription(ctx, "s 3", "orders", SubscriptionConfig{}); return err }, ErrInvalidName},
		{"delete missing subscription", func() error { return b.DeleteSubscription(ctx, "nope") }, ErrSubscriptionNotFound},
		{"list subscriptions of missing topic", func() error { _, err := b.ListSubscriptions(ctx, "nope"); return err }, ErrTopicNotFound},
	}
	for _, s := range steps {
		err := s.do()
		if s.wantErr == nil && err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if s.wantErr != nil && !errors.Is(err, s.wantErr) {
			t.Fatalf("%s: got %v, want %v", s.name, err, s.wantErr)
		}
	}

	topics, err := b.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(names(topics)); got != "[orders payments]" {
		t.Fatalf("topics = %s", got)
	}
	if topics[0].Retention != DefaultRetention || topics[1].Retention != time.Hour || topics[0].DuplicateWindow != DefaultDuplicateWindow {
		t.Errorf("retention/duplicate window not applied: %+v", topics)
	}
	if topics[0].Subject != "weir.topic.orders" || topics[0].Stream != "WEIR_TOPIC_orders" {
		t.Errorf("naming: %+v", topics[0])
	}
	subs, err := b.ListSubscriptions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != 2 || subs[0].Name != "s1" || subs[0].Topic != "orders" || subs[1].Topic != "payments" {
		t.Fatalf("subscriptions = %+v", subs)
	}
	if err := b.DeleteSubscription(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscription(ctx, "s1"); !errors.Is(err, ErrSubscriptionNotFound) {
		t.Fatalf("deleted subscription: %v", err)
	}
	if err := b.DeleteTopic(ctx, "payments"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscription(ctx, "s2"); !errors.Is(err, ErrSubscriptionNotFound) {
		t.Fatalf("subscription of deleted topic: %v", err)
	}
}

func names(ts []TopicInfo) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func TestPublishPull(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	if _, err := b.Publish(ctx, "missing", []byte("x"), nil, ""); !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("publish to missing topic: %v", err)
	}
	if _, err := b.CreateTopic(ctx, "t", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	// Published before the subscription exists: not delivered to it.
	if _, err := b.Publish(ctx, "t", []byte("before"), nil, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateSubscription(ctx, "sub", "t", SubscriptionConfig{AckWait: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateSubscription(ctx, "all", "t", SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, "t", []byte("x"), map[string]string{"Nats-Foo": "1"}, ""); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("reserved attribute: %v", err)
	}
	pubs := []struct {
		data    string
		attrs   map[string]string
		id      string
		wantDup bool
	}{
		{"one", map[string]string{"region": "NORTH", "kind": "order"}, "id-1", false},
		{"one again", nil, "id-1", true},
		{"two", nil, "", false},
		{"three", map[string]string{"region": "WEST"}, "id-3", false},
	}
	for _, p := range pubs {
		res, err := b.Publish(ctx, "t", []byte(p.data), p.attrs, p.id)
		if err != nil {
			t.Fatal(err)
		}
		if res.Duplicate != p.wantDup {
			t.Errorf("publish %q: duplicate = %v, want %v", p.data, res.Duplicate, p.wantDup)
		}
	}
	// The server counts a subscription's pending messages asynchronously
	// after it acknowledged the publish: wait for the count to arrive.
	var info SubscriptionInfo
	await.Until(10*time.Second, 5*time.Millisecond, func() bool {
		var err error
		if info, err = b.Subscription(ctx, "sub"); err != nil {
			t.Fatal(err)
		}
		return info.NumPending >= 3
	})
	if info.NumPending != 3 || info.Backlog != 3 {
		t.Errorf("backlog before pull = %+v, want 3 pending", info)
	}
	got, err := b.Pull(ctx, "sub", 10, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || string(got[0].Data) != "one" || got[0].Attributes["region"] != "NORTH" || got[0].Attributes["kind"] != "order" ||
		got[0].ID != "id-1" || string(got[1].Data) != "two" || got[1].Attributes != nil || got[2].Attributes["region"] != "WEST" {
		t.Fatalf("pulled %+v", got)
	}
	if info, _ := b.Subscription(ctx, "sub"); info.NumAckPending != 3 || info.Backlog != 3 {
		t.Errorf("after pull without ack: %+v", info)
	}
	// Not acknowledged: delivered again after AckWait. The server's timer
	// decides when; pull until all three came back (a pull may catch the
	// server between two of them; each pull acknowledges what it got).
	var again []Message
	await.Until(10*time.Second, 20*time.Millisecond, func() bool {
		more, err := b.Pull(ctx, "sub", 10, true)
		if err != nil {
			t.Fatal(err)
		}
		again = append(again, more...)
		return len(again) >= 3
	})
	if len(again) != 3 || again[0].Sequence != got[0].Sequence || again[0].NumDelivered != 2 {
		t.Fatalf("redelivered %+v", again)
	}
	if info, _ := b.Subscription(ctx, "sub"); info.Backlog != 0 || info.AckFloor != got[2].Sequence {
		t.Errorf("after pull with ack: %+v", info)
	}
	if more, err := b.Pull(ctx, "sub", 10, true); err != nil || len(more) != 0 {
		t.Fatalf("pull of empty subscription: %v %v", more, err)
	}
	all, err := b.Pull(ctx, "all", 10, true)
	if err != nil || len(all) != 4 || string(all[0].Data) != "before" {
		t.Fatalf("from-beginning subscription: %v %v", all, err)
	}
	ti, err := b.Topic(ctx, "t")
	if err != nil || ti.Messages != 4 || ti.Subscriptions != 2 {
		t.Fatalf("topic info %+v %v", ti, err)
	}
}

func TestDeadLetter(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	topic := DeadLetterTopic("orders-job")
	if topic != "weir.deadletter.orders-job" {
		t.Fatalf("DeadLetterTopic = %s", topic)
	}
	rj := rejectFixture()
	seq, err := b.PublishReject(ctx, "orders-job", rj, RejectID(rj))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateSubscription(ctx, "dl", topic, SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	// A replay of the same reject is dropped by its ID.
	if seq2, err := b.PublishReject(ctx, "orders-job", rj, RejectID(rj)); err != nil || seq2 != seq {
		t.Fatalf("replayed reject: seq %d (first %d), %v", seq2, seq, err)
	}
	msgs, err := b.Pull(ctx, "dl", 10, true)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("pull %v %v", msgs, err)
	}
	want := `{"element":"{\"amount\":\"x\"}","error":{"step":"ReadOrders","reason":"schema_mismatch","message":"field amount: want int","window":null,"watermark":null},"source":{"source":"orders/sub","offset":7}}`
	if string(msgs[0].Data) != want {
		t.Errorf("dead letter =\n%s\nwant\n%s", msgs[0].Data, want)
	}
	topics, err := b.ListTopics(ctx)
	if err != nil || len(topics) != 1 || topics[0].Name != topic || topics[0].Stream != "WEIR_DEADLETTER_orders-job" {
		t.Fatalf("topics %+v %v", topics, err)
	}
}

func TestShutdownStopsServer(t *testing.T) {
	dir := t.TempDir()
	ctx := tctx(t)
	b, err := StartEmbedded(ctx, Options{StoreDir: dir, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(ctx, "kept", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, "kept", []byte("x"), nil, ""); err != nil {
		t.Fatal(err)
	}
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ListTopics(ctx); err == nil {
		t.Fatal("ListTopics after Shutdown succeeded")
	}
	// The file store keeps topics across restarts.
	b2, err := StartEmbedded(ctx, Options{StoreDir: dir, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Shutdown(context.Background())
	ti, err := b2.Topic(ctx, "kept")
	if err != nil || ti.Messages != 1 {
		t.Fatalf("after restart: %+v %v", ti, err)
	}
	if _, err := StartEmbedded(ctx, Options{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("no store dir: %v", err)
	}
}

// TestConcurrentCreatesOneWins: twenty identical creates of one topic (and
// then of one subscription) at once: exactly one succeeds, every other gets
// ErrTopicExists (ErrSubscriptionExists). JetStream alone would accept
// every identical create.
func TestConcurrentCreatesOneWins(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	count := func(create func() error, exists error) (ok, dup int) {
		t.Helper()
		errs := make(chan error, 20)
		start := make(chan struct{})
		for range 20 {
			go func() { <-start; errs <- create() }()
		}
		close(start)
		for range 20 {
			switch err := <-errs; {
			case err == nil:
				ok++
			case errors.Is(err, exists):
				dup++
			default:
				t.Errorf("create: %v", err)
			}
		}
		return ok, dup
	}
	if ok, dup := count(func() error { _, err := b.CreateTopic(ctx, "races", TopicConfig{}); return err }, ErrTopicExists); ok != 1 || dup != 19 {
		t.Errorf("topic: %d created, %d exists; want 1 and 19", ok, dup)
	}
	if ok, dup := count(func() error {
		_, err := b.CreateSubscription(ctx, "races-sub", "races", SubscriptionConfig{})
		return err
	}, ErrSubscriptionExists); ok != 1 || dup != 19 {
		t.Errorf("subscription: %d created, %d exists; want 1 and 19", ok, dup)
	}
}

// TestNamesWithDots: topic and subscription names may contain '.', '~',
// '+' and '%', as Pub/Sub IDs do; "a.b" and "a" are distinct topics with
// their own messages and subscriptions, listed under their names; a
// snapshot and a seek of a subscription named with them work (their
// key-value keys escape what keys do not allow).
func TestNamesWithDots(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	for _, topic := range []string{"a.b", "a", "a.b.c", "x~y+z%20"} {
		if _, err := b.CreateTopic(ctx, topic, TopicConfig{}); err != nil {
			t.Fatalf("CreateTopic %s: %v", topic, err)
		}
		if _, err := b.CreateSubscription(ctx, "sub."+topic, topic, SubscriptionConfig{}); err != nil {
			t.Fatalf("CreateSubscription sub.%s: %v", topic, err)
		}
		if _, err := b.Publish(ctx, topic, []byte("to "+topic), nil, ""); err != nil {
			t.Fatalf("Publish %s: %v", topic, err)
		}
	}
	for _, topic := range []string{"a.b", "a", "a.b.c", "x~y+z%20"} {
		msgs, err := b.Pull(ctx, "sub."+topic, 10, true)
		if err != nil || len(msgs) != 1 || string(msgs[0].Data) != "to "+topic || msgs[0].Topic != topic {
			t.Fatalf("Pull sub.%s: %v %v", topic, msgs, err)
		}
		info, err := b.Subscription(ctx, "sub."+topic)
		if err != nil || info.Name != "sub."+topic || info.Topic != topic || info.AckFloor != 1 {
			t.Fatalf("Subscription sub.%s: %+v %v", topic, info, err)
		}
	}
	topics, err := b.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ti := range topics {
		names = append(names, ti.Name)
	}
	if fmt.Sprint(names) != "[a a.b a.b.c x~y+z%20]" {
		t.Fatalf("ListTopics: %v", names)
	}
	subs, err := b.ListSubscriptions(ctx, "a.b")
	if err != nil || len(subs) != 1 || subs[0].Name != "sub.a.b" {
		t.Fatalf("ListSubscriptions a.b: %+v %v", subs, err)
	}
	for _, bad := range []string{".a", "~a", "a b", "a*", "a=b", "a/b"} {
		if _, err := b.CreateTopic(ctx, bad, TopicConfig{}); !errors.Is(err, ErrInvalidName) {
			t.Errorf("CreateTopic %q: %v, want ErrInvalidName", bad, err)
		}
	}
	snap, err := b.CreateSubscriptionSnapshot(ctx, "snap~1+%", "sub.x~y+z%20")
	if err != nil || snap.Name != "snap~1+%" {
		t.Fatalf("CreateSubscriptionSnapshot: %+v %v", snap, err)
	}
	if snaps, err := b.ListSubscriptionSnapshots(ctx, ""); err != nil || len(snaps) != 1 || snaps[0].Name != "snap~1+%" {
		t.Fatalf("ListSubscriptionSnapshots: %+v %v", snaps, err)
	}
	if err := b.DeleteSubscriptionSnapshot(ctx, "snap~1+%"); err != nil {
		t.Fatalf("DeleteSubscriptionSnapshot: %v", err)
	}
	if err := b.DeleteSubscription(ctx, "sub.a.b"); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteTopic(ctx, "a.b"); err != nil {
		t.Fatal(err)
	}
}
