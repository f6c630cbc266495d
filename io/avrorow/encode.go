package avrorow

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/hamba/avro/v2"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
)

// Encoder writes rows as records of one schema (one record, without a
// container: Beam's schemaless payloads), straight from the rows' values
// into bytes. A row's fields are matched to the record's by name; a value
// the schema cannot hold is an error naming the field. Map entries are
// written in key order, so a row is always the same bytes. An Encoder is
// safe for concurrent use.
type Encoder struct {
	rs   *avro.RecordSchema
	root *enode
	// last maps the record's fields to the positions of the last row
	// schema seen (rows of one step share one schema).
	last atomic.Pointer[fieldMap]
}

// fieldMap is the record's fields' positions in one row schema (-1: the
// row has no such field, written as null).
type fieldMap struct {
	rows *row.Schema
	pos  []int
}

// enode is one Avro type compiled for writing.
type enode struct {
	s       avro.Schema
	kind    nodeKind
	int32   bool  // an int, not a long
	ts      int64 // a timestamp's unit per millisecond (1 or 1000), 0 if none
	symbols []string
	// size is a fixed's bytes (a decimal's too; 0 for a bytes decimal).
	size int
	// scale and precision are a decimal's.
	scale, precision int
	names            []string
	fields           []*enode
	items            *enode
	// branches are a union's; null is the null branch's index (-1: none).
	branches []*enode
	null     int
}

// NewEncoder compiles rs for writing.
func NewEncoder(rs *avro.RecordSchema) (*Encoder, error) {
	root, err := compileEnc(rs, map[string]*enode{})
	if err != nil {
		return nil, err
	}
	return &Encoder{rs: rs, root: root}, nil
}

func compileEnc(s avro.Schema, named map[string]*enode) (*enode, error) {
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	if n, ok := s.(avro.NamedSchema); ok {
		if e, ok := named[n.FullName()]; ok {
			return e, nil
		}
	}
	e := &enode{s: s, null: -1}
	switch x := s.(type) {
	case *avro.NullSchema:
		e.kind = kNull
	case *avro.PrimitiveSchema:
		kind, ts, ok := primitiveKind(x)
		if !ok {
			return nil, fmt.Errorf("Avro type %s is not written", x.Type())
		}
		if d, ok := x.Logical().(*avro.DecimalLogicalSchema); ok && x.Type() == avro.Bytes {
			e.kind, e.scale, e.precision = kDecimal, d.Scale(), d.Precision()
			return e, nil
		}
		e.kind, e.ts, e.int32 = kind, ts, x.Type() == avro.Int
	case *avro.EnumSchema:
		e.kind, e.symbols = kEnum, x.Symbols()
	case *avro.FixedSchema:
		if d, ok := x.Logical().(*avro.DecimalLogicalSchema); ok {
			e.kind, e.size, e.scale, e.precision = kDecimal, x.Size(), d.Scale(), d.Precision()
			return e, nil
		}
		if x.Logical() != nil {
			return nil, fmt.Errorf("a fixed %s with logical type %s is not written", x.FullName(), x.Logical().Type())
		}
		e.kind, e.size = kFixed, x.Size()
	case *avro.RecordSchema:
		e.kind = kRecord
		named[x.FullName()] = e
		for _, f := range x.Fields() {
			fe, err := compileEnc(f.Type(), named)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", f.Name(), err)
			}
			e.names = append(e.names, f.Name())
			e.fields = append(e.fields, fe)
		}
	case *avro.ArraySchema:
		items, err := compileEnc(x.Items(), named)
		if err != nil {
			return nil, err
		}
		e.kind, e.items = kArray, items
	case *avro.MapSchema:
		values, err := compileEnc(x.Values(), named)
		if err != nil {
			return nil, err
		}
		e.kind, e.items = kMap, values
	case *avro.UnionSchema:
		e.kind = kUnion
		for i, b := range x.Types() {
			be, err := compileEnc(b, named)
			if err != nil {
				return nil, err
			}
			if be.kind == kNull {
				e.null = i
			}
			e.branches = append(e.branches, be)
		}
	default:
		return nil, fmt.Errorf("Avro type %s is not written", s.Type())
	}
	return e, nil
}

// Append appends row r as a record of the schema to dst.
func (e *Encoder) Append(dst []byte, r *row.Row) ([]byte, error) {
	fm := e.last.Load()
	if fm == nil || fm.rows != r.Schema {
		fm = &fieldMap{rows: r.Schema, pos: make([]int, len(e.root.names))}
		for i, name := range e.root.names {
			fm.pos[i] = r.Schema.Index(name)
		}
		e.last.Store(fm)
	}
	for i, f := range e.root.fields {
		var v any
		if p := fm.pos[i]; p >= 0 {
			v = r.Values[p]
		}
		var err error
		if dst, err = appendValue(dst, f, v, 0); err != nil {
			return nil, fmt.Errorf("field %s: %w", e.root.names[i], err)
		}
	}
	return dst, nil
}

func appendLong(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

func appendValue(dst []byte, e *enode, v any, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("values nest deeper than %d", maxDepth)
	}
	if e.kind == kUnion {
		if v == nil {
			if e.null < 0 {
				return nil, fmt.Errorf("null, which the union %s does not take", e.s)
			}
			return appendLong(dst, int64(e.null)), nil
		}
		branch := -1
		for i, b := range e.branches {
			if b.kind == kNull {
				continue
			}
			if branch < 0 {
				branch = i
			}
			if fits(v, b.s) {
				branch = i
				break
			}
		}
		if branch < 0 {
			return nil, fmt.Errorf("the union %s has only null", e.s)
		}
		return appendValue(appendLong(dst, int64(branch)), e.branches[branch], v, depth+1)
	}
	if v == nil {
		if e.kind == kNull {
			return dst, nil
		}
		return nil, fmt.Errorf("null, which %s does not take (make it a union with null)", e.s.Type())
	}
	mismatch := func() error {
		return fmt.Errorf("%s %s is not a value of Avro %s", row.GoTypeName(v), shortValue(v), e.s.Type())
	}
	switch e.kind {
	case kNull:
		return nil, mismatch()
	case kBool:
		b, ok := v.(bool)
		if !ok {
			return nil, mismatch()
		}
		if b {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case kLong:
		if e.ts != 0 {
			ts, err := row.ToTimestamp(v)
			if err != nil {
				return nil, mismatch()
			}
			return appendLong(dst, int64(ts)*e.ts), nil
		}
		var i int64
		switch x := v.(type) {
		case int64:
			i = x
		case int:
			i = int64(x)
		default:
			return nil, mismatch()
		}
		if e.int32 && (i < math.MinInt32 || i > math.MaxInt32) {
			return nil, fmt.Errorf("%d does not fit an Avro int (32 bits)", i)
		}
		return appendLong(dst, i), nil
	case kFloat, kDouble:
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		case int64:
			f = float64(x)
		default:
			return nil, mismatch()
		}
		if e.kind == kFloat {
			return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(f))), nil
		}
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f)), nil
	case kString:
		s, ok := v.(string)
		if !ok {
			if e.s.Type() == avro.Bytes {
				return nil, mismatch()
			}
			s = string(row.AppendJSONValue(nil, v)) // a value as its JSON text, as JSON would carry it
		}
		return append(appendLong(dst, int64(len(s))), s...), nil
	case kEnum:
		s, _ := v.(string)
		i := slices.Index(e.symbols, s)
		if i < 0 {
			return nil, fmt.Errorf("%q is not a symbol of the enum %s", s, e.s.(*avro.EnumSchema).FullName())
		}
		return appendLong(dst, int64(i)), nil
	case kDecimal:
		b, err := decimalBytes(v, e.scale, e.precision, e.size)
		if err != nil {
			return nil, err
		}
		if e.size == 0 {
			dst = appendLong(dst, int64(len(b)))
		}
		return append(dst, b...), nil
	case kFixed:
		s, ok := v.(string)
		if !ok || len(s) != e.size {
			return nil, fmt.Errorf("%s is not %d bytes, as the fixed %s wants", shortValue(v), e.size, e.s.(*avro.FixedSchema).FullName())
		}
		return append(dst, s...), nil
	case kRecord:
		r, ok := row.AsRow(v)
		if !ok {
			return nil, mismatch()
		}
		for i, f := range e.fields {
			fv, _ := r.Get(e.names[i])
			var err error
			if dst, err = appendValue(dst, f, fv, depth+1); err != nil {
				return nil, fmt.Errorf("field %s: %w", e.names[i], err)
			}
		}
		return dst, nil
	case kArray:
		l, ok := v.([]any)
		if !ok {
			return nil, mismatch()
		}
		if len(l) > 0 {
			dst = appendLong(dst, int64(len(l)))
			for _, x := range l {
				var err error
				if dst, err = appendValue(dst, e.items, x, depth+1); err != nil {
					return nil, err
				}
			}
		}
		return appendLong(dst, 0), nil
	case kMap:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, mismatch()
		}
		if len(m) > 0 {
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			dst = appendLong(dst, int64(len(keys)))
			for _, k := range keys {
				dst = append(appendLong(dst, int64(len(k))), k...)
				var err error
				if dst, err = appendValue(dst, e.items, m[k], depth+1); err != nil {
					return nil, fmt.Errorf("key %q: %w", k, err)
				}
			}
		}
		return appendLong(dst, 0), nil
	}
	return nil, mismatch()
}

// shortValue is v as short JSON text, for messages.
func shortValue(v any) string {
	b := row.AppendJSONValue(nil, v)
	if len(b) > 40 {
		return string(b[:37]) + "..."
	}
	return string(b)
}

// isTimestamp reports whether a logical type is one of the timestamps
// rows hold as timestamps.
func isTimestamp(t avro.LogicalType) bool {
	switch t {
	case avro.TimestampMillis, avro.TimestampMicros, avro.LocalTimestampMillis, avro.LocalTimestampMicros:
		return true
	}
	return false
}

// fits reports whether row value v (not nil) is of the kind of Avro type
// s, for the choice of a union's branch.
func fits(v any, s avro.Schema) bool {
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil && isTimestamp(ls.Logical().Type()) {
		_, ok := v.(mtime.Time)
		return ok
	}
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil && ls.Logical().Type() == avro.Decimal {
		switch v.(type) {
		case string, int64, int, float64:
			return true
		}
		return false
	}
	switch x := v.(type) {
	case int64, int:
		i, _ := v.(int64)
		if n, ok := v.(int); ok {
			i = int64(n)
		}
		return s.Type() == avro.Long || (s.Type() == avro.Int && i >= math.MinInt32 && i <= math.MaxInt32)
	case float64:
		return s.Type() == avro.Double || s.Type() == avro.Float
	case bool:
		return s.Type() == avro.Boolean
	case string:
		switch y := s.(type) {
		case *avro.EnumSchema:
			return slices.Contains(y.Symbols(), x)
		case *avro.FixedSchema:
			return len(x) == y.Size()
		}
		return s.Type() == avro.String || s.Type() == avro.Bytes
	case []any:
		return s.Type() == avro.Array
	case map[string]any:
		return s.Type() == avro.Map
	}
	if _, ok := row.AsRow(v); ok {
		return s.Type() == avro.Record
	}
	return false
}

// decimalBytes is v — a string of exact digits (as a decoder reads a
// decimal), an int or a float — as an Avro decimal of scale and precision:
// its unscaled value's big-endian two's complement, in size bytes for a
// fixed (0: as few as it takes, for bytes). A value with more decimal
// places than the scale (other than zeros) or more digits than the
// precision is an error: nothing is rounded.
func decimalBytes(v any, scale, precision, size int) ([]byte, error) {
	var text string
	switch x := v.(type) {
	case string:
		text = x
	case int64:
		text = strconv.FormatInt(x, 10)
	case int:
		text = strconv.Itoa(x)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%v is not a decimal", x)
		}
		text = strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return nil, fmt.Errorf("%s %s is not a decimal", row.GoTypeName(v), shortValue(v))
	}
	digits, neg := text, false
	if rest, ok := strings.CutPrefix(digits, "-"); ok {
		digits, neg = rest, true
	} else {
		digits = strings.TrimPrefix(digits, "+")
	}
	whole, frac, _ := strings.Cut(digits, ".")
	valid := whole != "" || frac != ""
	for _, c := range whole + frac {
		if c < '0' || c > '9' {
			valid = false
		}
	}
	if !valid {
		return nil, fmt.Errorf("%q is not a decimal number", text)
	}
	if len(frac) > scale {
		if strings.Trim(frac[scale:], "0") != "" {
			return nil, fmt.Errorf("%s has %d decimal places, more than the decimal's scale %d (nothing is rounded)", text, len(strings.TrimRight(frac, "0")), scale)
		}
		frac = frac[:scale]
	}
	unscaled := strings.TrimLeft(whole+frac+strings.Repeat("0", scale-len(frac)), "0")
	if precision > 0 && len(unscaled) > precision {
		return nil, fmt.Errorf("%s has %d digits, more than the decimal's precision %d", text, len(unscaled), precision)
	}
	if unscaled == "" {
		unscaled = "0"
	}
	n, _ := new(big.Int).SetString(unscaled, 10)
	if neg {
		n.Neg(n)
	}
	var b []byte
	switch n.Sign() {
	case 0:
		b = []byte{0}
	case 1:
		b = n.Bytes()
		if b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
	default:
		// The smallest width whose two's complement holds n: that of −n−1
		// with a sign bit.
		m := new(big.Int).Neg(n)
		m.Sub(m, big.NewInt(1))
		width := m.BitLen()/8 + 1
		t := new(big.Int).Lsh(big.NewInt(1), uint(8*width))
		b = t.Add(t, n).Bytes()
	}
	if size == 0 {
		return b, nil
	}
	if len(b) > size {
		return nil, fmt.Errorf("%s does not fit the decimal's %d bytes", text, size)
	}
	pad := byte(0)
	if n.Sign() < 0 {
		pad = 0xff
	}
	out := make([]byte, size)
	for i := range size - len(b) {
		out[i] = pad
	}
	copy(out[size-len(b):], b)
	return out, nil
}
