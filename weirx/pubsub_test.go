package weirx_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/weirx"
)

var (
	orderSchema   = row.MustSchema(row.Field{Name: "id", Type: row.Of(row.KindString)}, row.Field{Name: "amount", Type: row.Of(row.KindInt)})
	doubledSchema = row.MustSchema(row.Field{Name: "id", Type: row.Of(row.KindString)}, row.Field{Name: "doubled", Type: row.Of(row.KindInt)})
)

// relay reads topic orders-in, doubles each amount and publishes to
// orders-out; it first makes the topics and a subscription to check the
// output with (a test's setup, through the program's own broker).
func relay(p *weir.Pipeline) error {
	s := p.Root()
	if b, ok := p.Job().Broker.(*pubsub.Broker); ok && b != nil {
		ctx := context.Background()
		for _, topic := range []string{"orders-in", "orders-out"} {
			if _, err := b.CreateTopic(ctx, topic, pubsub.TopicConfig{}); err != nil && !errors.Is(err, pubsub.ErrTopicExists) {
				return err
			}
		}
		if _, err := b.CreateSubscription(ctx, "check", "orders-out", pubsub.SubscriptionConfig{FromBeginning: true}); err != nil && !errors.Is(err, pubsub.ErrSubscriptionExists) {
			return err
		}
	}
	in, err := weirx.ReadFromPubSub(s, "Orders", pubsub.SourceConfig{Topic: "orders-in", Schema: orderSchema, IDField: "id"})
	if err != nil {
		return err
	}
	out := weir.Map(s, "Double", in, func(r *row.Row) *row.Row {
		o := row.New(doubledSchema)
		o.Values[0] = r.Values[0]
		o.Values[1] = r.Values[1].(int64) * 2
		return o
	}, weir.WithCoder(doubledSchema.Coder()))
	return weirx.WriteToPubSub(s, "Publish", out, doubledSchema, pubsub.SinkConfig{Topic: "orders-out", IDField: "id"})
}

// TestProgramPubSub: a Go program reads a topic and writes another through
// weirx's Pub/Sub transforms, as a job of its embedded server; a message
// published twice with one ID comes out once.
func TestProgramPubSub(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		errc <- weirx.Run(ctx, []string{"--job-name", "relay", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
			"--pubsub-grpc-listen", "", "--checkpoint-interval", "100ms"}, pw, relay)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-errc:
		case <-time.After(30 * time.Second):
			t.Error("the program did not stop")
		}
	})
	sc := bufio.NewScanner(pr)
	if !sc.Scan() {
		t.Fatalf("the program printed nothing: %v", <-errc)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	_, rest, found := strings.Cut(sc.Text(), " listening on ")
	if !found {
		t.Fatalf("first line %q names no address", sc.Text())
	}
	addr, _, _ := strings.Cut(rest, " ")
	c, err := client.NewClient(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []client.PublishMessage
	for i := range 5 {
		msgs = append(msgs, client.PublishMessage{Data: json.RawMessage(fmt.Sprintf(`{"id": "o%d", "amount": %d}`, i, 10*i))})
	}
	msgs = append(msgs, msgs[2]) // the same order again: the source drops it by its id
	if !await.Until(30*time.Second, 50*time.Millisecond, func() bool {
		_, err := c.Publish(ctx, "orders-in", msgs)
		return err == nil
	}) {
		t.Fatal("publishing to orders-in never succeeded")
	}
	got := map[string]int{}
	var last []string
	if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
		pulled, err := c.Pull(ctx, "check", client.PullRequest{Max: 100, Ack: true})
		if err != nil {
			return false
		}
		for _, m := range pulled {
			last = append(last, m.Data)
			var o struct {
				ID      string `json:"id"`
				Doubled int    `json:"doubled"`
			}
			if err := json.Unmarshal([]byte(m.Data), &o); err != nil {
				t.Fatalf("orders-out message %q: %v", m.Data, err)
			}
			got[fmt.Sprintf("%s=%d", o.ID, o.Doubled)]++
		}
		return len(got) >= 5
	}) {
		t.Fatalf("orders-out got %v (%v)", got, last)
	}
	for i := range 5 {
		if k := fmt.Sprintf("o%d=%d", i, 20*i); got[k] != 1 {
			t.Errorf("orders-out has %s %d times, want once (all: %v)", k, got[k], got)
		}
	}
}

// TestReadFromPubSubFormats: the string and Avro formats give their rows'
// schema without one being spelled out; an Avro schema that cannot be
// read is named.
func TestReadFromPubSubFormats(t *testing.T) {
	const avroSchema = `{"type": "record", "name": "O", "fields": [{"name": "id", "type": "string"}]}`
	for _, tc := range []struct {
		name string
		cfg  pubsub.SourceConfig
		err  string
	}{
		{"string", pubsub.SourceConfig{Topic: "t", Format: pubsub.FormatString}, ""},
		{"avro", pubsub.SourceConfig{Topic: "t", Format: pubsub.FormatAvro, AvroSchema: avroSchema}, ""},
		{"avro without a schema", pubsub.SourceConfig{Topic: "t", Format: pubsub.FormatAvro}, "ReadFromPubSub of Avro messages: not an Avro schema"},
		{"json without a schema", pubsub.SourceConfig{Topic: "t"}, "needs a schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := weir.NewPipeline()
			_, err := weirx.ReadFromPubSub(p.Root(), "Read", tc.cfg)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
		})
	}
}
