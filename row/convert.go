package row

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// The schemas below are built once and never modified.
var (
	windowSchema = MustSchema(
		Field{Name: "start", Type: Of(KindTimestamp)},
		Field{Name: "end", Type: Of(KindTimestamp)},
	)
	errorSchema = MustSchema(
		Field{Name: "step", Type: Of(KindString)},
		Field{Name: "reason", Type: Of(KindString)},
		Field{Name: "message", Type: Of(KindString)},
		// window and watermark are set on too_late rejects only.
		Field{Name: "window", Type: RowOf(windowSchema)},
		Field{Name: "watermark", Type: Of(KindTimestamp)},
	)
	positionSchema = MustSchema(
		Field{Name: "source", Type: Of(KindString)},
		Field{Name: "offset", Type: Of(KindInt)},
	)
	rejectSchema = MustSchema(
		Field{Name: "element", Type: Of(KindAny)},
		Field{Name: "error", Type: RowOf(errorSchema)},
		Field{Name: "source", Type: RowOf(positionSchema)},
	)
	paneSchema = MustSchema(
		Field{Name: "index", Type: Of(KindInt)},
		Field{Name: "timing", Type: Of(KindString)},
		Field{Name: "is_first", Type: Of(KindBool)},
		Field{Name: "is_last", Type: Of(KindBool)},
	)
)

// RejectSchema is the schema of error-output rows: {element, error: {step,
// reason, message, window: {start, end}, watermark}, source: {source,
// offset}}. error.window and error.watermark are set on too_late rejects
// (the window the element was late for and the step's watermark then) and
// null otherwise.
// The returned schema is shared: do not modify it.
func RejectSchema() *Schema { return rejectSchema }

// PaneSchema is the schema of the pane field of windowed results:
// {index, timing, is_first, is_last}. The returned schema is shared.
func PaneSchema() *Schema { return paneSchema }

// FromReject converts a runner reject into an error-output row. A rejected
// element that is itself a reject is converted too.
func FromReject(rj contract.Reject) *Row {
	var src any
	if rj.Source != nil {
		src = &Row{Schema: positionSchema, Values: []any{rj.Source.Source, rj.Source.Offset}}
	}
	elem := rj.Element
	switch x := elem.(type) {
	case contract.Reject:
		elem = FromReject(x)
	case *contract.Reject:
		elem = FromReject(*x)
	}
	var win, wm any
	if rj.Late != nil {
		if !rj.Late.Window.IsGlobal() {
			win = &Row{Schema: windowSchema, Values: []any{rj.Late.Window.Start, rj.Late.Window.End}}
		}
		wm = rj.Late.Watermark
	}
	return &Row{Schema: rejectSchema, Values: []any{
		elem,
		&Row{Schema: errorSchema, Values: []any{rj.Step, rj.Reason, rj.Message, win, wm}},
		src,
	}}
}

// PaneRow converts a pane into a row of PaneSchema.
func PaneRow(p window.PaneInfo) *Row {
	return &Row{Schema: paneSchema, Values: []any{p.Index, p.Timing.String(), p.IsFirst, p.IsLast}}
}

// AsRow returns v as a row: rows as they are, runner rejects converted with
// FromReject. ok is false for any other value.
func AsRow(v any) (r *Row, ok bool) {
	switch x := v.(type) {
	case *Row:
		return x, x != nil
	case contract.Reject:
		return FromReject(x), true
	case *contract.Reject:
		return FromReject(*x), x != nil
	}
	return nil, false
}

// MinMillis is the smallest magnitude a numeric timestamp may have: 10^11
// milliseconds (1973-03-03). A number below it is plainly seconds since the
// epoch, not milliseconds; ToTimestamp refuses it with ErrTimestampInSeconds
// rather than read it as an instant of January 1970.
const MinMillis = 100_000_000_000

// ErrTimestampInSeconds is wrapped by ToTimestamp's error for a numeric
// timestamp below MinMillis: it looks like seconds, not milliseconds.
// Connectors reject such an element with reason "timestamp_in_seconds".
var ErrTimestampInSeconds = errors.New("timestamp in seconds")

// millis checks that n is plausibly epoch milliseconds.
func millis(n int64) (mtime.Time, error) {
	if n > -MinMillis && n < MinMillis {
		return 0, fmt.Errorf("%w: %d is below 10^11, so it reads as seconds since the epoch, not milliseconds "+
			"(as milliseconds it would be %s); send epoch milliseconds (%d) or an RFC 3339 string",
			ErrTimestampInSeconds, n, mtime.Time(n), n*1000)
	}
	return mtime.Time(n), nil
}

// ToTimestamp converts an event-time value: an mtime.Time, an RFC 3339
// string, or an integer count of milliseconds since the Unix epoch. A
// number whose magnitude is below MinMillis is an error wrapping
// ErrTimestampInSeconds.
func ToTimestamp(v any) (mtime.Time, error) {
	switch x := v.(type) {
	case mtime.Time:
		return x, nil
	case int64:
		return millis(x)
	case int:
		return millis(int64(x))
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) {
			return 0, fmt.Errorf("timestamp %v is not a whole number of milliseconds", x)
		}
		if math.Abs(x) < MinMillis {
			return millis(int64(x))
		}
		return mtime.Time(x), nil
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			return 0, fmt.Errorf("timestamp %s is not an integer number of milliseconds", x)
		}
		return millis(n)
	case string:
		if n, err := strconv.ParseInt(x, 10, 64); err == nil {
			return millis(n)
		}
		return mtime.Parse(x)
	case nil:
		return 0, fmt.Errorf("timestamp is missing (null)")
	}
	return 0, fmt.Errorf("timestamp has type %s; want an RFC 3339 string or epoch milliseconds", GoTypeName(v))
}

// GoTypeName names the row kind of a Go value, for messages.
func GoTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case int64, int, json.Number:
		if n, ok := v.(json.Number); ok {
			if _, err := n.Int64(); err != nil {
				return "float"
			}
		}
		return "int"
	case float64:
		return "float"
	case bool:
		return "bool"
	case string:
		return "string"
	case mtime.Time:
		return "timestamp"
	case *Row, map[string]any:
		return "object"
	case []any:
		return "list"
	}
	return fmt.Sprintf("%T", v)
}

// FromJSON converts a value decoded by encoding/json (with UseNumber) to a
// value of type t. A null stays nil. A value that does not fit t is an
// error naming both types.
func FromJSON(v any, t Type) (any, error) {
	if v == nil {
		return nil, nil
	}
	mismatch := func() error {
		return fmt.Errorf("want %s, got %s %s", t, GoTypeName(v), shortJSON(v))
	}
	switch t.Kind {
	case KindInt:
		switch x := v.(type) {
		case json.Number:
			if n, err := x.Int64(); err == nil {
				return n, nil
			}
			if f, err := x.Float64(); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<63 {
				return int64(f), nil
			}
		case int64:
			return x, nil
		case float64:
			if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
				return int64(x), nil
			}
		}
		return nil, mismatch()
	case KindFloat:
		switch x := v.(type) {
		case json.Number:
			if f, err := x.Float64(); err == nil {
				return f, nil
			}
		case float64:
			return x, nil
		case int64:
			return float64(x), nil
		}
		return nil, mismatch()
	case KindBool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return nil, mismatch()
	case KindString:
		if s, ok := v.(string); ok {
			return s, nil
		}
		return nil, mismatch()
	case KindTimestamp:
		switch v.(type) {
		case string, json.Number, int64, mtime.Time:
			ts, err := ToTimestamp(v)
			if err != nil {
				return nil, fmt.Errorf("want timestamp: %w", err)
			}
			return ts, nil
		}
		return nil, mismatch()
	case KindRow:
		m, ok := v.(map[string]any)
		if !ok || t.Row == nil {
			return nil, mismatch()
		}
		r := New(t.Row)
		for i, f := range t.Row.Fields {
			x, err := FromJSON(m[f.Name], f.Type)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", f.Name, err)
			}
			r.Values[i] = x
		}
		return r, nil
	case KindList:
		l, ok := v.([]any)
		if !ok {
			return nil, mismatch()
		}
		elem := Of(KindAny)
		if t.Elem != nil {
			elem = *t.Elem
		}
		out := make([]any, len(l))
		for i, e := range l {
			x, err := FromJSON(e, elem)
			if err != nil {
				return nil, fmt.Errorf("item %d: %w", i, err)
			}
			out[i] = x
		}
		return out, nil
	}
	return normalizeJSON(v), nil
}

// normalizeJSON turns json.Number into int64 or float64, recursively.
func normalizeJSON(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeJSON(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = normalizeJSON(e)
		}
		return x
	}
	return v
}

func shortJSON(v any) string {
	b := AppendJSONValue(nil, v)
	if len(b) > 40 {
		return string(b[:37]) + "..."
	}
	return string(b)
}

// ParseText converts a text cell (a CSV field) to a value of type t. An
// empty cell is null for every type but string.
func ParseText(s string, t Type) (any, error) {
	if s == "" && t.Kind != KindString && t.Kind != KindAny {
		return nil, nil
	}
	switch t.Kind {
	case KindString, KindAny:
		return s, nil
	case KindInt:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("want int, got %q", s)
		}
		return n, nil
	case KindFloat:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, fmt.Errorf("want float, got %q", s)
		}
		return f, nil
	case KindBool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("want bool, got %q", s)
		}
		return b, nil
	case KindTimestamp:
		ts, err := ToTimestamp(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("want timestamp: %w", err)
		}
		return ts, nil
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("want %s as JSON, got %q", t, s)
	}
	return FromJSON(v, t)
}

// AppendText appends v as a text cell (a CSV field): null is empty,
// timestamps are RFC 3339 with milliseconds, rows and lists are JSON.
func AppendText(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return dst
	case string:
		return append(dst, x...)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case float64:
		return appendFloat(dst, x)
	case bool:
		return strconv.AppendBool(dst, x)
	case mtime.Time:
		return x.AppendFormat(dst)
	}
	return AppendJSONValue(dst, v)
}
