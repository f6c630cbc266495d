package files

import (
	"encoding/json"
	"fmt"
	"os"

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
	o, err := avrorow.NewOCFReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", paths[0], err)
	}
	defer o.Close()
	return avrorow.RowSchema(o.Schema())
}

// avroReader is the Avro part of a split: the file's records read by
// avrorow's container reader, bounded against sizes and counts a file
// only claims, straight into values of the file's schema as rows.
type avroReader struct {
	ocf    *avrorow.OCFReader
	dec    *avrorow.Decoder
	schema *row.Schema // the file's
	vals   []any       // a record's values, in the file's order
	// cols maps the file's fields to the configured schema's (-1: not read).
	cols []int
}

func (s *split) openAvro() error {
	o, err := avrorow.NewOCFReader(s.br)
	if err != nil {
		return fmt.Errorf("%s: %w", s.path, err)
	}
	fs, err := avrorow.RowSchema(o.Schema())
	if err == nil {
		var dec *avrorow.Decoder
		if dec, err = avrorow.NewDecoder(o.Schema(), fs); err == nil {
			var cols []int
			if cols, err = s.columns(fs.Names(), "Avro schema", "field"); err == nil {
				s.avro = &avroReader{ocf: o, dec: dec, schema: fs, vals: make([]any, fs.Len()), cols: cols}
				return nil
			}
			o.Close()
			return err
		}
	}
	o.Close()
	return fmt.Errorf("%s: %w", s.path, err)
}

func (s *split) readAvro(dst *contract.Element) (bool, error) {
	ar := s.avro
	ok, err := ar.ocf.Next(ar.dec, ar.vals)
	if err != nil {
		return false, fmt.Errorf("reading %s after record %d: %w", s.path, s.line, err)
	}
	if !ok {
		ar.ocf.Close()
		s.done = true
		return false, nil
	}
	s.line++ // the record's number in the file
	sch := s.cfg.Schema
	r := row.New(sch)
	for c, i := range ar.cols {
		if i < 0 {
			continue
		}
		v := ar.vals[c]
		if want := sch.Fields[i].Type; !want.Equal(ar.schema.Fields[c].Type) {
			// The configured schema types the field otherwise: converted
			// as a JSON value would be.
			if v, err = row.FromJSON(plainValue(v), want); err != nil {
				reason := ReasonSchemaMismatch
				if i == s.cfg.TimestampField {
					reason = ReasonBadTimestamp
				}
				rec := make(map[string]any, len(ar.vals))
				for k, f := range ar.schema.Fields {
					rec[f.Name] = plainValue(ar.vals[k])
				}
				raw, _ := json.Marshal(rec)
				s.reject(dst, string(raw), timestampReason(err, reason), fmt.Sprintf("field %s: %v", ar.schema.Fields[c].Name, err))
				return true, nil
			}
		}
		r.Values[i] = v
	}
	s.finish(dst, r, nil)
	return true, nil
}

// plainValue turns a row value into the plain form row.FromJSON takes:
// a nested row as a map of its fields.
func plainValue(v any) any {
	switch x := v.(type) {
	case *row.Row:
		m := make(map[string]any, len(x.Values))
		for i, f := range x.Schema.Fields {
			m[f.Name] = plainValue(x.Values[i])
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plainValue(e)
		}
		return out
	}
	return v
}
