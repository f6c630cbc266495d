// This file holds what a job started from a snapshot needs of the broker
// for its Pub/Sub sources: the broker's identity (so a snapshot says whose
// positions it holds), the topic and sequence range behind a position
// (recorded with the snapshot), and the placement of a snapshot's position
// on the subscription the new job reads — under another job name, or on
// another broker, translated by publish time, to the earliest or to the
// latest message.

package pubsub

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// identityBucket keeps the broker's identity (key identityKey): a random
// ID written once, at the first start, and kept with the broker's data.
const (
	identityBucket = "WEIR_BROKER"
	identityKey    = "identity"
)

// Connected reports whether the broker's connection is up now (an
// external server may be away while the client reconnects).
func (b *Broker) Connected() bool { return b.nc.IsConnected() }

// BrokerIdentity returns the broker's identity: a random UUID created the
// first time it is asked for and stored in the broker's own data (a
// JetStream key-value bucket), so that it lasts as long as the topics
// and the sequences it describes, across restarts. Two brokers never
// share one unless one's data was copied from the other's (and then the
// positions are valid on both). Safe for concurrent use: the creation is
// create-only.
func (b *Broker) BrokerIdentity(ctx context.Context) (string, error) {
	kv, err := b.js.KeyValue(ctx, identityBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = b.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      identityBucket,
			Description: "weir broker identity",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    b.Replicas(),
		})
		if errors.Is(err, jetstream.ErrBucketExists) { // created concurrently
			kv, err = b.js.KeyValue(ctx, identityBucket)
		}
	}
	if err != nil {
		return "", apiErr("opening the broker identity store", err)
	}
	e, err := kv.Get(ctx, identityKey)
	if err == nil {
		return string(e.Value()), nil
	}
	if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", apiErr("reading the broker identity", err)
	}
	id, err := newUUID()
	if err != nil {
		return "", err
	}
	if _, err := kv.Create(ctx, identityKey, []byte(id)); err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return "", apiErr("storing the broker identity", err)
		}
		// Created concurrently: the first one stays.
		if e, err = kv.Get(ctx, identityKey); err != nil {
			return "", apiErr("reading the broker identity", err)
		}
		return string(e.Value()), nil
	}
	b.log.Info("broker identity created", "broker_id", id)
	return id, nil
}

// newUUID returns a random (version 4) UUID.
func newUUID() (string, error) {
	var r [16]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("generating the broker identity: %w", err)
	}
	r[6] = r[6]&0x0f | 0x40
	r[8] = r[8]&0x3f | 0x80
	h := hex.EncodeToString(r[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}

// PositionRange describes a source position (a checkpoint's position of a
// ReadFromPubSub split) on this broker: the subscription it reads, that
// subscription's topic, the position's stream sequence (the last message
// it counts as read, 0 for none), and the sequences the topic stores now
// (first, last). A snapshot records them with the broker's identity, so
// that where its positions came from can be told where they are used.
func (b *Broker) PositionRange(ctx context.Context, position []byte) (sub, topic string, seq, first, last uint64, err error) {
	p, err := decodePosition(position)
	if err != nil {
		return "", "", 0, 0, 0, err
	}
	topic, _, err = b.findSubscription(ctx, p.Subscription)
	if err != nil {
		return "", "", 0, 0, 0, err
	}
	ti, err := b.Topic(ctx, topic)
	if err != nil {
		return "", "", 0, 0, 0, err
	}
	return p.Subscription, topic, p.StreamSeq, ti.FirstSeq, ti.LastSeq, nil
}

// How a position is translated onto a broker it does not come from
// (PlaceSourcePosition's translate).
const (
	// TranslateExact uses the position as it is: it must be this broker's.
	TranslateExact = ""
	// TranslatePublishTime starts after the last message published at or
	// before the position's publish time.
	TranslatePublishTime = "from-publish-time"
	// TranslateEarliest starts at the oldest message the topic stores.
	TranslateEarliest = "earliest"
	// TranslateLatest starts after the newest message the topic stores:
	// only messages published from now on are read.
	TranslateLatest = "latest"
)

// PlaceSourcePosition returns the position (placed) from which a new job's source
// reading subscription sub resumes, given position, a checkpoint's
// position of a source of possibly another subscription (a job snapshot's,
// taken under another job name or on another broker). topic is the topic
// the source reads through sub, which is then the service's subscription
// of the job and step (created by the source at its start if missing, on
// that topic); "" for a source of a named subscription sub, which must
// exist. translate is TranslateExact (the position is this broker's: the
// source starts right after it on sub's topic, which must be the
// position's subscription's topic when that still exists, and must not
// end before the position), or TranslatePublishTime, TranslateEarliest or
// TranslateLatest (the position is another broker's: its sequence means
// nothing here; its event-time table is dropped).
//
// It changes nothing on the broker: it reads the topic and the
// subscriptions, and fails with a wrapped ErrTopicNotFound,
// ErrSubscriptionNotFound, ErrSubscriptionExists (sub is another
// topic's), ErrInvalidPosition or ErrPositionBeyondTopic for what would
// make the source fail at its start. It also returns the first stream
// sequence the source will read and a note saying what it did, for the
// user.
func (b *Broker) PlaceSourcePosition(ctx context.Context, position []byte, sub, topic, translate string) (placed []byte, startSeq uint64, note string, err error) {
	pl, err := b.placeSourcePosition(ctx, position, sub, topic, translate)
	if err != nil {
		return nil, 0, "", err
	}
	return pl.position, pl.startSeq, pl.note, nil
}

// placement is where placeSourcePosition put a position.
type placement struct {
	position []byte
	startSeq uint64
	note     string
}

func (b *Broker) placeSourcePosition(ctx context.Context, position []byte, sub, topic, translate string) (placement, error) {
	p, err := decodePosition(position)
	if err != nil {
		return placement{}, err
	}
	switch translate {
	case TranslateExact, TranslatePublishTime, TranslateEarliest, TranslateLatest:
	default:
		return placement{}, fmt.Errorf("positions translate %q: want %s, %s or %s: %w", translate,
			TranslatePublishTime, TranslateEarliest, TranslateLatest, ErrInvalidConfig)
	}
	if topic == "" {
		info, err := b.Subscription(ctx, sub)
		if err != nil {
			return placement{}, err
		}
		topic = info.Topic
	} else if info, err := b.Subscription(ctx, sub); err == nil && info.Topic != topic {
		return placement{}, fmt.Errorf("subscription %s belongs to topic %s, not %s: %w", sub, info.Topic, topic, ErrSubscriptionExists)
	} else if err != nil && !errors.Is(err, ErrSubscriptionNotFound) {
		return placement{}, err
	}
	ti, err := b.Topic(ctx, topic)
	if err != nil {
		return placement{}, err
	}
	stream, _, _ := topicNames(topic)
	pl := placement{}
	switch translate {
	case TranslateExact:
		if p.Subscription != sub {
			// Another job name's subscription: it must read the same topic
			// (when it is still there to say so).
			if t, _, err := b.findSubscription(ctx, p.Subscription); err == nil && t != topic {
				return placement{}, fmt.Errorf("the position is of subscription %s of topic %s, and %s reads topic %s: %w",
					p.Subscription, t, sub, topic, ErrInvalidPosition)
			}
		}
		if p.StreamSeq > ti.LastSeq {
			return placement{}, fmt.Errorf("the position is after sequence %d and topic %s ends at sequence %d: %w",
				p.StreamSeq, topic, ti.LastSeq, ErrPositionBeyondTopic)
		}
		pl.startSeq = p.StreamSeq + 1
		pl.note = fmt.Sprintf("subscription %s of topic %s starts at sequence %d, right after the snapshot's position", sub, topic, pl.startSeq)
		if p.Subscription != sub {
			pl.note += fmt.Sprintf(" (read under subscription %s)", p.Subscription)
		}
	case TranslatePublishTime:
		if p.PublishMillis == 0 {
			pl.startSeq = max(ti.FirstSeq, 1)
			pl.note = fmt.Sprintf("subscription %s of topic %s starts at the oldest message (sequence %d): the snapshot's position has no publish time", sub, topic, pl.startSeq)
			break
		}
		after := time.UnixMilli(p.PublishMillis + 1)
		if pl.startSeq, err = b.firstAtOrAfter(ctx, stream, after); err != nil {
			return placement{}, err
		}
		pl.note = fmt.Sprintf("subscription %s of topic %s starts at sequence %d, the first message published after %s (the snapshot's position)",
			sub, topic, pl.startSeq, time.UnixMilli(p.PublishMillis).UTC().Format(time.RFC3339Nano))
	case TranslateEarliest:
		pl.startSeq = max(ti.FirstSeq, 1)
		pl.note = fmt.Sprintf("subscription %s of topic %s starts at the oldest message it stores (sequence %d)", sub, topic, pl.startSeq)
	case TranslateLatest:
		pl.startSeq = ti.LastSeq + 1
		pl.note = fmt.Sprintf("subscription %s of topic %s starts after the newest message it stores (sequence %d): only messages published from now on", sub, topic, ti.LastSeq)
	}
	np := p
	np.Subscription, np.Ack = sub, ""
	if translate != TranslateExact {
		// Another broker's sequences and publish times: the event-time
		// table (sequences) and the de-duplication read-back point mean
		// nothing here, except a publish time kept by a translation that
		// is by publish time.
		np.StreamSeq, np.ConsumerSeq, np.Track = pl.startSeq-1, 0, nil
		if translate != TranslatePublishTime {
			np.PublishMillis = 0
		}
	}
	np.V = positionVersion
	if pl.position, err = json.Marshal(np); err != nil {
		return placement{}, fmt.Errorf("encoding the placed position: %w", err)
	}
	return pl, nil
}
