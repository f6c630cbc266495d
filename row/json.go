package row

import (
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// AppendJSON appends r as a JSON object, fields in schema order.
// Timestamps are RFC 3339 UTC strings with milliseconds. It is
// AppendJSONOmitting without the check for omitted fields, kept apart so
// that every row the JSON sinks write does not pay it (BenchmarkAppendJSON
// could not tell the two apart within this machine's noise, ±20%).
func AppendJSON(dst []byte, r *Row) []byte {
	if r == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '{')
	for i, f := range r.Schema.Fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendJSONString(dst, f.Name)
		dst = append(dst, ':')
		var v any
		if i < len(r.Values) {
			v = r.Values[i]
		}
		dst = AppendJSONValue(dst, v)
	}
	return append(dst, '}')
}

// AppendJSONOmitting is AppendJSON leaving out the fields at the
// positions in omit (a few: each field looks them up).
func AppendJSONOmitting(dst []byte, r *Row, omit []int) []byte {
	if r == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '{')
	first := true
	for i, f := range r.Schema.Fields {
		if len(omit) > 0 && slices.Contains(omit, i) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = AppendJSONString(dst, f.Name)
		dst = append(dst, ':')
		var v any
		if i < len(r.Values) {
			v = r.Values[i]
		}
		dst = AppendJSONValue(dst, v)
	}
	return append(dst, '}')
}

// AppendJSONValue appends any row value (and common Go values) as JSON.
// Unknown types are encoded with encoding/json.
func AppendJSONValue(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case int:
		return strconv.AppendInt(dst, int64(x), 10)
	case uint64:
		return strconv.AppendUint(dst, x, 10)
	case float64:
		return appendFloat(dst, x)
	case bool:
		return strconv.AppendBool(dst, x)
	case string:
		return AppendJSONString(dst, x)
	case mtime.Time:
		// A timestamp's characters need no escaping.
		return append(x.AppendFormat(append(dst, '"')), '"')
	case *Row:
		return AppendJSON(dst, x)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendJSONValue(dst, e)
		}
		return append(dst, ']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendJSONString(dst, k)
			dst = append(dst, ':')
			dst = AppendJSONValue(dst, x[k])
		}
		return append(dst, '}')
	case json.Number:
		return append(dst, x...)
	case contract.Reject:
		return AppendJSON(dst, FromReject(x))
	case window.PaneInfo:
		return AppendJSON(dst, PaneRow(x))
	}
	b, err := json.Marshal(v)
	if err != nil {
		return AppendJSONString(dst, err.Error())
	}
	return append(dst, b...)
}

// appendFloat formats f as encoding/json does; NaN and ±Inf become null.
func appendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string literal. Invalid UTF-8 is
// replaced by U+FFFD.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
