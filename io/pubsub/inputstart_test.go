package pubsub

import (
	"fmt"
	"testing"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
)

// TestInputStart: a source tells where its input starts when it reads
// past messages still on the topic, by the newest skipped event time
// (out of publish order too), and reports nothing when it skips nothing.
func TestInputStart(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	if _, err := b.CreateTopic(ctx, "orders", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	base, err := mtime.Parse("2026-03-01T07:20:00Z")
	if err != nil {
		t.Fatal(err)
	}
	// Event times 07:20:00, 07:20:30, 07:20:10 (late), 07:21:00, 07:21:30.
	offsets := []int64{0, 30, 10, 60, 90}
	for i, off := range offsets {
		data := fmt.Sprintf(`{"region":"EAST","amount":%d,"ts":%q}`, i, base.Add(mtime.Duration(off)*mtime.Second))
		if _, err := b.Publish(ctx, "orders", []byte(data), nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	src := func(sub string, fromBeginning bool) *Source {
		cfg := SourceConfig{Step: "ReadOrders", Subscription: sub, Topic: "orders", Schema: orderSchema, TimestampField: "ts"}
		cfg.Subscribe.FromBeginning = fromBeginning
		s, err := NewSource(b, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// An existing subscription acknowledged up to sequence 3.
	if _, err := b.CreateSubscription(ctx, "acked3", "orders", SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Pull(ctx, "acked3", 3, true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateSubscription(ctx, "fresh", "orders", SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	rewinding := src("acked3", false)
	rewinding.ReRead(map[string]contract.RewindStart{"acked3": {}})
	cases := []struct {
		name   string
		src    *Source
		want   mtime.Time
		wantOK bool
	}{
		{"acknowledged up to 3: newest skipped is 07:20:30", src("acked3", false), base.Add(30*mtime.Second + mtime.Millisecond), true},
		{"a subscription with nothing acknowledged", src("fresh", false), 0, false},
		{"to be created from the beginning", src("new1", true), 0, false},
		{"to be created at the topic's end", src("new2", false), base.Add(90*mtime.Second + mtime.Millisecond), true},
		{"re-reading for a replacement", rewinding, 0, false},
		{"a named subscription that does not exist (the split says so)", func() *Source {
			s, err := NewSource(b, SourceConfig{Step: "ReadOrders", Subscription: "gone", Schema: orderSchema})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}(), 0, false},
	}
	for _, c := range cases {
		got, note, ok, err := c.src.InputStart(ctx)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if ok != c.wantOK || got != c.want {
			t.Errorf("%s: start %s ok %v (%s), want %s ok %v", c.name, got, ok, note, c.want, c.wantOK)
		}
		if ok && note == "" {
			t.Errorf("%s: no note", c.name)
		}
	}
}
