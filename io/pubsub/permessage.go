package pubsub

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// This file holds what the Pub/Sub gRPC API (package pubsubgrpc) needs of
// the broker beyond weir's own API: the JetStream consumer behind a
// subscription, to fetch and acknowledge messages one by one.

// JetStream returns the broker's JetStream context. Do not delete or change
// the streams and consumers of topics and subscriptions through it but
// through the Broker's methods, which keep the naming rules.
func (b *Broker) JetStream() jetstream.JetStream { return b.js }

// SubscriptionConsumer returns the topic of subscription name and its
// JetStream consumer. It fails with ErrSubscriptionNotFound if there is
// none.
func (b *Broker) SubscriptionConsumer(ctx context.Context, name string) (topic string, c jetstream.Consumer, err error) {
	return b.findSubscription(ctx, name)
}

// TopicStream returns the JetStream stream name of a topic (it need not
// exist); ErrInvalidName for a bad name.
func TopicStream(topic string) (string, error) {
	stream, _, err := topicNames(topic)
	return stream, err
}

// refusePerMessageConsumer fails with ErrPerMessageSubscription when
// subscription sub (ci its consumer's info) acknowledges per message: a
// pipeline source would rewind it (forgetting its clients' deliveries) and
// acknowledge only the last message of each checkpoint.
func refusePerMessageConsumer(ci *jetstream.ConsumerInfo, step, sub, topic string) error {
	if ci != nil && ci.Config.AckPolicy == jetstream.AckExplicitPolicy {
		return fmt.Errorf("ReadFromPubSub %s: subscription %s acknowledges each message on its own (it was created through the Pub/Sub gRPC API), "+
			"and a pipeline acknowledges cumulatively at checkpoints: read its topic (topic: %s) or a subscription created with weir: %w",
			step, sub, topic, ErrPerMessageSubscription)
	}
	return nil
}
