package yamlpipe

import (
	"errors"
	"fmt"
	"sort"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/io/files"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/yamlpipe/genrows"
	"github.com/weir-dev/weir/yamlpipe/schemainfer"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

type rowT = row.Row

// transformDef describes one transform type of the YAML language.
type transformDef struct {
	// keys are the config keys the type accepts.
	keys []string
	// source types take no input; sink types have no output.
	source, sink bool
	// errors says the type can declare error_handling.
	errors bool
	// multi says the type takes several inputs (Flatten).
	multi bool
	build func(l *loader, t *transformSpec, ins []*coll) (*coll, error)
}

var celKeys = []string{"language", "side_inputs", "side_input_key", "error_handling"}

// lookupTransform returns the definition of a transform type.
func lookupTransform(typ string) (*transformDef, bool) {
	switch typ {
	case "Create":
		return &transformDef{keys: []string{"elements", "timestamp_field", "reshuffle", "output_schema", "error_handling"}, source: true, errors: true, build: buildCreate}, true
	case "TestStream":
		return &transformDef{keys: []string{"events", "timestamp_field", "error_handling"}, source: true, errors: true, build: buildTestStream}, true
	case "Generate":
		return &transformDef{keys: []string{"count", "keys", "rate", "spacing", "start", "seed", "max_amount"}, source: true, build: buildGenerate}, true
	case "ReadFromJson":
		return &transformDef{keys: []string{"path", "manifest", "side_input", "schema", "timestamp_field", "filename_column", "error_handling"}, source: true, errors: true, build: buildRead(files.JSONLines)}, true
	case "ReadFromCsv":
		return &transformDef{keys: []string{"path", "manifest", "side_input", "schema", "timestamp_field", "delimiter", "comment", "filename_column", "error_handling"}, source: true, errors: true, build: buildRead(files.CSV)}, true
	case "ReadFromAvro":
		return &transformDef{keys: []string{"path", "manifest", "side_input", "schema", "timestamp_field", "error_handling"}, source: true, errors: true, build: buildRead(files.Avro)}, true
	case "ReadFromParquet":
		return &transformDef{keys: []string{"path", "manifest", "side_input", "schema", "timestamp_field", "error_handling"}, source: true, errors: true, build: buildRead(files.Parquet)}, true
	case "WriteToParquet":
		return &transformDef{keys: []string{"path", "file_mode", "error_handling"}, sink: true, errors: true, build: buildWrite(files.Parquet)}, true
	case "WriteToAvro":
		return &transformDef{keys: []string{"path", "file_mode", "error_handling"}, sink: true, errors: true, build: buildWrite(files.Avro)}, true
	case "WriteToJson":
		return &transformDef{keys: []string{"path", "file_mode", "roll_size", "roll_interval", "error_handling"}, sink: true, errors: true, build: buildWrite(files.JSONLines)}, true
	case "WriteToCsv":
		return &transformDef{keys: []string{"path", "file_mode", "delimiter", "roll_size", "roll_interval", "error_handling"}, sink: true, errors: true, build: buildWrite(files.CSV)}, true
	case "ReadFromPubSub":
		return &transformDef{keys: []string{"subscription", "topic", "format", "schema", "timestamp_attribute", "timestamp_field",
			"id_attribute", "id_field", "attributes", "attributes_map", "dedupe_window", "max_out_of_orderness", "idle_timeout", "ack_wait", "max_future_skew", "error_handling"},
			source: true, errors: true, build: buildReadFromPubSub}, true
	case "WriteToPubSub":
		return &transformDef{keys: []string{"topic", "format", "schema", "id_field", "id_attribute", "timestamp_attribute", "attributes", "attributes_map", "error_handling"}, sink: true, errors: true, build: buildWriteToPubSub}, true
	case "WriteToSql":
		return &transformDef{keys: []string{"driver", "dsn", "table", "key", "mode", "layout", "merge_interval", "convert", "error_handling"}, sink: true, errors: true, build: buildWriteToSql}, true
	case "MapToFields":
		return &transformDef{keys: append([]string{"fields", "append", "drop", "metrics"}, celKeys...), errors: true, build: buildMapToFields}, true
	case "Filter":
		return &transformDef{keys: append([]string{"keep", "metrics"}, celKeys...), errors: true, build: buildFilter}, true
	case "Validate":
		return &transformDef{keys: append([]string{"rules"}, celKeys...), errors: true, build: buildValidate}, true
	case "ValidateWithSchema":
		return &transformDef{keys: []string{"schema", "error_handling"}, errors: true, build: buildValidateWithSchema}, true
	case "MatchAll":
		return &transformDef{keys: []string{"file_pattern", "empty_match_treatment", "error_handling"}, errors: true, build: buildMatchAll}, true
	case "WindowInto":
		return &transformDef{keys: []string{"windowing"}, build: buildWindowInto}, true
	case "Combine":
		return &transformDef{keys: []string{"group_by", "combine", "language", "error_handling"}, errors: true, build: buildCombine}, true
	case "Flatten":
		return &transformDef{multi: true, build: buildFlatten}, true
	case "Explode":
		return &transformDef{keys: []string{"fields", "cross_product", "error_handling"}, errors: true, build: buildExplode}, true
	case "AssignTimestamps":
		return &transformDef{keys: []string{"timestamp", "language", "error_handling"}, errors: true, build: buildAssignTimestamps}, true
	case "Partition":
		return &transformDef{keys: []string{"by", "outputs", "unknown_output", "language", "error_handling"}, errors: true, build: buildPartition}, true
	case "LogForTesting":
		return &transformDef{keys: []string{"level", "prefix"}, build: buildLogForTesting}, true
	case "ReadFromText":
		return &transformDef{keys: []string{"path", "manifest", "side_input", "delimiter"}, source: true, build: buildReadFromText}, true
	case "WriteToText":
		return &transformDef{keys: []string{"path", "file_mode", "roll_size", "roll_interval"}, sink: true, build: buildWriteToText}, true
	case "Join":
		return &transformDef{keys: []string{"equalities", "type", "fields"}, multi: true, build: buildJoin}, true
	case "Sql":
		return &transformDef{keys: []string{"query", "dialect", "error_handling"}, multi: true, errors: true, build: buildSql}, true
	case "ExtractWindowingInfo":
		return &transformDef{keys: []string{"fields"}, build: buildExtractWindowingInfo}, true
	case "AssertEqual":
		return &transformDef{keys: []string{"elements"}, sink: true, build: buildAssertEqual}, true
	case "Reshuffle":
		return &transformDef{keys: []string{"num_buckets"}, build: buildReshuffle}, true
	case "ReadFromJdbc", "ReadFromPostgres", "ReadFromMySql":
		return &transformDef{keys: append([]string{"query"}, jdbcKeys...), source: true, build: buildReadFromJdbc}, true
	case "WriteToJdbc", "WriteToPostgres", "WriteToMySql":
		return &transformDef{keys: append([]string{"batch_size", "autosharding"}, jdbcKeys...), sink: true, build: buildWriteToJdbc}, true
	case "ReadFromIceberg":
		return &transformDef{keys: icebergReadKeys, source: true, build: buildReadFromIceberg}, true
	case "WriteToIceberg":
		return &transformDef{keys: icebergWriteKeys, sink: true, build: buildWriteToIceberg}, true
	case "Nexmark":
		return &transformDef{keys: nexmarkKeys, source: true, build: buildNexmark}, true
	}
	return nil, false
}

// transformTypes lists the known transform types, for messages.
func transformTypes() []string {
	out := []string{"Combine", "Create", "Filter", "Flatten", "Generate", "MapToFields", "ReadFromCsv",
		"ReadFromAvro", "ReadFromJson", "ReadFromParquet", "ReadFromPubSub", "TestStream", "Validate", "ValidateWithSchema", "WindowInto", "WriteToAvro", "WriteToCsv", "WriteToJson", "WriteToParquet", "WriteToPubSub", "WriteToSql",
		"AssignTimestamps", "Explode", "LogForTesting", "Partition", "ReadFromText", "WriteToText",
		"ExtractWindowingInfo", "Join", "AssertEqual", "Reshuffle", "Nexmark", "MatchAll",
		"ReadFromJdbc", "ReadFromPostgres", "ReadFromMySql", "WriteToJdbc", "WriteToPostgres", "WriteToMySql", "ReadFromIceberg", "WriteToIceberg", "Sql"}
	sort.Strings(out)
	return out
}

// ---- Create ----

func buildCreate(l *loader, t *transformSpec, _ []*coll) (*coll, error) {
	en := t.config.Get("elements")
	if en == nil || en.Kind != yamlnode.Seq {
		if en == nil {
			return nil, l.errf(t.typNode, "Create needs config.elements (a list of rows)")
		}
		return nil, l.errf(en, "Create elements must be a list, not %s", en.Kind)
	}
	tsField, _, err := l.optStr(t.config, "timestamp_field")
	if err != nil {
		return nil, err
	}
	if rn := t.config.Get("reshuffle"); rn != nil && rn.Kind != yamlnode.Bool {
		return nil, l.errf(rn, "Create reshuffle must be true or false")
	}
	elems := en.Seq
	var invalid []weir.TimestampedValue[*rowT]
	if osn := t.config.Get("output_schema"); osn != nil {
		os, err := l.parseOutputSchema(osn)
		if err != nil {
			return nil, err
		}
		if elems, invalid, err = l.splitBySchema(os, elems); err != nil {
			return nil, err
		}
	}
	lit, err := l.literalRows(elems, tsField)
	if err != nil {
		return nil, err
	}
	if tsField != "" && lit.schema.Index(tsField) < 0 {
		return nil, l.errf(t.config.Get("timestamp_field"), "timestamp_field %q is in none of the elements", tsField)
	}
	tvs := make([]weir.TimestampedValue[*rowT], len(lit.rows))
	for i, r := range lit.rows {
		tvs[i] = l.timestamped(r, lit.nodes[i], tsField, mtime.MinTimestamp)
	}
	tvs = append(tvs, invalid...)
	out := weir.CreateTimestamped(l.root, t.name, tvs, stepOpts(t, append(errorOpt(t), weir.WithCoder(lit.schema.Coder()))...)...)
	l.registerErrors(t, out)
	return rowsColl(lit.schema, out), nil
}

// timestamped gives a literal row its event time and source position; a
// missing or unparsable timestamp makes it a bad_timestamp reject.
func (l *loader) timestamped(r *rowT, n *yamlnode.Node, tsField string, def mtime.Time) weir.TimestampedValue[*rowT] {
	tv := weir.TimestampedValue[*rowT]{Value: r, Time: def, Source: &contract.SourcePos{Source: l.file, Offset: int64(n.Line)}}
	if tsField == "" {
		return tv
	}
	v, _ := r.Get(tsField)
	ts, err := row.ToTimestamp(v)
	if err != nil {
		if raw := n.Get(tsField); raw != nil && v == nil && raw.Kind == yamlnode.String {
			err = fmt.Errorf("%q is not RFC 3339 (e.g. 2026-03-01T10:05:00Z)", raw.Text)
		}
		reason := files.ReasonBadTimestamp
		if errors.Is(err, row.ErrTimestampInSeconds) {
			reason = files.ReasonTimestampInSeconds
		}
		tv.Err = &contract.ElementError{Reason: reason, Message: fmt.Sprintf("field %s: %v", tsField, err)}
		return tv
	}
	tv.Time = ts
	return tv
}

// ---- TestStream ----

func buildTestStream(l *loader, t *transformSpec, _ []*coll) (*coll, error) {
	evn := t.config.Get("events")
	if evn == nil || evn.Kind != yamlnode.Seq {
		if evn == nil {
			return nil, l.errf(t.typNode, "TestStream needs config.events")
		}
		return nil, l.errf(evn, "TestStream events must be a list, not %s", evn.Kind)
	}
	tsField, _, err := l.optStr(t.config, "timestamp_field")
	if err != nil {
		return nil, err
	}
	var elems []*yamlnode.Node
	for _, ev := range evn.Seq {
		if err := l.checkKeys(ev, "a TestStream event", "add", "advance_watermark_to", "advance_processing_time", "advance_watermark_to_infinity"); err != nil {
			return nil, err
		}
		if len(ev.Keys) != 1 {
			return nil, l.errf(ev, "a TestStream event has exactly one of add, advance_watermark_to, advance_processing_time, advance_watermark_to_infinity")
		}
		if add := ev.Get("add"); add != nil {
			if add.Kind != yamlnode.Seq {
				return nil, l.errf(add, "add takes a list of elements, not %s", add.Kind)
			}
			elems = append(elems, add.Seq...)
		}
	}
	lit, err := l.literalRows(elems, tsField)
	if err != nil {
		return nil, err
	}
	var events []weir.TestEvent[*rowT]
	wm := mtime.MinTimestamp
	k := 0
	for _, ev := range evn.Seq {
		key, v := ev.Keys[0], ev.Vals[0]
		switch key.Text {
		case "add":
			tvs := make([]weir.TimestampedValue[*rowT], 0, len(v.Seq))
			for range v.Seq {
				tvs = append(tvs, l.timestamped(lit.rows[k], lit.nodes[k], tsField, wm))
				k++
			}
			if len(tvs) > 0 {
				events = append(events, weir.AddElements(tvs...))
			}
		case "advance_watermark_to":
			ts, err := l.timestamp(v, "advance_watermark_to")
			if err != nil {
				return nil, err
			}
			if ts < wm {
				return nil, l.errf(v, "the watermark cannot move back (it is already at %s)", wm)
			}
			wm = ts
			events = append(events, weir.AdvanceWatermark[*rowT](ts))
		case "advance_processing_time":
			d, err := l.duration(v, "advance_processing_time")
			if err != nil {
				return nil, err
			}
			if d > 0 {
				events = append(events, weir.AdvanceProcessingTime[*rowT](d))
			}
		case "advance_watermark_to_infinity":
			b, err := l.boolean(v, "advance_watermark_to_infinity")
			if err != nil {
				return nil, err
			}
			if !b {
				return nil, l.errf(v, "advance_watermark_to_infinity takes true")
			}
			events = append(events, weir.AdvanceWatermarkToInfinity[*rowT]())
		}
	}
	out := weir.TestStream(l.root, t.name, events, stepOpts(t, append(errorOpt(t), weir.WithCoder(lit.schema.Coder()))...)...)
	l.registerErrors(t, out)
	return rowsColl(lit.schema, out), nil
}

// timestamp reads an RFC 3339 string or integer epoch milliseconds.
func (l *loader) timestamp(n *yamlnode.Node, what string) (mtime.Time, error) {
	switch n.Kind {
	case yamlnode.Int:
		return mtime.Time(n.I), nil
	case yamlnode.String:
		ts, err := mtime.Parse(n.Text)
		if err != nil {
			return 0, l.wrapf(n, err, "bad %s", what)
		}
		return ts, nil
	}
	return 0, l.errf(n, "%s must be an RFC 3339 time or epoch milliseconds, not %s", what, n.Kind)
}

func (l *loader) optStr(m *yamlnode.Node, key string) (string, *yamlnode.Node, error) {
	n := m.Get(key)
	if n == nil || n.Kind == yamlnode.Null {
		return "", nil, nil
	}
	s, err := l.str(n, key)
	return s, n, err
}

// ---- Generate ----

// defaultGenerateStart is where Generate's event time starts: 2026-01-01T00:00:00Z.
const defaultGenerateStart mtime.Time = 1767225600000

func buildGenerate(l *loader, t *transformSpec, _ []*coll) (*coll, error) {
	c := t.config
	count, err := l.integer(c.Get("count"), "count")
	if err != nil {
		return nil, err
	}
	if count < 0 {
		return nil, l.errf(c.Get("count"), "count must not be negative (0 or absent means unbounded)")
	}
	keys := int64(10)
	if kn := c.Get("keys"); kn != nil {
		if keys, err = l.integer(kn, "keys"); err != nil {
			return nil, err
		}
		if keys < 1 {
			return nil, l.errf(kn, "keys must be at least 1")
		}
	}
	maxAmount := int64(1000)
	if mn := c.Get("max_amount"); mn != nil {
		if maxAmount, err = l.integer(mn, "max_amount"); err != nil {
			return nil, err
		}
		if maxAmount < 1 || maxAmount > 1<<20 {
			return nil, l.errf(mn, "max_amount must be between 1 and %d", 1<<20)
		}
	}
	rate, err := l.number(c.Get("rate"), "rate")
	if err != nil {
		return nil, err
	}
	if rate < 0 {
		return nil, l.errf(c.Get("rate"), "rate must not be negative (0 or absent means as fast as possible)")
	}
	spacing := mtime.Millisecond
	if sn := c.Get("spacing"); sn != nil {
		if sn.Kind == yamlnode.Int {
			// A bare number is milliseconds here: spacing is usually sub-second.
			return nil, l.errf(sn, "spacing needs a unit (e.g. 1ms, 10ms, 1s)")
		}
		if spacing, err = l.duration(sn, "spacing"); err != nil {
			return nil, err
		}
	}
	start := defaultGenerateStart
	if sn := c.Get("start"); sn != nil {
		if start, err = l.timestamp(sn, "start"); err != nil {
			return nil, err
		}
	}
	seed, err := l.integer(c.Get("seed"), "seed")
	if err != nil {
		return nil, err
	}
	g := genrows.New(genrows.Config{Seed: uint64(seed), Keys: keys, MaxAmount: maxAmount, Start: start, Spacing: spacing})
	out := weir.GenerateEach(l.root, t.name, weir.GenerateConfig{Count: count, Rate: rate, Start: start, Spacing: spacing}, g.NewRowMaker,
		stepOpts(t, weir.WithCoder(g.Schema().Coder()))...)
	return rowsColl(g.Schema(), out), nil
}

// ---- files ----

func buildRead(format files.Format) func(*loader, *transformSpec, []*coll) (*coll, error) {
	return func(l *loader, t *transformSpec, _ []*coll) (*coll, error) {
		in, err := l.fileInput(t)
		if err != nil {
			return nil, err
		}
		pn := t.config.Get("path")
		if in.m != nil {
			pn = t.config.Get("manifest")
		}
		path := in.path
		var schema *row.Schema
		var required []string
		var dialect files.CSVOptions
		sn := t.config.Get("schema")
		if sn != nil {
			if schema, required, err = l.sourceSchema(sn); err != nil {
				return nil, err
			}
		}
		switch {
		case format == files.JSONLines && schema == nil:
			if schema, err = schemainfer.JSON(path); err != nil {
				return nil, l.wrapf(pn, err, "ReadFromJson without a schema infers it from the file at load time")
			}
		case (format == files.Avro || format == files.Parquet) && schema == nil:
			// The file carries its schema.
			read := files.AvroSchema
			if format == files.Parquet {
				read = files.ParquetSchema
			}
			if schema, err = read(path); err != nil {
				return nil, l.wrapf(pn, err, "%s reads the file's schema at load time", t.typ)
			}
		case format == files.CSV:
			if dialect, err = l.csvDialect(t); err != nil {
				return nil, err
			}
			header, kinds, herr := files.CSVInfer(path, dialect)
			if herr != nil && schema == nil {
				return nil, l.wrapf(pn, herr, "ReadFromCsv without a schema reads the header and types the columns at load time")
			}
			if herr == nil {
				if schema, err = schemainfer.CSV(header, kinds, schema); err != nil {
					return nil, l.wrapf(sn, err, "schema does not match the header of %s", path)
				}
			}
		}
		nameCol, nn, err := l.optStr(t.config, "filename_column")
		if err != nil {
			return nil, err
		}
		if nn != nil {
			if nameCol == "" || schema.Index(nameCol) >= 0 {
				return nil, l.errf(nn, "%s filename_column %q must name a new field: the file's rows have %s", t.typ, nameCol, schema)
			}
			fields := append(append([]row.Field(nil), schema.Fields...), row.Field{Name: nameCol, Type: row.Of(row.KindString)})
			if schema, err = row.NewSchema(fields...); err != nil {
				return nil, l.wrapf(nn, err, "%s filename_column", t.typ)
			}
		}
		tsIdx := -1
		if ts, tn, err := l.optStr(t.config, "timestamp_field"); err != nil {
			return nil, err
		} else if ts != "" {
			if tsIdx = schema.Index(ts); tsIdx < 0 || ts == nameCol {
				return nil, l.errf(tn, "timestamp_field %q is not in the schema (%s)", ts, schema)
			}
			switch schema.Fields[tsIdx].Type.Kind {
			case row.KindTimestamp, row.KindInt, row.KindString:
			default:
				return nil, l.errf(tn, "timestamp_field %q has type %s; want timestamp, int (epoch ms) or string", ts, schema.Fields[tsIdx].Type)
			}
		}
		var requiredIdx []int
		for _, name := range required {
			i := schema.Index(name)
			if i < 0 {
				return nil, l.errf(sn, "required field %q is not in the rows' schema (%s)", name, schema)
			}
			requiredIdx = append(requiredIdx, i)
		}
		src := files.NewSource(files.SourceConfig{Step: t.name, Path: path, Format: format, Schema: schema, TimestampField: tsIdx, Roots: l.files(), CSV: dialect,
			Manifest: in.m, Inputs: in.files, FilenameColumn: nameCol, Required: requiredIdx})
		kind := map[files.Format]string{files.JSONLines: "file_json", files.CSV: "file_csv", files.Avro: "file_avro", files.Parquet: "file_parquet"}[format]
		opts := stepOpts(t, append(errorOpt(t), weir.WithCoder(schema.Coder()), weir.WithSourceIdentity(kind, in.identity, true))...)
		out := weir.Read[*rowT](l.root, t.name, src, true, opts...)
		l.registerErrors(t, out)
		return rowsColl(schema, out), nil
	}
}

// csvDialect reads ReadFromCsv's delimiter and comment (Beam's config
// keys; one character each, "\t" for tab-separated files).
func (l *loader) csvDialect(t *transformSpec) (files.CSVOptions, error) {
	var o files.CSVOptions
	for _, k := range []struct {
		key string
		to  *rune
	}{{"delimiter", &o.Delimiter}, {"comment", &o.Comment}} {
		v, n, err := l.optStr(t.config, k.key)
		if err != nil || n == nil {
			return o, err
		}
		r := []rune(v)
		if len(r) != 1 || r[0] == '"' || r[0] == '\r' || r[0] == '\n' || r[0] == 0xFFFD {
			return o, l.errf(n, "%s %s must be one character other than a quote or a line break, not %q", t.typ, k.key, v)
		}
		*k.to = r[0]
	}
	if o.Delimiter != 0 && o.Delimiter == o.Comment {
		return o, l.errf(t.config.Get("comment"), "%s comment and delimiter are both %q", t.typ, string(o.Comment))
	}
	return o, nil
}

func buildWrite(format files.Format) func(*loader, *transformSpec, []*coll) (*coll, error) {
	return func(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
		path, pn, err := l.requireStr(t.config, "path", t.typ+" config")
		if err != nil {
			return nil, err
		}
		path = l.path(path)
		if err := l.checkPath(t, pn, path, false); err != nil {
			return nil, err
		}
		kind := "file_json"
		if format == files.CSV {
			kind = "file_csv"
		}
		cfg := files.SinkConfig{Path: path, Format: format, Schema: ins[0].schema}
		if format == files.CSV {
			d, err := l.csvDialect(t)
			if err != nil {
				return nil, err
			}
			cfg.Delimiter = d.Delimiter
		}
		if cfg.Rolling, err = l.rolling(t); err != nil {
			return nil, err
		}
		sink, err := l.fileSink(t, pn, ins[0], cfg)
		if err != nil {
			return nil, err
		}
		l.writeWithErrors(t, ins[0], sink, stepOpts(t, weir.WithSinkIdentity(kind, path))...)
		return nil, nil
	}
}

// ---- Flatten, WindowInto ----

func buildFlatten(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	first := ins[0]
	for i, c := range ins[1:] {
		if !c.schema.Equal(first.schema) {
			return nil, l.errf(t.inputs[i+1].n, "Flatten inputs must have the same fields: %q has %s, %q has %s",
				t.inputs[0].text, first.schema, t.inputs[i+1].text, c.schema)
		}
		if c.isReject != first.isReject {
			return nil, l.errf(t.inputs[i+1].n, "Flatten cannot mix an error output with rows")
		}
	}
	if first.isReject {
		cs := make([]weir.PCollection[contract.Reject], len(ins))
		for i, c := range ins {
			cs[i] = c.rejects
		}
		return &coll{schema: first.schema, isReject: true, rejects: weir.Flatten(l.root, t.name, cs, stepOpts(t)...)}, nil
	}
	cs := make([]weir.PCollection[*rowT], len(ins))
	for i, c := range ins {
		cs[i] = c.rows
	}
	return rowsColl(first.schema, weir.Flatten(l.root, t.name, cs, stepOpts(t)...)), nil
}

func buildWindowInto(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	wn := t.config.Get("windowing")
	if wn != nil && t.windowing != nil {
		return nil, l.errf(t.windowing, "WindowInto takes its windowing once: in config.windowing or at the top level, not both")
	}
	if wn == nil {
		wn = t.windowing
	}
	if wn == nil {
		return nil, l.errf(t.typNode, "WindowInto needs windowing (config.windowing: {type: fixed, size: 5m})")
	}
	ws, err := l.windowing(wn)
	if err != nil {
		return nil, err
	}
	opts := []weir.StepOption{weir.WithURN("weir:yaml:WindowInto"), weir.WithConfig(map[string]any{"windowing": wn.Plain()})}
	return windowInto(l.root, t.name, ins[0], ws, opts...), nil
}
