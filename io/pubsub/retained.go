package pubsub

import (
	"context"
	"errors"
	"fmt"
)

// RetainedAfter says whether the topic a checkpointed source position (a
// ReadFromPubSub split's) reads from still holds every message after that
// position, so that a job started from the position re-reads all of them
// (the job service's rollback asks before it rewinds a subscription). It
// returns the position's subscription and topic, next (the stream sequence
// of the first message after the position), and the topic's first and
// last stored sequences: the input since the position is retained when
// first <= next. A subscription that is gone is looked for in topicHint
// (the topic a ReadFromPubSub `topic:` source names; its subscription is
// created again when the source opens); without one it fails as
// Subscription does. It fails with ErrInvalidPosition for a position that
// is not one.
func (b *Broker) RetainedAfter(ctx context.Context, position []byte, topicHint string) (sub, topic string, next, first, last uint64, err error) {
	p, err := decodePosition(position)
	if err != nil {
		return "", "", 0, 0, 0, err
	}
	topic, _, err = b.findSubscription(ctx, p.Subscription)
	if errors.Is(err, ErrSubscriptionNotFound) && topicHint != "" {
		topic, err = topicHint, nil
	}
	if err != nil {
		return "", "", 0, 0, 0, err
	}
	ti, err := b.Topic(ctx, topic)
	if err != nil {
		return "", "", 0, 0, 0, fmt.Errorf("reading the retention of topic %s: %w", topic, err)
	}
	return p.Subscription, topic, p.StreamSeq + 1, ti.FirstSeq, ti.LastSeq, nil
}
