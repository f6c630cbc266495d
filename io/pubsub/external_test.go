package pubsub

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestExternalNATS runs the topic, subscription and resume paths against the
// NATS server at 127.0.0.1:4222 when one is reachable. Servers older than
// 2.14 have no consumer reset: the source then recreates the subscription
// to rewind it.
func TestExternalNATS(t *testing.T) {
	b := externalBroker(t)
	t.Logf("external server version %s", b.ServerVersion())
	ctx := tctx(t)
	suffix := fmt.Sprintf("%d", time.Now().UnixNano())
	topic, sub := "weirtest-"+suffix, "weirtest-sub-"+suffix
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		b.DeleteTopic(ctx, topic)
	})
	t.Run("publish and pull", func(t *testing.T) {
		if _, err := b.CreateTopic(ctx, topic+"-p", TopicConfig{Retention: time.Hour}); err != nil {
			t.Fatal(err)
		}
		defer b.DeleteTopic(ctx, topic+"-p")
		if _, err := b.CreateSubscription(ctx, sub+"-p", topic+"-p", SubscriptionConfig{}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Publish(ctx, topic+"-p", []byte("hi"), map[string]string{"a": "1"}, "x"); err != nil {
			t.Fatal(err)
		}
		if res, err := b.Publish(ctx, topic+"-p", []byte("hi"), nil, "x"); err != nil || !res.Duplicate {
			t.Fatalf("duplicate publish: %+v %v", res, err)
		}
		msgs, err := b.Pull(ctx, sub+"-p", 10, true)
		if err != nil || len(msgs) != 1 || msgs[0].Attributes["a"] != "1" {
			t.Fatalf("pull %+v %v", msgs, err)
		}
	})
	t.Run("ack and resume", func(t *testing.T) {
		testAckResume(t, b, topic, sub, true)
	})
}
