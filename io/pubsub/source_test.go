package pubsub

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hamba/avro/v2"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

func rejectFixture() contract.Reject {
	return contract.Reject{Element: `{"amount":"x"}`, Step: "ReadOrders", Reason: "schema_mismatch",
		Message: "field amount: want int", Source: &contract.SourcePos{Source: "orders/sub", Offset: 7}}
}

var orderSchema = row.MustSchema(
	row.Field{Name: "region", Type: row.Of(row.KindString)},
	row.Field{Name: "amount", Type: row.Of(row.KindInt)},
	row.Field{Name: "ts", Type: row.Of(row.KindTimestamp)},
	row.Field{Name: "id", Type: row.Of(row.KindString)},
)

// orderAvro is orderSchema's record as an Avro schema.
const orderAvro = `{"type": "record", "name": "Order", "fields": [
	{"name": "region", "type": "string"},
	{"name": "amount", "type": "long"},
	{"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
	{"name": "id", "type": ["null", "string"], "default": null}]}`

// avroOrder encodes an order with hamba/avro itself (not the code under
// test); an empty id is null.
func avroOrder(t testing.TB, region string, amount int64, ts, id string) []byte {
	t.Helper()
	type order struct {
		Region string    `avro:"region"`
		Amount int64     `avro:"amount"`
		TS     time.Time `avro:"ts"`
		ID     *string   `avro:"id"`
	}
	when, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		t.Fatal(err)
	}
	o := order{Region: region, Amount: amount, TS: when}
	if id != "" {
		o.ID = &id
	}
	b, err := avro.Marshal(avro.MustParse(orderAvro), o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withFields returns s with fields added at its end.
func withFields(s *row.Schema, fields ...row.Field) *row.Schema {
	return row.MustSchema(append(append([]row.Field(nil), s.Fields...), fields...)...)
}

func setupTopic(t *testing.T, b *Broker, topic, sub string, ackWait time.Duration) {
	t.Helper()
	ctx := tctx(t)
	if _, err := b.CreateTopic(ctx, topic, TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	if sub != "" {
		if _, err := b.CreateSubscription(ctx, sub, topic, SubscriptionConfig{AckWait: ackWait}); err != nil {
			t.Fatal(err)
		}
	}
}

func openSplit(t *testing.T, src *Source) contract.PositionedSplit {
	t.Helper()
	sps, err := src.Split(tctx(t), 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(sps) != 1 {
		t.Fatalf("%d splits, want 1", len(sps))
	}
	t.Cleanup(func() { sps[0].Close() })
	return sps[0].(contract.PositionedSplit)
}

// describe renders an element as "value@time" or "reject:reason@time".
func describe(e contract.Element) string {
	switch v := e.Value.(type) {
	case contract.Reject:
		return "reject:" + v.Reason + "@" + e.Time.Format()
	case *row.Row:
		return v.String() + "@" + e.Time.Format()
	}
	return fmt.Sprint(e.Value)
}

func TestSourceJSON(t *testing.T) {
	const t0 = "2026-03-01T00:01:00.000Z"
	type msg struct {
		data  string
		attrs map[string]string
	}
	cases := []struct {
		name string
		cfg  SourceConfig
		msgs []msg
		want []string
	}{
		{
			name: "timestamp field",
			cfg:  SourceConfig{TimestampField: "ts"},
			msgs: []msg{
				{data: `{"region":"NORTH","amount":250,"ts":"2026-03-01T00:01:00Z"}`},
				{data: `{"region":"NORTH","amount":175,"ts":1772323380000,"extra":true}`},
				{data: `{"region":"WEST","amount":"lots","ts":"2026-03-01T00:01:00Z"}`},
				{data: `{"region":`},
				{data: `[1,2]`},
				{data: `{"a":1} {"b":2}`},
				{data: `{"region":"WEST","amount":1}`},
				{data: `{"region":"WEST","amount":1,"ts":"yesterday"}`},
				{data: `{"region":"WEST","amount":1.5,"ts":"2026-03-01T00:01:00Z"}`},
			},
			want: []string{
				`{"region":"NORTH","amount":250,"ts":"2026-03-01T00:01:00.000Z","id":null}@` + t0,
				`{"region":"NORTH","amount":175,"ts":"2026-03-01T00:03:00.000Z","id":null}@2026-03-01T00:03:00.000Z`,
				"reject:schema_mismatch@",
				"reject:malformed_json@",
				"reject:malformed_json@",
				"reject:malformed_json@",
				"reject:bad_timestamp@",
				"reject:bad_timestamp@",
				"reject:schema_mismatch@",
			},
		},
		{
			name: "timestamp attribute",
			cfg:  SourceConfig{TimestampAttribute: "event_time"},
			msgs: []msg{
				{data: `{"region":"NORTH","amount":50}`, attrs: map[string]string{"event_time": "2026-03-01T00:04:00Z"}},
				{data: `{"region":"NORTH","amount":51}`, attrs: map[string]string{"event_time": "1772323440000"}},
				{data: `{"region":"NORTH","amount":52}`},
				{data: `{"region":"NORTH","amount":53}`, attrs: map[string]string{"event_time": "soon"}},
			},
			want: []string{
				`{"region":"NORTH","amount":50,"ts":null,"id":null}@2026-03-01T00:04:00.000Z`,
				`{"region":"NORTH","amount":51,"ts":null,"id":null}@2026-03-01T00:04:00.000Z`,
				"reject:bad_timestamp@",
				"reject:bad_timestamp@",
			},
		},
		{
			// A JSON Schema's required fields: absent or null is a
			// schema_mismatch reject, in the flat decoder's shape and in
			// the general one's (a nested value).
			name: "required fields",
			cfg:  SourceConfig{TimestampField: "ts", Required: []string{"region", "amount"}},
			msgs: []msg{
				{data: `{"region":"NORTH","amount":5,"ts":"2026-03-01T00:01:00Z"}`},
				{data: `{"amount":6,"ts":"2026-03-01T00:01:00Z"}`},
				{data: `{"region":null,"amount":7,"ts":"2026-03-01T00:01:00Z"}`},
				{data: `{"region":"WEST","ts":"2026-03-01T00:01:00Z","extra":{"nested":[1]}}`},
				{data: `{"region":"WEST","amount":8,"ts":"2026-03-01T00:01:00Z","extra":{"nested":[1]}}`},
			},
			want: []string{
				`{"region":"NORTH","amount":5,"ts":"2026-03-01T00:01:00.000Z","id":null}@` + t0,
				"reject:schema_mismatch@",
				"reject:schema_mismatch@",
				"reject:schema_mismatch@",
				`{"region":"WEST","amount":8,"ts":"2026-03-01T00:01:00.000Z","id":null}@` + t0,
			},
		},
		{
			// Beam's attributes and attributes_map: named attributes in
			// string fields (null when absent), all of them in a map.
			name: "attribute fields",
			cfg: SourceConfig{TimestampField: "ts", AttributeFields: []string{"origin"}, AttributesMap: "attrs",
				Schema: withFields(orderSchema, row.Field{Name: "origin", Type: row.Of(row.KindString)}, row.Field{Name: "attrs", Type: row.Of(row.KindAny)})},
			msgs: []msg{
				{data: `{"region":"NORTH","amount":1,"ts":"2026-03-01T00:01:00Z"}`, attrs: map[string]string{"origin": "web", "lang": "de"}},
				{data: `{"region":"NORTH","amount":2,"ts":"2026-03-01T00:01:00Z","origin":"payload"}`},
			},
			want: []string{
				`{"region":"NORTH","amount":1,"ts":"2026-03-01T00:01:00.000Z","id":null,"origin":"web","attrs":{"lang":"de","origin":"web"}}@` + t0,
				`{"region":"NORTH","amount":2,"ts":"2026-03-01T00:01:00.000Z","id":null,"origin":null,"attrs":{}}@` + t0,
			},
		},
		{
			// Beam's STRING format: the payload as text; bytes that are
			// not UTF-8 are a reject.
			name: "string format",
			cfg: SourceConfig{Format: FormatString, AttributeFields: []string{"origin"}, TimestampAttribute: "event_time",
				Schema: withFields(StringSchema(), row.Field{Name: "origin", Type: row.Of(row.KindString)})},
			msgs: []msg{
				{data: `hello, "world"`, attrs: map[string]string{"origin": "cli", "event_time": "2026-03-01T00:01:00Z"}},
				{data: "\xff\xfe"},
			},
			want: []string{
				`{"payload":"hello, \"world\"","origin":"cli"}@` + t0,
				"reject:malformed_payload@",
			},
		},
		{
			// Beam's AVRO format: each payload one record of the schema,
			// without a container; the rows are the record's fields, then
			// the attribute fields. What is not a record of the schema is
			// a malformed_payload reject, kept whole in base64.
			name: "avro format",
			cfg:  SourceConfig{Format: FormatAvro, AvroSchema: orderAvro, TimestampField: "ts", AttributeFields: []string{"origin"}},
			msgs: []msg{
				{data: string(avroOrder(t, "NORTH", 250, "2026-03-01T00:01:00Z", "o-1")), attrs: map[string]string{"origin": "web"}},
				{data: string(avroOrder(t, "WEST", 100, "2026-03-01T00:01:00Z", "")[:6])},
				{data: string(avroOrder(t, "WEST", 100, "2026-03-01T00:01:00Z", "")) + "\x00\x01"},
			},
			want: []string{
				`{"region":"NORTH","amount":250,"ts":"2026-03-01T00:01:00.000Z","id":"o-1","origin":"web"}@` + t0,
				"reject:malformed_payload@",
				`{"region":"WEST","amount":100,"ts":"2026-03-01T00:01:00.000Z","id":null,"origin":null}@` + t0,
			},
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestBroker(t)
			ctx := tctx(t)
			topic := "orders" + strconv.Itoa(i)
			setupTopic(t, b, topic, "read", 0)
			for _, m := range tc.msgs {
				if _, err := b.Publish(ctx, topic, []byte(m.data), m.attrs, ""); err != nil {
					t.Fatal(err)
				}
			}
			cfg := tc.cfg
			cfg.Step, cfg.Subscription = "ReadOrders", "read"
			if cfg.Schema == nil && cfg.Format == FormatJSON {
				cfg.Schema = orderSchema
			}
			src, err := NewSource(b, cfg)
			if err != nil {
				t.Fatal(err)
			}
			sp := openSplit(t, src)
			got := readN(t, ctx, sp, len(tc.msgs), 4)
			for j, e := range got {
				d := describe(e)
				if rj, ok := e.Value.(contract.Reject); ok {
					d = "reject:" + rj.Reason + "@"
					want := tc.msgs[j].data
					if !utf8.ValidString(want) {
						want = base64.StdEncoding.EncodeToString([]byte(want))
					}
					if rj.Step != "ReadOrders" || rj.Element != want || rj.Source == nil || rj.Message == "" {
						t.Errorf("reject %d = %+v", j, rj)
					}
				}
				if d != tc.want[j] {
					t.Errorf("element %d = %s, want %s", j, d, tc.want[j])
				}
				// The topic and its stream sequence, whatever the subscription.
				if e.Source == nil || e.Source.Source != topic || e.Source.Offset != int64(j+1) {
					t.Errorf("element %d source = %v", j, e.Source)
				}
			}
		})
	}
}

func TestSourceConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		cfg  SourceConfig
	}{
		{"nothing to read", SourceConfig{Schema: orderSchema}},
		{"topic without subscription name", SourceConfig{Topic: "t", Schema: orderSchema}},
		{"json without schema", SourceConfig{Subscription: "s"}},
		{"both timestamps", SourceConfig{Subscription: "s", Schema: orderSchema, TimestampField: "ts", TimestampAttribute: "t"}},
		{"unknown timestamp field", SourceConfig{Subscription: "s", Schema: orderSchema, TimestampField: "when"}},
		{"unknown id field", SourceConfig{Subscription: "s", Schema: orderSchema, IDField: "key"}},
		{"raw with a field", SourceConfig{Subscription: "s", Format: FormatRaw, TimestampField: "ts"}},
		{"unknown required field", SourceConfig{Subscription: "s", Schema: orderSchema, Required: []string{"region", "colour"}}},
		{"raw with a required field", SourceConfig{Subscription: "s", Format: FormatRaw, Required: []string{"payload"}}},
		{"an attribute field that does not end the schema", SourceConfig{Subscription: "s", Schema: orderSchema, AttributeFields: []string{"region"}}},
		{"an attributes map that is not of type any", SourceConfig{Subscription: "s", Schema: orderSchema, AttributesMap: "id"}},
		{"attribute fields but no payload", SourceConfig{Subscription: "s", Format: FormatString, AttributeFields: []string{"payload"}}},
		{"bad subscription name", SourceConfig{Subscription: "a/b", Schema: orderSchema}},
		{"avro without a schema", SourceConfig{Subscription: "s", Format: FormatAvro}},
		{"avro with a schema that is not one", SourceConfig{Subscription: "s", Format: FormatAvro, AvroSchema: `{"type": "record"}`}},
		{"avro with rows of other fields", SourceConfig{Subscription: "s", Format: FormatAvro, AvroSchema: orderAvro, Schema: row.MustSchema(row.Field{Name: "region", Type: row.Of(row.KindString)})}},
	}
	for _, tc := range cases {
		if _, err := NewSource(nil, tc.cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: got %v, want ErrInvalidConfig", tc.name, err)
		}
	}
	if got := SubscriptionName("orders-job", "Read/Orders"); got != "orders-job--Read_Orders" {
		t.Errorf("SubscriptionName = %s", got)
	}
}

func TestSourceRawAndTopicSubscription(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	if _, err := b.CreateTopic(ctx, "events", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	sub := SubscriptionName("job", "Read")
	src, err := NewSource(b, SourceConfig{Step: "Read", Topic: "events", Subscription: sub, Format: FormatRaw})
	if err != nil {
		t.Fatal(err)
	}
	sp := openSplit(t, src) // creates the subscription
	if _, err := b.Publish(ctx, "events", []byte("hello"), map[string]string{"k": "v"}, "m1"); err != nil {
		t.Fatal(err)
	}
	got := readN(t, ctx, sp, 1, 8)
	r := got[0].Value.(*row.Row)
	if d, _ := r.Get("data"); d != "hello" {
		t.Errorf("data = %v", d)
	}
	if a, _ := r.Get("attributes"); fmt.Sprint(a) != "map[k:v]" {
		t.Errorf("attributes = %v", a)
	}
	if id, _ := r.Get("id"); id != "m1" {
		t.Errorf("id = %v", id)
	}
	if pt, _ := r.Get("publish_time"); pt != got[0].Time {
		t.Errorf("publish time %v, event time %v", pt, got[0].Time)
	}
	if d := time.Since(got[0].Time.ToTime()); d < 0 || d > time.Minute {
		t.Errorf("event time %v is not the publish time", got[0].Time)
	}
	sp.Close()
	// A second run keeps the subscription.
	src2, _ := NewSource(b, SourceConfig{Step: "Read", Topic: "events", Subscription: sub, Format: FormatRaw})
	openSplit(t, src2)
	subs, err := b.ListSubscriptions(ctx, "events")
	if err != nil || len(subs) != 1 || subs[0].Name != sub {
		t.Fatalf("subscriptions %+v %v", subs, err)
	}
}

func TestReadBlocksBrieflyAndHonoursCancel(t *testing.T) {
	b := newTestBroker(t)
	setupTopic(t, b, "quiet", "q", 0)
	src, err := NewSource(b, SourceConfig{Subscription: "q", Format: FormatRaw})
	if err != nil {
		t.Fatal(err)
	}
	sp := openSplit(t, src)
	buf := make([]contract.Element, 16)
	start := time.Now()
	res, err := sp.Read(context.Background(), buf)
	if err != nil || res.N != 0 {
		t.Fatalf("Read = %+v, %v", res, err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("empty Read blocked %v", d)
	}
	// Cancel while Read waits for messages: Read asks for ctx.Done() only
	// in its wait, so the probe tells when it is there.
	cctx, cancel := context.WithCancel(context.Background())
	ctx := &doneProbe{Context: cctx, asked: make(chan struct{})}
	go func() { <-ctx.asked; cancel() }()
	start = time.Now()
	if _, err := sp.Read(ctx, buf); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Read: %v", err)
	}
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Errorf("cancelled Read took %v", d)
	}
}

func TestWatermarker(t *testing.T) {
	base := mtime.Time(1_000_000)
	w := newWatermarker(WatermarkPolicy{MaxOutOfOrderness: 10 * time.Second, IdleTimeout: 5 * time.Second}, base)
	steps := []struct {
		name     string
		event    mtime.Time // observed when not 0
		busyAt   mtime.Time // busy when not 0
		now      mtime.Time
		caughtUp bool
		want     mtime.Time
	}{
		{name: "start", now: base, want: mtime.MinTimestamp},
		{name: "caught up, not idle yet", now: base + 4000, caughtUp: true, want: mtime.MinTimestamp},
		{name: "idle", now: base + 5000, caughtUp: true, want: base + 5000 - 10000},
		{name: "data", event: base + 60000, busyAt: base + 6000, now: base + 6000, want: base + 50000},
		{name: "older data keeps it", event: base + 1000, busyAt: base + 6100, now: base + 6100, want: base + 50000},
		{name: "idle but behind max event", now: base + 12000, caughtUp: true, want: base + 50000},
		{name: "not caught up: no idle advance", now: base + 100000, want: base + 50000},
		{name: "idle follows processing time", now: base + 100000, caughtUp: true, want: base + 90000},
	}
	for _, s := range steps {
		if s.event != 0 {
			w.observe(s.event)
		}
		if s.busyAt != 0 {
			w.busy(s.busyAt)
		}
		if got := w.current(s.now, s.caughtUp); got != s.want {
			t.Fatalf("%s: watermark %v, want %v", s.name, got, s.want)
		}
	}
	never := newWatermarker(WatermarkPolicy{IdleTimeout: -1, MaxOutOfOrderness: time.Second}, base)
	if got := never.current(base.Add(mtime.Hour), true); got != mtime.MinTimestamp {
		t.Errorf("idle disabled: %v", got)
	}
}

func TestSourceWatermark(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	setupTopic(t, b, "wm", "wm", 0)
	start := mtime.Time(1_772_323_200_000) // 2026-03-01T00:00:00Z
	clock := mtime.NewManualClock(start)
	src, err := NewSource(b, SourceConfig{Subscription: "wm", Schema: orderSchema, TimestampField: "ts", Clock: clock,
		Watermark: WatermarkPolicy{MaxOutOfOrderness: 10 * time.Second, IdleTimeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	sp := openSplit(t, src)
	publish := func(ts string) {
		if _, err := b.Publish(ctx, "wm", []byte(`{"region":"N","amount":1,"ts":"`+ts+`"}`), nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	at := func(s string) mtime.Time { x, _ := mtime.Parse(s); return x }
	steps := []struct {
		name    string
		publish []string
		advance mtime.Duration
		wantN   int
		want    mtime.Time
	}{
		{name: "nothing yet", want: mtime.MinTimestamp},
		{name: "data", publish: []string{"2026-03-01T00:01:00Z", "2026-03-01T00:03:00Z"}, wantN: 2, want: at("2026-03-01T00:02:50Z")},
		{name: "out of order", publish: []string{"2026-03-01T00:02:00Z"}, wantN: 1, want: at("2026-03-01T00:02:50Z")},
		{name: "caught up, not idle", advance: 4 * mtime.Second, want: at("2026-03-01T00:02:50Z")},
		{name: "idle, behind the data", advance: 2 * mtime.Second, want: at("2026-03-01T00:02:50Z")},
		{name: "idle past the data", advance: 5 * mtime.Minute, want: start.Add(5*mtime.Minute + 6*mtime.Second - 10*mtime.Second)},
	}
	for _, s := range steps {
		for _, ts := range s.publish {
			publish(ts)
		}
		clock.Advance(s.advance)
		got, res := readIdle(t, ctx, sp)
		if len(got) != s.wantN {
			t.Fatalf("%s: read %d, want %d", s.name, len(got), s.wantN)
		}
		if res.Watermark != s.want {
			t.Fatalf("%s: watermark %v, want %v", s.name, res.Watermark, s.want)
		}
	}
}

// TestFarFutureTimestamp: a message stamped 2099 between good ones is a
// timestamp_in_future reject; it does not move the watermark, so the good
// messages after it are on time. One within MaxFutureSkew is accepted, and
// the watermark never passes processing time + MaxFutureSkew.
func TestFarFutureTimestamp(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	setupTopic(t, b, "skew", "skew", 0)
	start := mtime.Time(1_772_323_200_000) // 2026-03-01T00:00:00Z
	clock := mtime.NewManualClock(start)
	src, err := NewSource(b, SourceConfig{Step: "ReadOrders", Subscription: "skew", Schema: orderSchema, TimestampField: "ts", Clock: clock,
		Watermark: WatermarkPolicy{MaxOutOfOrderness: 10 * time.Second, IdleTimeout: -1}})
	if err != nil {
		t.Fatal(err)
	}
	sp := openSplit(t, src)
	for _, ts := range []string{"2026-03-01T00:00:05Z", "2099-01-01T00:00:00Z", "2026-03-01T00:00:06Z", "2026-03-01T00:59:00Z", "2026-03-01T01:00:01Z", "2026-03-01T00:00:07Z"} {
		if _, err := b.Publish(ctx, "skew", []byte(`{"region":"N","amount":1,"ts":"`+ts+`"}`), nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	got := readN(t, ctx, sp, 6, 8)
	want := []string{"2026-03-01T00:00:05.000Z", "reject:timestamp_in_future", "2026-03-01T00:00:06.000Z",
		"2026-03-01T00:59:00.000Z", "reject:timestamp_in_future", "2026-03-01T00:00:07.000Z"}
	for i, e := range got {
		d := e.Time.Format()
		if rj, ok := e.Value.(contract.Reject); ok {
			d = "reject:" + rj.Reason
			if !strings.Contains(rj.Message, "max_future_skew 1h0m0s") {
				t.Errorf("reject %d message %q does not name max_future_skew", i, rj.Message)
			}
		}
		if d != want[i] {
			t.Errorf("element %d = %s, want %s", i, d, want[i])
		}
	}
	_, res := readIdle(t, ctx, sp)
	if limit := start.Add(mtime.Hour); res.Watermark > limit {
		t.Errorf("watermark %v passed processing time + max_future_skew %v", res.Watermark, limit)
	}
	if w := mtime.Time(1_772_326_740_000).Add(-10 * mtime.Second); res.Watermark != w { // 00:59:00 - 10s
		t.Errorf("watermark %v, want %v", res.Watermark, w)
	}
}

// TestTimestampInSeconds: a numeric timestamp below 10^11 is plainly
// seconds: a timestamp_in_seconds reject with a hint, not an event in 1970.
func TestTimestampInSeconds(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	setupTopic(t, b, "secs", "secs", 0)
	for _, m := range []struct {
		data  string
		attrs map[string]string
	}{
		{data: `{"region":"N","amount":1,"ts":1772323200}`},
		{data: `{"region":"N","amount":2,"ts":1772323200000}`},
	} {
		if _, err := b.Publish(ctx, "secs", []byte(m.data), m.attrs, ""); err != nil {
			t.Fatal(err)
		}
	}
	src, err := NewSource(b, SourceConfig{Step: "ReadOrders", Subscription: "secs", Schema: orderSchema, TimestampField: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	got := readN(t, ctx, openSplit(t, src), 2, 4)
	rj, ok := got[0].Value.(contract.Reject)
	if !ok || rj.Reason != ReasonTimestampInSeconds || !strings.Contains(rj.Message, "seconds") || !strings.Contains(rj.Message, "1772323200000") {
		t.Errorf("seconds timestamp: %s %+v, want a timestamp_in_seconds reject with the millisecond hint", describe(got[0]), got[0].Value)
	}
	if got[1].Time != 1_772_323_200_000 {
		t.Errorf("milliseconds timestamp: %s", describe(got[1]))
	}

	// The same through an attribute.
	setupTopic(t, b, "secs2", "secs2", 0)
	if _, err := b.Publish(ctx, "secs2", []byte(`{"region":"N","amount":1}`), map[string]string{"event_time": "1772323200"}, ""); err != nil {
		t.Fatal(err)
	}
	src, err = NewSource(b, SourceConfig{Step: "ReadOrders", Subscription: "secs2", Schema: orderSchema, TimestampAttribute: "event_time"})
	if err != nil {
		t.Fatal(err)
	}
	got = readN(t, ctx, openSplit(t, src), 1, 4)
	if rj, ok := got[0].Value.(contract.Reject); !ok || rj.Reason != ReasonTimestampInSeconds {
		t.Errorf("seconds attribute: %s, want a timestamp_in_seconds reject", describe(got[0]))
	}
}

func publishN(t *testing.T, b *Broker, topic string, from, to int, id func(i int) string) {
	t.Helper()
	ctx := tctx(t)
	for i := from; i <= to; i++ {
		var attrs map[string]string
		if id != nil {
			attrs = map[string]string{"key": id(i)}
		}
		if _, err := b.Publish(ctx, topic, []byte(`{"region":"N","amount":`+strconv.Itoa(i)+`}`), attrs, ""); err != nil {
			t.Fatal(err)
		}
	}
}

func amounts(es []contract.Element) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		v, _ := e.Value.(*row.Row).Get("amount")
		out[i] = v.(int64)
	}
	return out
}

func seqRange(from, to int) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, int64(i))
	}
	return out
}

// TestAckResume reads 100 messages, acknowledges the first 50 (a durable
// checkpoint at 50) and stops; the next run gets 51..100 again, at once,
// whether it resumes from the checkpoint or starts without one.
func TestAckResume(t *testing.T) {
	for _, resume := range []bool{true, false} {
		t.Run(fmt.Sprintf("resume=%v", resume), func(t *testing.T) {
			b := newTestBroker(t)
			testAckResume(t, b, "orders", "read", resume)
		})
	}
}

func testAckResume(t *testing.T, b *Broker, topic, sub string, resume bool) {
	ctx := tctx(t)
	// AckWait is long: redelivery must come from the rewind, not the timeout.
	setupTopic(t, b, topic, sub, time.Hour)
	publishN(t, b, topic, 1, 100, nil)
	cfg := SourceConfig{Step: "Read", Subscription: sub, Schema: orderSchema}
	src, err := NewSource(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sp := openSplit(t, src)
	first := readN(t, ctx, sp, 50, 50)
	pos50, err := sp.Position()
	if err != nil {
		t.Fatal(err)
	}
	second := readN(t, ctx, sp, 50, 50)
	if got, want := fmt.Sprint(amounts(append(first, second...))), fmt.Sprint(seqRange(1, 100)); got != want {
		t.Fatalf("first run read %s", got)
	}
	if err := sp.Ack(ctx, pos50); err != nil {
		t.Fatal(err)
	}
	info, err := b.Subscription(ctx, sub)
	if err != nil {
		t.Fatal(err)
	}
	if info.AckFloor != 50 || info.NumAckPending != 50 || info.NumPending != 0 {
		t.Fatalf("after ack at 50: %+v", info)
	}
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}

	src2, _ := NewSource(b, cfg)
	var sps []contract.SourceSplit
	if resume {
		sps, err = src2.Resume(ctx, [][]byte{pos50})
	} else {
		sps, err = src2.Split(ctx, 1)
	}
	if err != nil {
		t.Fatal(err)
	}
	sp2 := sps[0].(contract.PositionedSplit)
	defer sp2.Close()
	again := readN(t, ctx, sp2, 50, 64)
	if got, want := fmt.Sprint(amounts(again)), fmt.Sprint(seqRange(51, 100)); got != want {
		t.Fatalf("second run read %s, want %s", got, want)
	}
	if rest, _ := readIdle(t, ctx, sp2); len(rest) != 0 {
		t.Fatalf("second run read %d more", len(rest))
	}
	pos100, _ := sp2.Position()
	if err := sp2.Ack(ctx, pos100); err != nil {
		t.Fatal(err)
	}
	if info, _ := b.Subscription(ctx, sub); info.AckFloor != 100 || info.Backlog != 0 {
		t.Fatalf("after ack at 100: %+v", info)
	}
	// Acknowledging an older position changes nothing.
	if err := sp2.Ack(ctx, pos50); err != nil {
		t.Fatal(err)
	}
	if _, err := src2.Resume(ctx, [][]byte{[]byte("junk")}); !errors.Is(err, ErrInvalidPosition) {
		t.Fatalf("junk position: %v", err)
	}
}

// TestRedeliveryAfterAckWait: within one run, messages not acknowledged
// within AckWait are delivered again by the server; the source drops them
// (they are already in flight towards a checkpoint).
func TestRedeliveryAfterAckWait(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	setupTopic(t, b, "slow", "slow", time.Second)
	publishN(t, b, "slow", 1, 10, nil)
	src, _ := NewSource(b, SourceConfig{Subscription: "slow", Schema: orderSchema})
	sp := openSplit(t, src)
	readN(t, ctx, sp, 10, 16)
	// The server redelivers after AckWait, by its own timer: read until the
	// split has dropped all ten redeliveries.
	var more []contract.Element
	buf := make([]contract.Element, 16)
	if !await.Until(10*time.Second, time.Millisecond, func() bool {
		res, err := sp.Read(ctx, buf)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		more = append(more, buf[:res.N]...)
		return sp.(*split).skipped >= 10
	}) {
		t.Fatalf("dropped %d redeliveries, want 10", sp.(*split).skipped)
	}
	if rest, _ := readIdle(t, ctx, sp); len(more)+len(rest) != 0 {
		t.Fatalf("redeliveries were emitted again: %d", len(more)+len(rest))
	}
	if info, _ := b.Subscription(ctx, "slow"); info.NumAckPending != 10 {
		t.Fatalf("unacknowledged: %+v", info)
	}
}

// TestDedupe: messages republished with the same ID within the window are
// dropped, within a run and across a resume.
func TestDedupe(t *testing.T) {
	for _, byField := range []bool{false, true} {
		t.Run(fmt.Sprintf("by_field=%v", byField), func(t *testing.T) {
			b := newTestBroker(t)
			ctx := tctx(t)
			setupTopic(t, b, "dup", "dup", time.Hour)
			pub := func(amount int, id string) {
				data := fmt.Sprintf(`{"region":"N","amount":%d,"id":%q}`, amount, id)
				if _, err := b.Publish(ctx, "dup", []byte(data), map[string]string{"key": id}, ""); err != nil {
					t.Fatal(err)
				}
			}
			cfg := SourceConfig{Subscription: "dup", Schema: orderSchema, IDAttribute: "key"}
			if byField {
				cfg.IDAttribute, cfg.IDField = "", "id"
			}
			src, _ := NewSource(b, cfg)
			sp := openSplit(t, src)
			pub(1, "a")
			pub(2, "b")
			pub(3, "a") // republished
			got, _ := readIdle(t, ctx, sp)
			if fmt.Sprint(amounts(got)) != "[1 2]" {
				t.Fatalf("first run: %v", amounts(got))
			}
			// The republished "a" carries other data: an ID conflict.
			if n := src.DuplicateIDConflicts(); n != 1 {
				t.Errorf("first run: %d ID conflicts, want 1", n)
			}
			pos, _ := sp.Position() // covers all three
			sp.Close()
			pub(4, "b") // republished after the checkpoint
			pub(5, "c")
			src2, _ := NewSource(b, cfg)
			sps, err := src2.Resume(ctx, [][]byte{pos})
			if err != nil {
				t.Fatal(err)
			}
			defer sps[0].Close()
			got, _ = readIdle(t, ctx, sps[0])
			if fmt.Sprint(amounts(got)) != "[5]" {
				t.Fatalf("after resume: %v", amounts(got))
			}
			// "b" again with other data: the IDs read back by field carry
			// their data's hash, those read back from headers only do not.
			want := int64(0)
			if byField {
				want = 1
			}
			if n := src2.DuplicateIDConflicts(); n != want {
				t.Errorf("after resume: %d ID conflicts, want %d", n, want)
			}
		})
	}
}

// TestSeenIDs: an ID is a duplicate within the window of the newest
// publish time, at most max IDs are remembered, and a duplicate whose data
// hash differs from the remembered one (both known) is a conflict.
func TestSeenIDs(t *testing.T) {
	s := newSeenIDs(10, 3)
	x, y := s.hash([]byte("x")), s.hash([]byte("y"))
	steps := []struct {
		id           string
		t            mtime.Time
		h            uint64
		want         bool
		wantConflict bool
	}{
		{"a", 0, x, false, false}, {"a", 5, x, true, false}, {"b", 6, x, false, false}, {"a", 10, y, true, true},
		{"a", 11, y, false, false},                             // "a"@0 left the window
		{"c", 12, 0, false, false}, {"d", 12, x, false, false}, // max 3: "b" forgotten
		{"b", 13, x, false, false},
		{"c", 13, y, true, false}, // "c"'s data is not known: no conflict
		{"d", 14, 0, true, false}, // nor this one's
	}
	for i, st := range steps {
		if got, conflict := s.check(st.id, st.t, st.h); got != st.want || conflict != st.wantConflict {
			t.Fatalf("step %d: check(%s, %d) = %v, %v; want %v, %v", i, st.id, st.t, got, conflict, st.want, st.wantConflict)
		}
		if s.len() > 3 {
			t.Fatalf("step %d: %d ids remembered", i, s.len())
		}
	}
	if x == 0 || y == 0 || x == y {
		t.Errorf("hashes %x, %x: want two distinct, neither 0", x, y)
	}
}

// doneProbe is a context that closes asked the first time its Done is
// called: a test learns that the code under test has started to wait on it.
type doneProbe struct {
	context.Context
	asked chan struct{}
	once  sync.Once
}

func (c *doneProbe) Done() <-chan struct{} {
	c.once.Do(func() { close(c.asked) })
	return c.Context.Done()
}
