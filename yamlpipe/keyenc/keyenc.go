package keyenc

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
)

// The tags: each encoded value starts with one. Their numbers are stored
// in checkpoints and never change.
const (
	tagNull byte = iota
	tagInt
	tagFloat
	tagBool
	tagString
	tagTime
	tagOther
	// tagList is a list in an accumulator's slot (group, concat, top): a
	// uvarint length and the values. Keys keep tagOther for lists.
	tagList
)

// ErrCorruptValue is the error of stored state whose value does not
// decode (Read).
var ErrCorruptValue = errors.New("corrupt combine state value")

// errCorruptKey is the error of a key encoding that does not decode (made
// on failure only: decoding a key allocates nothing else).
func errCorruptKey() error { return fmt.Errorf("corrupt combine key") }

// Append appends v's encoding to dst: null, int64, float64, bool, string
// and mtime.Time have their own tags; any other value (a list, a map, a
// row) is its JSON text.
func Append(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, tagNull)
	case int64:
		return binary.BigEndian.AppendUint64(append(dst, tagInt), uint64(x))
	case float64:
		return binary.BigEndian.AppendUint64(append(dst, tagFloat), math.Float64bits(x))
	case bool:
		if x {
			return append(dst, tagBool, 1)
		}
		return append(dst, tagBool, 0)
	case string:
		dst = binary.AppendUvarint(append(dst, tagString), uint64(len(x)))
		return append(dst, x...)
	case mtime.Time:
		return binary.BigEndian.AppendUint64(append(dst, tagTime), uint64(x))
	}
	b := row.AppendJSONValue(nil, v)
	dst = binary.AppendUvarint(append(dst, tagOther), uint64(len(b)))
	return append(dst, b...)
}

// AppendState appends a state value's encoding: lists element by element
// (so integers in them stay integers), anything else as Append writes it.
func AppendState(dst []byte, v any) []byte {
	l, ok := v.([]any)
	if !ok {
		return Append(dst, v)
	}
	dst = binary.AppendUvarint(append(dst, tagList), uint64(len(l)))
	for _, e := range l {
		dst = AppendState(dst, e)
	}
	return dst
}

// Read reads one value written by Append or AppendState and returns it
// with the bytes after it. A value written as JSON text comes back as
// encoding/json decodes it into an any.
func Read(b []byte) (any, []byte, error) { return read(b, true) }

// Skip returns b after the value Read would read from its start, without
// decoding it (nothing is allocated), or ErrCorruptValue when b does not
// start with a whole value. A JSON value (tagOther) is not parsed.
func Skip(b []byte) ([]byte, error) {
	_, rest, err := read(b, false)
	return rest, err
}

// read is Read, decoding the value only when decode is set (Skip).
func read(b []byte, decode bool) (any, []byte, error) {
	bad := ErrCorruptValue
	if len(b) == 0 {
		return nil, nil, bad
	}
	tag, b := b[0], b[1:]
	switch tag {
	case tagNull:
		return nil, b, nil
	case tagInt, tagFloat, tagTime:
		if len(b) < 8 {
			return nil, nil, bad
		}
		if !decode {
			return nil, b[8:], nil
		}
		return fixed(tag, binary.BigEndian.Uint64(b)), b[8:], nil
	case tagBool:
		if len(b) < 1 {
			return nil, nil, bad
		}
		return b[0] == 1, b[1:], nil
	case tagList:
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)) {
			return nil, nil, bad
		}
		b = b[k:]
		var l []any
		if decode {
			l = make([]any, n)
		}
		for i := range n {
			var v any
			var err error
			if v, b, err = read(b, decode); err != nil {
				return nil, nil, err
			}
			if decode {
				l[i] = v
			}
		}
		if !decode {
			return nil, b, nil
		}
		return l, b, nil
	case tagString, tagOther:
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, nil, bad
		}
		s, rest := b[k:k+int(n)], b[k+int(n):]
		switch {
		case !decode:
			return nil, rest, nil
		case tag == tagString:
			return string(s), rest, nil
		}
		var v any
		if err := json.Unmarshal(s, &v); err != nil {
			return nil, nil, fmt.Errorf("decoding a combine state value: %w", err)
		}
		return v, rest, nil
	}
	return nil, nil, bad
}

// ReadString is Read over a key's encoding held as a string: a string
// value is a substring of enc, not a copy, and reading a scalar allocates
// nothing but its interface value.
func ReadString(enc string) (any, string, error) {
	if enc == "" {
		return nil, "", errCorruptKey()
	}
	tag, rest := enc[0], enc[1:]
	switch tag {
	case tagNull:
		return nil, rest, nil
	case tagInt, tagFloat, tagTime:
		if len(rest) < 8 {
			return nil, "", errCorruptKey()
		}
		// A short conversion to []byte that does not escape is not a
		// heap allocation.
		return fixed(tag, binary.BigEndian.Uint64([]byte(rest[:8]))), rest[8:], nil
	case tagBool:
		if rest == "" {
			return nil, "", errCorruptKey()
		}
		return rest[0] == 1, rest[1:], nil
	case tagString:
		n, k := binary.Uvarint([]byte(rest[:min(len(rest), binary.MaxVarintLen64)]))
		if k <= 0 {
			return nil, "", errCorruptKey()
		}
		if uint64(len(rest)-k) < n {
			return nil, "", errCorruptKey()
		}
		return rest[k : k+int(n)], rest[k+int(n):], nil
	}
	v, left, err := Read([]byte(enc))
	if err != nil {
		return nil, "", err
	}
	return v, enc[len(enc)-len(left):], nil
}

// fixed is the value of an 8-byte value (tagInt, tagFloat or tagTime)
// whose bytes read u.
func fixed(tag byte, u uint64) any {
	switch tag {
	case tagInt:
		return int64(u)
	case tagFloat:
		return math.Float64frombits(u)
	}
	return mtime.Time(u)
}
