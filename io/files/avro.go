package files

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// Avro object container files (Beam YAML's ReadFromAvro and WriteToAvro):
// the file carries its schema, so a reader needs none; records become rows
// field by field (long and int → int, float and double → float, boolean →
// bool, string, bytes and enum → string, timestamp-millis/micros →
// timestamp, arrays → lists, records → nested rows, a union with null →
// its other branch, nullable). A written file's schema comes from the
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
	return avroRowSchema(rs)
}

func avroRowSchema(rs *avro.RecordSchema) (*row.Schema, error) {
	fields := make([]row.Field, 0, len(rs.Fields()))
	for _, f := range rs.Fields() {
		t, err := avroRowType(f.Type())
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.Name(), err)
		}
		fields = append(fields, row.Field{Name: f.Name(), Type: t})
	}
	return row.NewSchema(fields...)
}

func avroRowType(s avro.Schema) (row.Type, error) {
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		switch ls.Logical().Type() {
		case avro.TimestampMillis, avro.TimestampMicros, avro.LocalTimestampMillis, avro.LocalTimestampMicros:
			return row.Of(row.KindTimestamp), nil
		}
	}
	switch x := s.(type) {
	case *avro.PrimitiveSchema:
		switch x.Type() {
		case avro.Int, avro.Long:
			return row.Of(row.KindInt), nil
		case avro.Float, avro.Double:
			return row.Of(row.KindFloat), nil
		case avro.Boolean:
			return row.Of(row.KindBool), nil
		case avro.String, avro.Bytes:
			return row.Of(row.KindString), nil
		case avro.Null:
			return row.Of(row.KindAny), nil
		}
	case *avro.EnumSchema:
		return row.Of(row.KindString), nil
	case *avro.FixedSchema:
		return row.Of(row.KindString), nil
	case *avro.RecordSchema:
		rs, err := avroRowSchema(x)
		if err != nil {
			return row.Type{}, err
		}
		return row.Type{Kind: row.KindRow, Row: rs}, nil
	case *avro.ArraySchema:
		elem, err := avroRowType(x.Items())
		if err != nil {
			return row.Type{}, err
		}
		return row.Type{Kind: row.KindList, Elem: &elem}, nil
	case *avro.MapSchema:
		return row.Of(row.KindAny), nil
	case *avro.UnionSchema:
		var other []avro.Schema
		for _, t := range x.Types() {
			if t.Type() != avro.Null {
				other = append(other, t)
			}
		}
		if len(other) == 1 {
			return avroRowType(other[0])
		}
		return row.Of(row.KindAny), nil
	}
	return row.Type{}, fmt.Errorf("Avro type %s has no row type", s.Type())
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
	fs, err := avroRowSchema(rs)
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
		v, err := row.FromJSON(avroPlain(m[name]), sch.Fields[i].Type)
		if err != nil {
			reason := ReasonSchemaMismatch
			if i == s.cfg.TimestampField {
				reason = ReasonBadTimestamp
			}
			raw, _ := json.Marshal(avroPlain(m))
			s.reject(dst, string(raw), timestampReason(err, reason), fmt.Sprintf("field %s: %v", name, err))
			return true, nil
		}
		r.Values[i] = v
	}
	s.finish(dst, r, nil)
	return true, nil
}

// avroPlain turns a decoded Avro value into the plain values row.FromJSON
// takes.
func avroPlain(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case float32:
		return float64(x)
	case []byte:
		return string(x)
	case time.Time:
		return mtime.FromTime(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = avroPlain(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = avroPlain(e)
		}
		return out
	}
	return v
}

// avroSchemaOf is the Avro record schema of rows of s: every field a union
// with null.
func avroSchemaOf(s *row.Schema) (avro.Schema, error) {
	var n int
	rec, err := avroRecord(s, "Row", &n)
	if err != nil {
		return nil, err
	}
	return rec, nil
}

func avroRecord(s *row.Schema, name string, n *int) (*avro.RecordSchema, error) {
	fields := make([]*avro.Field, 0, s.Len())
	for _, f := range s.Fields {
		t, err := avroTypeOf(f.Type, n)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.Name, err)
		}
		u, err := avro.NewUnionSchema([]avro.Schema{avro.NewNullSchema(), t})
		if err != nil {
			return nil, err
		}
		af, err := avro.NewField(f.Name, u, avro.WithDefault(nil))
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.Name, err)
		}
		fields = append(fields, af)
	}
	return avro.NewRecordSchema(name, "weir", fields)
}

func avroTypeOf(t row.Type, n *int) (avro.Schema, error) {
	switch t.Kind {
	case row.KindInt:
		return avro.NewPrimitiveSchema(avro.Long, nil), nil
	case row.KindFloat:
		return avro.NewPrimitiveSchema(avro.Double, nil), nil
	case row.KindBool:
		return avro.NewPrimitiveSchema(avro.Boolean, nil), nil
	case row.KindString, row.KindAny:
		return avro.NewPrimitiveSchema(avro.String, nil), nil
	case row.KindTimestamp:
		return avro.NewPrimitiveSchema(avro.Long, avro.NewPrimitiveLogicalSchema(avro.TimestampMillis)), nil
	case row.KindList:
		elem := row.Of(row.KindAny)
		if t.Elem != nil {
			elem = *t.Elem
		}
		et, err := avroTypeOf(elem, n)
		if err != nil {
			return nil, err
		}
		u, err := avro.NewUnionSchema([]avro.Schema{avro.NewNullSchema(), et})
		if err != nil {
			return nil, err
		}
		return avro.NewArraySchema(u), nil
	case row.KindRow:
		if t.Row == nil {
			return avro.NewPrimitiveSchema(avro.String, nil), nil
		}
		*n++
		return avroRecord(t.Row, fmt.Sprintf("Row%d", *n), n)
	}
	return nil, fmt.Errorf("type %s has no Avro type", t)
}

// avroValue is the value the Avro encoder takes for row value v of
// Avro type s: a union with null as a one-entry map {branch: value}, as
// hamba/avro encodes unions from generic values.
func avroValue(v any, s avro.Schema) any {
	if u, ok := s.(*avro.UnionSchema); ok {
		if v == nil {
			return nil
		}
		for _, b := range u.Types() {
			if b.Type() == avro.Null {
				continue
			}
			x := avroValue(v, b)
			if x == nil {
				return nil
			}
			name := string(b.Type())
			if n, ok := b.(avro.NamedSchema); ok {
				name = n.FullName()
			} else if ls, ok := b.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
				name += "." + string(ls.Logical().Type())
			}
			return map[string]any{name: x}
		}
		return nil
	}
	if v == nil {
		return nil
	}
	switch x := s.(type) {
	case *avro.PrimitiveSchema:
		if x.Logical() != nil {
			ts, err := row.ToTimestamp(v)
			if err != nil {
				return nil
			}
			return ts.ToTime()
		}
		switch x.Type() {
		case avro.Long:
			if i, ok := v.(int); ok {
				return int64(i)
			}
		case avro.String:
			if _, ok := v.(string); !ok {
				return string(row.AppendJSONValue(nil, v))
			}
		}
		return v
	case *avro.ArraySchema:
		l, _ := v.([]any)
		out := make([]any, len(l))
		for i, e := range l {
			out[i] = avroValue(e, x.Items())
		}
		return out
	case *avro.RecordSchema:
		r, ok := row.AsRow(v)
		if !ok {
			return nil
		}
		return avroRecordValue(r, x)
	}
	return v
}

// avroRecordValue is row r as the Avro encoder takes it for record schema
// rs (fields by name).
func avroRecordValue(r *row.Row, rs *avro.RecordSchema) map[string]any {
	m := make(map[string]any, len(rs.Fields()))
	for _, f := range rs.Fields() {
		v, _ := r.Get(f.Name())
		m[f.Name()] = avroValue(v, f.Type())
	}
	return m
}
