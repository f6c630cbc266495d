package pubsub

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/weir-dev/weir/runner/contract"
)

// TestBrokerIdentity: a broker's identity is made once and kept with its
// data across a restart; another broker's differs.
func TestBrokerIdentity(t *testing.T) {
	ctx := tctx(t)
	dir := t.TempDir()
	b, err := StartEmbedded(ctx, Options{StoreDir: dir, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	id, err := b.BrokerIdentity(ctx)
	if err != nil || len(id) != 36 {
		t.Fatalf("identity %q %v, want a UUID", id, err)
	}
	if again, err := b.BrokerIdentity(ctx); err != nil || again != id {
		t.Fatalf("asked again: %q %v, want %q", again, err, id)
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err = StartEmbedded(ctx, Options{StoreDir: dir, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Shutdown(context.Background()) }()
	if after, err := b.BrokerIdentity(ctx); err != nil || after != id {
		t.Fatalf("after a restart: %q %v, want %q", after, err, id)
	}
	if other, err := newTestBroker(t).BrokerIdentity(ctx); err != nil || other == id {
		t.Fatalf("another broker's identity %q %v, want another than %q", other, err, id)
	}
}

// TestPlaceSourcePosition: a position is placed on another subscription of
// the same topic exactly; one beyond the topic's messages is
// contract.ErrForeignPosition unless translated; a translation by publish
// time, to the earliest or to the latest message starts where it says; a
// missing topic, a subscription of another topic and a position of another
// topic's subscription are refused. Nothing changes on the broker.
func TestPlaceSourcePosition(t *testing.T) {
	ctx := tctx(t)
	b := newTestBroker(t)
	for _, topic := range []string{"t", "u"} {
		if _, err := b.CreateTopic(ctx, topic, TopicConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.CreateSubscription(ctx, "old--S", "t", SubscriptionConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateSubscription(ctx, "other--S", "u", SubscriptionConfig{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if _, err := b.Publish(ctx, "t", []byte(`{}`), nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	pos := func(sub string, seq uint64, publishMS int64) []byte {
		b, _ := json.Marshal(position{V: positionVersion, Subscription: sub, StreamSeq: seq, PublishMillis: publishMS, Track: &Track{}})
		return b
	}
	cases := []struct {
		name       string
		pos        []byte
		sub, topic string
		translate  string
		start      uint64
		err        error
	}{
		{"another name, same topic", pos("old--S", 4, 0), "new--S", "t", "", 5, nil},
		{"named subscription", pos("old--S", 4, 0), "old--S", "", "", 5, nil},
		{"beyond the topic", pos("old--S", 400, 0), "new--S", "t", "", 0, contract.ErrForeignPosition},
		{"earliest", pos("old--S", 400, 0), "new--S", "t", TranslateEarliest, 1, nil},
		{"latest", pos("old--S", 400, 0), "new--S", "t", TranslateLatest, 11, nil},
		{"by publish time, before everything", pos("old--S", 400, 1), "new--S", "t", TranslatePublishTime, 1, nil},
		{"by publish time, after everything", pos("old--S", 400, time.Now().Add(time.Hour).UnixMilli()), "new--S", "t", TranslatePublishTime, 11, nil},
		{"topic gone", pos("old--S", 4, 0), "new--S", "gone", "", 0, ErrTopicNotFound},
		{"subscription of another topic", pos("old--S", 4, 0), "other--S", "t", "", 0, ErrSubscriptionExists},
		{"named subscription missing", pos("old--S", 4, 0), "nope", "", "", 0, ErrSubscriptionNotFound},
		{"position of another topic's subscription", pos("other--S", 0, 0), "new--S", "t", "", 0, ErrInvalidPosition},
		{"not a position", []byte("junk"), "new--S", "t", "", 0, ErrInvalidPosition},
		{"unknown translation", pos("old--S", 4, 0), "new--S", "t", "sometime", 0, ErrInvalidConfig},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			placed, start, note, err := b.PlaceSourcePosition(ctx, c.pos, c.sub, c.topic, c.translate)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("err %v, want %v", err, c.err)
				}
				return
			}
			if err != nil || start != c.start || note == "" {
				t.Fatalf("start %d note %q err %v, want start %d", start, note, err, c.start)
			}
			p, err := decodePosition(placed)
			if err != nil || p.Subscription != c.sub || p.StreamSeq != c.start-1 || p.Ack != "" {
				t.Fatalf("placed position %+v %v, want of %s after sequence %d", p, err, c.sub, c.start-1)
			}
			if (c.translate != "") != (p.Track == nil) {
				t.Errorf("translated %q, event-time table %+v: a translation drops it, an exact placement keeps it", c.translate, p.Track)
			}
		})
	}
	if _, err := b.Subscription(ctx, "new--S"); !errors.Is(err, ErrSubscriptionNotFound) {
		t.Errorf("placing a position created subscription new--S: %v", err)
	}
}
