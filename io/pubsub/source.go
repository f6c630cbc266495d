// This file holds the ReadFromPubSub source's public surface and its opening:
// the reject reasons, SubscriptionName, SourceConfig (defaults and
// validation), Source, and Split/Resume, which open the subscription as
// one split (and, on resume, read back the dedupe IDs). The split's read
// loop is in source_read.go; positions, Ack and Close in source_ack.go;
// the formats in format.go (Avro's in avro.go).

package pubsub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-dev/weir/io/avrorow"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// Reject reasons of the source (the same words as the file sources).
const (
	// ReasonMalformedJSON: the message is not one JSON object.
	ReasonMalformedJSON = "malformed_json"
	// ReasonSchemaMismatch: a value does not have its field's declared type.
	ReasonSchemaMismatch = "schema_mismatch"
	// ReasonBadTimestamp: the timestamp attribute or field is missing or
	// unparsable.
	ReasonBadTimestamp = "bad_timestamp"
	// ReasonTimestampInSeconds: a numeric timestamp is below 10^11, so it
	// is plainly seconds since the epoch, not milliseconds
	// (row.ErrTimestampInSeconds).
	ReasonTimestampInSeconds = "timestamp_in_seconds"
	// ReasonTimestampInFuture: the event time is further ahead of
	// processing time than SourceConfig.MaxFutureSkew.
	ReasonTimestampInFuture = "timestamp_in_future"
	// ReasonMalformedPayload: a string-format message whose payload is
	// not UTF-8 text, an avro-format message whose payload is not a value
	// of the schema.
	ReasonMalformedPayload = "malformed_payload"
)

// payloadSchema returns Schema without the attribute fields that end it
// (AttributeFields, AttributesMap), or an error when they do not.
func (c *SourceConfig) payloadSchema() (*row.Schema, error) {
	k := len(c.AttributeFields)
	if c.AttributesMap != "" {
		k++
	}
	if k == 0 || c.Schema == nil {
		return c.Schema, nil
	}
	n := c.Schema.Len() - k
	if n < 1 {
		return nil, fmt.Errorf("the schema %s has no room for the payload's fields before %d attribute fields", c.Schema, k)
	}
	for i, name := range c.AttributeFields {
		if f := c.Schema.Fields[n+i]; f.Name != name || f.Type.Kind != row.KindString {
			return nil, fmt.Errorf("attribute %q must be the string field %d of the schema %s", name, n+i, c.Schema)
		}
	}
	if c.AttributesMap != "" {
		if f := c.Schema.Fields[c.Schema.Len()-1]; f.Name != c.AttributesMap || f.Type.Kind != row.KindAny {
			return nil, fmt.Errorf("attributes_map %q must be the last field of the schema %s, of type any", c.AttributesMap, c.Schema)
		}
	}
	return row.NewSchema(c.Schema.Fields[:n]...)
}

// SubscriptionName returns the name of the subscription a source reading a
// topic creates for a job's step: job + "--" + step, with characters not
// allowed in names replaced by '_'. It is stable across runs of the job
// name, so the subscription (and its backlog) survives updates.
func SubscriptionName(job, step string) string { return contract.SubscriptionName(job, step) }

// SourceConfig configures a ReadFromPubSub source.
type SourceConfig struct {
	// Step is the name of the source step, recorded in rejects.
	Step string
	// Subscription is the subscription to read. With Topic empty it must
	// exist; with Topic set it is created on Topic if missing (name it with
	// SubscriptionName) and kept across runs.
	Subscription string
	// Topic, when set, is the topic Subscription reads.
	Topic string
	// Subscribe configures the subscription when the source creates it.
	Subscribe SubscriptionConfig
	// Format says how payloads are read. FormatJSON needs Schema.
	Format Format
	// Schema is the schema of the rows produced from JSON. With
	// FormatAvro it may be left nil: the rows are then AvroSchema's
	// fields (AvroRowSchema), with the attribute fields after them.
	Schema *row.Schema
	// AvroSchema is the Avro record schema of FormatAvro's payloads, as
	// JSON text. Schema's payload fields must be its fields.
	AvroSchema string
	// TimestampAttribute names the attribute holding each message's event
	// time (RFC 3339 or epoch milliseconds). At most one of
	// TimestampAttribute and TimestampField may be set; with neither, event
	// time is the publish time.
	TimestampAttribute string
	// TimestampField names the Schema field holding event time (a
	// timestamp, RFC 3339 string or epoch milliseconds).
	TimestampField string
	// IDAttribute or IDField (a Schema field) names a unique message ID:
	// a message whose ID was seen within DedupeWindow is dropped (a
	// republished or redelivered message). A message without an ID is never
	// dropped. At most one may be set.
	IDAttribute string
	IDField     string
	// Required names fields of Schema that every message must have, not
	// null (a JSON Schema's required): a message without one is a
	// schema_mismatch reject.
	Required []string
	// AttributeFields names attributes copied into fields of their names
	// (Beam's attributes): string fields, null for a message without the
	// attribute. AttributesMap, when set, names a field holding all of a
	// message's attributes as a map of strings (Beam's attributes_map).
	// Those fields end Schema, in that order, after the payload's fields
	// (RawSchema's, StringSchema's or the JSON rows').
	AttributeFields []string
	AttributesMap   string
	// DedupeWindow is how long IDs are remembered, by publish time. Default
	// DefaultDedupeWindow (10 minutes).
	DedupeWindow time.Duration
	// MaxDedupeIDs caps the IDs remembered (oldest forgotten first), which
	// bounds memory: about 100 bytes per ID. Default DefaultMaxDedupeIDs.
	MaxDedupeIDs int
	// Watermark is the watermark policy.
	Watermark WatermarkPolicy
	// FetchWait is the longest Read blocks when nothing is available, and
	// so the longest a pause (an update's, a rescale's, a drain's) waits
	// for the pull request in flight. Default 25ms: with 100ms an update
	// under light traffic paused up to ~95 ms; an idle source then costs
	// 40 pull requests a second (docs/BENCHMARKS.md).
	FetchWait time.Duration
	// IdlePollInterval is the longest an idle source waits between two
	// looks at an empty subscription when its worker has nothing else to
	// do (contract.IdleReader) and no message was published to the topic
	// meanwhile (a publish wakes it at once): what a redelivery or a seek
	// of an idle subscription may wait. Default DefaultIdlePollInterval.
	IdlePollInterval time.Duration
	// MaxFutureSkew is how far ahead of processing time (Clock) an event
	// time may be. A message stamped further ahead is a reject with reason
	// ReasonTimestampInFuture: it never reaches the watermark, so one bad
	// clock (a message stamped 2099) cannot make everything after it late.
	// Default DefaultMaxFutureSkew (1h); negative disables the check.
	MaxFutureSkew time.Duration
	// Clock gives processing time for the idle watermark and the
	// MaxFutureSkew bound. Default the wall clock.
	Clock mtime.Clock
	// RewindHorizon is how far behind the watermark the event-time table
	// of the position keeps buckets (rewind.go): the job's longest window
	// plus its allowed lateness. Default DefaultRewindHorizon, at most
	// MaxRewindHorizon.
	RewindHorizon time.Duration
	// Rewind, when set, makes the split re-read for a replacement job:
	// see RewindStart.
	Rewind *contract.RewindStart
	// UnreachableAfter is how long a split's reads may find the broker's
	// connection down (the client reconnecting to an external NATS
	// server that went away) before a read fails with ErrUnavailable: a
	// server job then waits for its broker under the condition
	// CONNECTOR_UNAVAILABLE, retried from its last checkpoint, instead of
	// idling unseen. Measured on Clock. Default DefaultUnreachableAfter.
	UnreachableAfter time.Duration

	// required holds Required's positions in Schema (NewSource).
	required []int
	// payload is the part of Schema the payload fills: Schema without the
	// attribute fields (NewSource).
	payload *row.Schema
	// avro is AvroSchema parsed (Validate); avroDec reads its payloads
	// into the rows (NewSource).
	avro    *avro.RecordSchema
	avroDec *avrorow.Decoder
}

// DefaultUnreachableAfter is the default SourceConfig.UnreachableAfter:
// longer than a NATS server's restart or a cluster's change of leader,
// which the client rides out by reconnecting.
const DefaultUnreachableAfter = 30 * time.Second

// DefaultMaxFutureSkew is the default SourceConfig.MaxFutureSkew.
const DefaultMaxFutureSkew = time.Hour

// EnsureDefaults fills unset fields with their defaults.
func (c *SourceConfig) EnsureDefaults() {
	if c.Schema == nil {
		switch c.Format {
		case FormatRaw:
			c.Schema = rawSchema
		case FormatString:
			c.Schema = stringSchema
		case FormatAvro:
			c.Schema = c.avroRows()
		}
	}
	c.Subscribe.EnsureDefaults()
	c.Watermark.EnsureDefaults()
	if c.DedupeWindow <= 0 {
		c.DedupeWindow = DefaultDedupeWindow
	}
	if c.MaxDedupeIDs <= 0 {
		c.MaxDedupeIDs = DefaultMaxDedupeIDs
	}
	if c.FetchWait <= 0 {
		c.FetchWait = 25 * time.Millisecond
	}
	if c.IdlePollInterval <= 0 {
		c.IdlePollInterval = DefaultIdlePollInterval
	}
	if c.Clock == nil {
		c.Clock = mtime.WallClock{}
	}
	if c.MaxFutureSkew == 0 {
		c.MaxFutureSkew = DefaultMaxFutureSkew
	}
	if c.RewindHorizon <= 0 {
		c.RewindHorizon = DefaultRewindHorizon
	}
	c.RewindHorizon = min(c.RewindHorizon, MaxRewindHorizon)
	if c.UnreachableAfter <= 0 {
		c.UnreachableAfter = DefaultUnreachableAfter
	}
}

// Validate reports settings that cannot work.
func (c *SourceConfig) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("ReadFromPubSub %s: %s: %w", c.Step, fmt.Sprintf(format, args...), ErrInvalidConfig)
	}
	if c.Subscription == "" {
		if c.Topic != "" {
			return bad("reading topic %s needs a subscription name (the job service names it after the job and step)", c.Topic)
		}
		return bad("set subscription or topic")
	}
	if err := ValidateName("subscription", c.Subscription); err != nil {
		return bad("%v", err)
	}
	if c.Topic != "" {
		if _, _, err := topicNames(c.Topic); err != nil {
			return bad("%v", err)
		}
	}
	if c.TimestampAttribute != "" && c.TimestampField != "" {
		return bad("set timestamp_attribute or timestamp_field, not both")
	}
	if c.IDAttribute != "" && c.IDField != "" {
		return bad("set id_attribute or id_field, not both")
	}
	payload, err := c.payloadSchema()
	if err != nil {
		return bad("%v", err)
	}
	if c.Format == FormatAvro {
		if err := c.validateAvro(payload); err != nil {
			return bad("%v", err)
		}
	}
	if c.Schema == nil && (c.Format == FormatJSON || c.Format == FormatAvro || c.TimestampField != "" || c.IDField != "" || len(c.Required) > 0) {
		return bad("format %s needs a schema", c.Format)
	}
	for _, f := range []struct{ what, name string }{{"timestamp_field", c.TimestampField}, {"id_field", c.IDField}} {
		if f.name != "" && c.Schema.Index(f.name) < 0 {
			return bad("%s %q is not a field of the schema (fields: %s)", f.what, f.name, strings.Join(c.Schema.Names(), ", "))
		}
	}
	switch c.Format {
	case FormatJSON, FormatAvro:
		for _, name := range c.Required {
			if c.Schema.Index(name) < 0 {
				return bad("required field %q is not a field of the schema (fields: %s)", name, strings.Join(c.Schema.Names(), ", "))
			}
		}
	case FormatRaw, FormatString:
		if len(c.Required) > 0 {
			return bad("format %s has no required fields", c.Format)
		}
	default:
		return bad("unknown format %d", c.Format)
	}
	return nil
}

// Source is the ReadFromPubSub source: it reads one subscription as one
// split (a subscription is one cursor; reading it from several workers would
// need one subscription per partition, which a later version may add). It
// implements contract.ResumableSource; its splits implement
// contract.PositionedSplit.
//
// Lifecycle: the runner calls Split (a fresh start) or Resume (from a
// checkpoint) once; then Read repeatedly from one goroutine, Position between
// Reads when a checkpoint barrier is taken, Ack from any goroutine once a
// checkpoint is durable, and Close once. Messages are acknowledged only by
// Ack, cumulatively; messages read but not acknowledged are delivered again
// on the next start.
type Source struct {
	b   *Broker
	cfg SourceConfig
	// maxEvent is the newest event time its splits produced (mtime
	// milliseconds; MinTimestamp before the first).
	maxEvent *atomic.Int64
	// rewindSkipped counts the messages its splits skipped under
	// SourceConfig.Rewind.
	rewindSkipped atomic.Int64
	// idConflicts counts the messages its splits dropped as duplicates of
	// an ID seen within the dedupe window although their data differed.
	idConflicts atomic.Int64
	// readSeq is the last stream sequence its split handled (set only
	// under SourceConfig.Rewind: CatchUp).
	readSeq atomic.Uint64
	// expired counts the messages of the re-read the topic no longer held
	// (CatchUp.Expired); onExpired, when set, is told of each gap.
	expired   atomic.Uint64
	onExpired atomic.Pointer[func(contract.CatchUpExpired)]
	// live is the subscription its last opened split reads (the backlog
	// metrics ask it directly, without looking the subscription up).
	live atomic.Pointer[liveConsumer]
	// closedSeen is what its last closed split remembered of message IDs
	// (a source with de-duplication), handed to the source that replaces
	// it (AdoptSource); adopted is what it took over from its
	// predecessor, used once by the split that resumes where that one
	// stopped (source_handover.go).
	closedSeen atomic.Pointer[seenHandoff]
	adopted    atomic.Pointer[seenHandoff]
	// readBack counts the read-back of dedupe IDs at resumes (ReadBack).
	readBack readBackStats
}

// liveConsumer is the subscription an open split reads, on its topic.
type liveConsumer struct {
	topic string
	cons  jetstream.Consumer
}

// ReRead makes the source re-read for a replacement job when starts has
// an entry for its subscription (SourceConfig.Rewind); call it before
// Split or Resume (contract.ReReadingSource).
func (s *Source) ReRead(starts map[string]contract.RewindStart) {
	if rs, ok := starts[s.cfg.Subscription]; ok {
		s.cfg.Rewind = &rs
	}
}

// CatchUp returns the progress of the source's re-read, or false when it
// does not re-read (no SourceConfig.Rewind). Safe from any goroutine.
func (s *Source) CatchUp() (contract.CatchUp, bool) {
	if s.cfg.Rewind == nil {
		return contract.CatchUp{}, false
	}
	c := contract.CatchUp{ReadSeq: s.readSeq.Load(), HoldUntil: s.cfg.Rewind.HoldUntil, Expired: s.expired.Load()}
	c.Holding = c.ReadSeq < c.HoldUntil
	return c, true
}

// OnCatchUpExpired makes the source call fn, from its reading goroutine,
// each time its split finds that messages its re-read had to read again
// are gone from the topic (CatchUpExpired); without it the source logs a
// warning. Call it before Split or Resume.
func (s *Source) OnCatchUpExpired(fn func(contract.CatchUpExpired)) { s.onExpired.Store(&fn) }

// MaxEventTime returns the newest event time of an element the source
// produced since it was built; ok is false before the first. The job
// service reads it to tell which windows a job may already have fired.
func (s *Source) MaxEventTime() (t mtime.Time, ok bool) {
	t = mtime.Time(s.maxEvent.Load())
	return t, t != mtime.MinTimestamp
}

// RewindSkipped returns how many messages the source skipped because every
// window they belong to had expired before the replacement it re-reads for
// (SourceConfig.Rewind); they are neither emitted nor dead-lettered.
func (s *Source) RewindSkipped() int64 { return s.rewindSkipped.Load() }

// DuplicateIDConflicts returns how many messages the source dropped as
// duplicates of an ID (id_attribute or id_field) it had seen within its
// dedupe window although their data differed from the first message's: a
// publisher reused an ID for another message. Since the source was built.
func (s *Source) DuplicateIDConflicts() int64 { return s.idConflicts.Load() }

// NewSource returns a source reading through b. It checks cfg but does not
// touch the broker: the subscription is resolved (or created) by Split or
// Resume.
func NewSource(b *Broker, cfg SourceConfig) (*Source, error) {
	if cfg.UnreachableAfter <= 0 && b != nil { // nil: loaded to be checked, never read
		cfg.UnreachableAfter = b.unreachableAfter
	}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, name := range cfg.Required {
		cfg.required = append(cfg.required, cfg.Schema.Index(name))
	}
	cfg.payload, _ = cfg.payloadSchema()
	if cfg.Format == FormatAvro {
		var err error
		if cfg.avroDec, err = avrorow.NewDecoder(cfg.avro, cfg.payload); err != nil {
			return nil, fmt.Errorf("ReadFromPubSub %s: %w: %w", cfg.Step, err, ErrInvalidConfig)
		}
	}
	src := &Source{b: b, cfg: cfg, maxEvent: &atomic.Int64{}}
	src.maxEvent.Store(int64(mtime.MinTimestamp))
	return src, nil
}

// SetRewindHorizon sets SourceConfig.RewindHorizon (capped at
// MaxRewindHorizon); call it before Split or Resume.
func (s *Source) SetRewindHorizon(d time.Duration) {
	if d > 0 {
		s.cfg.RewindHorizon = min(d, MaxRewindHorizon)
	}
}

// Config returns the source's configuration with defaults filled in.
func (s *Source) Config() SourceConfig { return s.cfg }

// backlogTimeout bounds the broker call of BacklogElements.
const backlogTimeout = 200 * time.Millisecond

// BacklogElements returns the subscription's messages not yet acknowledged
// (pending delivery or delivered and awaiting a checkpoint), or false when
// the broker does not answer quickly.
func (s *Source) BacklogElements() (int64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), backlogTimeout)
	defer cancel()
	info, err := s.backlogInfo(ctx)
	if err != nil {
		return 0, false
	}
	return int64(info.Backlog), true
}

// BacklogBytes estimates the size of the subscription's messages not yet
// acknowledged: the backlog times the topic's mean stored message size
// (contract.BacklogBytesReporter).
func (s *Source) BacklogBytes() (int64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), backlogTimeout)
	defer cancel()
	info, err := s.backlogInfo(ctx)
	if err != nil {
		return 0, false
	}
	ti, err := s.b.Topic(ctx, info.Topic)
	if err != nil {
		return 0, false
	}
	if ti.Messages == 0 {
		return 0, true
	}
	return int64(float64(info.Backlog) * float64(ti.Bytes) / float64(ti.Messages)), true
}

// backlogInfo describes the subscription for the backlog metrics: through
// the open split's consumer (one round trip to the broker), else by looking
// it up (a search over the topics' streams, several round trips, which
// under load queue with the broker's other requests, a resume's among
// them: the metrics are sampled while jobs run and at every update).
func (s *Source) backlogInfo(ctx context.Context) (SubscriptionInfo, error) {
	if lc := s.live.Load(); lc != nil {
		if ci, err := lc.cons.Info(ctx); err == nil {
			return subscriptionInfo(lc.topic, ci), nil
		}
		// Deleted, or recreated meanwhile: look it up.
	}
	return s.b.Subscription(ctx, s.cfg.Subscription)
}

// Split opens the subscription as one split, starting from its
// acknowledgement floor: messages delivered earlier but not acknowledged
// (an earlier run that stopped before its checkpoint) are delivered again
// at once.
func (s *Source) Split(ctx context.Context, _ int) ([]contract.SourceSplit, error) {
	sp, err := s.open(ctx, nil)
	if err != nil {
		return nil, err
	}
	return []contract.SourceSplit{sp}, nil
}

// Resume opens the subscription from the position a checkpoint recorded:
// everything up to it counts as acknowledged, everything after it is
// delivered again. With ID de-duplication, the IDs of the messages within
// DedupeWindow before the position are read back from the topic first, so
// de-duplication spans the restart.
func (s *Source) Resume(ctx context.Context, positions [][]byte) ([]contract.SourceSplit, error) {
	if len(positions) == 0 {
		return s.Split(ctx, 1)
	}
	if len(positions) != 1 {
		return nil, fmt.Errorf("resuming %s: the checkpoint has %d positions, this source has one split: %w", s.cfg.Subscription, len(positions), ErrInvalidPosition)
	}
	p, err := decodePosition(positions[0])
	if err != nil {
		return nil, err
	}
	if p.Subscription != s.cfg.Subscription {
		return nil, fmt.Errorf("resuming %s from a position of subscription %s: %w", s.cfg.Subscription, p.Subscription, ErrInvalidPosition)
	}
	sp, err := s.open(ctx, &p)
	if err != nil {
		return nil, err
	}
	return []contract.SourceSplit{sp}, nil
}

func (s *Source) open(ctx context.Context, from *position) (*split, error) {
	cfg := &s.cfg
	// A resumed split (every in-place update and restart) is on the data
	// pause's path: the subscription is looked up once, on its topic's
	// stream when the topic is known, and that lookup serves the per-message
	// check and the rewind too (each lookup is a round trip to the broker,
	// and a search over every topic's stream is one per topic).
	s.b.ensureStorage(ctx)
	var seq uint64
	switch {
	case from != nil:
		seq = from.StreamSeq + 1
	case cfg.Rewind != nil && cfg.Rewind.FromSeq > 0:
		seq = cfg.Rewind.FromSeq
	}
	topic, cons, err := s.consumer(ctx, seq)
	if err != nil {
		return nil, err
	}
	stream, _, _ := topicNames(topic)
	if err := refusePerMessageConsumer(cons.CachedInfo(), cfg.Step, cfg.Subscription, topic); err != nil {
		return nil, err
	}
	if cons, err = s.b.rewindConsumer(ctx, stream, cfg.Subscription, seq, cons, false); err != nil {
		return nil, fmt.Errorf("ReadFromPubSub %s: %w", cfg.Step, err)
	}
	s.live.Store(&liveConsumer{topic: topic, cons: cons})
	sp := &split{
		src:      s,
		b:        s.b,
		cfg:      cfg,
		cons:     cons,
		stream:   stream,
		srcName:  topic,
		wm:       newWatermarker(cfg.Watermark, cfg.Clock.Now()),
		maxEvent: s.maxEvent,
		pending:  -1,
	}
	if cfg.IDAttribute != "" || cfg.IDField != "" {
		sp.seen = newSeenIDs(mtime.FromDuration(cfg.DedupeWindow), cfg.MaxDedupeIDs)
	}
	sp.tsField, sp.idField = -1, -1
	if cfg.Schema != nil {
		if cfg.TimestampField != "" {
			sp.tsField = cfg.Schema.Index(cfg.TimestampField)
		}
		if cfg.IDField != "" {
			sp.idField = cfg.Schema.Index(cfg.IDField)
		}
	}
	sp.horizon = mtime.FromDuration(cfg.RewindHorizon)
	if from != nil {
		sp.pos = *from
		sp.pos.Ack = ""
		if sp.pos.Track == nil {
			// A position from before event-time tracking: what it read
			// earlier is unknown, so nothing is known complete.
			sp.pos.Track = &Track{From: int64(mtime.MaxTimestamp), Watermark: int64(mtime.MinTimestamp)}
		}
		if sp.seen != nil {
			if seen := s.takeAdopted(from); seen != nil {
				sp.seen = seen // handed over in memory: nothing to read back
			} else if err := sp.warmSeen(ctx); err != nil {
				return nil, err
			}
		}
	} else if seq > 0 {
		sp.pos = position{Subscription: cfg.Subscription, StreamSeq: seq - 1,
			Track: &Track{From: int64(mtime.MinTimestamp), Watermark: int64(mtime.MinTimestamp)}}
	} else {
		// The rewind above left the delivery at the acknowledgement floor.
		ci, err := cons.Info(ctx)
		if err != nil {
			return nil, apiErr("ReadFromPubSub "+cfg.Step+": opening subscription "+cfg.Subscription, err)
		}
		sp.pos = position{Subscription: cfg.Subscription, StreamSeq: ci.AckFloor.Stream,
			Track: &Track{From: int64(mtime.MinTimestamp), Watermark: int64(mtime.MinTimestamp)}}
	}
	if cfg.Rewind != nil {
		s.readSeq.Store(sp.pos.StreamSeq)
	}
	return sp, nil
}

// DefaultIdlePollInterval is SourceConfig.IdlePollInterval's default.
const DefaultIdlePollInterval = 5 * time.Second

// consumer finds the source's subscription and its topic: on the topic's
// stream when the source reads a topic (creating the subscription the
// first time, at stream sequence startSeq when it is not 0 — a job placed
// at a snapshot's position — so that the subscription's backlog counts
// what the source will read from the moment it exists), else by searching
// every topic's stream.
func (s *Source) consumer(ctx context.Context, startSeq uint64) (string, jetstream.Consumer, error) {
	cfg := &s.cfg
	if cfg.Topic == "" {
		t, c, err := s.b.findSubscription(ctx, cfg.Subscription)
		if err != nil {
			return "", nil, fmt.Errorf("ReadFromPubSub %s: %w", cfg.Step, err)
		}
		return t, c, nil
	}
	stream, _, _ := topicNames(cfg.Topic)
	// A lookup can say "not found" and the creation "exists" a moment
	// later: the broker loading its streams and consumers again (after a
	// full disk) answers from a partial view for a short while. The source
	// asks again, briefly, rather than fail its job on that.
	var lastErr error
	// No pause before the first lookup, nor before the lookup that follows
	// the first creation.
	pause, created := false, false
	exists := 0 // creations in a row that said "exists"
	for attempt := 0; attempt < consumerLookupAttempts; attempt++ {
		if pause {
			t := time.NewTimer(consumerLookupPause)
			select {
			case <-ctx.Done():
				t.Stop()
				return "", nil, fmt.Errorf("ReadFromPubSub %s: opening subscription %s: %w (last: %w)", cfg.Step, cfg.Subscription, ctx.Err(), lastErr)
			case <-t.C:
			}
		}
		c, err := s.b.js.Consumer(ctx, stream, NATSName(cfg.Subscription))
		if err == nil {
			return cfg.Topic, c, nil
		}
		if !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return "", nil, apiErr("ReadFromPubSub "+cfg.Step+": opening subscription "+cfg.Subscription, err)
		}
		// Missing (or on another topic, which EnsureSubscription refuses).
		sc := cfg.Subscribe
		sc.StartSeq = startSeq
		info, err := s.b.EnsureSubscription(ctx, cfg.Subscription, cfg.Topic, sc)
		switch {
		case err == nil:
			lastErr = fmt.Errorf("subscription %s was created on topic %s but cannot be read yet", cfg.Subscription, info.Topic)
			pause, created = created, true
		case errors.Is(err, ErrSubscriptionExists) && !errors.As(err, new(otherTopicError)):
			lastErr, pause = err, true // exists, not yet visible to a lookup
			if exists++; exists == closedConsumerAfter {
				// Still so after a while: a consumer left closed in its
				// stream, which only a reload of JetStream clears.
				if _, err := s.b.reloadForClosedConsumer(cfg.Subscription); err != nil {
					lastErr = err
				}
			}
		default:
			return "", nil, fmt.Errorf("ReadFromPubSub %s: %w", cfg.Step, err)
		}
	}
	return "", nil, fmt.Errorf("ReadFromPubSub %s: opening subscription %s: %w: %w", cfg.Step, cfg.Subscription, ErrUnavailable, lastErr)
}

// consumerLookupAttempts and consumerLookupPause bound how long a source
// asks again for a subscription that the broker says both exists and is
// missing (its view being loaded again): about thirty seconds. Five were
// not enough on a loaded machine after a full disk
// (TestCLIServerFullDisk failed its job with "subscription already
// exists" once in a fresh-clone CI run).
const (
	consumerLookupAttempts = 300
	consumerLookupPause    = 100 * time.Millisecond
	// closedConsumerAfter is how many creations in a row that say
	// "exists" (to lookups that say "not found") make the source ask the
	// broker to load JetStream again (Broker.reloadForClosedConsumer).
	closedConsumerAfter = 20
)

// warmSeen reads back the IDs of the messages published within the dedupe
// window before the resume position, so that de-duplication spans a
// restart. It reads the messages stored from the window's start up to the
// position, which the topic already holds: every fetch asks only for what
// is there (no wait for messages that cannot come), and the read-back ends
// at the position's message or at the first fetch that finds nothing more
// (the position's message is gone: retention).
func (s *split) warmSeen(ctx context.Context) error {
	if s.pos.StreamSeq == 0 || s.pos.PublishMillis == 0 {
		return nil
	}
	start := mtime.Time(s.pos.PublishMillis).Add(-mtime.FromDuration(s.cfg.DedupeWindow)).ToTime()
	oc, err := s.b.js.OrderedConsumer(ctx, s.stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartTimePolicy,
		OptStartTime:  &start,
		// Only the headers are needed to read an ID attribute.
		HeadersOnly:       s.cfg.IDAttribute != "",
		InactiveThreshold: 5 * time.Second,
	})
	if err != nil {
		return apiErr("reading back message IDs of "+s.cfg.Subscription, err)
	}
	stats := &s.src.readBack
	stats.resumes.Add(1)
	for {
		// No wait: what the read-back needs is stored already. (A fetch
		// with an expiry that the batch does not fill waits it out: a
		// second of pause at every resume.)
		b, err := oc.FetchNoWait(readBackBatch)
		if err != nil {
			return apiErr("reading back message IDs of "+s.cfg.Subscription, err)
		}
		stats.fetches.Add(1)
		got := 0
		for m := range b.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil || md.Sequence.Stream > s.pos.StreamSeq {
				continue
			}
			publish := mtime.FromTime(md.Timestamp)
			if s.cfg.IDAttribute != "" {
				if id := m.Headers().Get(s.cfg.IDAttribute); id != "" {
					s.seen.check(id, publish, 0) // headers only: the data is not known
				}
			} else if r, _, _ := s.decode(m.Data()); r != nil {
				if id := s.rowID(r); id != "" {
					s.seen.check(id, publish, s.seen.hash(m.Data()))
				}
			}
			if md.Sequence.Stream >= s.pos.StreamSeq {
				drain(b)
				stats.messages.Add(int64(got))
				return s.readBackEnd(b)
			}
		}
		stats.messages.Add(int64(got))
		if err := s.readBackEnd(b); err != nil {
			return err
		}
		if got == 0 {
			return nil // the position's message is gone (retention)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// readBackEnd is the error of a read-back fetch that failed, else nil.
func (s *split) readBackEnd(b jetstream.MessageBatch) error {
	if err := b.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
		return apiErr("reading back message IDs of "+s.cfg.Subscription, err)
	}
	return nil
}

func drain(b jetstream.MessageBatch) {
	for range b.Messages() {
	}
}
