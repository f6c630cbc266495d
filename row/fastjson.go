package row

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/weir-dev/weir/internal/jsonscan"
)

// DecodeFlatJSON fills r (of schema s) from a JSON object whose values are
// plain scalars, without building a map: the common shape of messages and
// JSON lines. It handles only the happy path — keys and strings without
// escapes; numbers, booleans, null and strings matching their field's
// kind; no nested objects or arrays — and reports ok false for anything
// else (malformed input included), in which case the caller decodes the
// general way, which also words the errors. Fields absent from the object
// are null; keys absent from the schema are ignored; a repeated key keeps
// its last value, as encoding/json does.
func DecodeFlatJSON(data []byte, s *Schema, r *Row) (ok bool) {
	i := jsonscan.SkipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = jsonscan.SkipSpace(data, i+1)
	for k := range r.Values {
		r.Values[k] = nil
	}
	if i < len(data) && data[i] == '}' {
		return jsonscan.SkipSpace(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return false
		}
		end := bytes.IndexByte(data[i+1:], '"')
		if end < 0 {
			return false
		}
		key := data[i+1 : i+1+end]
		if !jsonscan.PlainString(key) {
			return false
		}
		i = jsonscan.SkipSpace(data, i+2+end)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		i = jsonscan.SkipSpace(data, i+1)
		if i >= len(data) {
			return false
		}
		// The value token.
		var tok []byte
		isString := false
		switch c := data[i]; {
		case c == '"':
			e := bytes.IndexByte(data[i+1:], '"')
			if e < 0 {
				return false
			}
			tok = data[i+1 : i+1+e]
			if !jsonscan.PlainString(tok) {
				return false
			}
			isString = true
			i += 2 + e
		case c == '{' || c == '[':
			return false
		default:
			j := i
			for j < len(data) && data[j] != ',' && data[j] != '}' && data[j] != ' ' && data[j] != '\t' && data[j] != '\n' && data[j] != '\r' {
				j++
			}
			tok = data[i:j]
			i = j
			if t := string(tok); t != "null" && t != "true" && t != "false" && !jsonscan.Number(tok) {
				return false // not a JSON scalar, whether or not the schema has the key
			}
		}
		if f := s.indexBytes(key); f >= 0 {
			v, ok := scalar(tok, isString, s.Fields[f].Type.Kind)
			if !ok {
				return false
			}
			r.Values[f] = v
		}
		i = jsonscan.SkipSpace(data, i)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = jsonscan.SkipSpace(data, i+1)
		case '}':
			return jsonscan.SkipSpace(data, i+1) == len(data)
		default:
			return false
		}
	}
}

// indexBytes is Index for a key held in a byte slice.
func (s *Schema) indexBytes(name []byte) int {
	for i, f := range s.Fields {
		if f.Name == string(name) {
			return i
		}
	}
	return -1
}

// scalar converts one JSON token to a value of kind k, on the happy path,
// exactly as FromJSON converts what encoding/json decoded.
func scalar(tok []byte, isString bool, k Kind) (any, bool) {
	if !isString {
		switch string(tok) {
		case "null":
			return nil, true
		case "true", "false":
			if k == KindBool {
				return string(tok) == "true", true
			}
			return nil, false
		}
		if !jsonscan.Number(tok) {
			return nil, false
		}
	}
	switch k {
	case KindString:
		if isString {
			return string(tok), true
		}
	case KindInt:
		if !isString {
			if n, err := strconv.ParseInt(string(tok), 10, 64); err == nil {
				return n, true
			}
		}
	case KindFloat:
		if !isString {
			if f, err := strconv.ParseFloat(string(tok), 64); err == nil {
				return f, true
			}
		}
	case KindTimestamp:
		var v any = json.Number(tok)
		if isString {
			v = string(tok)
		}
		if t, err := ToTimestamp(v); err == nil {
			return t, true
		}
	}
	return nil, false
}
