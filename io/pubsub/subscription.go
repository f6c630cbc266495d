package pubsub

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-dev/weir/runner/contract"
)

// DefaultAckWait is how long a delivered, unacknowledged message waits
// before the subscription delivers it again, by default.
const DefaultAckWait = contract.DefaultAckWait

// SubscriptionConfig configures a subscription (contract.SubscriptionConfig).
type SubscriptionConfig = contract.SubscriptionConfig

// SubscriptionInfo describes a subscription (contract.SubscriptionInfo).
type SubscriptionInfo = contract.SubscriptionInfo

func subscriptionInfo(topic string, ci *jetstream.ConsumerInfo) SubscriptionInfo {
	return SubscriptionInfo{
		Name:          fromNATSName(ci.Name),
		Topic:         topic,
		NumPending:    ci.NumPending,
		NumAckPending: ci.NumAckPending,
		Backlog:       ci.NumPending + uint64(max(ci.NumAckPending, 0)),
		AckFloor:      ci.AckFloor.Stream,
		Delivered:     ci.Delivered.Stream,
		AckWait:       ci.Config.AckWait,
		Created:       ci.Created,
		PerMessageAck: ci.Config.AckPolicy == jetstream.AckExplicitPolicy,
		Metadata:      ci.Config.Metadata,
	}
}

// CreateSubscription creates subscription name on topic. It fails with
// ErrSubscriptionExists if a subscription of that name exists on any topic,
// ErrTopicNotFound if the topic does not exist.
func (b *Broker) CreateSubscription(ctx context.Context, name, topic string, cfg SubscriptionConfig) (SubscriptionInfo, error) {
	b.admin.Lock() // a leaf: see Broker.admin
	defer b.admin.Unlock()
	if err := ValidateName("subscription", name); err != nil {
		return SubscriptionInfo{}, err
	}
	stream, _, err := topicNames(topic)
	if err != nil {
		return SubscriptionInfo{}, err
	}
	if t, _, err := b.findSubscription(ctx, name); err == nil {
		return SubscriptionInfo{}, fmt.Errorf("creating subscription %s: %w (on topic %s)", name, ErrSubscriptionExists, t)
	} else if !errors.Is(err, ErrSubscriptionNotFound) {
		return SubscriptionInfo{}, err
	}
	s, err := b.js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return SubscriptionInfo{}, fmt.Errorf("creating subscription %s: topic %s: %w", name, topic, ErrTopicNotFound)
	}
	if err != nil {
		return SubscriptionInfo{}, apiErr("creating subscription "+name, err)
	}
	cfg.EnsureDefaults()
	cc := jetstream.ConsumerConfig{
		Durable:       NATSName(name),
		Description:   "weir subscription " + name + " of topic " + topic,
		AckPolicy:     jetstream.AckAllPolicy,
		AckWait:       cfg.AckWait,
		MaxAckPending: cfg.MaxAckPending,
		MaxDeliver:    -1,
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		Metadata:      cfg.Metadata,
	}
	if cfg.PerMessageAck {
		cc.AckPolicy = jetstream.AckExplicitPolicy
	}
	switch {
	case cfg.StartSeq > 0:
		cc.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cc.OptStartSeq = cfg.StartSeq
	case !cfg.FromBeginning:
		// DeliverByStartSequence rather than DeliverNew: a subscription can
		// then be rewound to any later sequence (Resume, seek).
		cc.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cc.OptStartSeq = s.CachedInfo().State.LastSeq + 1
	}
	c, err := s.CreateConsumer(ctx, cc)
	if errors.Is(err, jetstream.ErrConsumerExists) {
		return SubscriptionInfo{}, fmt.Errorf("creating subscription %s: %w", name, ErrSubscriptionExists)
	}
	if err != nil {
		return SubscriptionInfo{}, apiErr("creating subscription "+name, err)
	}
	if cfg.PerMessageAck {
		// A deleted subscription of the same name may have left its
		// acknowledgement record (a crash before its deletion cleared it).
		b.setRestored(name, nil)
		if err := b.resetAckState(ctx, name, nil); err != nil {
			b.log.Warn("clearing the acknowledgement record of a new subscription", "subscription", name, "error", err)
		}
	}
	b.log.Info("subscription created", "subscription", name, "topic", topic, "ack_wait", cfg.AckWait)
	return subscriptionInfo(topic, c.CachedInfo()), nil
}

// EnsureSubscription returns subscription name of topic, creating it with
// cfg if it does not exist. It fails with ErrSubscriptionExists if the name
// belongs to a subscription of another topic.
func (b *Broker) EnsureSubscription(ctx context.Context, name, topic string, cfg SubscriptionConfig) (SubscriptionInfo, error) {
	info, err := b.Subscription(ctx, name)
	if err == nil {
		if info.Topic != topic {
			return SubscriptionInfo{}, otherTopicError{fmt.Errorf("subscription %s belongs to topic %s, not %s: %w", name, info.Topic, topic, ErrSubscriptionExists)}
		}
		return info, nil
	}
	if !errors.Is(err, ErrSubscriptionNotFound) {
		return SubscriptionInfo{}, err
	}
	info, err = b.CreateSubscription(ctx, name, topic, cfg)
	if errors.Is(err, ErrSubscriptionExists) { // created concurrently
		if info, err := b.Subscription(ctx, name); err == nil && info.Topic == topic {
			return info, nil
		}
	}
	return info, err
}

// otherTopicError is EnsureSubscription's refusal of a name that belongs
// to a subscription of another topic (it wraps ErrSubscriptionExists).
type otherTopicError struct{ error }

func (e otherTopicError) Unwrap() error { return e.error }

// findSubscription looks for the consumer name on every topic's stream.
func (b *Broker) findSubscription(ctx context.Context, name string) (topic string, c jetstream.Consumer, err error) {
	if err := ValidateName("subscription", name); err != nil {
		return "", nil, err
	}
	l := b.js.StreamNames(ctx)
	var streams []string
	for s := range l.Name() {
		if _, ok := topicOfStream(s); ok {
			streams = append(streams, s)
		}
	}
	if err := l.Err(); err != nil {
		return "", nil, apiErr("looking up subscription "+name, err)
	}
	for _, s := range streams {
		c, err := b.js.Consumer(ctx, s, NATSName(name))
		if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return "", nil, apiErr("looking up subscription "+name, err)
		}
		t, _ := topicOfStream(s)
		return t, c, nil
	}
	return "", nil, fmt.Errorf("subscription %s: %w", name, ErrSubscriptionNotFound)
}

// Subscription describes one subscription. It fails with
// ErrSubscriptionNotFound if there is none.
func (b *Broker) Subscription(ctx context.Context, name string) (SubscriptionInfo, error) {
	topic, c, err := b.findSubscription(ctx, name)
	if err != nil {
		return SubscriptionInfo{}, err
	}
	ci, err := c.Info(ctx)
	if err != nil {
		return SubscriptionInfo{}, apiErr("describing subscription "+name, err)
	}
	return subscriptionInfo(topic, ci), nil
}

// DeleteSubscription deletes a subscription; the topic keeps its messages.
// It fails with ErrSubscriptionNotFound if there is none.
func (b *Broker) DeleteSubscription(ctx context.Context, name string) error {
	b.admin.Lock() // a leaf: see Broker.admin
	defer b.admin.Unlock()
	topic, c, err := b.findSubscription(ctx, name)
	if err != nil {
		return err
	}
	stream, _, _ := topicNames(topic)
	err = b.js.DeleteConsumer(ctx, stream, NATSName(name))
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("deleting subscription %s: %w", name, ErrSubscriptionNotFound)
	}
	if err != nil {
		return apiErr("deleting subscription "+name, err)
	}
	if c.CachedInfo().Config.AckPolicy == jetstream.AckExplicitPolicy {
		b.setRestored(name, nil)
		if err := b.resetAckState(ctx, name, nil); err != nil {
			b.log.Warn("clearing the acknowledgement record of a deleted subscription (a subscription created with its name clears it too)", "subscription", name, "error", err)
		}
	}
	b.log.Info("subscription deleted", "subscription", name, "topic", topic)
	return nil
}

// ListSubscriptions lists the subscriptions of topic, or of every topic when
// topic is "", by name. It fails with ErrTopicNotFound for a missing topic.
func (b *Broker) ListSubscriptions(ctx context.Context, topic string) ([]SubscriptionInfo, error) {
	var topics []string
	if topic != "" {
		if _, err := b.Topic(ctx, topic); err != nil {
			return nil, err
		}
		topics = []string{topic}
	} else {
		all, err := b.ListTopics(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range all {
			topics = append(topics, t.Name)
		}
	}
	var out []SubscriptionInfo
	for _, t := range topics {
		stream, _, _ := topicNames(t)
		s, err := b.js.Stream(ctx, stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, apiErr("listing subscriptions of "+t, err)
		}
		l := s.ListConsumers(ctx)
		for ci := range l.Info() {
			if ci.Config.Durable == "" {
				continue // an ephemeral reader, not a subscription
			}
			out = append(out, subscriptionInfo(t, ci))
		}
		if err := l.Err(); err != nil {
			return nil, apiErr("listing subscriptions of "+t, err)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Message is a message read from a subscription.
type Message struct {
	Topic string `json:"topic"`
	Data  []byte `json:"data"`
	// Attributes are the message's NATS headers, but for the reserved
	// Nats-* ones (the ID is in ID).
	Attributes map[string]string `json:"attributes,omitempty"`
	// ID is the message's Nats-Msg-Id, if it was published with one.
	ID string `json:"id,omitempty"`
	// Sequence is the message's stream sequence.
	Sequence    uint64    `json:"sequence"`
	PublishTime time.Time `json:"publish_time"`
	// NumDelivered counts the deliveries of this message to the
	// subscription, this one included.
	NumDelivered uint64 `json:"num_delivered"`
}

// pullCatchUp bounds how long Pull waits for messages its topic stored
// before the pull but that have not reached the subscription yet.
const pullCatchUp = 500 * time.Millisecond

// Pull reads up to max messages that are available now from subscription
// sub, without waiting for more; it is meant for people (weir
// subscriptions pull). Messages the topic stored before the pull are
// available: a subscription sees a message just stored a moment later,
// so Pull waits (at most pullCatchUp) until the subscription has been
// offered everything its topic held when the pull began. With ack, every
// returned message is acknowledged (cumulatively: with the last one);
// without, they are delivered again after the subscription's AckWait. Do
// not pull with ack from a subscription a running job reads: it would
// acknowledge the job's in-flight messages too.
func (b *Broker) Pull(ctx context.Context, sub string, max int, ack bool) ([]Message, error) {
	if max <= 0 {
		max = 1
	}
	topic, c, err := b.findSubscription(ctx, sub)
	if err != nil {
		return nil, err
	}
	stream, _, err := topicNames(topic)
	if err != nil {
		return nil, err
	}
	st, err := b.js.Stream(ctx, stream)
	if err != nil {
		return nil, apiErr("pulling from "+sub, err)
	}
	stored := st.CachedInfo().State.LastSeq // what the pull must have been offered
	var out []Message
	var last jetstream.Msg
	var earlier []jetstream.Msg // before last, for a per-message subscription
	deadline := time.Now().Add(pullCatchUp)
	for len(out) < max {
		batch, err := c.FetchNoWait(max - len(out))
		if err != nil {
			return nil, apiErr("pulling from "+sub, err)
		}
		progress := false // messages came: more may be there
	drain:
		for {
			select {
			case m, ok := <-batch.Messages():
				if !ok {
					if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) {
						return out, apiErr("pulling from "+sub, err)
					}
					break drain
				}
				if done, err := b.AckRestored(ctx, sub, m); err != nil {
					return out, err
				} else if done {
					progress = true // a seek to a snapshot restored it as acknowledged
					continue
				}
				msg, err := toMessage(topic, m)
				if err != nil {
					return out, err
				}
				out = append(out, msg)
				progress = true
				if last != nil {
					earlier = append(earlier, last)
				}
				last = m
			case <-ctx.Done():
				return out, fmt.Errorf("pulling from %s: %w", sub, ctx.Err())
			}
		}
		if progress {
			continue
		}
		// Nothing this round: done once the subscription has been offered
		// everything stored before the pull (or the catch-up time is over).
		info, err := c.Info(ctx)
		if err != nil {
			return out, apiErr("pulling from "+sub, err)
		}
		if info.Delivered.Stream >= stored || !time.Now().Before(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("pulling from %s: %w", sub, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	if ack && last != nil {
		if err := last.DoubleAck(ctx); err != nil {
			return out, apiErr("acknowledging messages of "+sub, err)
		}
		if c.CachedInfo().Config.AckPolicy == jetstream.AckExplicitPolicy {
			// One by one (a subscription of the Pub/Sub gRPC API).
			for _, m := range earlier {
				if err := m.DoubleAck(ctx); err != nil {
					return out, apiErr("acknowledging messages of "+sub, err)
				}
			}
			seqs := make([]uint64, len(out))
			for i, msg := range out {
				seqs[i] = msg.Sequence
			}
			if err := b.recordAcked(ctx, sub, seqs); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

func toMessage(topic string, m jetstream.Msg) (Message, error) {
	md, err := m.Metadata()
	if err != nil {
		return Message{}, fmt.Errorf("reading message metadata: %w", err)
	}
	msg := Message{
		Topic:        topic,
		Data:         m.Data(),
		Sequence:     md.Sequence.Stream,
		PublishTime:  md.Timestamp,
		NumDelivered: md.NumDelivered,
	}
	for k, v := range m.Headers() {
		if k == jetstream.MsgIDHeader {
			if len(v) > 0 {
				msg.ID = v[0]
			}
			continue
		}
		if len(k) >= 5 && strings.EqualFold(k[:5], "nats-") || len(v) == 0 {
			continue
		}
		if msg.Attributes == nil {
			msg.Attributes = make(map[string]string, len(m.Headers()))
		}
		msg.Attributes[k] = v[0]
	}
	return msg, nil
}

// rewindConsumer makes subscription sub of stream deliver again from stream
// sequence seq, treating everything before seq as acknowledged and
// forgetting deliveries that were not acknowledged; seq 0 means the
// acknowledgement floor + 1 (redeliver what is unacknowledged, now). Servers
// from 2.14 reset the consumer in place; older ones get it recreated with
// the same configuration.
//
// c is the subscription's consumer, just looked up; the consumer to read
// from is returned (c, or the one created in its place). Unless always, a
// consumer whose description says it stands at seq is left as it is (a
// split opening where it stopped); an explicit seek always resets it: a
// description read right after other changes (an earlier seek, an
// acknowledgement of a delivery made before it) is not always the
// consumer's position.
func (b *Broker) rewindConsumer(ctx context.Context, stream, sub string, seq uint64, c jetstream.Consumer, always bool) (jetstream.Consumer, error) {
	ci := c.CachedInfo()
	target := seq
	if target == 0 {
		target = ci.AckFloor.Stream + 1
	}
	if !always && ci.NumAckPending == 0 && ci.Delivered.Stream+1 == target && ci.AckFloor.Stream == ci.Delivered.Stream {
		return c, nil // already there
	}
	if serverAtLeast(b.nc.ConnectedServerVersion(), 2, 14) {
		var err error
		if seq == 0 {
			_, err = b.js.ResetConsumer(ctx, stream, NATSName(sub))
		} else {
			_, err = b.js.ResetConsumerToSequence(ctx, stream, NATSName(sub), seq)
		}
		if err == nil {
			b.log.Debug("subscription rewound", "subscription", sub, "to_seq", target)
			return c, nil
		}
		if !errors.Is(err, jetstream.ErrConsumerInvalidReset) {
			return nil, apiErr("rewinding subscription "+sub, err)
		}
	}
	cfg := ci.Config
	cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
	cfg.OptStartSeq = target
	cfg.OptStartTime = nil
	if err := b.js.DeleteConsumer(ctx, stream, NATSName(sub)); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, apiErr("rewinding subscription "+sub, err)
	}
	nc, err := b.js.CreateConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, apiErr(fmt.Sprintf("recreating subscription %s at sequence %d", sub, target), err)
	}
	b.log.Info("subscription recreated to rewind it", "subscription", sub, "to_seq", target)
	return nc, nil
}

// serverAtLeast reports whether version ("2.15.3") is at least major.minor.
func serverAtLeast(version string, major, minor int) bool {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}
