package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
)

// Event is one entry of a recorded stretch of input: an element read by a
// source, or a move of a source's watermark.
type Event struct {
	// Source names the source step the event belongs to (in the old
	// pipeline's names); empty: the pipeline's only recorded source.
	Source string
	// Value is the element as a JSON object (decoded with UseNumber), or
	// nil for a watermark move.
	Value map[string]any
	// Time is the element's event time.
	Time mtime.Time
	// Watermark, for a watermark move, is the source's new watermark.
	Watermark mtime.Time
	// IsWatermark says the event moves the watermark.
	IsWatermark bool
	// Origin and Offset say where the element was recorded (the events
	// file and its line, a topic and its stream sequence); they become the
	// element's source position, so rejects of the same element are
	// matched across runs.
	Origin string
	Offset int64
	// Message, when set, is a retained Pub/Sub message of the source's
	// topic: each run decodes it as its own source would (Value and Time
	// are then unused).
	Message *pubsub.Message
	// SeenOnly marks a message read before the stretch (before a job
	// snapshot's position, within its source's dedupe window): a run only
	// remembers its ID, as the job's source remembered it, so that a
	// duplicate of it in the stretch is dropped; it is not replayed.
	SeenOnly bool
}

// Trace is a recorded stretch of input: elements and watermark moves in
// the order they were read. Every run of a rehearsal is fed the same
// trace, so every run sees the same elements and the same watermark holds
// and advances. Its events are kept encoded, and beyond MaxMemory on disk
// (see tracelog.go); Close releases the disk space. A trace is appended
// to by one goroutine, then read by any number.
type Trace struct {
	// MaxMemory is the memory budget of the encoded events (0:
	// DefaultTraceMemory): beyond it, older events spill to an unlinked
	// file in SpillDir (empty: the system's temporary directory). Set both
	// before the first Append.
	MaxMemory int64
	SpillDir  string

	log      traceLog
	elements int64

	// sums are the trace's input sums (inputSums), added up as events are
	// appended, so that no run decodes the trace again for them.
	sums map[string]float64
	flat flatSums
}

// Append adds ev at the end of the trace.
func (t *Trace) Append(ev Event) error {
	if t.log.refs == nil {
		t.log.budget, t.log.dir = t.MaxMemory, t.SpillDir
	}
	if err := t.log.append(&ev); err != nil {
		return err
	}
	if t.sums == nil {
		t.sums = map[string]float64{}
	}
	switch {
	case ev.IsWatermark, ev.SeenOnly:
	case ev.Message != nil:
		t.elements++
		t.flat.addMessageNumbers(t.sums, ev.Message.Data)
	default:
		t.elements++
		addNumbers(t.sums, ev.Value)
	}
	return nil
}

// Len returns the number of events.
func (t *Trace) Len() int { return t.log.len() }

// Event returns event i (0 ≤ i < Len()).
func (t *Trace) Event(i int) (Event, error) {
	ev, _, err := t.log.event(i, nil)
	return ev, err
}

// Events returns every event, decoded: for small traces (tests).
func (t *Trace) Events() ([]Event, error) {
	out := make([]Event, 0, t.Len())
	var buf []byte
	for i := range t.Len() {
		ev, b, err := t.log.event(i, buf)
		if err != nil {
			return nil, err
		}
		buf = b
		out = append(out, ev)
	}
	return out, nil
}

// Spilled returns how many bytes of the trace are on disk.
func (t *Trace) Spilled() int64 { return t.log.spilled() }

// Size returns how many bytes the trace's encoded events take, in memory
// and on disk together.
func (t *Trace) Size() int64 { return t.log.size() }

// Close releases the trace's disk space; it is not read afterwards.
func (t *Trace) Close() error { return t.log.close() }

// inputSums returns the sum of each numeric top-level field over the
// trace's elements (a message's JSON object payload, or an element's
// value): the input side of a run's conservation. The map is shared by
// the runs of the trace, so callers copy it.
func (t *Trace) inputSums() map[string]float64 {
	if t.sums == nil {
		return map[string]float64{}
	}
	return t.sums
}

// Elements counts the trace's elements.
func (t *Trace) Elements() int64 { return t.elements }

// eventLine is one line of an events file.
type eventLine struct {
	Source    string          `json:"source"`
	Element   json.RawMessage `json:"element"`
	EventTime json.RawMessage `json:"event_time"`
	Watermark json.RawMessage `json:"watermark"`
}

// ReadEvents reads an events file: JSON lines, each either an element
//
//	{"element": {...}, "event_time": "2026-03-01T00:01:00Z", "source": "ReadEvents"}
//
// or a watermark move
//
//	{"watermark": "2026-03-01T00:05:00Z", "source": "ReadEvents"}
//
// Times are RFC 3339 strings or integer epoch milliseconds; "source" is
// optional when the pipeline has one recorded source. Watermarks of a
// source must not move back. Without watermark lines a source's
// watermark stays at −∞ until the stretch ends (every window fires once,
// at the end). Blank lines and lines starting with # are skipped. name is
// used in errors and as the elements' source position. The trace keeps
// DefaultTraceMemory in memory: AppendEvents reads into a trace with
// another budget.
func ReadEvents(r io.Reader, name string) (*Trace, error) {
	t := &Trace{}
	if err := t.AppendEvents(r, name); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// AppendEvents appends the events of an events file (see ReadEvents) to
// t, a new trace whose MaxMemory and SpillDir the caller set. On an error
// the caller still closes t.
func (t *Trace) AppendEvents(r io.Reader, name string) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	wms := map[string]mtime.Time{}
	line := int64(0)
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		var l eventLine
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return fmt.Errorf("%s:%d: not an event (want {\"element\": {...}, \"event_time\": ...} or {\"watermark\": ...}): %w", name, line, err)
		}
		switch {
		case l.Watermark != nil && l.Element != nil:
			return fmt.Errorf("%s:%d: an event is an element or a watermark move, not both", name, line)
		case l.Watermark != nil:
			wm, err := parseTime(l.Watermark)
			if err != nil {
				return fmt.Errorf("%s:%d: watermark: %w", name, line, err)
			}
			if prev, ok := wms[l.Source]; ok && wm < prev {
				return fmt.Errorf("%s:%d: the watermark of source %q moves back from %s to %s", name, line, l.Source, prev, wm)
			}
			wms[l.Source] = wm
			if err := t.Append(Event{Source: l.Source, Watermark: wm, IsWatermark: true, Origin: name, Offset: line}); err != nil {
				return err
			}
		case l.Element != nil:
			if l.EventTime == nil {
				return fmt.Errorf("%s:%d: an element needs its event_time", name, line)
			}
			ts, err := parseTime(l.EventTime)
			if err != nil {
				return fmt.Errorf("%s:%d: event_time: %w", name, line, err)
			}
			dec := json.NewDecoder(bytes.NewReader(l.Element))
			dec.UseNumber()
			var v map[string]any
			if err := dec.Decode(&v); err != nil || v == nil {
				return fmt.Errorf("%s:%d: element must be a JSON object (got %s)", name, line, short(l.Element))
			}
			if err := t.Append(Event{Source: l.Source, Value: v, Time: ts, Origin: name, Offset: line}); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s:%d: an event needs \"element\" (with \"event_time\") or \"watermark\"", name, line)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading events file %s: %w", name, err)
	}
	return nil
}

// parseTime reads an RFC 3339 string or integer epoch milliseconds.
func parseTime(raw json.RawMessage) (mtime.Time, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return mtime.Parse(s)
	}
	var ms int64
	if err := json.Unmarshal(raw, &ms); err == nil {
		return mtime.Time(ms), nil
	}
	return 0, fmt.Errorf("%s is neither an RFC 3339 string nor epoch milliseconds", short(raw))
}

func short(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	if s == "" {
		return "nothing"
	}
	return s
}

// MessagesTracer appends the retained messages of the topic that one
// ReadFromPubSub source reads to a trace, a page at a time (the messages
// need not all be in memory at once): each message, followed by the
// watermark that source holds after it (the newest event time so far less
// its max_out_of_orderness), so that every run sees the same watermark
// moves. Idle advancement, which depends on the wall clock, is not
// replayed: the stretch ends with the watermark at +∞.
type MessagesTracer struct {
	t          *Trace
	step       string
	src        *pubsub.Source
	bound      mtime.Duration
	newest, wm mtime.Time
}

// NewMessagesTracer returns a tracer of step, a ReadFromPubSub source of
// p (a pipeline built by Load, the old pipeline of a rehearsal), appending
// to t.
func NewMessagesTracer(t *Trace, p *weir.Pipeline, step string) (*MessagesTracer, error) {
	src, ok := p.Program().Code[step].(*pubsub.Source)
	if !ok {
		return nil, fmt.Errorf("%w: step %q is not a ReadFromPubSub source", ErrNoRecordedInput, step)
	}
	return &MessagesTracer{t: t, step: step, src: src, bound: mtime.FromDuration(src.MaxOutOfOrderness()),
		newest: mtime.MinTimestamp, wm: mtime.MinTimestamp}, nil
}

// Add appends msgs, in order, each followed by the watermark move it
// makes.
func (mt *MessagesTracer) Add(msgs ...pubsub.Message) error {
	for i := range msgs {
		m := &msgs[i]
		if err := mt.t.Append(Event{Source: mt.step, Message: m, Origin: m.Topic, Offset: int64(m.Sequence)}); err != nil {
			return err
		}
		e := mt.src.DecodeRecorded(*m)
		if _, rejected := e.Value.(contract.Reject); rejected {
			continue
		}
		if e.Time > mt.newest {
			mt.newest = e.Time
		}
		if w := mt.newest.Add(-mt.bound); w > mt.wm {
			mt.wm = w
			if err := mt.t.Append(Event{Source: mt.step, Watermark: w, IsWatermark: true, Origin: m.Topic, Offset: int64(m.Sequence)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// DedupeWindow is how long the traced source remembers message IDs; 0
// when it has none (pubsub.Source.DedupeWindow).
func (mt *MessagesTracer) DedupeWindow() time.Duration { return mt.src.DedupeWindow() }

// AddSeen appends msgs, read before the stretch, as SeenOnly events: each
// run remembers their IDs for de-duplication and replays none of them.
func (mt *MessagesTracer) AddSeen(msgs ...pubsub.Message) error {
	for i := range msgs {
		m := &msgs[i]
		if err := mt.t.Append(Event{Source: mt.step, Message: m, Origin: m.Topic, Offset: int64(m.Sequence), SeenOnly: true}); err != nil {
			return err
		}
	}
	return nil
}

// AddRetained appends what topic retains since the given time (zero: all
// of it), read from rb page by page, by stream sequence.
func (mt *MessagesTracer) AddRetained(ctx context.Context, rb RetainedReader, topic string, since time.Time) error {
	var from uint64
	for {
		page, err := rb.ReadRetained(ctx, topic, from, since, time.Time{}, 0)
		if err != nil {
			return fmt.Errorf("reading the retained messages of topic %s: %w", topic, err)
		}
		if err := mt.Add(page.Messages...); err != nil {
			return err
		}
		if page.Done || len(page.Messages) == 0 {
			return nil
		}
		from = page.Next
	}
}

// PubSubSources returns the ReadFromPubSub source steps of p (built by
// Load) with the topic each reads; a step that reads a named subscription
// has an empty topic (its subscription's topic is the caller's to find).
func PubSubSources(p *weir.Pipeline) (steps []string, topics map[string]string, subscriptions map[string]string) {
	topics, subscriptions = map[string]string{}, map[string]string{}
	for _, s := range p.Graph().Steps {
		src, ok := p.Program().Code[s.Name].(*pubsub.Source)
		if !ok {
			continue
		}
		cfg := src.Config()
		steps = append(steps, s.Name)
		topics[s.Name] = cfg.Topic
		subscriptions[s.Name] = cfg.Subscription
	}
	return steps, topics, subscriptions
}

// RetainedReader is what AppendRetained needs of a broker (*pubsub.Broker
// implements it): reading a topic's retained messages without a
// subscription, and a named subscription's topic.
type RetainedReader interface {
	ReadRetained(ctx context.Context, topic string, from uint64, since, until time.Time, max int) (pubsub.RetainedRead, error)
	Subscription(ctx context.Context, name string) (pubsub.SubscriptionInfo, error)
}

var _ RetainedReader = (*pubsub.Broker)(nil)

// AppendRetained appends to t (a new trace, whose MaxMemory and SpillDir
// the caller set) what the topics of p's ReadFromPubSub sources (p built
// by Load) retain since the given time, read page by page from rb, each
// source's messages followed by its watermark moves (MessagesTracer). A
// source reading a named subscription is traced from that subscription's
// topic. It fails with ErrNoRecordedInput when p reads no Pub/Sub topic.
// On an error the caller still closes t.
func (t *Trace) AppendRetained(ctx context.Context, rb RetainedReader, p *weir.Pipeline, since time.Time) error {
	steps, topics, subs := PubSubSources(p)
	if len(steps) == 0 {
		return fmt.Errorf("%w: the pipeline reads no Pub/Sub topic", ErrNoRecordedInput)
	}
	for _, step := range steps {
		topic := topics[step]
		if topic == "" {
			info, err := rb.Subscription(ctx, subs[step])
			if err != nil {
				return fmt.Errorf("finding the topic of subscription %s (step %s): %w", subs[step], step, err)
			}
			topic = info.Topic
		}
		mt, err := NewMessagesTracer(t, p, step)
		if err != nil {
			return err
		}
		if err := mt.AddRetained(ctx, rb, topic, since); err != nil {
			return err
		}
	}
	return nil
}
