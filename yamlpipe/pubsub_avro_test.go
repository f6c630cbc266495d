package yamlpipe

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/runner"
)

// orderAvro is the Avro schema of the test's order payloads.
const orderAvro = `{"type": "record", "name": "Order", "namespace": "shop", "fields": [
  {"name": "region", "type": "string"},
  {"name": "amount", "type": "long"},
  {"name": "note", "type": ["null", "string"], "default": null}]}`

// avroOrderMsg is one order as hamba/avro encodes it (the payload a Beam
// writer would publish), independent of the code under test.
type avroOrderMsg struct {
	Region string  `avro:"region"`
	Amount int64   `avro:"amount"`
	Note   *string `avro:"note"`
}

// TestPubSubAvro: Beam's format AVRO end to end on a real broker.
// ReadFromPubSub takes the payloads' Avro schema (as a mapping or as its
// JSON text) and reads each message as one record; a message that is not
// one is a malformed_payload reject to the step's error output, its
// payload kept in base64. WriteToPubSub publishes rows as records of the
// schema it is given, or of one inferred from the rows.
func TestPubSubAvro(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := ordersBroker(t, dir)
	for _, topic := range []string{"copies", "bad"} {
		if _, err := b.CreateTopic(ctx, topic, pubsub.TopicConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []struct{ name, topic string }{{"copies-check", "copies"}, {"bad-check", "bad"}} {
		if _, err := b.CreateSubscription(ctx, sub.name, sub.topic, pubsub.SubscriptionConfig{FromBeginning: true}); err != nil {
			t.Fatal(err)
		}
	}
	schemaJSON, _ := json.Marshal(orderAvro)
	src := `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Orders
      config:
        topic: projects/p/topics/orders
        format: AVRO
        schema: ` + string(schemaJSON) + `
        attributes: [origin]
        error_handling: {output: bad}
    - type: MapToFields
      name: Doubled
      input: Orders
      config:
        language: python
        fields:
          region: region
          amount: amount * 2
          origin: origin
    - type: WriteToPubSub
      input: Doubled
      config:
        topic: copies
        format: AVRO
        attributes: [origin]
        schema:
          type: record
          name: Doubled
          fields:
            - {name: region, type: string}
            - {name: amount, type: int}
    - type: WriteToPubSub
      input: Orders.bad
      config: {topic: bad}
`
	job := &JobEnv{Name: "avro-job", ID: "job-1", Generation: 1, DataDir: dir, Broker: b}
	p, err := Load("p.yaml", []byte(src), Options{BaseDir: dir, Job: job, LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	x, err := runner.Start(ctx, p.Program(), runner.Options{NumWorkers: 1, Checkpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Cancel()
	sub := pubsub.SubscriptionName(job.Name, "Orders")
	if !await.Until(30*time.Second, 5*time.Millisecond, func() bool { _, err := b.Subscription(ctx, sub); return err == nil }) {
		t.Fatalf("the split did not create subscription %s", sub)
	}
	note := "gift"
	schema := avro.MustParse(orderAvro)
	for _, o := range []avroOrderMsg{{"NORTH", 250, &note}, {"WEST", 100, nil}} {
		data, err := avro.Marshal(schema, o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Publish(ctx, "orders", data, map[string]string{"origin": "web"}, ""); err != nil {
			t.Fatal(err)
		}
	}
	garbage := []byte{0x08, 'E', 'A', 0xff} // a string's length past the end
	if _, err := b.Publish(ctx, "orders", garbage, nil, ""); err != nil {
		t.Fatal(err)
	}
	read := func() int64 { m := x.Metrics().Step("Orders"); return m.ElementsOut + m.Rejects }
	if !await.Until(30*time.Second, 5*time.Millisecond, func() bool { return read() >= 3 && x.Metrics().Step("Doubled").ElementsOut >= 2 }) {
		t.Fatalf("the job read %d messages, want 3", read())
	}
	// The sinks publish at the checkpoint's commit.
	cp, err := x.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Commit(ctx, cp); err != nil {
		t.Fatal(err)
	}
	msgs, err := b.Pull(ctx, "copies-check", 10, true)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("copies: %d messages, %v", len(msgs), err)
	}
	out := avro.MustParse(`{"type": "record", "name": "Doubled", "fields": [{"name": "region", "type": "string"}, {"name": "amount", "type": "int"}]}`)
	var got []string
	for _, m := range msgs {
		var o struct {
			Region string `avro:"region"`
			Amount int32  `avro:"amount"`
		}
		if err := avro.Unmarshal(out, m.Data, &o); err != nil {
			t.Fatalf("a copy is not a record of the sink's schema: %v", err)
		}
		got = append(got, o.Region+"="+strconv.Itoa(int(o.Amount))+"@"+m.Attributes["origin"])
	}
	if strings.Join(got, " ") != "NORTH=500@web WEST=200@web" {
		t.Errorf("copies %v", got)
	}
	bad, err := b.Pull(ctx, "bad-check", 10, true)
	if err != nil || len(bad) != 1 {
		t.Fatalf("bad: %d messages, %v", len(bad), err)
	}
	var rj struct {
		Element string `json:"element"`
		Error   struct {
			Reason, Message string
		} `json:"error"`
	}
	if err := json.Unmarshal(bad[0].Data, &rj); err != nil {
		t.Fatalf("reject %s: %v", bad[0].Data, err)
	}
	if rj.Error.Reason != "malformed_payload" || rj.Element != base64.StdEncoding.EncodeToString(garbage) || !strings.Contains(rj.Error.Message, "format avro") {
		t.Errorf("reject %s", bad[0].Data)
	}
}

// TestPubSubAvroConfig: what format AVRO's configs take and refuse, at
// their positions.
func TestPubSubAvroConfig(t *testing.T) {
	b := ordersBroker(t, t.TempDir())
	load := func(read, write string) (*pubsub.Source, error) {
		src := "pipeline:\n  transforms:\n    - type: ReadFromPubSub\n      name: Orders\n      config: {topic: orders, " + read + "}\n"
		if write != "" {
			src += "    - type: WriteToPubSub\n      input: Orders\n      config: {topic: copies, " + write + "}\n"
		} else {
			src += "    - type: LogForTesting\n      input: Orders\n"
		}
		p, err := Load("f.yaml", []byte(src), Options{Job: &JobEnv{Name: "j", ID: "j-1", Generation: 1, Broker: b}, LogOutput: io.Discard})
		if err != nil {
			return nil, err
		}
		return p.Program().Code["Orders"].(*pubsub.Source), nil
	}
	mapping := "schema: {type: record, name: O, fields: [{name: k, type: string}, {name: n, type: [\"null\", long]}]}"
	for _, tc := range []struct{ read, write, rows, err string }{
		{"format: avro, " + mapping, "", "{k:string,n:int}", ""},
		{"format: avro, " + mapping + ", attributes_map: attrs", "", "{k:string,n:int,attrs:any}", ""},
		{"format: avro, schema: '{\"type\": \"record\", \"name\": \"O\", \"fields\": [{\"name\": \"k\", \"type\": \"string\"}]}'", "", "{k:string}", ""},
		{"format: avro", "", "", "f.yaml:3:13: ReadFromPubSub with format avro needs config.schema"},
		{"format: avro, schema: {type: record, name: O}", "", "", "f.yaml:5:53: schema: not an Avro schema"},
		{"format: avro, schema: '\"long\"'", "", "", "schema: an Avro schema of long values, not a record"},
		{"format: proto, schema: {k: string}", "", "", "f.yaml:5:39: format \"proto\" is not supported"},
		{"format: avro, " + mapping, "format: avro", "", ""},
		{"format: avro, " + mapping, "format: avro, schema: {type: record, name: W, fields: [{name: k, type: string}]}", "",
			`the input's field "n" is not in the schema, so the messages would leave it out`},
		{"format: avro, " + mapping, "format: avro, schema: {type: record, name: W, fields: [{name: k, type: string}, {name: n, type: long}, {name: z, type: long}]}", "",
			`WriteToPubSub schema: field "z" is not a payload field of the input (k:string, n:int)`},
		{"format: avro, " + mapping, "format: json, schema: {type: object, properties: {k: {type: string}, n: {type: integer}}}", "", ""},
		{"format: avro, " + mapping, "format: json, schema: {type: object, properties: {k: {type: string}}}", "",
			`the input's field "n" is not in the schema`},
		{"format: string", "format: string, schema: {k: string}", "", "WriteToPubSub with format raw or string takes no schema"},
		{"format: avro, " + mapping, "format: avro, id_attribute: uid, timestamp_attribute: ts", "", ""},
		{"format: avro, " + mapping, "id_attribute: t, timestamp_attribute: t", "", `id_attribute and timestamp_attribute are both "t"`},
	} {
		s, err := load(tc.read, tc.write)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s | %s: err = %v, want %q", tc.read, tc.write, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s | %s: %v", tc.read, tc.write, err)
			continue
		}
		if got := s.Config().Schema.String(); tc.rows != "" && got != tc.rows {
			t.Errorf("%s: rows %s, want %s", tc.read, got, tc.rows)
		}
	}
}
