package files

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"

	"github.com/weir-dev/weir/io/avrorow"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// Avro object container files (Beam YAML's ReadFromAvro and WriteToAvro):
// the file carries its schema, so a reader needs none; records become rows
// as package avrorow maps them. A written file's schema comes from the
// rows' schema, every field nullable.

// AvroSchema reads the schema of an Avro file (the first match of a glob)
// as a row schema.
func AvroSchema(path string) (*row.Schema, error) {
	paths, err := Files(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(paths[0])
	if err != nil {
		return nil, fmt.Errorf("reading the Avro schema: %w", err)
	}
	defer f.Close()
	dec, err := ocf.NewDecoder(f)
	if err != nil {
		return nil, fmt.Errorf("%s is not an Avro object container file: %w", paths[0], err)
	}
	rs, ok := dec.Schema().(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("%s holds %s values, not records: weir reads Avro records as rows", paths[0], dec.Schema().Type())
	}
	return avrorow.RowSchema(rs)
}

// avroReader is the Avro part of a split: its decoder and the file's
// schema as rows.
type avroReader struct {
	dec    *ocf.Decoder
	schema *row.Schema // the file's
	// cols maps the file's fields to the configured schema's (-1: not read).
	cols []int
}

func (s *split) openAvro() error {
	dec, err := ocf.NewDecoder(s.br)
	if err != nil {
		return fmt.Errorf("%s is not an Avro object container file: %w", s.path, err)
	}
	rs, ok := dec.Schema().(*avro.RecordSchema)
	if !ok {
		return fmt.Errorf("%s holds %s values, not records", s.path, dec.Schema().Type())
	}
	fs, err := avrorow.RowSchema(rs)
	if err != nil {
		return fmt.Errorf("%s: %w", s.path, err)
	}
	cols, err := s.columns(fs.Names(), "Avro schema", "field")
	if err != nil {
		return err
	}
	ar := &avroReader{dec: dec, schema: fs, cols: cols}
	s.avro = ar
	return nil
}

func (s *split) readAvro(dst *contract.Element) (bool, error) {
	ar := s.avro
	if !ar.dec.HasNext() {
		if err := ar.dec.Error(); err != nil && err != io.EOF {
			return false, fmt.Errorf("reading %s after record %d: %w", s.path, s.line, err)
		}
		s.done = true
		return false, nil
	}
	s.line++ // the record's number in the file
	var m map[string]any
	if err := ar.dec.Decode(&m); err != nil {
		return false, fmt.Errorf("reading record %d of %s: %w", s.line, s.path, err)
	}
	sch := s.cfg.Schema
	r := row.New(sch)
	for c, i := range ar.cols {
		if i < 0 {
			continue
		}
		name := ar.schema.Fields[c].Name
		v, err := row.FromJSON(avrorow.Plain(m[name]), sch.Fields[i].Type)
		if err != nil {
			reason := ReasonSchemaMismatch
			if i == s.cfg.TimestampField {
				reason = ReasonBadTimestamp
			}
			raw, _ := json.Marshal(avrorow.Plain(m))
			s.reject(dst, string(raw), timestampReason(err, reason), fmt.Sprintf("field %s: %v", name, err))
			return true, nil
		}
		r.Values[i] = v
	}
	s.finish(dst, r, nil)
	return true, nil
}
