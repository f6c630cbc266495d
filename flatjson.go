package weir

import (
	"encoding"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/weir-dev/weir/internal/jsonscan"
)

// flatJSON reads the JSON that encoding/json writes for a struct whose
// fields are all numbers, strings or bools — the usual accumulator, such as
// struct{ N, Total int64 } — without encoding/json's reflection per field
// and per value: a restore decodes one accumulator per key, millions of
// them. It reads only what it can read exactly as json.Unmarshal does (the
// fields by their exact JSON names, plain numbers, strings without escapes)
// and reports false for anything else, which the caller then gives to
// json.Unmarshal: the result is always json.Unmarshal's.
type flatJSON struct {
	fields []flatField
	// writes says whether append may write the type (encoding/json writes
	// it without a method of the type's or its fields').
	writes bool
}

// flatField is one field of a flatJSON struct: its JSON name, its index in
// the struct and its kind.
type flatField struct {
	name  string
	index int
	kind  reflect.Kind
	// omitEmpty and omitZero are the tag's options.
	omitEmpty, omitZero bool
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	jsonMarshalerType   = reflect.TypeFor[json.Marshaler]()
	textMarshalerType   = reflect.TypeFor[encoding.TextMarshaler]()
)

// newFlatJSON returns the reader of T, or nil when T is not a struct of
// number, string and bool fields that encoding/json reads by name alone (a
// type with its own unmarshalling, an embedded or tagged ",string" field,
// a field of any other kind).
func newFlatJSON[T any]() *flatJSON {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct || customUnmarshal(t) {
		return nil
	}
	f := &flatJSON{writes: !customMarshal(t)}
	seen := map[string]bool{}
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Anonymous {
			return nil
		}
		if !sf.IsExported() {
			continue
		}
		fld := flatField{name: sf.Name, index: i, kind: sf.Type.Kind()}
		if tag, ok := sf.Tag.Lookup("json"); ok {
			if tag == "-" {
				continue
			}
			n, opts, _ := strings.Cut(tag, ",")
			for o := range strings.SplitSeq(opts, ",") {
				switch o {
				case "":
				case "omitempty":
					fld.omitEmpty = true
				case "omitzero":
					fld.omitZero = true
				default:
					return nil
				}
			}
			if n != "" {
				if !plainName(n) {
					return nil
				}
				fld.name = n
			}
		}
		switch sf.Type.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Float32, reflect.Float64, reflect.String, reflect.Bool:
		default:
			return nil
		}
		if customUnmarshal(sf.Type) || seen[fld.name] {
			return nil
		}
		if customMarshal(sf.Type) || fld.omitZero && hasIsZero(sf.Type) {
			// encoding/json writes the field through its methods (omitzero
			// asks the type's own IsZero).
			f.writes = false
		}
		seen[fld.name] = true
		f.fields = append(f.fields, fld)
	}
	return f
}

// customUnmarshal reports whether encoding/json reads t through a method
// of t's.
func customUnmarshal(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(jsonUnmarshalerType) || p.Implements(jsonUnmarshalerType) ||
		t.Implements(textUnmarshalerType) || p.Implements(textUnmarshalerType)
}

// hasIsZero reports whether t or *t has an IsZero method.
func hasIsZero(t reflect.Type) bool {
	_, ok := t.MethodByName("IsZero")
	_, pok := reflect.PointerTo(t).MethodByName("IsZero")
	return ok || pok
}

// customMarshal reports whether encoding/json writes t through a method
// of t's.
func customMarshal(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(jsonMarshalerType) || p.Implements(jsonMarshalerType) ||
		t.Implements(textMarshalerType) || p.Implements(textMarshalerType)
}

// append appends v, a struct of the reader's type, as json.Marshal writes
// it, and reports whether it could: false for a type the writer does not
// write, a string that encoding/json would escape, a float that is not
// finite (json.Marshal's error), and then dst is returned as it was.
func (f *flatJSON) append(dst []byte, v reflect.Value) ([]byte, bool) {
	if !f.writes {
		return dst, false
	}
	out := append(dst, '{')
	first := true
	for k := range f.fields {
		fld := &f.fields[k]
		fv := v.Field(fld.index)
		if fld.omitEmpty && emptyValue(fv) || fld.omitZero && fv.IsZero() {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, '"')
		out = append(out, fld.name...)
		out = append(out, '"', ':')
		var ok bool
		if out, ok = appendFlatValue(out, fv); !ok {
			return dst, false
		}
	}
	return append(out, '}'), true
}

// emptyValue is encoding/json's omitempty test for the flat kinds.
func emptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint() == 0
	}
	return v.Int() == 0
}

// appendFlatValue appends one field's value as encoding/json writes it.
func appendFlatValue(out []byte, v reflect.Value) ([]byte, bool) {
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		for i := 0; i < len(s); i++ {
			// Anything encoding/json escapes or checks (controls, quotes,
			// HTML characters, every non-ASCII byte) is left to it.
			if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return out, false
			}
		}
		out = append(out, '"')
		out = append(out, s...)
		return append(out, '"'), true
	case reflect.Bool:
		return strconv.AppendBool(out, v.Bool()), true
	case reflect.Float32, reflect.Float64:
		return appendJSONFloat(out, v.Float(), v.Type().Bits())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.AppendUint(out, v.Uint(), 10), true
	}
	return strconv.AppendInt(out, v.Int(), 10), true
}

// appendJSONFloat appends x as encoding/json writes a float of the given
// bits: the shortest decimal that reads back, in exponent form below 1e-6
// and from 1e21, with a one-digit negative exponent written without its 0.
func appendJSONFloat(out []byte, x float64, bits int) ([]byte, bool) {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return out, false
	}
	format := byte('f')
	if abs := math.Abs(x); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	out = strconv.AppendFloat(out, x, format, -1, bits)
	if format == 'e' {
		if n := len(out); n >= 4 && out[n-4] == 'e' && out[n-3] == '-' && out[n-2] == '0' {
			out[n-2] = out[n-1]
			out = out[:n-1]
		}
	}
	return out, true
}

// plainName reports whether a tag's name is letters, digits and
// underscores (names encoding/json takes as they are).
func plainName(s string) bool {
	for _, r := range s {
		if r != '_' && !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

// decode reads b into v, a zero struct of the reader's type, and reports
// whether it could; after false, v may hold some fields and the caller
// starts again from a zero value.
func (f *flatJSON) decode(b []byte, v reflect.Value) bool {
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return jsonscan.SkipSpace(b, i+1) == len(b)
	}
	for {
		key, j, ok := jsonscan.StringAt(b, i)
		if !ok {
			return false
		}
		fld := f.field(key)
		if fld == nil {
			return false
		}
		i = jsonscan.SkipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = jsonscan.SkipSpace(b, i+1)
		if i, ok = fld.set(b, i, v.Field(fld.index)); !ok {
			return false
		}
		i = jsonscan.SkipSpace(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = jsonscan.SkipSpace(b, i+1)
		case '}':
			return jsonscan.SkipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

// field returns the field of JSON name key, matched exactly.
func (f *flatJSON) field(key []byte) *flatField {
	for k := range f.fields {
		if f.fields[k].name == string(key) {
			return &f.fields[k]
		}
	}
	return nil
}

// set reads the value at b[i:] into v and returns where it ends.
func (fld *flatField) set(b []byte, i int, v reflect.Value) (int, bool) {
	switch fld.kind {
	case reflect.String:
		s, j, ok := jsonscan.StringAt(b, i)
		if !ok {
			return 0, false
		}
		v.SetString(string(s))
		return j, true
	case reflect.Bool:
		switch {
		case strings.HasPrefix(string(b[i:]), "true"):
			v.SetBool(true)
			return i + 4, true
		case strings.HasPrefix(string(b[i:]), "false"):
			v.SetBool(false)
			return i + 5, true
		}
		return 0, false
	}
	j := jsonscan.NumberEnd(b, i)
	lit := b[i:j]
	if !jsonscan.Number(lit) {
		return 0, false
	}
	switch fld.kind {
	case reflect.Float32, reflect.Float64:
		x, err := strconv.ParseFloat(string(lit), v.Type().Bits())
		if err != nil {
			return 0, false
		}
		v.SetFloat(x)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		x, err := strconv.ParseUint(string(lit), 10, v.Type().Bits())
		if err != nil {
			return 0, false
		}
		v.SetUint(x)
	default:
		x, err := strconv.ParseInt(string(lit), 10, v.Type().Bits())
		if err != nil {
			return 0, false
		}
		v.SetInt(x)
	}
	return j, true
}
