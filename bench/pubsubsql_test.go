package bench

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/mtime"
)

// tinyPubSub is a pubsub-to-sql workload small enough for CI: 1-second
// windows so that 20,000 messages (20 s of event time) fill 20 windows.
func tinyPubSub() PubSubConfig {
	return PubSubConfig{
		Messages:           20_000,
		Keys:               37,
		Window:             time.Second,
		CheckpointInterval: 50 * time.Millisecond,
		LatencyRate:        2_000,
		LatencyDuration:    time.Second,
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestEventMessage(t *testing.T) {
	for _, i := range []int64{0, 1, 59_999, 60_000, 4_999_999} {
		b := AppendEventMessage(nil, i, DefaultKeys)
		if len(b) != MessageSize {
			t.Errorf("message %d is %d bytes, want %d: %s", i, len(b), MessageSize, b)
		}
		var m struct {
			Key    string `json:"key"`
			Amount int64  `json:"amount"`
			TS     string `json:"ts"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("message %d: %v: %s", i, err, b)
		}
		k, a := Event(i, DefaultKeys)
		ts, err := mtime.Parse(m.TS)
		if m.Key != eventKey(k) || m.Amount != a || err != nil || ts != EventTime(i) {
			t.Errorf("message %d = %s, want key %s, amount %d, ts %s", i, b, eventKey(k), a, EventTime(i))
		}
	}
	b := appendLatencyMessage(nil, 123, 1_764_469_999_123_456)
	if len(b) != MessageSize || !strings.HasPrefix(string(b), `{"seq":123,"pub_us":1764469999123456,"pad":"x`) {
		t.Errorf("latency probe = %s (%d bytes)", b, len(b))
	}
}

func TestExpectedSums(t *testing.T) {
	cfg := PubSubConfig{Messages: 150_000, Keys: 10, Window: time.Minute}
	e := ComputeExpectedSums(cfg)
	// 150 s of event time from a minute boundary: three windows, every key
	// in each.
	if e.Rows != 30 || e.Count != cfg.Messages || e.Total != ExpectedTotal(Config{Events: cfg.Messages, Keys: cfg.Keys}) {
		t.Errorf("expected sums: %d rows, count %d, total %d", e.Rows, e.Count, e.Total)
	}
}

func TestParsePubSubVariant(t *testing.T) {
	for _, v := range append(PubSubVariants(), VariantPublish) {
		if got, err := ParsePubSubVariant(string(v)); err != nil || got != v {
			t.Errorf("ParsePubSubVariant(%q) = %q, %v", v, got, err)
		}
	}
	if _, err := ParsePubSubVariant("sdk-w1"); err == nil {
		t.Error("ParsePubSubVariant accepted sdk-w1")
	}
}

// TestPubSubVariants runs every pubsub-to-sql variant in this process at a
// tiny size; each must verify its result.
func TestPubSubVariants(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := tinyPubSub()
	run := func(v PubSubVariant) PubSubOutcome {
		t.Helper()
		o, err := RunPubSub(ctx, v, 1, cfg, dir, quietLogger())
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if o.Variant != string(v) || o.ElapsedNanos <= 0 {
			t.Errorf("%s: outcome %+v", v, o)
		}
		return o
	}
	if o := run(VariantPublish); o.Messages != cfg.Messages {
		t.Errorf("published %d, want %d", o.Messages, cfg.Messages)
	}
	if o := run(VariantRaw); o.Messages != cfg.Messages {
		t.Errorf("raw consumed %d, want %d", o.Messages, cfg.Messages)
	}
	want := ComputeExpectedSums(cfg)
	for _, v := range []PubSubVariant{VariantPipeline, VariantPipelineFinalCP} {
		o := run(v)
		if o.Rows != want.Rows || o.Total != want.Total || o.Count != cfg.Messages || o.Checksum != want.Checksum {
			t.Errorf("%s: table %d rows, total %d, count %d; want %d, %d, %d", v, o.Rows, o.Total, o.Count, want.Rows, want.Total, cfg.Messages)
		}
		if v == VariantPipelineFinalCP && o.Checkpoints != 1 {
			t.Errorf("%s took %d checkpoints, want only the final one", v, o.Checkpoints)
		}
	}
	o := run(VariantLatency)
	if o.Samples != o.Messages || o.Messages != 2_000 || o.LatencyP50Nanos <= 0 || o.LatencyP99Nanos < o.LatencyP50Nanos {
		t.Errorf("latency: %+v", o)
	}
	// A second run reuses the published stream with fresh subscriptions.
	if o, err := RunPubSub(ctx, VariantRaw, 2, cfg, dir, quietLogger()); err != nil || o.Messages != cfg.Messages {
		t.Errorf("raw, run 2: %+v, %v", o, err)
	}
}

func TestPubSubNothingPublished(t *testing.T) {
	cfg := tinyPubSub()
	_, err := RunPubSub(context.Background(), VariantRaw, 1, cfg, t.TempDir(), quietLogger())
	if err == nil || !strings.Contains(err.Error(), "topic") {
		t.Errorf("raw without a published topic: %v", err)
	}
	if errors.Is(err, ErrMismatch) {
		t.Errorf("a missing topic is not a wrong result: %v", err)
	}
}

// BenchmarkPubSubToSQL runs the raw consumer and the checkpointed pipeline
// in this process over b.N pre-published messages (published outside the
// timer), for profiling without child processes:
//
//	go test -run '^$' -bench PubSubToSQL -benchtime 500000x -cpuprofile cpu.prof ./bench
func BenchmarkPubSubToSQL(b *testing.B) {
	for _, v := range []PubSubVariant{VariantRaw, VariantPipeline} {
		b.Run(string(v), func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			cfg := PubSubConfig{Messages: int64(b.N), Window: time.Minute}
			if _, err := RunPubSub(ctx, VariantPublish, 0, cfg, dir, quietLogger()); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(MessageSize)
			b.ResetTimer()
			o, err := RunPubSub(ctx, v, 1, cfg, dir, quietLogger())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(o.Messages)/o.Elapsed().Seconds(), "msgs/s")
		})
	}
}
