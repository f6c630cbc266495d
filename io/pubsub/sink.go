package pubsub

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/hamba/avro/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-dev/weir/io/avrorow"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// SinkConfig configures a WriteToPubSub sink.
type SinkConfig struct {
	// Step is the name of the sink step, for messages.
	Step string
	// Topic is the topic written to.
	Topic string
	// CreateTopic creates the topic (with TopicConfig) at the first commit
	// if it does not exist; otherwise a missing topic is an error.
	CreateTopic bool
	TopicConfig TopicConfig
	// ID identifies the sink across replays of a job: message IDs are
	// derived from it, so it must be the same when a job restarts from a
	// checkpoint and different for two sinks writing one topic (the job
	// service uses job ID + "/" + step name).
	ID string
	// Format says how element values become payloads.
	Format Format
	// AvroSchema is the Avro record schema (its JSON text) FormatAvro
	// writes rows with, their fields by name. Empty: each row's own,
	// inferred from its payload fields (package avrorow), every field
	// nullable.
	AvroSchema string
	// IDField, when set, names the row field whose value is each message's
	// ID, instead of the derived one: a message whose field value was
	// already published within the topic's duplicate window is dropped,
	// whichever sink or job published it.
	IDField string
	// Attributes are added to every message.
	Attributes map[string]string
	// AttributeFields names row fields published as attributes of their
	// names, their values as text (a null leaves the attribute out), and
	// left out of the payload: Beam's attributes. AttributesMapField
	// names a row field holding a map of attributes, published likewise
	// and left out of the payload: Beam's attributes_map. An element whose
	// attributes cannot be published (a name Pub/Sub refuses, a map field
	// that holds no map) is a not_publishable reject of the sink.
	AttributeFields    []string
	AttributesMapField string
	// IDAttribute, when set, names an attribute holding each message's ID
	// (the derived one, or IDField's value), Beam's id_attribute: a reader
	// that dedupes on it (ReadFromPubSub's id_attribute, Dataflow's
	// id_label) drops what a replay published again.
	IDAttribute string
	// TimestampAttribute, when set, names an attribute holding each
	// element's event time as milliseconds since the Unix epoch (Beam's
	// timestamp_attribute): a reader with the same timestamp_attribute
	// reads the events at their own time, not at their publish time.
	TimestampAttribute string
	// Owns, when set, says which windows the sink publishes: an element
	// whose window it returns false for is left out (the job service sets
	// it during a parallel replacement, so that each window's panes reach
	// the topic from one job only). Nil publishes every element.
	Owns func(w window.Window) bool

	// avro is AvroSchema parsed (Validate).
	avro *avro.RecordSchema
}

// Validate reports settings that cannot work.
func (c *SinkConfig) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("WriteToPubSub %s: %s: %w", c.Step, fmt.Sprintf(format, args...), ErrInvalidConfig)
	}
	if c.Topic == "" {
		return bad("set topic")
	}
	if _, _, err := topicNames(c.Topic); err != nil {
		return bad("%v", err)
	}
	if c.ID == "" {
		return bad("the sink needs an ID (job ID and step) to derive message IDs")
	}
	if c.Format != FormatJSON && c.Format != FormatRaw && c.Format != FormatString && c.Format != FormatAvro {
		return bad("unknown format %d", c.Format)
	}
	if c.AvroSchema != "" {
		if c.Format != FormatAvro {
			return bad("an Avro schema is for format avro, not %s", c.Format)
		}
		var err error
		if c.avro, err = avrorow.Parse(c.AvroSchema); err != nil {
			return bad("%v", err)
		}
	}
	for k := range c.Attributes {
		if err := validateAttribute(k); err != nil {
			return bad("%v", err)
		}
	}
	for _, k := range append(slices.Clone(c.AttributeFields), c.IDAttribute, c.TimestampAttribute) {
		if k == "" {
			continue
		}
		if err := validateAttribute(k); err != nil {
			return bad("%v", err)
		}
	}
	if c.IDAttribute != "" && c.IDAttribute == c.TimestampAttribute {
		return bad("id_attribute and timestamp_attribute are both %q", c.IDAttribute)
	}
	for _, k := range c.AttributeFields {
		if k == c.IDAttribute || k == c.TimestampAttribute {
			return bad("the attribute %q is both an attribute field and the id_attribute or timestamp_attribute", k)
		}
	}
	return nil
}

// ReasonNotPublishable is the reject reason of an element a WriteToPubSub
// sink cannot make a message of (contract.RejectingSink).
const ReasonNotPublishable = "not_publishable"

// Sink is the WriteToPubSub sink: it publishes each element as one message
// (a row as a JSON object, or raw bytes) with a deterministic message ID, so
// that JetStream's duplicate window drops what a replay publishes again. It
// implements contract.TransactionalSink.
//
// Lifecycle: Write is called with each bundle from the worker that produced
// it (concurrently across workers) and only buffers. At a checkpoint
// barrier PreCommit hands over a worker's buffer, serialized with the
// message IDs of epoch, worker and index; once the checkpoint is durable
// Commit publishes the parts and waits for the server's acknowledgements.
// A replay of Commit after a crash publishes the same IDs: within the
// topic's duplicate window (DefaultDuplicateWindow, 10 minutes) nothing is
// stored twice; later than that, duplicates are possible. Close publishes
// what is still buffered (bounded runs without checkpoints).
type Sink struct {
	b   *Broker
	cfg SinkConfig
	// buffered is the size of the messages in mu.buf (BufferedBytes).
	buffered atomic.Int64
	// avro writes SinkConfig.AvroSchema's records; nil infers each row
	// schema's, the last one inferred kept in inferred.
	avro     *avrorow.Encoder
	inferred atomic.Pointer[inferredAvro]

	mu struct {
		sync.Mutex
		buf          map[int][]outMsg // by worker
		topicChecked bool
		published    int64
		duplicates   int64
	}
}

// outMsg is one message to publish; id is empty until PreCommit or Close
// assigns the derived one. cutShort marks the pane of a window the job did
// not see whole (the CutShortAttribute).
type outMsg struct {
	id       string
	data     []byte
	cutShort bool
	// attrs holds the message's own attributes as name, value pairs
	// (SinkConfig.AttributeFields, AttributesMapField).
	attrs []string
}

// CutShortAttribute is the attribute, set to "true", of a message carrying
// a pane whose job did not see all of its window's input
// (window.PaneInfo.CutShort: a drain's last pane for a window still open, or
// a window that began before the job's input). Messages of complete panes,
// and of elements that are not panes, do not have it. A consumer keeping
// the latest result per key and window keeps a complete one over a message
// with this attribute.
const CutShortAttribute = "weir-pane-cut-short"

var (
	_ contract.WindowRestrictedSink = (*Sink)(nil)
	_ contract.BufferingSink        = (*Sink)(nil)
	_ contract.ReReadingSource      = (*Source)(nil)
)

// RestrictWindows makes the sink leave out the elements of windows keep
// refuses, on top of SinkConfig.Owns and earlier restrictions; call it
// before the execution starts (contract.WindowRestrictedSink).
func (s *Sink) RestrictWindows(keep func(window.Window) bool) {
	s.cfg.Owns = contract.Restrict(s.cfg.Owns, keep)
}

// NewSink returns a sink publishing through b.
func NewSink(b *Broker, cfg SinkConfig) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Sink{b: b, cfg: cfg}
	if cfg.AvroSchema != "" {
		var err error
		if s.avro, err = avrorow.NewEncoder(cfg.avro); err != nil {
			return nil, fmt.Errorf("WriteToPubSub %s: %w: %w", cfg.Step, err, ErrInvalidConfig)
		}
	}
	s.mu.buf = make(map[int][]outMsg)
	return s, nil
}

// Stats returns how many messages Commit and Close stored, and how many the
// topic dropped as duplicates (replays).
func (s *Sink) Stats() (published, duplicates int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.published, s.mu.duplicates
}

// Write encodes elems and buffers them for worker. An element that cannot
// be made a message fails the call; WriteRejecting reports it instead.
func (s *Sink) Write(_ context.Context, worker int, elems []contract.Element) error {
	_, err := s.write(worker, elems, nil, false)
	return err
}

// WriteRejecting is Write, except that an element that cannot be made a
// message is left out and appended to rejects, reason
// ReasonNotPublishable (contract.RejectingSink).
func (s *Sink) WriteRejecting(_ context.Context, worker int, elems []contract.Element, rejects []contract.SinkReject) ([]contract.SinkReject, error) {
	return s.write(worker, elems, rejects, true)
}

func (s *Sink) write(worker int, elems []contract.Element, rejects []contract.SinkReject, reject bool) ([]contract.SinkReject, error) {
	msgs := make([]outMsg, 0, len(elems))
	for i := range elems {
		if s.cfg.Owns != nil && !s.cfg.Owns(elems[i].Window) {
			continue
		}
		m, err := s.encode(elems[i].Value)
		if err != nil {
			if !reject {
				return rejects, fmt.Errorf("WriteToPubSub %s: element at %s: %w", s.cfg.Step, elems[i].Source, err)
			}
			rejects = append(rejects, contract.SinkReject{Index: i, Err: contract.ElementError{Reason: ReasonNotPublishable, Message: err.Error()}})
			continue
		}
		m.cutShort = elems[i].Pane.CutShort
		if s.cfg.TimestampAttribute != "" {
			// In the pre-committed part with the other attributes, so
			// that a replay publishes what the first commit would have.
			m.attrs = append(m.attrs, s.cfg.TimestampAttribute, strconv.FormatInt(int64(elems[i].Time), 10))
		}
		msgs = append(msgs, m)
	}
	s.mu.Lock()
	s.mu.buf[worker] = append(s.mu.buf[worker], msgs...)
	s.buffered.Add(msgsSize(msgs))
	s.mu.Unlock()
	return rejects, nil
}

// BufferedBytes returns the size of the messages written and not yet
// taken by a PreCommit (contract.BufferingSink): the sink holds them in
// memory until then.
func (s *Sink) BufferedBytes() int64 { return s.buffered.Load() }

// msgsSize is about how many bytes msgs hold.
func msgsSize(msgs []outMsg) int64 {
	n := int64(len(msgs)) * int64(unsafe.Sizeof(outMsg{}))
	for i := range msgs {
		n += int64(len(msgs[i].data) + len(msgs[i].id))
		for _, a := range msgs[i].attrs {
			n += int64(len(a)) + 16
		}
	}
	return n
}

func (s *Sink) encode(v any) (outMsg, error) {
	var m outMsg
	if s.cfg.IDField != "" {
		if r, ok := row.AsRow(v); ok {
			if x, ok := r.Get(s.cfg.IDField); ok && x != nil {
				m.id = string(row.AppendText(nil, x))
			}
		}
	}
	var omit []int
	if len(s.cfg.AttributeFields) > 0 || s.cfg.AttributesMapField != "" {
		r, ok := row.AsRow(v)
		if !ok {
			return m, fmt.Errorf("attributes come from fields: want a row, got %s", row.GoTypeName(v))
		}
		var err error
		if m.attrs, omit, err = s.attributes(r); err != nil {
			return m, err
		}
	}
	if s.cfg.Format == FormatAvro {
		r, ok := row.AsRow(v)
		if !ok {
			return m, fmt.Errorf("format avro publishes rows, not a %s value", row.GoTypeName(v))
		}
		enc, err := s.avroEncoder(r.Schema, omit)
		if err != nil {
			return m, err
		}
		if m.data, err = enc.Append(nil, r); err != nil {
			return m, fmt.Errorf("the row is not a record of the Avro schema: %w", err)
		}
		return m, nil
	}
	if s.cfg.Format == FormatJSON {
		if r, ok := row.AsRow(v); ok {
			m.data = row.AppendJSONOmitting(nil, r, omit)
		} else {
			m.data = row.AppendJSONValue(nil, v)
		}
		return m, nil
	}
	switch x := v.(type) {
	case []byte:
		m.data = x
	case string:
		m.data = []byte(x)
	case *row.Row:
		d, err := rawPayload(x, omit)
		if err != nil {
			return m, err
		}
		switch d := d.(type) {
		case string:
			m.data = []byte(d)
		case nil:
		default:
			m.data = row.AppendText(nil, d)
		}
	default:
		return m, fmt.Errorf("format raw cannot publish a %s value (want bytes, a string or a row with a data field)", row.GoTypeName(v))
	}
	return m, nil
}

// attributes returns the attributes r's fields give (AttributeFields,
// AttributesMapField) as name, value pairs, and those fields' positions.
func (s *Sink) attributes(r *row.Row) (attrs []string, omit []int, err error) {
	for _, name := range s.cfg.AttributeFields {
		i := r.Schema.Index(name)
		if i < 0 {
			return nil, nil, fmt.Errorf("attribute field %q is not a field of the row %s", name, r.Schema)
		}
		omit = append(omit, i)
		if x := r.Values[i]; x != nil {
			attrs = append(attrs, name, string(row.AppendText(nil, x)))
		}
	}
	if name := s.cfg.AttributesMapField; name != "" {
		i := r.Schema.Index(name)
		if i < 0 {
			return nil, nil, fmt.Errorf("attributes_map field %q is not a field of the row %s", name, r.Schema)
		}
		omit = append(omit, i)
		switch m := r.Values[i].(type) {
		case nil:
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(m)) {
				if err := validateAttribute(k); err != nil {
					return nil, nil, fmt.Errorf("field %s: %w", name, err)
				}
				if x := m[k]; x != nil {
					attrs = append(attrs, k, string(row.AppendText(nil, x)))
				}
			}
		default:
			return nil, nil, fmt.Errorf("attributes_map field %q holds %s, not a map of attributes", name, row.GoTypeName(m))
		}
	}
	return attrs, omit, nil
}

// rawPayload returns what a raw message of row r carries: the one field
// left once the attribute fields at omit are out (Beam's STRING rows,
// {payload}), else its data field (RawSchema's rows).
func rawPayload(r *row.Row, omit []int) (any, error) {
	one, n := -1, 0
	for i := range r.Schema.Fields {
		if !slices.Contains(omit, i) {
			one, n = i, n+1
		}
	}
	if n == 1 {
		return r.Values[one], nil
	}
	if d, ok := r.Get("data"); ok {
		return d, nil
	}
	return nil, fmt.Errorf("format raw needs a row with one field besides its attribute fields, or a data field, got %s", r.Schema)
}

// PreCommit returns what worker wrote since its last PreCommit, serialized
// with message IDs derived from the sink ID, epoch, worker and index.
func (s *Sink) PreCommit(_ context.Context, worker int, epoch uint64) ([]byte, error) {
	s.mu.Lock()
	msgs := s.mu.buf[worker]
	delete(s.mu.buf, worker)
	s.buffered.Add(-msgsSize(msgs))
	s.mu.Unlock()
	prefix := s.cfg.ID + "/" + strconv.FormatUint(epoch, 10) + "/" + strconv.Itoa(worker) + "/"
	return encodePart(msgs, prefix), nil
}

// Commit publishes the parts of epoch and waits until the topic stored them.
// It is idempotent within the topic's duplicate window.
func (s *Sink) Commit(ctx context.Context, epoch uint64, parts [][]byte) error {
	var all []outMsg
	for i, p := range parts {
		msgs, err := decodePart(p)
		if err != nil {
			return fmt.Errorf("WriteToPubSub %s: epoch %d part %d: %w", s.cfg.Step, epoch, i, err)
		}
		all = append(all, msgs...)
	}
	return s.publish(ctx, all)
}

// Close publishes everything still buffered (with IDs derived from the sink
// ID, "final", worker and index) and waits until the topic stored it.
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	var all []outMsg
	for w, msgs := range s.mu.buf {
		prefix := s.cfg.ID + "/final/" + strconv.Itoa(w) + "/"
		for i := range msgs {
			if msgs[i].id == "" {
				msgs[i].id = prefix + strconv.Itoa(i)
			}
		}
		all = append(all, msgs...)
	}
	clear(s.mu.buf)
	s.buffered.Store(0)
	s.mu.Unlock()
	return s.publish(ctx, all)
}

func (s *Sink) publish(ctx context.Context, msgs []outMsg) error {
	if len(msgs) == 0 {
		return nil
	}
	if err := s.checkTopic(ctx); err != nil {
		return err
	}
	base, err := newMsg(s.cfg.Topic, nil, s.cfg.Attributes)
	if err != nil {
		return err
	}
	if s.cfg.IDAttribute != "" {
		for i := range msgs {
			a := msgs[i].attrs
			msgs[i].attrs = append(a[:len(a):len(a)], s.cfg.IDAttribute, msgs[i].id)
		}
	}
	published, dups, err := s.b.publishAsync(ctx, base, msgs)
	s.mu.Lock()
	s.mu.published += published
	s.mu.duplicates += dups
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("WriteToPubSub %s: %w", s.cfg.Step, err)
	}
	return nil
}

func (s *Sink) checkTopic(ctx context.Context) error {
	s.mu.Lock()
	checked := s.mu.topicChecked
	s.mu.Unlock()
	if checked {
		return nil
	}
	var err error
	if s.cfg.CreateTopic {
		_, err = s.b.EnsureTopic(ctx, s.cfg.Topic, s.cfg.TopicConfig)
	} else {
		_, err = s.b.Topic(ctx, s.cfg.Topic)
	}
	if err != nil {
		return fmt.Errorf("WriteToPubSub %s: %w", s.cfg.Step, err)
	}
	s.mu.Lock()
	s.mu.topicChecked = true
	s.mu.Unlock()
	return nil
}

// publishAsync publishes msgs (copies of base with their data and IDs),
// keeping up to asyncWindow in flight, and waits for every
// acknowledgement. It returns how many were stored and how many were
// duplicates.
func (b *Broker) publishAsync(ctx context.Context, base *nats.Msg, msgs []outMsg) (stored, dups int64, err error) {
	futures := make([]jetstream.PubAckFuture, 0, min(len(msgs), asyncWindow))
	wait := func(f jetstream.PubAckFuture) error {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				dups++
			} else {
				stored++
			}
			return nil
		case err := <-f.Err():
			return publishErr(base.Subject, err)
		case <-ctx.Done():
			return fmt.Errorf("publishing to %s: %w", base.Subject, ctx.Err())
		}
	}
	head := 0
	for _, m := range msgs {
		if len(futures)-head >= asyncWindow {
			if err := wait(futures[head]); err != nil {
				return stored, dups, err
			}
			futures[head] = nil
			head++
		}
		nm := &nats.Msg{Subject: base.Subject, Data: m.data}
		if len(base.Header) > 0 || m.cutShort || len(m.attrs) > 0 {
			nm.Header = make(nats.Header, len(base.Header)+2+len(m.attrs)/2)
			for k, v := range base.Header {
				nm.Header[k] = v
			}
		}
		for i := 0; i+1 < len(m.attrs); i += 2 {
			nm.Header.Set(m.attrs[i], m.attrs[i+1])
		}
		if m.cutShort {
			nm.Header.Set(CutShortAttribute, "true")
		}
		var opts []jetstream.PublishOpt
		if m.id != "" {
			opts = append(opts, jetstream.WithMsgID(m.id))
		}
		f, err := b.js.PublishMsgAsync(nm, opts...)
		if err != nil {
			return stored, dups, publishErr(base.Subject, err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures[head:] {
		if err := wait(f); err != nil {
			return stored, dups, err
		}
	}
	return stored, dups, nil
}

// A part is: version byte 3, uvarint count, then per message uvarint
// len(id), id, uvarint len(data), data, and a flags byte (bit 0: cut
// short; bit 1: attributes follow, as a uvarint count of name, value
// pairs, each string a uvarint length and its bytes). Version 2 (parts
// stored by an older weir) has no attributes; version 1 no flags byte.
const (
	partVersion   = 3
	partVersionV2 = 2
	partVersionV1 = 1
)

func encodePart(msgs []outMsg, idPrefix string) []byte {
	size := 1 + binary.MaxVarintLen64
	for _, m := range msgs {
		size += 2*binary.MaxVarintLen64 + len(idPrefix) + 20 + len(m.data)
	}
	b := make([]byte, 0, size)
	b = append(b, partVersion)
	b = binary.AppendUvarint(b, uint64(len(msgs)))
	for i, m := range msgs {
		id := m.id
		if id == "" {
			id = idPrefix + strconv.Itoa(i)
		}
		b = binary.AppendUvarint(b, uint64(len(id)))
		b = append(b, id...)
		b = binary.AppendUvarint(b, uint64(len(m.data)))
		b = append(b, m.data...)
		var flags byte
		if m.cutShort {
			flags |= 1
		}
		if len(m.attrs) > 0 {
			flags |= 2
		}
		b = append(b, flags)
		if len(m.attrs) > 0 {
			b = binary.AppendUvarint(b, uint64(len(m.attrs)/2))
			for _, a := range m.attrs {
				b = binary.AppendUvarint(b, uint64(len(a)))
				b = append(b, a...)
			}
		}
	}
	return b
}

var errBadPart = errors.New("corrupt pre-committed sink data")

func decodePart(b []byte) ([]outMsg, error) {
	if len(b) == 0 {
		return nil, nil
	}
	version := b[0]
	if version != partVersion && version != partVersionV2 && version != partVersionV1 {
		return nil, fmt.Errorf("%w: version %d", errBadPart, b[0])
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errBadPart
	}
	b = b[k:]
	out := make([]outMsg, 0, n)
	next := func() ([]byte, bool) {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, false
		}
		v := b[k : k+int(l)]
		b = b[k+int(l):]
		return v, true
	}
	for range n {
		id, ok1 := next()
		data, ok2 := next()
		if !ok1 || !ok2 {
			return nil, errBadPart
		}
		m := outMsg{id: string(id), data: data}
		if version >= partVersionV2 {
			known := byte(1)
			if version >= partVersion {
				known = 3
			}
			if len(b) == 0 || b[0]&^known != 0 {
				return nil, errBadPart
			}
			m.cutShort = b[0]&1 != 0
			hasAttrs := b[0]&2 != 0
			b = b[1:]
			if hasAttrs {
				n, k := binary.Uvarint(b)
				if k <= 0 || n == 0 || n > uint64(len(b)) {
					return nil, errBadPart
				}
				b = b[k:]
				m.attrs = make([]string, 0, 2*n)
				for range 2 * n {
					a, ok := next()
					if !ok {
						return nil, errBadPart
					}
					m.attrs = append(m.attrs, string(a))
				}
			}
		}
		out = append(out, m)
	}
	return out, nil
}
