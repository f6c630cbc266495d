// Package avrorow maps Avro records to rows and back, for the connectors
// that read and write Avro (files' object containers, Pub/Sub payloads):
// long and int → int, float and double → float, boolean → bool, string,
// bytes, enum and fixed → string (a decimal → its exact digits),
// timestamp-millis/micros → timestamp (date, time-* → their int),
// arrays → lists, records → nested rows, maps → any, a union with null →
// its other branch (nullable). Rows written without a schema get one of
// their own, every field a union with null.
//
// Object container files are read here too (OCFReader), not by
// hamba/avro's ocf package, whose reader allocates whatever size a block
// claims and loops over whatever count it claims: a file under the
// server's file roots must not be able to take the server down.
//
// It may import mtime, row, github.com/hamba/avro/v2 (schemas, encoding),
// github.com/golang/snappy and github.com/klauspost/compress/zstd (the
// containers' codecs) and the standard library.
package avrorow

import (
	"fmt"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
)

// RowSchema is the row schema of records of rs, field by field. A
// record that contains itself (a recursive schema) is held, where it
// recurs, as a value of type any.
func RowSchema(rs *avro.RecordSchema) (*row.Schema, error) {
	return rowSchema(rs, map[string]bool{})
}

// rowSchema is RowSchema with the records being expanded in open.
func rowSchema(rs *avro.RecordSchema, open map[string]bool) (*row.Schema, error) {
	open[rs.FullName()] = true
	defer delete(open, rs.FullName())
	fields := make([]row.Field, 0, len(rs.Fields()))
	for _, f := range rs.Fields() {
		t, err := rowType(f.Type(), open)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.Name(), err)
		}
		fields = append(fields, row.Field{Name: f.Name(), Type: t})
	}
	return row.NewSchema(fields...)
}

func rowType(s avro.Schema, open map[string]bool) (row.Type, error) {
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	if n, ok := s.(avro.NamedSchema); ok && open[n.FullName()] {
		return row.Of(row.KindAny), nil // a record within itself
	}
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
	case *avro.NullSchema:
		return row.Of(row.KindAny), nil
	case *avro.EnumSchema:
		return row.Of(row.KindString), nil
	case *avro.FixedSchema:
		return row.Of(row.KindString), nil
	case *avro.RecordSchema:
		rs, err := rowSchema(x, open)
		if err != nil {
			return row.Type{}, err
		}
		return row.Type{Kind: row.KindRow, Row: rs}, nil
	case *avro.ArraySchema:
		elem, err := rowType(x.Items(), open)
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
			return rowType(other[0], open)
		}
		return row.Of(row.KindAny), nil
	}
	return row.Type{}, fmt.Errorf("Avro type %s has no row type", s.Type())
}

// Plain turns a decoded Avro value into the plain values row.FromJSON
// takes.
func Plain(v any) any {
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
			out[k] = Plain(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Plain(e)
		}
		return out
	}
	return v
}

// SchemaOf is the Avro record schema of rows of s: every field a union
// with null.
func SchemaOf(s *row.Schema) (avro.Schema, error) {
	var n int
	rec, err := record(s, "Row", &n)
	if err != nil {
		return nil, err
	}
	return rec, nil
}

func record(s *row.Schema, name string, n *int) (*avro.RecordSchema, error) {
	fields := make([]*avro.Field, 0, s.Len())
	for _, f := range s.Fields {
		t, err := typeOf(f.Type, n)
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

func typeOf(t row.Type, n *int) (avro.Schema, error) {
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
		et, err := typeOf(elem, n)
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
		return record(t.Row, fmt.Sprintf("Row%d", *n), n)
	}
	return nil, fmt.Errorf("type %s has no Avro type", t)
}
