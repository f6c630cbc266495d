package weir

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
)

// KeyEncoder is implemented by key types that encode themselves. The
// encoding must be canonical (equal keys encode to equal bytes) and stable
// across processes and releases: it is hashed to choose the key group.
type KeyEncoder interface {
	AppendKey(dst []byte) []byte
}

// keyAppender returns a canonical encoder for keys of type K, chosen once.
// Built-in kinds encode as: integers 8-byte big-endian, floats their IEEE
// bits, strings their bytes, bools one byte; structs and arrays the
// concatenation of their fields with strings length-prefixed.
func keyAppender[K comparable]() (func(dst []byte, k K) []byte, error) {
	var zero K
	if _, ok := any(zero).(KeyEncoder); ok {
		return func(dst []byte, k K) []byte { return any(k).(KeyEncoder).AppendKey(dst) }, nil
	}
	switch any(zero).(type) {
	case string:
		return func(dst []byte, k K) []byte { return append(dst, any(k).(string)...) }, nil
	case int64:
		return func(dst []byte, k K) []byte { return binary.BigEndian.AppendUint64(dst, uint64(any(k).(int64))) }, nil
	case int:
		return func(dst []byte, k K) []byte { return binary.BigEndian.AppendUint64(dst, uint64(any(k).(int))) }, nil
	}
	t := reflect.TypeFor[K]()
	if err := checkKeyType(t); err != nil {
		return nil, err
	}
	return func(dst []byte, k K) []byte { return appendReflect(dst, reflect.ValueOf(k), false) }, nil
}

func checkKeyType(t reflect.Type) error {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.String:
		return nil
	case reflect.Array:
		return checkKeyType(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if err := checkKeyType(t.Field(i).Type); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("key type %s has no canonical encoding (use bool, numbers, strings, or structs and arrays of them, or implement weir.KeyEncoder)", t)
}

func appendReflect(dst []byte, v reflect.Value, nested bool) []byte {
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			return append(dst, 1)
		}
		return append(dst, 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return binary.BigEndian.AppendUint64(dst, uint64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return binary.BigEndian.AppendUint64(dst, v.Uint())
	case reflect.Float32, reflect.Float64:
		return binary.BigEndian.AppendUint64(dst, math.Float64bits(v.Float()))
	case reflect.String:
		if nested {
			dst = binary.AppendUvarint(dst, uint64(v.Len()))
		}
		return append(dst, v.String()...)
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			dst = appendReflect(dst, v.Index(i), true)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			dst = appendReflect(dst, v.Field(i), true)
		}
	}
	return dst
}

// kvKeyer implements contract.Keyer for collections of KV[K, V].
type kvKeyer[K comparable, V any] struct {
	appendKey func([]byte, K) []byte
	// mark starts the stored encoding of every key of a step that
	// declares a re-key (RekeyFrom); nil otherwise.
	mark []byte
}

func (k kvKeyer[K, V]) AppendKey(dst []byte, v any) []byte {
	return k.appendKey(dst, v.(KV[K, V]).Key)
}

func (k kvKeyer[K, V]) Key(v any) any { return v.(KV[K, V]).Key }
