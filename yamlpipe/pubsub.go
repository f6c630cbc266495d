package yamlpipe

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/yamlpipe/srcschema"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// ErrNeedsServer is wrapped by the load error of a pipeline whose
// transforms need a weir server (its Pub/Sub broker): submit it as a job.
var ErrNeedsServer = errors.New("it needs a weir server")

// Broker is what the Pub/Sub transforms need of the job service's broker:
// a source of a subscription (ReadFromPubSub) and a sink of a topic
// (WriteToPubSub). *pubsub.Broker implements it; building a step only
// configures the connector, it does not call the broker.
type Broker interface {
	NewSource(cfg pubsub.SourceConfig) (*pubsub.Source, error)
	NewSink(cfg pubsub.SinkConfig) (*pubsub.Sink, error)
}

var _ Broker = (*pubsub.Broker)(nil)

// TopicSubscription is the subscription a ReadFromPubSub step reading a
// topic reads in job name (unless the job's environment gives the step
// another, JobEnv.Subscriptions): the service made it for the job and the
// step, and the job's successors read it on.
func TopicSubscription(job, step string) string { return pubsub.SubscriptionName(job, step) }

// broker returns the job's Pub/Sub broker, or an error at n saying that
// Pub/Sub transforms need a weir server.
func (l *loader) broker(n *yamlnode.Node, typ string) (Broker, error) {
	if l.opts.Job == nil || l.opts.Job.Broker == nil {
		e := l.errf(n, "%s needs the Pub/Sub broker of a weir server: submit the pipeline with --job-name (start one with `weir server`)", typ).(*Error)
		e.Err = ErrNeedsServer
		return nil, e
	}
	return l.opts.Job.Broker, nil
}

// optDuration reads an optional duration (300, 300s, 5m) at key.
func (l *loader) optDuration(m *yamlnode.Node, key string) (time.Duration, bool, error) {
	n := m.Get(key)
	if n == nil {
		return 0, false, nil
	}
	d, err := l.duration(n, key)
	if err != nil {
		return 0, false, err
	}
	return time.Duration(d) * time.Millisecond, true, nil
}

// idleTimeout reads ReadFromPubSub's idle_timeout: a duration, 0 or
// absent for the default (pubsub.DefaultIdleTimeout), or never, which
// disables idle advancement (a negative pubsub IdleTimeout): a caught-up
// subscription then holds its watermark until messages move it, as a
// backfill of historical event times needs.
func (l *loader) idleTimeout(n *yamlnode.Node) (time.Duration, error) {
	if n == nil {
		return 0, nil
	}
	if n.Kind == yamlnode.String && n.Text == "never" {
		return -1, nil
	}
	text, err := l.str(n, "idle_timeout")
	if err != nil {
		return 0, err
	}
	d, err := mtime.ParseDuration(text)
	if err != nil {
		return 0, l.wrapf(n, err, "bad idle_timeout (want a duration such as 5s or 24h, 0 for the default 5s, or never to disable idle advancement)")
	}
	return time.Duration(d) * time.Millisecond, nil
}

// resourceName returns the short name of a Pub/Sub topic or subscription
// written as Google's resource name, projects/PROJECT/KIND/NAME (KIND is
// topics or subscriptions), as Beam's pipelines write them; other names
// are returned as they are. A weir server is one project: PROJECT is not
// checked, as the CLI's --project is accepted and ignored.
func resourceName(name, kind string) string {
	rest, ok := strings.CutPrefix(name, "projects/")
	if !ok {
		return name
	}
	project, short, ok := strings.Cut(rest, "/"+kind+"/")
	if !ok || project == "" || strings.Contains(project, "/") || short == "" {
		return name
	}
	return short
}

// attributeFields reads ReadFromPubSub's attributes (names of attributes
// copied into string fields) and attributes_map (a field holding all of
// them), Beam's keys, and returns the rows' schema: schema, the payload's,
// followed by those fields.
func (l *loader) attributeFields(t *transformSpec, cfg *pubsub.SourceConfig, schema *row.Schema) (*row.Schema, error) {
	fields := slices.Clone(schema.Fields)
	taken := func(n *yamlnode.Node, name string) error {
		if name == "" {
			return l.errf(n, "ReadFromPubSub: an attribute's field needs a name")
		}
		if slices.ContainsFunc(fields, func(f row.Field) bool { return f.Name == name }) {
			return l.errf(n, "ReadFromPubSub: the attribute field %q is already a field of the rows (%s)", name, schema)
		}
		return nil
	}
	if an := t.config.Get("attributes"); an != nil {
		if an.Kind != yamlnode.Seq {
			return nil, l.errf(an, "ReadFromPubSub attributes must be a list of attribute names, not %s", an.Kind)
		}
		for _, e := range an.Seq {
			name, err := l.str(e, "an attribute name")
			if err != nil {
				return nil, err
			}
			if err := taken(e, name); err != nil {
				return nil, err
			}
			cfg.AttributeFields = append(cfg.AttributeFields, name)
			fields = append(fields, row.Field{Name: name, Type: row.Of(row.KindString)})
		}
	}
	if name, mn, err := l.optStr(t.config, "attributes_map"); err != nil {
		return nil, err
	} else if mn != nil {
		if err := taken(mn, name); err != nil {
			return nil, err
		}
		cfg.AttributesMap = name
		fields = append(fields, row.Field{Name: name, Type: row.Of(row.KindAny)})
	}
	if len(fields) == schema.Len() {
		return schema, nil
	}
	return row.NewSchema(fields...)
}

// buildReadFromPubSub compiles ReadFromPubSub: a subscription (or a topic,
// through a subscription named after the job and step, kept across updates)
// read as JSON rows with a schema, or raw.
func buildReadFromPubSub(l *loader, t *transformSpec, _ []*coll) (*coll, error) {
	cfg := pubsub.SourceConfig{Step: t.name, Format: pubsub.FormatJSON}
	var err error
	if cfg.Subscription, _, err = l.optStr(t.config, "subscription"); err != nil {
		return nil, err
	}
	var tn *yamlnode.Node
	if cfg.Topic, tn, err = l.optStr(t.config, "topic"); err != nil {
		return nil, err
	}
	cfg.Subscription = resourceName(cfg.Subscription, "subscriptions")
	cfg.Topic = resourceName(cfg.Topic, "topics")
	switch {
	case cfg.Subscription == "" && cfg.Topic == "":
		return nil, l.errf(t.typNode, "ReadFromPubSub needs config.subscription or config.topic")
	case cfg.Subscription != "" && cfg.Topic != "":
		return nil, l.errf(tn, "ReadFromPubSub takes subscription or topic, not both")
	}
	if f, fn, err := l.optStr(t.config, "format"); err != nil {
		return nil, err
	} else if f != "" {
		if cfg.Format, err = pubsub.ParseFormat(f); err != nil {
			return nil, l.errf(fn, "%v", err)
		}
	}
	schema := pubsub.RawSchema()
	if cfg.Format == pubsub.FormatString {
		schema = pubsub.StringSchema()
	}
	if sn := t.config.Get("schema"); sn != nil && cfg.Format != pubsub.FormatJSON && cfg.Format != pubsub.FormatAvro {
		return nil, l.errf(sn, "ReadFromPubSub with format %s takes no schema: its rows are %s", cfg.Format, schema)
	}
	if cfg.Format == pubsub.FormatAvro {
		sn := t.config.Get("schema")
		if sn == nil {
			return nil, l.errf(t.typNode, "ReadFromPubSub with format avro needs config.schema: the payloads' Avro record schema ({type: record, name: Order, fields: [{name: region, type: string}]}, or its JSON text)")
		}
		if cfg.AvroSchema, err = srcschema.AvroText(l.file, sn); err != nil {
			return nil, positioned(err)
		}
		if schema, err = pubsub.AvroRowSchema(cfg.AvroSchema); err != nil {
			return nil, l.errf(sn, "schema: %v", err)
		}
	}
	if cfg.Format == pubsub.FormatJSON {
		sn := t.config.Get("schema")
		if sn == nil {
			return nil, l.errf(t.typNode, "ReadFromPubSub with format json needs config.schema: {field: int|float|bool|string|timestamp} or a JSON Schema {type: object, properties: {field: {type: integer}}}")
		}
		if schema, cfg.Required, err = l.sourceSchema(sn); err != nil {
			return nil, err
		}
	}
	if schema, err = l.attributeFields(t, &cfg, schema); err != nil {
		return nil, err
	}
	cfg.Schema = schema
	for _, f := range []struct {
		key string
		dst *string
	}{{"timestamp_attribute", &cfg.TimestampAttribute}, {"timestamp_field", &cfg.TimestampField}, {"id_attribute", &cfg.IDAttribute}, {"id_field", &cfg.IDField}} {
		if *f.dst, _, err = l.optStr(t.config, f.key); err != nil {
			return nil, err
		}
	}
	if d, ok, err := l.optDuration(t.config, "dedupe_window"); err != nil {
		return nil, err
	} else if ok {
		cfg.DedupeWindow = d
	}
	if d, ok, err := l.optDuration(t.config, "max_out_of_orderness"); err != nil {
		return nil, err
	} else if ok {
		cfg.Watermark.MaxOutOfOrderness = d
		if d == 0 {
			cfg.Watermark.MaxOutOfOrderness = -1 // explicitly none
		}
	}
	if d, err := l.idleTimeout(t.config.Get("idle_timeout")); err != nil {
		return nil, err
	} else {
		cfg.Watermark.IdleTimeout = d
	}
	if d, ok, err := l.optDuration(t.config, "max_future_skew"); err != nil {
		return nil, err
	} else if ok {
		cfg.MaxFutureSkew = d
		if d == 0 {
			cfg.MaxFutureSkew = -1 // explicitly no bound
		}
	}
	if d, ok, err := l.optDuration(t.config, "ack_wait"); err != nil {
		return nil, err
	} else if ok {
		cfg.Subscribe.AckWait = d
	}
	b, err := l.broker(t.typNode, "ReadFromPubSub")
	if err != nil {
		return nil, err
	}
	identity := "subscription/" + cfg.Subscription
	if cfg.Topic != "" {
		cfg.Subscription = TopicSubscription(l.opts.Job.Name, t.name)
		if sub := l.opts.Job.Subscriptions[t.name]; sub != "" {
			cfg.Subscription = sub
		}
		identity = "topic/" + cfg.Topic
	} else if sub := l.opts.Job.Subscriptions[t.name]; sub != "" {
		// A parallel replacement gave the step a subscription of its own
		// on the named subscription's topic: the step's identity (the
		// user's subscription) stays, what it reads is the service's.
		cfg.Subscription = sub
	}
	src, err := b.NewSource(cfg)
	if err != nil {
		return nil, l.errf(t.typNode, "%v", err)
	}
	l.pubsubSources = append(l.pubsubSources, src)
	opts := stepOpts(t, append(errorOpt(t), weir.WithCoder(schema.Coder()), weir.WithSourceIdentity("pubsub", identity, false))...)
	out := weir.Read[*rowT](l.root, t.name, src, false, opts...)
	l.registerErrors(t, out)
	return rowsColl(schema, out), nil
}

// buildWriteToPubSub compiles WriteToPubSub: rows published as JSON objects
// (or raw payloads) with message IDs derived from the job, so a replay after
// a crash publishes nothing twice.
func buildWriteToPubSub(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	in := ins[0]
	cfg := pubsub.SinkConfig{Step: t.name, Format: pubsub.FormatJSON, CreateTopic: true}
	var err error
	if cfg.Topic, _, err = l.requireStr(t.config, "topic", "WriteToPubSub config"); err != nil {
		return nil, err
	}
	cfg.Topic = resourceName(cfg.Topic, "topics")
	if f, fn, err := l.optStr(t.config, "format"); err != nil {
		return nil, err
	} else if f != "" {
		if cfg.Format, err = pubsub.ParseFormat(f); cfg.Format == pubsub.FormatString {
			// Beam's STRING: one string field published as its text, as
			// raw does.
			cfg.Format = pubsub.FormatRaw
		}
		if err != nil {
			return nil, l.errf(fn, "%v", err)
		}
	}
	payload := slices.Clone(in.schema.Fields)
	attrField := func(n *yamlnode.Node, what string) (string, error) {
		name, err := l.str(n, what)
		if err != nil {
			return "", err
		}
		i := slices.IndexFunc(payload, func(f row.Field) bool { return f.Name == name })
		if i < 0 {
			return "", l.errf(n, "WriteToPubSub %s %q is not a field of the input (%s), or is named twice", what, name, in.schema)
		}
		payload = slices.Delete(payload, i, i+1)
		return name, nil
	}
	if an := t.config.Get("attributes"); an != nil && an.Kind == yamlnode.Seq {
		// Beam's: fields published as attributes, left out of the payload.
		for _, e := range an.Seq {
			name, err := attrField(e, "attribute field")
			if err != nil {
				return nil, err
			}
			cfg.AttributeFields = append(cfg.AttributeFields, name)
		}
	}
	if mn := t.config.Get("attributes_map"); mn != nil {
		if cfg.AttributesMapField, err = attrField(mn, "attributes_map field"); err != nil {
			return nil, err
		}
	}
	if sn := t.config.Get("schema"); sn != nil {
		var fields *row.Schema
		switch cfg.Format {
		case pubsub.FormatAvro:
			if cfg.AvroSchema, err = srcschema.AvroText(l.file, sn); err != nil {
				return nil, positioned(err)
			}
			if fields, err = pubsub.AvroRowSchema(cfg.AvroSchema); err != nil {
				return nil, l.errf(sn, "schema: %v", err)
			}
		case pubsub.FormatJSON:
			// Beam's JSON format writes the rows' own fields whatever the
			// schema says; weir checks that it says the same.
			if fields, _, err = l.sourceSchema(sn); err != nil {
				return nil, err
			}
		default:
			return nil, l.errf(sn, "WriteToPubSub with format raw or string takes no schema: it publishes the one payload field's text")
		}
		if err := srcschema.SameFields(l.file, sn, "WriteToPubSub", fields, payload); err != nil {
			return nil, positioned(err)
		}
	}
	if cfg.Format == pubsub.FormatRaw && (len(payload) != 1 || payload[0].Type.Kind != row.KindString) {
		return nil, l.errf(t.typNode, "WriteToPubSub with format raw or string needs rows of one string field besides the attribute fields (got %s)", in.schema)
	}
	if cfg.IDField, _, err = l.optStr(t.config, "id_field"); err != nil {
		return nil, err
	}
	if cfg.IDAttribute, _, err = l.optStr(t.config, "id_attribute"); err != nil {
		return nil, err
	}
	if cfg.TimestampAttribute, _, err = l.optStr(t.config, "timestamp_attribute"); err != nil {
		return nil, err
	}
	if cfg.IDField != "" && in.schema.Index(cfg.IDField) < 0 {
		return nil, l.errf(t.typNode, "id_field %q is not a field of the input (%s)", cfg.IDField, in.schema)
	}
	if an := t.config.Get("attributes"); an != nil && an.Kind != yamlnode.Seq {
		cfg.Attributes = map[string]string{}
		plain, ok := an.Plain().(map[string]any)
		if !ok {
			return nil, l.errf(an, "attributes must be a list of fields to publish as attributes (Beam's) or a map of attributes added to every message ({name: value})")
		}
		for k, v := range plain {
			cfg.Attributes[k] = fmt.Sprint(v)
		}
	}
	b, err := l.broker(t.typNode, "WriteToPubSub")
	if err != nil {
		return nil, err
	}
	cfg.ID = l.opts.Job.ID + "/" + t.name
	sink, err := b.NewSink(cfg)
	if err != nil {
		return nil, l.errf(t.typNode, "%v", err)
	}
	l.writeWithErrors(t, in, sink, stepOpts(t, weir.WithSinkIdentity("pubsub", "topic/"+cfg.Topic))...)
	return nil, nil
}

// setRewindHorizon sets the rewind horizon of every ReadFromPubSub source
// (pubsub.SourceConfig.RewindHorizon): twice the longest window plus
// allowed lateness of the graph plus one bucket, at least
// pubsub.DefaultRewindHorizon, so that the event-time table of a source
// position reaches back to every window the job may still hold state for.
func (l *loader) setRewindHorizon() {
	if len(l.pubsubSources) == 0 {
		return
	}
	h := pubsub.DefaultRewindHorizon
	for _, c := range l.p.Graph().Collections {
		ws := c.Windowing
		size := ws.Fn.Size
		if ws.Fn.Gap > size {
			size = ws.Fn.Gap
		}
		d := 2*time.Duration(size+ws.AllowedLateness)*time.Millisecond + pubsub.RewindBucket
		h = max(h, d)
	}
	for _, src := range l.pubsubSources {
		src.SetRewindHorizon(h)
	}
}
