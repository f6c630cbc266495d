package pubsub

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
)

// Stream and subject prefixes of topics (see the package documentation).
const (
	topicStreamPrefix      = "WEIR_TOPIC_"
	topicSubjectPrefix     = "weir.topic."
	deadLetterStreamPrefix = "WEIR_DEADLETTER_"
	deadLetterPrefix       = "weir.deadletter."
	maxNameLen             = contract.MaxBrokerNameLen
)

// Topic defaults.
const (
	// DefaultRetention is how long a topic keeps messages by default.
	DefaultRetention = 7 * 24 * time.Hour
	// DefaultDuplicateWindow is how long a topic remembers message IDs by
	// default: a message published again with the same ID within the window
	// is stored once. It bounds how late a sink replay may come and still
	// publish nothing twice.
	DefaultDuplicateWindow = 10 * time.Minute
)

// TopicConfig configures a topic. The zero value is usable.
type TopicConfig struct {
	// Retention is how long messages are kept, acknowledged or not.
	// Default DefaultRetention (7 days).
	Retention time.Duration
	// DuplicateWindow is how long message IDs are remembered for
	// de-duplication. Default DefaultDuplicateWindow (10 minutes); it may
	// not exceed Retention.
	DuplicateWindow time.Duration
	// MaxBytes caps the topic's size; the oldest messages are dropped past
	// it. Default 0: no cap.
	MaxBytes int64
	// Metadata is stored with the topic (JetStream stream metadata), e.g.
	// the Pub/Sub API's labels.
	Metadata map[string]string
}

// EnsureDefaults fills unset fields with their defaults.
func (c *TopicConfig) EnsureDefaults() {
	if c.Retention <= 0 {
		c.Retention = DefaultRetention
	}
	if c.DuplicateWindow <= 0 {
		c.DuplicateWindow = min(DefaultDuplicateWindow, c.Retention)
	}
}

// MinRetention is the shortest retention and duplicate window a topic
// accepts; shorter ones are refused as invalid configuration (JetStream
// itself refuses ages under 100 ms, and no stream is useful below a second).
const MinRetention = time.Second

// MaxMessageIDBytes is the longest message ID a publish accepts.
const MaxMessageIDBytes = 1024

// Validate reports settings that cannot work.
func (c *TopicConfig) Validate() error {
	if c.Retention < MinRetention {
		return fmt.Errorf("retention %s is shorter than the minimum %s: %w", c.Retention, MinRetention, ErrInvalidConfig)
	}
	if c.DuplicateWindow < MinRetention {
		return fmt.Errorf("duplicate window %s is shorter than the minimum %s: %w", c.DuplicateWindow, MinRetention, ErrInvalidConfig)
	}
	if c.MaxBytes < 0 {
		return fmt.Errorf("max bytes %d is negative: %w", c.MaxBytes, ErrInvalidConfig)
	}
	if c.DuplicateWindow > c.Retention {
		return fmt.Errorf("duplicate window %s exceeds retention %s: %w", c.DuplicateWindow, c.Retention, ErrInvalidConfig)
	}
	return nil
}

// TopicInfo describes a topic, for listings and metrics.
type TopicInfo struct {
	Name    string `json:"name"`
	Stream  string `json:"stream"`
	Subject string `json:"subject"`
	// Messages is the number of messages stored (within retention).
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	// FirstSeq and LastSeq are the stream sequences of the oldest and newest
	// stored messages.
	FirstSeq        uint64        `json:"first_seq"`
	LastSeq         uint64        `json:"last_seq"`
	Retention       time.Duration `json:"retention"`
	DuplicateWindow time.Duration `json:"duplicate_window"`
	Subscriptions   int           `json:"subscriptions"`
	Created         time.Time     `json:"created"`
	// Metadata is what TopicConfig.Metadata stored (and JetStream's own
	// entries).
	Metadata map[string]string `json:"-"`
}

// ValidateName checks a topic or subscription name: 1 to 200 characters
// from [A-Za-z0-9_.~+%-], starting with a letter or digit (the characters
// Pub/Sub allows in IDs; see NATSName and namedKV for how the broker
// stores them).
func ValidateName(kind, name string) error {
	if name == "" {
		return fmt.Errorf("%s name is empty: %w", kind, ErrInvalidName)
	}
	if len(name) > maxNameLen {
		return fmt.Errorf("%s name %.20q... is longer than %d characters: %w", kind, name, maxNameLen, ErrInvalidName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || (i > 0 && strings.IndexByte("_-.~+%", c) >= 0)
		if !ok {
			return fmt.Errorf("%s name %q: character %q at %d is not allowed (use letters, digits and _ - . ~ + %%, starting with a letter or digit): %w",
				kind, name, c, i, ErrInvalidName)
		}
	}
	return nil
}

// NATSName is a topic or subscription name as a NATS stream or consumer
// name or subject token: '.' separates subject tokens and is not allowed in
// stream and consumer names, so it becomes ',' (in neither weir's nor
// Pub/Sub's names); a name without '.' is its own NATS name.
func NATSName(name string) string { return strings.ReplaceAll(name, ".", ",") }

// fromNATSName undoes NATSName.
func fromNATSName(s string) string { return strings.ReplaceAll(s, ",", ".") }

// topicNames maps a topic name to its stream and subject.
func topicNames(name string) (stream, subject string, err error) {
	if job, ok := strings.CutPrefix(name, deadLetterPrefix); ok {
		if err := ValidateName("dead-letter job", job); err != nil {
			return "", "", err
		}
		return deadLetterStreamPrefix + NATSName(job), deadLetterPrefix + NATSName(job), nil
	}
	if err := ValidateName("topic", name); err != nil {
		return "", "", err
	}
	return topicStreamPrefix + NATSName(name), topicSubjectPrefix + NATSName(name), nil
}

// topicOfStream maps a stream name back to its topic name; ok is false for
// streams that are not topics.
func topicOfStream(stream string) (string, bool) {
	if t, ok := strings.CutPrefix(stream, topicStreamPrefix); ok && t != "" {
		return fromNATSName(t), true
	}
	if j, ok := strings.CutPrefix(stream, deadLetterStreamPrefix); ok && j != "" {
		return deadLetterPrefix + fromNATSName(j), true
	}
	return "", false
}

// TopicSubject returns the NATS subject of a topic, for external publishers.
func TopicSubject(topic string) (string, error) {
	_, subj, err := topicNames(topic)
	return subj, err
}

// CreateTopic creates a topic. It fails with ErrTopicExists if the topic
// exists, ErrInvalidName for a bad name.
func (b *Broker) CreateTopic(ctx context.Context, name string, cfg TopicConfig) (TopicInfo, error) {
	b.admin.Lock() // a leaf: see Broker.admin
	defer b.admin.Unlock()
	stream, subject, err := topicNames(name)
	if err != nil {
		return TopicInfo{}, err
	}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return TopicInfo{}, fmt.Errorf("topic %s: %w", name, err)
	}
	if _, err := b.js.Stream(ctx, stream); err == nil {
		return TopicInfo{}, fmt.Errorf("creating topic %s: %w", name, ErrTopicExists)
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return TopicInfo{}, apiErr("creating topic "+name, err)
	}
	s, err := b.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:        stream,
		Description: "weir topic " + name,
		Subjects:    []string{subject},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      cfg.Retention,
		MaxBytes:    maxBytes(cfg.MaxBytes),
		Duplicates:  cfg.DuplicateWindow,
		Storage:     jetstream.FileStorage,
		Discard:     jetstream.DiscardOld,
		Replicas:    b.Replicas(),
		Metadata:    cfg.Metadata,
	})
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return TopicInfo{}, fmt.Errorf("creating topic %s: %w", name, ErrTopicExists)
	}
	if err != nil {
		return TopicInfo{}, apiErr("creating topic "+name, err)
	}
	b.log.Info("topic created", "topic", name, "stream", stream, "retention", cfg.Retention)
	return topicInfo(name, s.CachedInfo()), nil
}

func maxBytes(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

// EnsureTopic creates the topic with cfg unless it exists; an existing
// topic is left as it is. It returns the topic's info.
func (b *Broker) EnsureTopic(ctx context.Context, name string, cfg TopicConfig) (TopicInfo, error) {
	info, err := b.Topic(ctx, name)
	if !errors.Is(err, ErrTopicNotFound) {
		return info, err
	}
	info, err = b.CreateTopic(ctx, name, cfg)
	if errors.Is(err, ErrTopicExists) { // created concurrently
		return b.Topic(ctx, name)
	}
	return info, err
}

// Topic describes one topic. It fails with ErrTopicNotFound if there is none.
func (b *Broker) Topic(ctx context.Context, name string) (TopicInfo, error) {
	stream, _, err := topicNames(name)
	if err != nil {
		return TopicInfo{}, err
	}
	s, err := b.js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return TopicInfo{}, fmt.Errorf("topic %s: %w", name, ErrTopicNotFound)
	}
	if err != nil {
		return TopicInfo{}, apiErr("describing topic "+name, err)
	}
	return topicInfo(name, s.CachedInfo()), nil
}

func topicInfo(name string, si *jetstream.StreamInfo) TopicInfo {
	subj := ""
	if len(si.Config.Subjects) > 0 {
		subj = si.Config.Subjects[0]
	}
	return TopicInfo{
		Name:            name,
		Stream:          si.Config.Name,
		Subject:         subj,
		Messages:        si.State.Msgs,
		Bytes:           si.State.Bytes,
		FirstSeq:        si.State.FirstSeq,
		LastSeq:         si.State.LastSeq,
		Retention:       si.Config.MaxAge,
		DuplicateWindow: si.Config.Duplicates,
		Subscriptions:   si.State.Consumers,
		Created:         si.Created,
		Metadata:        si.Config.Metadata,
	}
}

// DeleteTopic deletes a topic with its messages and its subscriptions. It
// fails with ErrTopicNotFound if there is no such topic.
func (b *Broker) DeleteTopic(ctx context.Context, name string) error {
	b.admin.Lock() // a leaf: see Broker.admin
	defer b.admin.Unlock()
	stream, _, err := topicNames(name)
	if err != nil {
		return err
	}
	err = b.js.DeleteStream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("deleting topic %s: %w", name, ErrTopicNotFound)
	}
	if err != nil {
		return apiErr("deleting topic "+name, err)
	}
	if err := b.deleteTopicSnapshots(ctx, name); err != nil {
		return fmt.Errorf("deleting topic %s: its subscription snapshots: %w", name, err)
	}
	b.log.Info("topic deleted", "topic", name)
	return nil
}

// ListTopics lists all topics (dead-letter topics included), by name.
func (b *Broker) ListTopics(ctx context.Context) ([]TopicInfo, error) {
	l := b.js.ListStreams(ctx)
	var out []TopicInfo
	for si := range l.Info() {
		if name, ok := topicOfStream(si.Config.Name); ok {
			out = append(out, topicInfo(name, si))
		}
	}
	if err := l.Err(); err != nil {
		return nil, apiErr("listing topics", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// PublishResult says where a published message was stored.
type PublishResult struct {
	// Sequence is the message's stream sequence.
	Sequence uint64 `json:"sequence"`
	// Duplicate reports that a message with the same ID was already stored
	// within the duplicate window: nothing new was stored, and Sequence is
	// that of the earlier message.
	Duplicate bool `json:"duplicate"`
	// IDConflict reports a Duplicate whose data differs from the stored
	// message's: a publisher reused an ID for other content,
	// which the duplicate window dropped (counted, DuplicateIDConflicts).
	IDConflict bool `json:"id_conflict,omitempty"`
}

// Publish stores one message on a topic and waits for the server's
// acknowledgement. Attributes travel as NATS headers (names may not start
// with "Nats-"). A non-empty msgID is the message's Nats-Msg-Id: a second
// message with the same ID within the topic's duplicate window is dropped
// and reported as a duplicate. It fails with ErrTopicNotFound when the
// topic does not exist.
func (b *Broker) Publish(ctx context.Context, topic string, data []byte, attributes map[string]string, msgID string) (PublishResult, error) {
	return b.publish(ctx, topic, data, attributes, msgID)
}

func (b *Broker) publish(ctx context.Context, topic string, data []byte, attributes map[string]string, msgID string, opts ...jetstream.PublishOpt) (PublishResult, error) {
	msg, err := newMsg(topic, data, attributes)
	if err != nil {
		return PublishResult{}, err
	}
	if len(msgID) > MaxMessageIDBytes {
		return PublishResult{}, fmt.Errorf("message ID of %d bytes is longer than the limit of %d bytes: %w", len(msgID), MaxMessageIDBytes, ErrInvalidConfig)
	}
	if err := b.checkSize(msg, msgID); err != nil {
		return PublishResult{}, err
	}
	if b.StorageFailing() {
		return PublishResult{}, b.storageFailedErr(topic)
	}
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	ack, err := b.js.PublishMsg(ctx, msg, opts...)
	if err != nil {
		err = publishErr(topic, err)
		if ferr := b.failFast(context.WithoutCancel(ctx), topic, err); ferr != nil {
			return PublishResult{}, ferr
		}
		return PublishResult{}, err
	}
	res := PublishResult{Sequence: ack.Sequence, Duplicate: ack.Duplicate}
	if msgID != "" {
		res.IDConflict = b.idConflict(ctx, topic, msgID, msg, ack)
	}
	return res, nil
}

// Bounds of the memory of recently published message IDs (recentIDs): a
// duplicate beyond them is told apart by reading the stored message.
const (
	recentIDsWindow = DefaultDuplicateWindow
	recentIDsMax    = 200_000
	// recentIDMaxBytes bounds the IDs remembered, and so the memory (at
	// most about 50 MB): a longer ID is compared with the stored message.
	recentIDMaxBytes = 128
)

// recentIDs remembers, for the message IDs the broker published lately
// (per topic), a hash of their data. mu is a leaf.
type recentIDs struct {
	mu   sync.Mutex
	seen *seenIDs // guarded by mu; made on first use
}

// idConflict records the publish of msg with ID id to topic, answered by
// ack, and reports whether it was a duplicate whose data differs from the
// stored message of the ID (then counted and logged). The data is compared
// by hash with what this broker published under the ID within the last
// recentIDsWindow (IDs of at most recentIDMaxBytes), else with the stored
// message itself.
func (b *Broker) idConflict(ctx context.Context, topic, id string, msg *nats.Msg, ack *jetstream.PubAck) bool {
	key := topic + "\x00" + id
	now := b.clock.Now()
	r := &b.recent
	r.mu.Lock() // a leaf
	if r.seen == nil {
		r.seen = newSeenIDs(mtime.FromDuration(recentIDsWindow), recentIDsMax)
	}
	seen := r.seen // its hash seed never changes: hashing needs no lock
	r.mu.Unlock()
	h := seen.hash(msg.Data)
	remember := len(id) <= recentIDMaxBytes
	r.mu.Lock() // a leaf
	if !ack.Duplicate {
		if remember {
			seen.put(key, now, h)
		}
		r.mu.Unlock()
		return false
	}
	stored, known := seen.lookup(key)
	r.mu.Unlock()
	if !known {
		data, ok := b.storedData(ctx, ack.Stream, ack.Sequence)
		if !ok {
			return false // a conflict is reported only when it is certain
		}
		stored = seen.hash(data)
		if remember {
			r.mu.Lock() // a leaf
			seen.put(key, now, stored)
			r.mu.Unlock()
		}
	}
	if stored == h {
		return false
	}
	b.countIDConflict(topic, id, ack.Sequence)
	return true
}

// storedData returns the data of the message stored at seq of stream, or
// ok false when it cannot be read (gone by now).
func (b *Broker) storedData(ctx context.Context, stream string, seq uint64) ([]byte, bool) {
	st, err := b.js.Stream(ctx, stream)
	if err == nil {
		var m *jetstream.RawStreamMsg
		if m, err = st.GetMsg(ctx, seq); err == nil {
			return m.Data, true
		}
	}
	b.log.Debug("reading the stored message a duplicate repeats", "stream", stream, "sequence", seq, "error", err)
	return nil, false
}

// countIDConflict counts a publish to topic that reused message ID id of
// the stored message seq with other content, and logs the first ten and
// every thousandth per topic (a publisher bug repeats).
func (b *Broker) countIDConflict(topic, id string, seq uint64) {
	v, _ := b.idConflicts.LoadOrStore(topic, new(atomic.Int64))
	n := v.(*atomic.Int64).Add(1)
	if logged(n) {
		b.log.Warn("a publish reused a message ID with different content: the topic's duplicate window dropped it",
			"topic", topic, "message_id", truncateID(id), "stored_sequence", seq, "id_conflicts", n)
	}
}

// logged says whether the nth occurrence of a repeating warning is
// logged: the first ten and every thousandth, so that a publisher's bug
// does not drown the log (the counters count them all).
func logged(n int64) bool { return n <= 10 || n%1000 == 0 }

// truncateID shortens a message ID for a log line.
func truncateID(id string) string {
	if len(id) > 64 {
		return id[:64] + "…"
	}
	return id
}

// DuplicateIDConflicts returns, per topic, the publishes since the broker
// started that were dropped as duplicates of a stored message ID although
// their data differed (PublishResult.IDConflict). Topics
// without one are absent.
func (b *Broker) DuplicateIDConflicts() map[string]int64 {
	out := map[string]int64{}
	b.idConflicts.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// checkSize refuses a message that the NATS server would refuse for its
// size (data and headers over the connection's maximum payload), with the
// limit in the message.
func (b *Broker) checkSize(msg *nats.Msg, msgID string) error {
	limit := b.nc.MaxPayload()
	if limit <= 0 {
		return nil
	}
	size := int64(len(msg.Data))
	for k, vs := range msg.Header {
		for _, v := range vs {
			size += int64(len(k) + len(v) + 4)
		}
	}
	if msgID != "" {
		size += int64(len(jetstream.MsgIDHeader) + len(msgID) + 4)
	}
	if size > limit {
		return fmt.Errorf("message of %d bytes (data %d, attributes and ID the rest) is larger than the broker's limit of %d bytes: %w", size, len(msg.Data), limit, ErrMessageTooLarge)
	}
	return nil
}

func publishErr(topic string, err error) error {
	if errors.Is(err, nats.ErrMaxPayload) {
		return fmt.Errorf("publishing to topic %s: %w (%w)", topic, ErrMessageTooLarge, err)
	}
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("publishing to topic %s: %w", topic, ErrTopicNotFound)
	}
	return apiErr("publishing to topic "+topic, err)
}

func newMsg(topic string, data []byte, attributes map[string]string) (*nats.Msg, error) {
	_, subject, err := topicNames(topic)
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(subject)
	msg.Data = data
	for k, v := range attributes {
		if err := validateAttribute(k); err != nil {
			return nil, err
		}
		msg.Header.Set(k, v)
	}
	return msg, nil
}

func validateAttribute(k string) error {
	if k == "" {
		return fmt.Errorf("attribute name is empty: %w", ErrInvalidName)
	}
	if len(k) >= 5 && strings.EqualFold(k[:5], "nats-") {
		return fmt.Errorf("attribute %q: names starting with Nats- are reserved: %w", k, ErrInvalidName)
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c == ':' || c >= 0x7f {
			return fmt.Errorf("attribute %q: character %q is not allowed in a name: %w", k, c, ErrInvalidName)
		}
	}
	return nil
}
