package weir

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"

	"github.com/weir-dev/weir/runner/contract"
)

// State that checkpoints persist is encoded as JSON of its Go type: keys,
// accumulators, state cells, bag elements and map entries. Types whose JSON
// does not round-trip (unexported fields, interfaces) need a json.Marshaler.

// Strings and 64-bit integers, the common key and accumulator types, skip
// JSON: a string is its bytes, an int64 its decimal text (which is also its
// JSON, so the two encodings agree). Other types use encoding/json.

func encodeJSON(v any) ([]byte, error) {
	switch x := v.(type) {
	case int64:
		return strconv.AppendInt(nil, x, 10), nil
	case string:
		return append([]byte{'s'}, x...), nil
	}
	return json.Marshal(v)
}

// appendJSON appends encodeJSON's encoding of v.
func appendJSON(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case string:
		return append(append(dst, 's'), x...), nil
	}
	b, err := json.Marshal(v)
	return append(dst, b...), err
}

func decodeJSON[T any](b []byte) (T, error) {
	var v T
	switch p := any(&v).(type) {
	case *int64:
		n, err := strconv.ParseInt(string(b), 10, 64)
		*p = n
		return v, err
	case *string:
		if len(b) > 0 && b[0] == 's' {
			*p = string(b[1:])
			return v, nil
		}
	}
	err := json.Unmarshal(b, &v)
	return v, err
}

// EncodeKey implements contract.StateCoder.
func (k kvKeyer[K, V]) EncodeKey(key any) ([]byte, error) {
	if k.mark != nil {
		return appendJSON(append([]byte(nil), k.mark...), key.(K))
	}
	return encodeJSON(key.(K))
}

// AppendEncodedKey implements contract.StateAppender.
func (k kvKeyer[K, V]) AppendEncodedKey(dst []byte, key any) ([]byte, error) {
	return appendJSON(append(dst, k.mark...), key)
}

// DecodeKey implements contract.StateCoder. It reads a key stored by a
// version that declares a re-key too (contract.RekeyMark).
func (k kvKeyer[K, V]) DecodeKey(b []byte) (any, error) {
	v, err := decodeJSON[K](contract.StripRekeyMark(b))
	return v, err
}

func (c *combineAgg[K, V, A, O]) EncodeState(_ string, v any) ([]byte, error) {
	if c.migrate != nil {
		return appendJSON([]byte{migratedAccumulator}, *v.(*A))
	}
	return encodeJSON(*v.(*A))
}

// AppendEncodedState implements contract.StateAppender.
func (c *combineAgg[K, V, A, O]) AppendEncodedState(dst []byte, _ string, v any) ([]byte, error) {
	if c.migrate != nil {
		// Mark the accumulators this version stores, so that a restore
		// tells them from those of the version it migrates from.
		dst = append(dst, migratedAccumulator)
	}
	// v is a *A: an int64 or string accumulator encodes without boxing.
	switch p := v.(type) {
	case *int64:
		return strconv.AppendInt(dst, *p, 10), nil
	case *string:
		return append(append(dst, 's'), *p...), nil
	}
	return appendFlat(dst, c.accJSON, v.(*A))
}

// appendFlat appends appendJSON's encoding of *v, written by f when f (a
// flatJSON of T, or nil) writes it.
func appendFlat[T any](dst []byte, f *flatJSON, v *T) ([]byte, error) {
	if f != nil {
		if out, ok := f.append(dst, reflect.ValueOf(v).Elem()); ok {
			return out, nil
		}
	}
	return appendJSON(dst, *v)
}

// decodeFlat reads what appendFlat wrote into *v: by f when f (a flatJSON
// of T, or nil) reads it exactly, else by decodeJSON.
func decodeFlat[T any](f *flatJSON, b []byte, v *T) error {
	if f != nil && f.decode(b, reflect.ValueOf(v).Elem()) {
		return nil
	}
	var err error
	*v, err = decodeJSON[T](b)
	return err
}

func (c *combineAgg[K, V, A, O]) DecodeState(_ string, b []byte) (any, error) {
	switch {
	case len(b) > 0 && b[0] == migratedAccumulator:
		b = b[1:]
	case c.migrate != nil:
		return c.migrate.read(c.step, b, func() any { a := c.fn.CreateAccumulator(); return &a })
	}
	a := new(A)
	if err := decodeFlat(c.accJSON, b, a); err != nil {
		return nil, err
	}
	return a, nil
}

func (gbkAgg[K, V]) EncodeState(_ string, v any) ([]byte, error) { return encodeJSON(*v.(*[]V)) }

func (gbkAgg[K, V]) DecodeState(_ string, b []byte) (any, error) {
	vs, err := decodeJSON[[]V](b)
	if err != nil {
		return nil, err
	}
	return &vs, nil
}

// cellCodec encodes one declared state cell's values.
type cellCodec struct {
	enc func(any) ([]byte, error)
	dec func([]byte) (any, error)
}

// codecOf returns the codec of a cell of values of type T: their JSON. A
// struct of numbers, strings and bools (flatJSON) is written and read
// without encoding/json's reflection, to the same bytes and values: a
// restore reads a cell per key.
func codecOf[T any]() cellCodec {
	flat := newFlatJSON[T]()
	return cellCodec{
		enc: func(v any) ([]byte, error) {
			t := v.(T)
			return appendFlat(nil, flat, &t)
		},
		dec: func(b []byte) (any, error) {
			// A value a version that declared a migration stored is marked
			// (MigrateState): read it on without the declaration too.
			if len(b) > 0 && b[0] == migratedAccumulator {
				b = b[1:]
			}
			var v T
			err := decodeFlat(flat, b, &v)
			return v, err
		},
	}
}

func (s ValueState[T]) codecs() map[string]cellCodec { return map[string]cellCodec{s.ID: codecOf[T]()} }
func (ValueState[T]) valueType() reflect.Type        { return reflect.TypeFor[T]() }
func (BagState[T]) valueType() reflect.Type          { return reflect.TypeFor[T]() }
func (MapState[K2, V2]) valueType() reflect.Type     { return reflect.TypeFor[V2]() }
func (s BagState[T]) codecs() map[string]cellCodec   { return map[string]cellCodec{s.ID: codecOf[T]()} }
func (s MapState[K2, V2]) codecs() map[string]cellCodec {
	return map[string]cellCodec{s.ID + "#key": codecOf[K2](), s.ID + "#value": codecOf[V2]()}
}

func (a *statefulAdapter[K, V, Out]) cell(name string) (cellCodec, error) {
	c, ok := a.cells[name]
	if !ok {
		return cellCodec{}, fmt.Errorf("state cell %q was not declared in StatefulFn.State", name)
	}
	return c, nil
}

func (a *statefulAdapter[K, V, Out]) EncodeState(cell string, v any) ([]byte, error) {
	c, err := a.cell(cell)
	if err != nil {
		return nil, err
	}
	return c.enc(v)
}

func (a *statefulAdapter[K, V, Out]) DecodeState(cell string, b []byte) (any, error) {
	c, err := a.cell(cell)
	if err != nil {
		return nil, err
	}
	return c.dec(b)
}

var (
	_ contract.StateCoder = (*combineAgg[int, int, int, int])(nil)
	_ contract.StateCoder = gbkAgg[int, int]{}
	_ contract.StateCoder = (*statefulAdapter[int, int, int])(nil)
)
