package avrorow

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/hamba/avro/v2"

	"github.com/weir-dev/weir/row"
)

// A payload is one Avro value without a container (Beam's schemaless
// Pub/Sub messages): its writer's schema is the reader's, given in the
// pipeline.

// MaxElements bounds the array items and map entries one payload may
// declare, all arrays and maps together. Items of a type that takes no
// bytes (null, an empty record) cost a decoder memory but no input, so
// without a bound a few bytes could ask for billions of them.
const MaxElements = 1 << 20

// ErrMalformed is the class of payloads that are not a value of the
// schema.
var ErrMalformed = errors.New("not an Avro value of the schema")

// Parse reads an Avro record schema from its JSON text. Each schema gets
// a cache of named types of its own: two pipelines that give different
// records one name do not meet.
func Parse(text string) (*avro.RecordSchema, error) {
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("not an Avro schema: %w", err)
	}
	rs, ok := s.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("an Avro schema of %s values, not a record: rows are read from records", s.Type())
	}
	return rs, nil
}

// Decode reads data, one value of rs, into its fields' plain values (see
// Plain) by name. data is walked first (see check): a payload that ends
// too early, or declares more items than MaxElements, is refused before
// anything is built. Bytes after the value are ignored, as Beam's
// schemaless reader ignores them.
func Decode(rs *avro.RecordSchema, data []byte) (map[string]any, error) {
	w := walker{data: data}
	if err := w.value(rs, 0); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	var m map[string]any
	if err := avro.Unmarshal(rs, data[:w.pos], &m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	for k, v := range m {
		m[k] = Plain(v)
	}
	return m, nil
}

// Encode writes row r as one value of rs (fields by name; see
// RecordValue).
func Encode(r *row.Row, rs *avro.RecordSchema) ([]byte, error) {
	b, err := avro.Marshal(rs, RecordValue(r, rs))
	if err != nil {
		return nil, fmt.Errorf("the row is not a value of the Avro schema %s: %w", rs.FullName(), err)
	}
	return b, nil
}

// maxDepth bounds the nesting a walk follows (a recursive schema's value
// could otherwise nest as deep as its bytes allow).
const maxDepth = 64

// walker steps through an Avro value's bytes without building it.
type walker struct {
	data  []byte
	pos   int
	elems int // array items and map entries so far
}

func (w *walker) need(n int) error {
	if n < 0 || n > len(w.data)-w.pos {
		return fmt.Errorf("the payload ends at byte %d, inside a value", len(w.data))
	}
	return nil
}

// long reads a zig-zag varint.
func (w *walker) long() (int64, error) {
	v, n := binary.Varint(w.data[w.pos:])
	if n <= 0 {
		return 0, fmt.Errorf("no valid number at byte %d", w.pos)
	}
	w.pos += n
	return v, nil
}

func (w *walker) value(s avro.Schema, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("values nest deeper than %d", maxDepth)
	}
	switch x := s.(type) {
	case *avro.RefSchema:
		return w.value(x.Schema(), depth)
	case *avro.NullSchema:
		return nil
	case *avro.PrimitiveSchema:
		switch x.Type() {
		case avro.Null:
			return nil
		case avro.Boolean:
			if err := w.need(1); err != nil {
				return err
			}
			w.pos++
			return nil
		case avro.Int, avro.Long:
			_, err := w.long()
			return err
		case avro.Float:
			if err := w.need(4); err != nil {
				return err
			}
			w.pos += 4
			return nil
		case avro.Double:
			if err := w.need(8); err != nil {
				return err
			}
			w.pos += 8
			return nil
		case avro.String, avro.Bytes:
			n, err := w.long()
			if err != nil {
				return err
			}
			if n < 0 || n > int64(len(w.data)-w.pos) {
				return fmt.Errorf("a length of %d bytes at byte %d, past the payload's end", n, w.pos)
			}
			w.pos += int(n)
			return nil
		}
	case *avro.EnumSchema:
		i, err := w.long()
		if err != nil {
			return err
		}
		if i < 0 || i >= int64(len(x.Symbols())) {
			return fmt.Errorf("enum %s has no symbol %d", x.FullName(), i)
		}
		return nil
	case *avro.FixedSchema:
		if err := w.need(x.Size()); err != nil {
			return err
		}
		w.pos += x.Size()
		return nil
	case *avro.RecordSchema:
		for _, f := range x.Fields() {
			if err := w.value(f.Type(), depth+1); err != nil {
				return err
			}
		}
		return nil
	case *avro.UnionSchema:
		i, err := w.long()
		if err != nil {
			return err
		}
		if i < 0 || i >= int64(len(x.Types())) {
			return fmt.Errorf("the union has no branch %d", i)
		}
		return w.value(x.Types()[i], depth+1)
	case *avro.ArraySchema:
		return w.blocks(depth, func() error { return w.value(x.Items(), depth+1) })
	case *avro.MapSchema:
		return w.blocks(depth, func() error {
			if err := w.value(avro.NewPrimitiveSchema(avro.String, nil), depth+1); err != nil {
				return err
			}
			return w.value(x.Values(), depth+1)
		})
	}
	return fmt.Errorf("Avro type %s is not read", s.Type())
}

// blocks walks an array's or a map's blocks, each a count (negative: its
// magnitude, then the block's size in bytes) and as many items.
func (w *walker) blocks(depth int, item func() error) error {
	for {
		n, err := w.long()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if n < 0 {
			if n == -n { // the one count without a magnitude
				return fmt.Errorf("a block of %d items", n)
			}
			n = -n
			if _, err := w.long(); err != nil {
				return err
			}
		}
		if n > int64(MaxElements-w.elems) {
			return fmt.Errorf("more than %d array items and map entries", MaxElements)
		}
		w.elems += int(n)
		for range n {
			if err := item(); err != nil {
				return err
			}
		}
	}
}
