package pubsub

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// Benchmarks on the embedded broker with its file store and 100-byte
// messages. Run with a fixed count so pre-publishing stays bounded:
//
//	go test -run XXX -bench . -benchtime 200000x ./io/pubsub/
var payload100 = bytes.Repeat([]byte("x"), 100)

func benchMsgs(n int, withID bool) []outMsg {
	msgs := make([]outMsg, n)
	for i := range msgs {
		msgs[i].data = payload100
		if withID {
			msgs[i].id = "bench/" + strconv.Itoa(i)
		}
	}
	return msgs
}

func reportRate(b *testing.B, n int, d time.Duration) {
	b.ReportMetric(float64(n)/d.Seconds(), "msgs/s")
}

func BenchmarkPublish(b *testing.B) {
	for _, withID := range []bool{false, true} {
		name := "async"
		if withID {
			name = "async-msgid"
		}
		b.Run(name, func(b *testing.B) {
			br := newTestBroker(b)
			ctx := context.Background()
			if _, err := br.CreateTopic(ctx, "bench", TopicConfig{}); err != nil {
				b.Fatal(err)
			}
			base, _ := newMsg("bench", nil, nil)
			msgs := benchMsgs(b.N, withID)
			b.SetBytes(100)
			b.ResetTimer()
			start := time.Now()
			if _, _, err := br.publishAsync(ctx, base, msgs); err != nil {
				b.Fatal(err)
			}
			reportRate(b, b.N, time.Since(start))
		})
	}
}

// prepareConsume publishes n messages to a fresh topic with a subscription
// from the beginning.
func prepareConsume(b *testing.B, n int) (*Broker, jetstream.Consumer) {
	br := newTestBroker(b)
	ctx := context.Background()
	if _, err := br.CreateTopic(ctx, "bench", TopicConfig{}); err != nil {
		b.Fatal(err)
	}
	base, _ := newMsg("bench", nil, nil)
	if _, _, err := br.publishAsync(ctx, base, benchMsgs(n, false)); err != nil {
		b.Fatal(err)
	}
	if _, err := br.CreateSubscription(ctx, "bench", "bench", SubscriptionConfig{FromBeginning: true}); err != nil {
		b.Fatal(err)
	}
	c, err := br.js.Consumer(ctx, "WEIR_TOPIC_bench", "bench")
	if err != nil {
		b.Fatal(err)
	}
	return br, c
}

func BenchmarkConsume(b *testing.B) {
	for _, mode := range []string{"ack-each", "ackall-per-batch"} {
		b.Run(mode, func(b *testing.B) {
			_, c := prepareConsume(b, b.N)
			b.SetBytes(100)
			b.ResetTimer()
			start := time.Now()
			got := 0
			for got < b.N {
				batch, err := c.Fetch(consumeBatch, jetstream.FetchMaxWait(time.Second))
				if err != nil {
					b.Fatal(err)
				}
				var last jetstream.Msg
				for m := range batch.Messages() {
					got++
					if mode == "ack-each" {
						if err := m.Ack(); err != nil {
							b.Fatal(err)
						}
					}
					last = m
				}
				if mode == "ackall-per-batch" && last != nil {
					if err := last.Ack(); err != nil {
						b.Fatal(err)
					}
				}
			}
			reportRate(b, got, time.Since(start))
		})
	}
}

// BenchmarkSourceRead measures the ReadFromPubSub source (raw format)
// with a cumulative Ack after every Read, as a checkpoint would do.
func BenchmarkSourceRead(b *testing.B) {
	br, _ := prepareConsume(b, b.N)
	src, err := NewSource(br, SourceConfig{Subscription: "bench", Format: FormatRaw})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	sps, err := src.Split(ctx, 1)
	if err != nil {
		b.Fatal(err)
	}
	sp := sps[0].(contract.PositionedSplit)
	defer sp.Close()
	buf := make([]contract.Element, 1024)
	b.SetBytes(100)
	b.ResetTimer()
	start := time.Now()
	got := 0
	for got < b.N {
		res, err := sp.Read(ctx, buf)
		if err != nil {
			b.Fatal(err)
		}
		got += res.N
		pos, _ := sp.Position()
		if err := sp.Ack(ctx, pos); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, got, time.Since(start))
}

// consumeBatch is the pull batch of BenchmarkConsume.
const consumeBatch = 4096

// BenchmarkSeenIDs measures the source's dedupe check per message, with
// the hash of a 200-byte message's data that tells an ID reused for other
// data apart ("hash") and without it ("id_only", what a header-only read
// back does): the cost of counting ID conflicts.
func BenchmarkSeenIDs(b *testing.B) {
	data := bytes.Repeat([]byte("x"), 200)
	ids := make([]string, 1<<16)
	for i := range ids {
		ids[i] = fmt.Sprintf("order-%08d", i)
	}
	for _, withHash := range []bool{false, true} {
		name := "id_only"
		if withHash {
			name = "hash"
		}
		b.Run(name, func(b *testing.B) {
			s := newSeenIDs(mtime.FromDuration(DefaultDedupeWindow), DefaultMaxDedupeIDs)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				var h uint64
				if withHash {
					h = s.hash(data)
				}
				s.check(ids[i&(len(ids)-1)], mtime.Time(i), h)
			}
		})
	}
}

// BenchmarkPayloadDecode measures a message's payload read into a row,
// by format, for the same order (no broker):
//
//	go test -run XXX -bench PayloadDecode ./io/pubsub/
func BenchmarkPayloadDecode(b *testing.B) {
	jsonPayload := []byte(`{"region":"NORTH","amount":250,"ts":"2026-03-01T00:01:00Z","id":"o-1"}`)
	avroPayload := avroOrder(b, "NORTH", 250, "2026-03-01T00:01:00Z", "o-1")
	for _, tc := range []struct {
		name string
		cfg  SourceConfig
		data []byte
	}{
		{"json", SourceConfig{Schema: orderSchema}, jsonPayload},
		{"avro", SourceConfig{Format: FormatAvro, AvroSchema: orderAvro}, avroPayload},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := tc.cfg
			cfg.Step, cfg.Subscription = "Read", "s"
			src, err := NewSource(nil, cfg)
			if err != nil {
				b.Fatal(err)
			}
			sp := &split{cfg: &src.cfg, tsField: -1, idField: -1}
			b.SetBytes(int64(len(tc.data)))
			b.ReportAllocs()
			for b.Loop() {
				if r, reason, msg := sp.messageRow(tc.data, nil, 0); r == nil {
					b.Fatalf("%s: %s", reason, msg)
				}
			}
		})
	}
}

// BenchmarkPayloadEncode measures a row made a message's payload, by
// format, for the same order (no broker):
//
//	go test -run XXX -bench PayloadEncode ./io/pubsub/
func BenchmarkPayloadEncode(b *testing.B) {
	r := row.New(orderSchema)
	r.Values = []any{"NORTH", int64(250), mtime.FromTime(time.Date(2026, 3, 1, 0, 1, 0, 0, time.UTC)), "o-1"}
	for _, tc := range []struct {
		name string
		cfg  SinkConfig
	}{
		{"json", SinkConfig{}},
		{"avro", SinkConfig{Format: FormatAvro, AvroSchema: orderAvro}},
		{"avro-inferred", SinkConfig{Format: FormatAvro}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := tc.cfg
			cfg.Step, cfg.Topic, cfg.ID = "Write", "t", "j/w"
			s, err := NewSink(nil, cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.encode(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
