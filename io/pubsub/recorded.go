package pubsub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// This file reads a topic's retained messages for a rehearsal, without a
// consumer: each message is fetched from the topic's stream by sequence
// (a stream message get), so no subscription's delivery or
// acknowledgement state, and no consumer, is created or changed. And it
// decodes such a message into the element a ReadFromPubSub source would
// have emitted for it.

// retainedGetLimit is the longest stretch ReadRetained reads with a get
// request per message; a longer one streams through an ordered consumer.
const retainedGetLimit = 32

// MaxRetainedRead is the most messages one ReadRetained call returns.
const MaxRetainedRead = 10000

// RetainedRead is what ReadRetained returns: messages in stream order, the
// sequence to continue from, and whether the stretch asked for is read.
type RetainedRead struct {
	Messages []Message
	// Next is the stream sequence the next call continues from.
	Next uint64
	// Done: no message of the stretch is left (the topic's last stored
	// message, or one published after Until, was reached).
	Done bool
}

// ReadRetained reads up to max (at most MaxRetainedRead) messages topic
// retains, in stream order: from stream sequence from when it is > 0,
// else from the first message published at or after since (the oldest
// retained when since is zero), up to the last message published before
// until (the newest stored when until is zero). It changes nothing:
// messages are fetched by sequence, not through a subscription.
func (b *Broker) ReadRetained(ctx context.Context, topic string, from uint64, since, until time.Time, max int) (RetainedRead, error) {
	if max <= 0 || max > MaxRetainedRead {
		max = MaxRetainedRead
	}
	stream, _, err := topicNames(topic)
	if err != nil {
		return RetainedRead{}, err
	}
	st, err := b.js.Stream(ctx, stream)
	if err != nil {
		return RetainedRead{}, apiErr("reading topic "+topic, err)
	}
	state := st.CachedInfo().State
	if state.Msgs == 0 {
		return RetainedRead{Next: state.LastSeq + 1, Done: true}, nil
	}
	seq := from
	if seq == 0 {
		if seq, err = firstAtOrAfter(ctx, st, state.FirstSeq, state.LastSeq, since); err != nil {
			return RetainedRead{}, apiErr("reading topic "+topic, err)
		}
	}
	seq = max64(seq, state.FirstSeq)
	if state.LastSeq >= seq && state.LastSeq-seq+1 > retainedGetLimit {
		return b.readRetainedOrdered(ctx, st, topic, seq, state.LastSeq, until, max)
	}
	out := RetainedRead{}
	for ; seq <= state.LastSeq && len(out.Messages) < max; seq++ {
		m, ok, err := getMsg(ctx, st, seq)
		if err != nil {
			return RetainedRead{}, apiErr("reading topic "+topic, err)
		}
		if !ok {
			continue // dropped from the middle of the stream
		}
		if !until.IsZero() && !m.Time.Before(until) {
			out.Done = true
			break
		}
		out.Messages = append(out.Messages, rawMessage(topic, m))
	}
	out.Next = seq
	if seq > state.LastSeq {
		out.Done = true
	}
	return out, nil
}

// readRetainedOrdered is ReadRetained for a long stretch: the messages
// from seq to last come through an ordered consumer (ephemeral, without
// acknowledgements, removed by the server when it goes idle, and nothing
// any subscription reads), which streams them instead of a request per
// message.
func (b *Broker) readRetainedOrdered(ctx context.Context, st jetstream.Stream, topic string, seq, last uint64, until time.Time, max int) (RetainedRead, error) {
	oc, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: seq})
	if err != nil {
		return RetainedRead{}, apiErr("reading topic "+topic, err)
	}
	defer func() {
		// Remove it now rather than when the server finds it idle: a
		// topic's subscription count must not show a rehearsal's read.
		if info := oc.CachedInfo(); info != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = st.DeleteConsumer(dctx, info.Name)
			cancel()
		}
	}()
	out := RetainedRead{Next: seq}
	for len(out.Messages) < max {
		want := int(min(uint64(max-len(out.Messages)), last-out.Next+1, 1000))
		batch, err := oc.Fetch(want, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return RetainedRead{}, apiErr("reading topic "+topic, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				drain(batch)
				return RetainedRead{}, fmt.Errorf("reading topic %s: %w", topic, err)
			}
			q := md.Sequence.Stream
			if q > last {
				drain(batch)
				out.Done = true
				return out, nil
			}
			if !until.IsZero() && !md.Timestamp.Before(until) {
				drain(batch)
				out.Next, out.Done = q, true
				return out, nil
			}
			out.Messages = append(out.Messages, rawMessage(topic, &jetstream.RawStreamMsg{Subject: m.Subject(), Sequence: q,
				Header: m.Headers(), Data: m.Data(), Time: md.Timestamp}))
			out.Next = q + 1
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) {
			return RetainedRead{}, apiErr("reading topic "+topic, err)
		}
		if n == 0 || out.Next > last {
			out.Done = out.Next > last || n == 0
			return out, nil
		}
	}
	return out, nil
}

func max64(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// getMsg fetches the message at seq; ok is false when the stream no
// longer holds it.
func getMsg(ctx context.Context, st jetstream.Stream, seq uint64) (*jetstream.RawStreamMsg, bool, error) {
	m, err := st.GetMsg(ctx, seq)
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return m, true, nil
}

// firstAtOrAfter finds the first sequence in [lo, hi] whose message was
// published at or after t (hi+1 when none), by bisection over publish
// times, which a stream keeps in order.
func firstAtOrAfter(ctx context.Context, st jetstream.Stream, lo, hi uint64, t time.Time) (uint64, error) {
	if t.IsZero() {
		return lo, nil
	}
	end := hi + 1
	for lo < end {
		mid := lo + (end-lo)/2
		probe := mid
		var m *jetstream.RawStreamMsg
		for probe < end {
			got, ok, err := getMsg(ctx, st, probe)
			if err != nil {
				return 0, err
			}
			if ok {
				m = got
				break
			}
			probe++
		}
		if m == nil || !m.Time.Before(t) {
			end = mid
		} else {
			lo = probe + 1
		}
	}
	return lo, nil
}

// rawMessage converts a stream message as toMessage converts a delivered
// one.
func rawMessage(topic string, m *jetstream.RawStreamMsg) Message {
	msg := Message{Topic: topic, Data: m.Data, Sequence: m.Sequence, PublishTime: m.Time.UTC()}
	for k, v := range m.Header {
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
			msg.Attributes = map[string]string{}
		}
		msg.Attributes[k] = v[0]
	}
	return msg
}

// DecodeRecorded returns the element the source emits for a retained
// message m of its topic: its row (or raw row) at its event time (the
// timestamp attribute or field, else the publish time), or the reject the
// source would send for it (malformed JSON, a schema mismatch, a bad
// timestamp), positioned at the topic and the message's stream sequence as
// the source positions it. De-duplication, the future-skew check and
// watermarks, which depend on what else was read and when, are left to
// the caller.
func (s *Source) DecodeRecorded(m Message) contract.Element {
	sp := &split{cfg: &s.cfg, tsField: -1, idField: -1}
	if s.cfg.Schema != nil && s.cfg.TimestampField != "" {
		sp.tsField = s.cfg.Schema.Index(s.cfg.TimestampField)
	}
	topic := m.Topic
	if topic == "" {
		topic = s.cfg.Topic
	}
	src := &contract.SourcePos{Source: topic, Offset: int64(m.Sequence)}
	publish := mtime.FromTime(m.PublishTime)
	hdr := nats.Header{}
	for k, v := range m.Attributes {
		hdr.Set(k, v)
	}
	if m.ID != "" {
		hdr.Set(jetstream.MsgIDHeader, m.ID)
	}
	value, reason, msg := sp.messageRow(m.Data, hdr, publish)
	if value == nil {
		return sp.reject(m.Data, reason, msg, publish, src)
	}
	t := publish
	switch {
	case s.cfg.TimestampAttribute != "":
		a := hdr.Get(s.cfg.TimestampAttribute)
		if a == "" {
			return sp.reject(m.Data, ReasonBadTimestamp, fmt.Sprintf("attribute %s is missing", s.cfg.TimestampAttribute), publish, src)
		}
		ts, err := row.ToTimestamp(a)
		if err != nil {
			return sp.reject(m.Data, timestampReason(err, ReasonBadTimestamp), fmt.Sprintf("attribute %s: %v", s.cfg.TimestampAttribute, err), publish, src)
		}
		t = ts
	case sp.tsField >= 0:
		ts, err := row.ToTimestamp(value.Values[sp.tsField])
		if err != nil {
			return sp.reject(m.Data, timestampReason(err, ReasonBadTimestamp), fmt.Sprintf("field %s: %v", s.cfg.TimestampField, err), publish, src)
		}
		t = ts
	}
	return contract.Element{Value: value, Time: t, Window: window.Global, Pane: window.NoFiring, Source: src}
}

// MaxOutOfOrderness is how far behind the newest event time the source
// holds its watermark (its WatermarkPolicy's, defaults applied; 0 for
// none).
func (s *Source) MaxOutOfOrderness() time.Duration {
	p := s.cfg.Watermark
	p.EnsureDefaults()
	if p.MaxOutOfOrderness < 0 {
		return 0
	}
	return p.MaxOutOfOrderness
}

// Deduper drops the duplicates of a recorded stretch of s's messages as
// s drops them when it reads its subscription: with id_attribute or
// id_field, a message whose ID was seen within the dedupe window (by
// publish time) is a duplicate. A rehearsal replays a topic's retained
// messages through it, so that its runs count each ID once, as the job
// does; Remember takes the IDs of the messages read before the stretch
// (a job snapshot's position), as a resume's read-back does.
type Deduper struct {
	sp   *split
	seen *seenIDs
}

// NewDeduper returns the de-duplication of s's messages, or nil when s
// de-duplicates nothing (no id_attribute or id_field).
func (s *Source) NewDeduper() *Deduper {
	if s.cfg.IDAttribute == "" && s.cfg.IDField == "" {
		return nil
	}
	sp := &split{cfg: &s.cfg, tsField: -1, idField: -1}
	if s.cfg.Schema != nil && s.cfg.IDField != "" {
		sp.idField = s.cfg.Schema.Index(s.cfg.IDField)
	}
	return &Deduper{sp: sp, seen: newSeenIDs(mtime.FromDuration(s.cfg.DedupeWindow), s.cfg.MaxDedupeIDs)}
}

// id returns m's ID as the source reads it, or "" when it has none (no
// such attribute, a payload that does not decode, a null field).
func (d *Deduper) id(m *Message) string {
	if a := d.sp.cfg.IDAttribute; a != "" {
		return m.Attributes[a]
	}
	if d.sp.idField < 0 || d.sp.cfg.Format == FormatRaw {
		return ""
	}
	r, _, _ := d.sp.decode(m.Data)
	return d.sp.rowID(r)
}

// Duplicate reports whether m repeats an ID seen within the dedupe window
// before it (it is then dropped), and remembers m's ID if not.
func (d *Deduper) Duplicate(m *Message) bool {
	id := d.id(m)
	if id == "" {
		return false
	}
	dup, _ := d.seen.check(id, mtime.FromTime(m.PublishTime), d.seen.hash(m.Data))
	return dup
}

// Remember remembers m's ID as seen, as a message read before the
// stretch.
func (d *Deduper) Remember(m *Message) {
	if id := d.id(m); id != "" {
		d.seen.check(id, mtime.FromTime(m.PublishTime), d.seen.hash(m.Data))
	}
}

// DedupeWindow is how long s remembers message IDs (its dedupe_window,
// defaults applied); 0 when it de-duplicates nothing.
func (s *Source) DedupeWindow() time.Duration {
	if s.cfg.IDAttribute == "" && s.cfg.IDField == "" {
		return 0
	}
	return s.cfg.DedupeWindow
}
