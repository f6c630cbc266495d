package avrorow

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"strings"

	"github.com/hamba/avro/v2"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
)

// Decoder reads payloads of one record schema (one record each, without
// a container) straight into the values of a row, with the bounds Decode
// keeps: a payload that ends inside a value, declares more than
// MaxElements array items and map entries, or nests deeper than 64 is
// refused. It builds no intermediate map: a payload costs its values'
// allocations only. A Decoder is safe for concurrent use.
type Decoder struct {
	fields []*node
}

// nodeKind is how a node's bytes are read.
type nodeKind uint8

const (
	kNull nodeKind = iota
	kBool
	kLong // int and long
	kFloat
	kDouble
	kString // string and bytes
	kEnum
	kFixed
	kRecord
	kArray
	kMap
	kUnion
	// kDecimal is a decimal (bytes or fixed) to write (Encoder only: a
	// decoder reads one as a kString or kFixed with its scale).
	kDecimal
)

// node is one Avro type compiled with the row type its value takes.
type node struct {
	kind nodeKind
	// ts: a timestamp-millis (1) or -micros (1000) long, read as a
	// timestamp where the row type is one.
	ts      int64
	symbols []string // enum
	size    int      // fixed
	// decimal: a bytes or fixed decimal, read as its exact digits with
	// scale digits after the point.
	decimal bool
	scale   int
	// row: the record's row schema; nil reads it as a map (in a value of
	// type any).
	row    *row.Schema
	names  []string // record field names, for maps
	fields []*node  // record
	items  *node    // array items, map values
	// min is the fewest bytes a value takes (0 for null, an empty record).
	min int
	// branches: a union's; nullable is set for [null, T], read as T or nil.
	branches []*node
}

// primitiveKind returns how a primitive type's bytes are read and written
// and, for a timestamp, its unit per millisecond (1 or 1000; 0 for other
// types); ok is false for a type neither reads.
func primitiveKind(x *avro.PrimitiveSchema) (kind nodeKind, ts int64, ok bool) {
	switch x.Type() {
	case avro.Null:
		return kNull, 0, true
	case avro.Boolean:
		return kBool, 0, true
	case avro.Int, avro.Long:
		if l := x.Logical(); l != nil {
			switch l.Type() {
			case avro.TimestampMillis, avro.LocalTimestampMillis:
				ts = 1
			case avro.TimestampMicros, avro.LocalTimestampMicros:
				ts = 1000
			}
		}
		return kLong, ts, true
	case avro.Float:
		return kFloat, 0, true
	case avro.Double:
		return kDouble, 0, true
	case avro.String, avro.Bytes:
		return kString, 0, true
	}
	return 0, 0, false
}

// NewDecoder compiles rs for rows of schema sch, whose first fields are
// rs's as RowSchema maps them (a source's rows may have more fields after
// them: attribute fields).
func NewDecoder(rs *avro.RecordSchema, sch *row.Schema) (*Decoder, error) {
	if sch.Len() < len(rs.Fields()) {
		return nil, fmt.Errorf("the rows %s have fewer fields than the Avro record %s", sch, rs.FullName())
	}
	c := compiler{plain: map[string]*node{}}
	d := &Decoder{fields: make([]*node, len(rs.Fields()))}
	for i, f := range rs.Fields() {
		if sch.Fields[i].Name != f.Name() {
			return nil, fmt.Errorf("row field %d is %s, the Avro record's %s", i, sch.Fields[i].Name, f.Name())
		}
		n, err := c.compile(f.Type(), sch.Fields[i].Type)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.Name(), err)
		}
		d.fields[i] = n
	}
	return d, nil
}

// compiler holds the records compiled to maps by name, so that a
// recursive record compiles once.
type compiler struct {
	plain map[string]*node
}

// compile returns the node reading s into values of row type t (KindAny:
// plain values, as a JSON decoder would give them), its min set.
func (c *compiler) compile(s avro.Schema, t row.Type) (*node, error) {
	n, err := c.node(s, t)
	if err != nil {
		return nil, err
	}
	switch n.kind {
	case kNull:
		n.min = 0
	case kFloat:
		n.min = 4
	case kDouble:
		n.min = 8
	case kFixed:
		n.min = n.size
	case kRecord:
		// A recursive record counts as taking no bytes where it recurs
		// (its fields are being compiled): the bound stays safe.
		n.min = 0
		for _, f := range n.fields {
			if f != nil {
				n.min += f.min
			}
		}
	default:
		n.min = 1
	}
	return n, nil
}

func (c *compiler) node(s avro.Schema, t row.Type) (*node, error) {
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	plain := t.Kind == row.KindAny
	switch x := s.(type) {
	case *avro.NullSchema:
		return &node{kind: kNull}, nil
	case *avro.PrimitiveSchema:
		kind, ts, ok := primitiveKind(x)
		if !ok {
			return nil, fmt.Errorf("Avro type %s is not read", x.Type())
		}
		n := &node{kind: kind, ts: ts}
		if d, isDec := x.Logical().(*avro.DecimalLogicalSchema); isDec && x.Type() == avro.Bytes {
			n.decimal, n.scale = true, d.Scale()
		}
		return n, nil
	case *avro.EnumSchema:
		return &node{kind: kEnum, symbols: x.Symbols()}, nil
	case *avro.FixedSchema:
		n := &node{kind: kFixed, size: x.Size()}
		if d, ok := x.Logical().(*avro.DecimalLogicalSchema); ok {
			n.decimal, n.scale = true, d.Scale()
		}
		return n, nil
	case *avro.RecordSchema:
		if plain {
			if n, ok := c.plain[x.FullName()]; ok {
				return n, nil
			}
		}
		n := &node{kind: kRecord}
		if plain {
			c.plain[x.FullName()] = n
		} else {
			if t.Kind != row.KindRow || t.Row == nil || t.Row.Len() != len(x.Fields()) {
				return nil, fmt.Errorf("record %s is not read into %s", x.FullName(), t)
			}
			n.row = t.Row
		}
		for i, f := range x.Fields() {
			ft := row.Of(row.KindAny)
			if !plain {
				ft = t.Row.Fields[i].Type
			}
			fn, err := c.compile(f.Type(), ft)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", f.Name(), err)
			}
			n.names = append(n.names, f.Name())
			n.fields = append(n.fields, fn)
		}
		return n, nil
	case *avro.ArraySchema:
		et := row.Of(row.KindAny)
		if t.Kind == row.KindList && t.Elem != nil {
			et = *t.Elem
		}
		items, err := c.compile(x.Items(), et)
		if err != nil {
			return nil, err
		}
		return &node{kind: kArray, items: items}, nil
	case *avro.MapSchema:
		values, err := c.compile(x.Values(), row.Of(row.KindAny))
		if err != nil {
			return nil, err
		}
		return &node{kind: kMap, items: values}, nil
	case *avro.UnionSchema:
		n := &node{kind: kUnion}
		others := 0
		for _, b := range x.Types() {
			if b.Type() != avro.Null {
				others++
			}
		}
		for _, b := range x.Types() {
			bt := row.Of(row.KindAny)
			if others == 1 {
				bt = t // [null, T] is read as T
			}
			bn, err := c.compile(b, bt)
			if err != nil {
				return nil, err
			}
			n.branches = append(n.branches, bn)
		}
		return n, nil
	}
	return nil, fmt.Errorf("Avro type %s is not read", s.Type())
}

// Decode reads data, one record, into vals[:n] for the record's n fields.
// Bytes after the record are ignored, as Beam's schemaless reader ignores
// them. An error wraps ErrMalformed.
func (d *Decoder) Decode(data []byte, vals []any) error {
	_, err := d.DecodeNext(data, vals)
	return err
}

// DecodeNext is Decode, and returns how many bytes of data the record
// took (the next record of a container's block starts there).
func (d *Decoder) DecodeNext(data []byte, vals []any) (int, error) {
	r := payloadReader{data: data}
	for i, n := range d.fields {
		v, err := r.read(n, 0)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		vals[i] = v
	}
	return r.pos, nil
}

// payloadReader reads one payload.
type payloadReader struct {
	data  []byte
	pos   int
	elems int // array items and map entries so far
	empty int // of them, items that take no bytes
}

func (r *payloadReader) long() (int64, error) {
	v, n := binary.Varint(r.data[r.pos:])
	if n <= 0 {
		return 0, fmt.Errorf("no valid number at byte %d", r.pos)
	}
	r.pos += n
	return v, nil
}

// index reads an enum's symbol or a union's branch, one of n; missing
// names what is missing, for the message.
func (r *payloadReader) index(n int, missing string) (int, error) {
	i, err := r.long()
	if err != nil {
		return 0, err
	}
	if i < 0 || i >= int64(n) {
		return 0, fmt.Errorf("%s %d", missing, i)
	}
	return int(i), nil
}

func (r *payloadReader) bytes(n int) ([]byte, error) {
	if n < 0 || n > len(r.data)-r.pos {
		return nil, fmt.Errorf("the payload ends at byte %d, inside a value", len(r.data))
	}
	b := r.data[r.pos : r.pos+n]
	r.pos += n
	return b, nil
}

func (r *payloadReader) str() (string, error) {
	n, err := r.long()
	if err != nil {
		return "", err
	}
	if n < 0 || n > int64(len(r.data)-r.pos) {
		return "", fmt.Errorf("a length of %d bytes at byte %d, past the payload's end", n, r.pos)
	}
	b, _ := r.bytes(int(n))
	return string(b), nil
}

// MaxEmptyItems bounds the array items and map values of types that take
// no bytes (null, a record of nulls) one payload may declare: nothing in
// the payload pays for them.
const MaxEmptyItems = 4096

// count reads a block's item count (a negative count is followed by the
// block's size in bytes) of items of at least min bytes each: no more
// than the payload's bytes left can hold, MaxElements over the payload,
// MaxEmptyItems of items that take no bytes.
func (r *payloadReader) count(min int) (int, error) {
	n, err := r.long()
	if err != nil {
		return 0, err
	}
	if n < 0 {
		if n == math.MinInt64 {
			return 0, fmt.Errorf("a block of %d items", n)
		}
		n = -n
		if _, err := r.long(); err != nil {
			return 0, err
		}
	}
	if n > int64(MaxElements-r.elems) {
		return 0, fmt.Errorf("more than %d array items and map entries", MaxElements)
	}
	if min > 0 && n > int64((len(r.data)-r.pos)/min) {
		return 0, fmt.Errorf("a block of %d items at byte %d, more than the payload's %d bytes left can hold", n, r.pos, len(r.data)-r.pos)
	}
	if min == 0 {
		if n > int64(MaxEmptyItems-r.empty) {
			return 0, fmt.Errorf("more than %d items that take no bytes", MaxEmptyItems)
		}
		r.empty += int(n)
	}
	r.elems += int(n)
	return int(n), nil
}

func (r *payloadReader) read(n *node, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("values nest deeper than %d", maxDepth)
	}
	switch n.kind {
	case kNull:
		return nil, nil
	case kBool:
		b, err := r.bytes(1)
		if err != nil {
			return nil, err
		}
		return b[0] != 0, nil
	case kLong:
		v, err := r.long()
		if err != nil {
			return nil, err
		}
		if n.ts != 0 {
			return mtime.Time(floorDiv(v, n.ts)), nil
		}
		return v, nil
	case kFloat:
		b, err := r.bytes(4)
		if err != nil {
			return nil, err
		}
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), nil
	case kDouble:
		b, err := r.bytes(8)
		if err != nil {
			return nil, err
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
	case kString:
		if n.decimal {
			l, err := r.long()
			if err != nil {
				return nil, err
			}
			if l < 0 || l > maxDecimalBytes || l > int64(len(r.data)-r.pos) {
				return nil, fmt.Errorf("a decimal of %d bytes at byte %d (at most %d, within the payload)", l, r.pos, maxDecimalBytes)
			}
			b, _ := r.bytes(int(l))
			return decimalText(b, n.scale), nil
		}
		return r.str()
	case kEnum:
		i, err := r.index(len(n.symbols), "the enum has no symbol")
		if err != nil {
			return nil, err
		}
		return n.symbols[i], nil
	case kFixed:
		b, err := r.bytes(n.size)
		if err != nil {
			return nil, err
		}
		if n.decimal {
			return decimalText(b, n.scale), nil
		}
		return string(b), nil
	case kRecord:
		if n.row == nil {
			m := make(map[string]any, len(n.fields))
			for i, f := range n.fields {
				v, err := r.read(f, depth+1)
				if err != nil {
					return nil, err
				}
				m[n.names[i]] = v
			}
			return m, nil
		}
		out := row.New(n.row)
		for i, f := range n.fields {
			v, err := r.read(f, depth+1)
			if err != nil {
				return nil, err
			}
			out.Values[i] = v
		}
		return out, nil
	case kArray:
		out := []any{}
		for {
			c, err := r.count(n.items.min)
			if err != nil {
				return nil, err
			}
			if c == 0 {
				return out, nil
			}
			for range c {
				v, err := r.read(n.items, depth+1)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
		}
	case kMap:
		out := map[string]any{}
		for {
			c, err := r.count(1 + n.items.min) // the key's length, at least
			if err != nil {
				return nil, err
			}
			if c == 0 {
				return out, nil
			}
			for range c {
				k, err := r.str()
				if err != nil {
					return nil, err
				}
				v, err := r.read(n.items, depth+1)
				if err != nil {
					return nil, err
				}
				out[k] = v
			}
		}
	case kUnion:
		i, err := r.index(len(n.branches), "the union has no branch")
		if err != nil {
			return nil, err
		}
		return r.read(n.branches[i], depth+1)
	}
	return nil, fmt.Errorf("node kind %d", n.kind)
}

// maxDecimalBytes bounds a decimal's unscaled value (2,460 digits; a
// decimal(38) takes 16 bytes).
const maxDecimalBytes = 1024

// decimalText is an Avro decimal (the unscaled value's big-endian two's
// complement) as its exact digits: rows have no decimal type, and a float
// would round it.
func decimalText(b []byte, scale int) string {
	v := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	digits := v.String()
	neg := strings.HasPrefix(digits, "-")
	digits = strings.TrimPrefix(digits, "-")
	if scale > 0 {
		if len(digits) <= scale {
			digits = strings.Repeat("0", scale-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	}
	if neg {
		digits = "-" + digits
	}
	return digits
}

// floorDiv divides rounding towards −∞ (a microsecond before the epoch is
// the millisecond before it).
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) != (b < 0) {
		q--
	}
	return q
}
