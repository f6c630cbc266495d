package yamlpipe

import (
	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/io/files"
	"github.com/weir-dev/weir/yamlpipe/pyrepr"
	"github.com/weir-dev/weir/yamlpipe/textio"
)

// Beam YAML's ReadFromText and WriteToText: rows of one string field named
// line, one per line of text.

func buildReadFromText(l *loader, t *transformSpec, _ []*coll) (*coll, error) {
	in, err := l.fileInput(t)
	if err != nil {
		return nil, err
	}
	delim, dn, err := l.optStr(t.config, "delimiter")
	if err != nil {
		return nil, err
	}
	if dn != nil && delim == "" {
		return nil, l.errf(dn, "delimiter must not be empty")
	}
	schema := textio.Schema()
	src := &textio.Source{Path: in.path, Delim: delim, Schema: schema, Manifest: in.m, Inputs: in.files}
	opts := stepOpts(t, weir.WithCoder(schema.Coder()), weir.WithSourceIdentity("file_text", in.identity, true))
	out := weir.Read[*rowT](l.root, t.name, src, true, opts...)
	return rowsColl(schema, out), nil
}

// buildWriteToText writes through the file sinks WriteToJson uses, in the
// text format: one file in a bounded run, part files per checkpoint epoch
// in a streaming job (exactly once across restores, rolling by roll_size
// and roll_interval), a staged version published at the end of a
// partition run. Each line is the input's sole field as Beam's str()
// writes it.
func buildWriteToText(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	path, pn, err := l.requireStr(t.config, "path", "WriteToText config")
	if err != nil {
		return nil, err
	}
	in := ins[0]
	if n := len(in.schema.Fields); n != 1 {
		return nil, l.errf(t.typNode, "WriteToText requires an input schema with exactly one field, got %d (%s): select it with MapToFields", n, in.schema)
	}
	path = l.path(path)
	if err := l.checkPath(t, pn, path, false); err != nil {
		return nil, err
	}
	cfg := files.SinkConfig{Path: path, Format: files.Text, Schema: in.schema, Line: pyrepr.AppendStr}
	if cfg.Rolling, err = l.rolling(t); err != nil {
		return nil, err
	}
	sink, err := l.fileSink(t, pn, in, cfg)
	if err != nil {
		return nil, err
	}
	write(l.root, t.name, in, sink, stepOpts(t, weir.WithSinkIdentity("file_text", path))...)
	return nil, nil
}
