package pubsub

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

func rowElems(from, to int) []contract.Element {
	var out []contract.Element
	for i := from; i <= to; i++ {
		r := row.New(orderSchema)
		r.Values[0], r.Values[1], r.Values[3] = "N", int64(i), fmt.Sprintf("k%d", i)
		out = append(out, contract.Element{Value: r})
	}
	return out
}

// TestSinkReplay: a commit replayed after a crash, with the parts stored
// in the checkpoint, publishes nothing twice.
func TestSinkReplay(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	cfg := SinkConfig{Step: "Write", Topic: "out", CreateTopic: true, ID: "job-1/Write", Attributes: map[string]string{"origin": "weir"}}
	sink, err := NewSink(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Epoch 1: two workers.
	if err := sink.Write(ctx, 0, rowElems(1, 3)); err != nil {
		t.Fatal(err)
	}
	if err := sink.Write(ctx, 1, rowElems(4, 5)); err != nil {
		t.Fatal(err)
	}
	p0, _ := sink.PreCommit(ctx, 0, 1)
	p1, _ := sink.PreCommit(ctx, 1, 1)
	steps := []struct {
		name          string
		do            func() error
		wantMessages  uint64
		wantPublished int64
		wantDups      int64
	}{
		{"commit epoch 1", func() error { return sink.Commit(ctx, 1, [][]byte{p0, p1}) }, 5, 5, 0},
		{"replay epoch 1", func() error { return sink.Commit(ctx, 1, [][]byte{p0, p1}) }, 5, 5, 5},
		{"replay by a new sink (restart)", func() error {
			s2, _ := NewSink(b, cfg)
			return s2.Commit(ctx, 1, [][]byte{p1, p0})
		}, 5, 5, 5},
		{"epoch 2 and close", func() error {
			if err := sink.Write(ctx, 0, rowElems(6, 6)); err != nil {
				return err
			}
			p, _ := sink.PreCommit(ctx, 0, 2)
			if err := sink.Commit(ctx, 2, [][]byte{p}); err != nil {
				return err
			}
			if err := sink.Write(ctx, 0, rowElems(7, 8)); err != nil {
				return err
			}
			return sink.Close(ctx)
		}, 8, 8, 5},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		ti, err := b.Topic(ctx, "out")
		if err != nil {
			t.Fatal(err)
		}
		pub, dups := sink.Stats()
		if ti.Messages != s.wantMessages || pub != s.wantPublished || dups != s.wantDups {
			t.Fatalf("%s: topic has %d messages, sink published %d with %d duplicates; want %d, %d, %d",
				s.name, ti.Messages, pub, dups, s.wantMessages, s.wantPublished, s.wantDups)
		}
	}
	if _, err := b.CreateSubscription(ctx, "check", "out", SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	msgs, err := b.Pull(ctx, "check", 100, true)
	if err != nil || len(msgs) != 8 {
		t.Fatalf("pull: %d, %v", len(msgs), err)
	}
	if got := string(msgs[0].Data); got != `{"region":"N","amount":1,"ts":null,"id":"k1"}` {
		t.Errorf("payload %s", got)
	}
	if msgs[0].ID != "job-1/Write/1/0/0" || msgs[0].Attributes["origin"] != "weir" {
		t.Errorf("message %+v", msgs[0])
	}
}

func TestSinkIDFieldAndRaw(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	if _, err := b.CreateTopic(ctx, "keyed", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	sink, _ := NewSink(b, SinkConfig{Topic: "keyed", ID: "j/W", IDField: "id"})
	// The same ids from two epochs (a replacement job re-emitting): stored once.
	for epoch := uint64(1); epoch <= 2; epoch++ {
		if err := sink.Write(ctx, 0, rowElems(1, 4)); err != nil {
			t.Fatal(err)
		}
		p, _ := sink.PreCommit(ctx, 0, epoch)
		if err := sink.Commit(ctx, epoch, [][]byte{p}); err != nil {
			t.Fatal(err)
		}
	}
	if ti, _ := b.Topic(ctx, "keyed"); ti.Messages != 4 {
		t.Fatalf("keyed topic has %d messages", ti.Messages)
	}
	raw, _ := NewSink(b, SinkConfig{Topic: "keyed", ID: "j/R", Format: FormatRaw})
	if err := raw.Write(ctx, 0, []contract.Element{{Value: "text"}, {Value: []byte("bytes")}}); err != nil {
		t.Fatal(err)
	}
	if err := raw.Write(ctx, 0, []contract.Element{{Value: 3.5}}); err == nil {
		t.Fatal("raw sink accepted a float")
	}
	if err := raw.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if ti, _ := b.Topic(ctx, "keyed"); ti.Messages != 6 {
		t.Fatalf("topic has %d messages", ti.Messages)
	}
	missing, _ := NewSink(b, SinkConfig{Topic: "missing", ID: "j/M"})
	missing.Write(ctx, 0, rowElems(1, 1))
	if err := missing.Close(ctx); !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("missing topic: %v", err)
	}
	if _, err := NewSink(b, SinkConfig{Topic: "keyed"}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("sink without ID: %v", err)
	}
	if _, err := decodePart([]byte{1, 5, 3}); err == nil {
		t.Fatal("corrupt part decoded")
	}
}

// TestSinkCutShortAttribute: the message of a cut-short pane carries the
// CutShortAttribute, kept through a pre-committed part; other messages do
// not; a part stored by an older weir (version 1, no flags) still decodes.
func TestSinkCutShortAttribute(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	sink, err := NewSink(b, SinkConfig{Step: "Write", Topic: "panes", CreateTopic: true, ID: "job-1/Write"})
	if err != nil {
		t.Fatal(err)
	}
	elems := rowElems(1, 3)
	elems[0].Pane = window.PaneInfo{Timing: window.OnTime, IsFirst: true, IsLast: true, CutShort: true}
	elems[1].Pane = window.PaneInfo{Timing: window.OnTime, IsFirst: true, IsLast: true}
	if err := sink.Write(ctx, 0, elems); err != nil {
		t.Fatal(err)
	}
	p, err := sink.PreCommit(ctx, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Commit(ctx, 1, [][]byte{p}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateSubscription(ctx, "check", "panes", SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	msgs, err := b.Pull(ctx, "check", 10, true)
	if err != nil || len(msgs) != 3 {
		t.Fatalf("pull: %d, %v", len(msgs), err)
	}
	for i, want := range []string{"true", "", ""} {
		if got := msgs[i].Attributes[CutShortAttribute]; got != want {
			t.Errorf("message %d: %s = %q, want %q (attributes %v)", i, CutShortAttribute, got, want, msgs[i].Attributes)
		}
	}
	v1 := []byte{1, 1, 2, 'i', 'd', 2, '{', '}'}
	got, err := decodePart(v1)
	if err != nil || len(got) != 1 || got[0].id != "id" || string(got[0].data) != "{}" || got[0].cutShort {
		t.Fatalf("version 1 part: %+v, %v", got, err)
	}
	if _, err := decodePart([]byte{2, 1, 2, 'i', 'd', 2, '{', '}', 4}); err == nil {
		t.Fatal("a part with unknown flags decoded")
	}
}

// TestSinkBufferedBytes: the sink says how much it holds uncommitted
// (contract.BufferingSink): what Write adds, per worker, until a
// PreCommit takes that worker's share or Close publishes it all.
func TestSinkBufferedBytes(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	sink, err := NewSink(b, SinkConfig{Step: "Write", Topic: "buffered", CreateTopic: true, ID: "job-1/Write"})
	if err != nil {
		t.Fatal(err)
	}
	if n := sink.BufferedBytes(); n != 0 {
		t.Fatalf("a new sink holds %d bytes, want 0", n)
	}
	if err := sink.Write(ctx, 0, rowElems(1, 100)); err != nil {
		t.Fatal(err)
	}
	w0 := sink.BufferedBytes()
	if w0 < 100*int64(len(`{"kind":"N"}`)) {
		t.Fatalf("100 messages held in %d bytes: fewer than their payloads", w0)
	}
	if err := sink.Write(ctx, 1, rowElems(101, 150)); err != nil {
		t.Fatal(err)
	}
	both := sink.BufferedBytes()
	if both <= w0 {
		t.Fatalf("worker 1's 50 messages added nothing: %d then %d bytes", w0, both)
	}
	if _, err := sink.PreCommit(ctx, 0, 1); err != nil {
		t.Fatal(err)
	}
	if n := sink.BufferedBytes(); n != both-w0 {
		t.Errorf("after worker 0's pre-commit the sink holds %d bytes, want worker 1's %d", n, both-w0)
	}
	if err := sink.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := sink.BufferedBytes(); n != 0 {
		t.Errorf("after Close the sink holds %d bytes, want 0", n)
	}
}

// TestSinkAttributeFields: Beam's attributes and attributes_map — fields
// published as attributes and left out of the payload, in JSON and raw
// form, kept through a pre-committed part; an element whose attributes
// cannot be published is a not_publishable reject (WriteRejecting), the
// others published.
func TestSinkAttributeFields(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	sch := row.MustSchema(row.Field{Name: "k", Type: row.Of(row.KindString)}, row.Field{Name: "origin", Type: row.Of(row.KindString)},
		row.Field{Name: "v", Type: row.Of(row.KindInt)}, row.Field{Name: "attrs", Type: row.Of(row.KindAny)})
	elem := func(k string, origin, attrs any) contract.Element {
		r := row.New(sch)
		r.Values[0], r.Values[2] = k, int64(len(k))
		r.Values[1], r.Values[3] = origin, attrs
		return contract.Element{Value: r}
	}
	for _, tc := range []struct {
		name   string
		format Format
		fields []string
		want   []string // payload and attributes per message
	}{
		{"json", FormatJSON, []string{"origin"}, []string{
			`{"k":"a","v":1} map[lang:de n:3 origin:web]`,
			`{"k":"bb","v":2} map[]`,
		}},
		{"raw", FormatRaw, []string{"origin", "v"}, []string{
			`a map[lang:de n:3 origin:web v:1]`,
			`bb map[v:2]`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "attrs-" + tc.name
			sink, err := NewSink(b, SinkConfig{Step: "Write", Topic: topic, CreateTopic: true, ID: "job-1/" + tc.name,
				Format: tc.format, AttributeFields: tc.fields, AttributesMapField: "attrs"})
			if err != nil {
				t.Fatal(err)
			}
			elems := []contract.Element{
				elem("a", "web", map[string]any{"lang": "de", "n": int64(3)}),
				elem("bad", "web", map[string]any{"a key": "x"}),
				elem("bb", nil, nil),
				elem("worse", "web", "lang=de"),
			}
			rejects, err := sink.WriteRejecting(ctx, 0, elems, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(rejects) != 2 || rejects[0].Index != 1 || rejects[1].Index != 3 || rejects[0].Err.Reason != ReasonNotPublishable ||
				!strings.Contains(rejects[0].Err.Message, `"a key"`) || !strings.Contains(rejects[1].Err.Message, "not a map of attributes") {
				t.Fatalf("rejects = %+v", rejects)
			}
			p, err := sink.PreCommit(ctx, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := sink.Commit(ctx, 1, [][]byte{p}); err != nil {
				t.Fatal(err)
			}
			if _, err := b.CreateSubscription(ctx, "check-"+tc.name, topic, SubscriptionConfig{FromBeginning: true}); err != nil {
				t.Fatal(err)
			}
			msgs, err := b.Pull(ctx, "check-"+tc.name, 10, true)
			if err != nil || len(msgs) != len(tc.want) {
				t.Fatalf("pull: %d, %v", len(msgs), err)
			}
			for i, m := range msgs {
				if got := fmt.Sprintf("%s %v", m.Data, m.Attributes); got != tc.want[i] {
					t.Errorf("message %d = %s, want %s", i, got, tc.want[i])
				}
			}
			// Write, without rejects, fails on the element instead.
			if err := sink.Write(ctx, 0, elems[1:2]); err == nil || !strings.Contains(err.Error(), `"a key"`) {
				t.Errorf("Write of an element with a bad attribute: %v", err)
			}
		})
	}
	// A part of version 2 (no attributes) still decodes.
	got, err := decodePart([]byte{2, 1, 2, 'i', 'd', 2, '{', '}', 1})
	if err != nil || len(got) != 1 || !got[0].cutShort || got[0].attrs != nil {
		t.Fatalf("version 2 part: %+v, %v", got, err)
	}
}

// TestSinkStringRows: a row of one string field, whatever its name (Beam's
// STRING rows are {payload}), is published as its text in raw and string
// format alike.
func TestSinkStringRows(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	for _, f := range []Format{FormatRaw, FormatString} {
		topic := "text-" + f.String()
		sink, err := NewSink(b, SinkConfig{Step: "Write", Topic: topic, CreateTopic: true, ID: "job-1/" + topic, Format: f})
		if err != nil {
			t.Fatal(err)
		}
		r := row.New(StringSchema())
		r.Values[0] = "plain text"
		if err := sink.Write(ctx, 0, []contract.Element{{Value: r}}); err != nil {
			t.Fatal(err)
		}
		if err := sink.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := b.CreateSubscription(ctx, "check-"+topic, topic, SubscriptionConfig{FromBeginning: true}); err != nil {
			t.Fatal(err)
		}
		msgs, err := b.Pull(ctx, "check-"+topic, 10, true)
		if err != nil || len(msgs) != 1 || string(msgs[0].Data) != "plain text" {
			t.Fatalf("%s: pulled %v, %v", f, msgs, err)
		}
	}
}

// TestSinkAvro: format avro publishes each row as one Avro record without
// a container (Beam's AVRO), with the configured schema or one inferred
// from the rows' payload fields (every field nullable); the attribute
// fields go to attributes, and a row the schema cannot hold is a
// not_publishable reject.
func TestSinkAvro(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	sch := row.MustSchema(row.Field{Name: "k", Type: row.Of(row.KindString)}, row.Field{Name: "origin", Type: row.Of(row.KindString)},
		row.Field{Name: "v", Type: row.Of(row.KindInt)})
	elem := func(k string, v int64) contract.Element {
		r := row.New(sch)
		r.Values[0], r.Values[1], r.Values[2] = k, "web", v
		return contract.Element{Value: r}
	}
	// What a Beam reader of each schema decodes, by hamba/avro itself.
	type given struct {
		K string `avro:"k"`
		V int32  `avro:"v"`
	}
	type inferred struct {
		K *string `avro:"k"`
		V *int64  `avro:"v"`
	}
	const givenSchema = `{"type": "record", "name": "Out", "fields": [{"name": "k", "type": "string"}, {"name": "v", "type": "int"}]}`
	const inferredSchema = `{"type": "record", "name": "Row", "namespace": "weir", "fields": [
		{"name": "k", "type": ["null", "string"], "default": null}, {"name": "v", "type": ["null", "long"], "default": null}]}`
	for _, tc := range []struct {
		name, schema string
		decode       func(data []byte) (string, error)
		rejects      int
	}{
		{"given schema", givenSchema, func(data []byte) (string, error) {
			var o given
			err := avro.Unmarshal(avro.MustParse(givenSchema), data, &o)
			return fmt.Sprintf("%s=%d", o.K, o.V), err
		}, 1},
		{"inferred schema", "", func(data []byte) (string, error) {
			var o inferred
			err := avro.Unmarshal(avro.MustParse(inferredSchema), data, &o)
			if o.K == nil || o.V == nil {
				return "", fmt.Errorf("nulls in %+v", o)
			}
			return fmt.Sprintf("%s=%d", *o.K, *o.V), err
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "avro-" + strings.ReplaceAll(tc.name, " ", "-")
			sink, err := NewSink(b, SinkConfig{Step: "Write", Topic: topic, CreateTopic: true, ID: "job-1/" + topic,
				Format: FormatAvro, AvroSchema: tc.schema, AttributeFields: []string{"origin"}})
			if err != nil {
				t.Fatal(err)
			}
			rejects, err := sink.WriteRejecting(ctx, 0, []contract.Element{elem("a", 1), elem("big", 1<<40), elem("bb", 2)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(rejects) != tc.rejects || (tc.rejects > 0 && (rejects[0].Index != 1 || rejects[0].Err.Reason != ReasonNotPublishable)) {
				t.Fatalf("rejects = %+v", rejects)
			}
			if err := sink.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := b.CreateSubscription(ctx, "check-"+topic, topic, SubscriptionConfig{FromBeginning: true}); err != nil {
				t.Fatal(err)
			}
			msgs, err := b.Pull(ctx, "check-"+topic, 10, true)
			if err != nil || len(msgs) != 3-tc.rejects {
				t.Fatalf("pull: %d, %v", len(msgs), err)
			}
			var got []string
			for _, m := range msgs {
				s, err := tc.decode(m.Data)
				if err != nil {
					t.Fatalf("message %q: %v", m.Data, err)
				}
				if m.Attributes["origin"] != "web" {
					t.Errorf("attributes %v", m.Attributes)
				}
				got = append(got, s)
			}
			want := "a=1 bb=2"
			if tc.rejects == 0 {
				want = "a=1 big=1099511627776 bb=2"
			}
			if strings.Join(got, " ") != want {
				t.Errorf("messages %v, want %s", got, want)
			}
		})
	}
	if _, err := NewSink(b, SinkConfig{Step: "Write", Topic: "t", ID: "j/w", Format: FormatJSON, AvroSchema: givenSchema}); err == nil {
		t.Error("an Avro schema with format json was taken")
	}
	if _, err := NewSink(b, SinkConfig{Step: "Write", Topic: "t", ID: "j/w", Format: FormatAvro, AvroSchema: `"long"`}); err == nil {
		t.Error("a schema of longs was taken for rows")
	}
}

// TestSinkIDAndTimestampAttributes: Beam's id_attribute and
// timestamp_attribute. Each message carries its ID and its element's
// event time in those attributes, the same on a replay of the commit; a
// source reading the topic with the same names reads the events at
// their own times.
func TestSinkIDAndTimestampAttributes(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	sch := row.MustSchema(row.Field{Name: "k", Type: row.Of(row.KindString)})
	t0 := mtime.FromTime(time.Date(2026, 3, 1, 0, 1, 0, 0, time.UTC))
	var elems []contract.Element
	for i, k := range []string{"a", "b"} {
		r := row.New(sch)
		r.Values[0] = k
		elems = append(elems, contract.Element{Value: r, Time: t0.Add(mtime.Duration(i) * mtime.Second)})
	}
	sink, err := NewSink(b, SinkConfig{Step: "Write", Topic: "stamped", CreateTopic: true, ID: "job-1/Write",
		IDAttribute: "uid", TimestampAttribute: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(ctx, "stamped", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"check", "look"} {
		if _, err := b.CreateSubscription(ctx, sub, "stamped", SubscriptionConfig{FromBeginning: true}); err != nil {
			t.Fatal(err)
		}
	}
	src, err := NewSource(b, SourceConfig{Step: "Read", Subscription: "check", Schema: sch, IDAttribute: "uid", TimestampAttribute: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Write(ctx, 0, elems); err != nil {
		t.Fatal(err)
	}
	p, err := sink.PreCommit(ctx, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the commit, and its replay after a crash
		if err := sink.Commit(ctx, 1, [][]byte{p}); err != nil {
			t.Fatal(err)
		}
	}
	if published, dups := sink.Stats(); published != 2 || dups != 2 {
		t.Fatalf("published %d, duplicates %d; want 2 and 2", published, dups)
	}
	sp := openSplit(t, src)
	got := readN(t, ctx, sp, 2, 4)
	for i, e := range got {
		if want := elems[i].Time; e.Time != want {
			t.Errorf("element %d at %s, want its event time %s", i, e.Time.Format(), want.Format())
		}
	}
	msgs, err := b.Pull(ctx, "look", 10, true)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("pulled %d, %v", len(msgs), err)
	}
	for _, m := range msgs {
		if !strings.HasPrefix(m.Attributes["uid"], "job-1/Write/") || m.Attributes["uid"] != m.ID {
			t.Errorf("uid %q, message ID %q", m.Attributes["uid"], m.ID)
		}
	}
	for _, tc := range []SinkConfig{
		{IDAttribute: "x", TimestampAttribute: "x"},
		{IDAttribute: "nats-id"},
		{TimestampAttribute: "k", AttributeFields: []string{"k"}},
	} {
		tc.Step, tc.Topic, tc.ID = "Write", "t", "j/w"
		if _, err := NewSink(b, tc); err == nil {
			t.Errorf("%+v: taken", tc)
		}
	}
}
