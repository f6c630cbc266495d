package pyrepr

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// AppendStr appends v as Python's str() prints it (Beam's WriteToText
// writes str(value)).
func AppendStr(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "None"...)
	case string:
		return append(dst, x...)
	case bool:
		if x {
			return append(dst, "True"...)
		}
		return append(dst, "False"...)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case float64:
		return AppendFloat(dst, x)
	case mtime.Time:
		return x.AppendFormat(dst)
	}
	return AppendJSON(dst, v)
}

// AppendJSON appends v as Python's json.dumps prints it, the way Beam's
// LogForTesting logs elements: ", " and ": " separators, non-ASCII as \u
// escapes, floats always with a decimal point or an exponent (1.0, 1e-05),
// NaN and Infinity; rows are objects, timestamps RFC 3339 strings.
func AppendJSON(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		if x {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case float64:
		return AppendFloat(dst, x)
	case string:
		return AppendString(dst, x)
	case mtime.Time:
		return AppendString(dst, x.Format())
	case *row.Row:
		dst = append(dst, '{')
		for i, f := range x.Schema.Fields {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = AppendString(dst, f.Name)
			dst = append(dst, ": "...)
			var fv any
			if i < len(x.Values) {
				fv = x.Values[i]
			}
			dst = AppendJSON(dst, fv)
		}
		return append(dst, '}')
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = AppendJSON(dst, e)
		}
		return append(dst, ']')
	case contract.Reject:
		return AppendJSON(dst, row.FromReject(x))
	case map[string]any:
		// A dict (of a field of type any): keys sorted, as a Go map has no order.
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = append(AppendString(dst, k), ": "...)
			dst = AppendJSON(dst, x[k])
		}
		return append(dst, '}')
	}
	if r, ok := row.AsRow(v); ok {
		return AppendJSON(dst, r)
	}
	// Anything else (maps of any fields): encoded as weir's JSON.
	return row.AppendJSONValue(dst, v)
}

// AppendFloat formats f as Python's repr does.
func AppendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	}
	exp := 0
	if f != 0 {
		exp = int(math.Floor(math.Log10(math.Abs(f))))
		// Log10 can be off by one at powers of ten: ask the shortest 'e' form.
		e := strconv.FormatFloat(f, 'e', -1, 64)
		if i := strings.IndexByte(e, 'e'); i >= 0 {
			exp, _ = strconv.Atoi(e[i+1:])
		}
	}
	if exp < -4 || exp >= 16 {
		return strconv.AppendFloat(dst, f, 'e', -1, 64)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'f', -1, 64)
	if !strings.ContainsRune(string(dst[start:]), '.') {
		dst = append(dst, ".0"...)
	}
	return dst
}

// AppendString appends s as a JSON string with Python's ensure_ascii.
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	u4 := func(dst []byte, r rune) []byte {
		return append(dst, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
	}
	dst = append(dst, '"')
	for _, r := range s {
		switch {
		case r == '"':
			dst = append(dst, '\\', '"')
		case r == '\\':
			dst = append(dst, '\\', '\\')
		case r == '\n':
			dst = append(dst, '\\', 'n')
		case r == '\r':
			dst = append(dst, '\\', 'r')
		case r == '\t':
			dst = append(dst, '\\', 't')
		case r == '\b':
			dst = append(dst, '\\', 'b')
		case r == '\f':
			dst = append(dst, '\\', 'f')
		case r < 0x20 || (r >= 0x7f && r < utf8.RuneSelf):
			dst = u4(dst, r)
		case r < utf8.RuneSelf:
			dst = append(dst, byte(r))
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			dst = u4(u4(dst, r1), r2)
		default:
			dst = u4(dst, r)
		}
	}
	return append(dst, '"')
}
