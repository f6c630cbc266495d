package weirx

import (
	"context"
	"errors"
	"fmt"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// errGraphOnly is the error of a connector of a pipeline built only for
// its graph (weir.JobInfo without an ID), should it ever run.
var errGraphOnly = errors.New("the pipeline was built for its graph only, without the job's Pub/Sub broker")

// graphOnly stands in for a Pub/Sub source or sink while the pipeline is
// built for its graph only (the program's check of its graph before the
// job starts, an update's compatibility check): it never runs.
type graphOnly struct{}

func (graphOnly) Split(context.Context, int) ([]contract.SourceSplit, error) {
	return nil, errGraphOnly
}
func (graphOnly) Write(context.Context, int, []contract.Element) error { return errGraphOnly }
func (graphOnly) Close(context.Context) error                          { return nil }

// broker returns the Pub/Sub broker of the job s's pipeline is built for;
// nil, without an error, when it is built for its graph only.
func broker(s weir.Scope, step, what string) (*pubsub.Broker, error) {
	job := s.Pipeline().Job()
	b, _ := job.Broker.(*pubsub.Broker)
	if b == nil && job.ID != "" {
		return nil, fmt.Errorf("step %q: %s needs the program's Pub/Sub broker: run the program as a job (weirx.Main or weirx.Run with --job-name)", step, what)
	}
	return b, nil
}

// ReadFromPubSub adds a source reading Pub/Sub messages as rows, as YAML's
// ReadFromPubSub does, with the same guarantees: cfg.Subscription is read
// as it is; cfg.Topic (instead) is read through the subscription named
// after the job and the step (pubsub.SubscriptionName), created at the
// job's first start and kept across updates, so an updated build reads on
// where the running one stopped. Acknowledgements follow the job's durable
// checkpoints, and cfg.IDAttribute or cfg.IDField de-duplicate within
// cfg.DedupeWindow, so each message is counted once in the job's state and
// sinks across crashes and updates. cfg.Format defaults to JSON, which
// needs cfg.Schema; pubsub.FormatRaw produces rows of pubsub.RawSchema,
// pubsub.FormatString of pubsub.StringSchema, pubsub.FormatAvro of
// cfg.AvroSchema's fields (pubsub.AvroRowSchema) unless cfg.Schema says
// otherwise (attribute fields need it).
// cfg.Step is set to name. It returns configuration errors, and an error
// when the pipeline is not built for a job with a broker.
func ReadFromPubSub(s weir.Scope, name string, cfg pubsub.SourceConfig) (weir.PCollection[*row.Row], error) {
	var none weir.PCollection[*row.Row]
	b, err := broker(s, name, "ReadFromPubSub")
	if err != nil {
		return none, err
	}
	cfg.Step = name
	switch {
	case cfg.Subscription == "" && cfg.Topic == "":
		return none, fmt.Errorf("step %q: ReadFromPubSub needs a subscription or a topic", name)
	case cfg.Subscription != "" && cfg.Topic != "":
		return none, fmt.Errorf("step %q: ReadFromPubSub takes a subscription or a topic, not both", name)
	}
	switch {
	case cfg.Format == pubsub.FormatRaw:
		cfg.Schema = pubsub.RawSchema()
	case cfg.Schema == nil && cfg.Format == pubsub.FormatAvro:
		fields, err := pubsub.AvroRowSchema(cfg.AvroSchema)
		if err != nil {
			return none, fmt.Errorf("step %q: ReadFromPubSub of Avro messages: %w", name, err)
		}
		cfg.Schema = fields
	case cfg.Schema == nil && cfg.Format == pubsub.FormatString:
		cfg.Schema = pubsub.StringSchema()
	case cfg.Schema == nil:
		return none, fmt.Errorf("step %q: ReadFromPubSub of JSON messages needs a schema (or pubsub.FormatRaw)", name)
	}
	identity := "subscription/" + cfg.Subscription
	if cfg.Topic != "" {
		identity = "topic/" + cfg.Topic
		cfg.Subscription = pubsub.SubscriptionName(s.Pipeline().Job().Name, name)
	}
	var src contract.Source = graphOnly{}
	if b != nil {
		if src, err = b.NewSource(cfg); err != nil {
			return none, fmt.Errorf("step %q: %w", name, err)
		}
	}
	return weir.Read[*row.Row](s, name, src, false, weir.WithCoder(cfg.Schema.Coder()), weir.WithSourceIdentity("pubsub", identity, false)), nil
}

// WriteToPubSub adds a sink publishing the rows of in to cfg.Topic
// (created when missing), as YAML's WriteToPubSub does: as JSON objects,
// a one-string-field row's text with pubsub.FormatRaw, or Avro records
// (of cfg.AvroSchema, or inferred from the rows) with pubsub.FormatAvro. Every message's ID
// derives from the job, the step and the element's checkpoint, so a replay
// after a crash publishes nothing twice (the topic's duplicate window drops
// it); cfg.IDField takes the ID from a field instead. cfg.Step and cfg.ID
// are set from name and the job. It returns configuration errors, and an
// error when the pipeline is not built for a job with a broker.
func WriteToPubSub(s weir.Scope, name string, in weir.PCollection[*row.Row], schema *row.Schema, cfg pubsub.SinkConfig) error {
	b, err := broker(s, name, "WriteToPubSub")
	if err != nil {
		return err
	}
	if cfg.Topic == "" {
		return fmt.Errorf("step %q: WriteToPubSub needs a topic", name)
	}
	if cfg.Format == pubsub.FormatRaw && (schema.Len() != 1 || schema.Fields[0].Type.Kind != row.KindString) {
		return fmt.Errorf("step %q: WriteToPubSub with the raw format needs rows of one string field (got %s)", name, schema)
	}
	if cfg.IDField != "" && schema.Index(cfg.IDField) < 0 {
		return fmt.Errorf("step %q: id field %q is not a field of the input (%s)", name, cfg.IDField, schema)
	}
	cfg.Step, cfg.CreateTopic = name, true
	cfg.ID = s.Pipeline().Job().ID + "/" + name
	var sink contract.Sink = graphOnly{}
	if b != nil {
		if sink, err = b.NewSink(cfg); err != nil {
			return fmt.Errorf("step %q: %w", name, err)
		}
	}
	weir.Write(s, name, in, sink, weir.WithSinkIdentity("pubsub", "topic/"+cfg.Topic))
	return nil
}
