package diff

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// windowLayout is how window bounds are rendered in Row.Window: RFC 3339
// UTC with milliseconds, as mtime formats them, so that a window read from
// a file, a SQLite TEXT column or a PostgreSQL timestamptz has one text.
const windowLayout = "2006-01-02T15:04:05.000Z"

// Layout says how records — an output's rows as field maps: a JSON line, a
// CSV record, a row of a SQL table — become Rows: which fields are the key,
// which carry the window, which are compared.
type Layout struct {
	// Output names the output the rows belong to.
	Output string
	// Key lists the key fields; every record must carry them.
	Key []string
	// Window lists the fields that carry the window (window_start and
	// window_end for weir's outputs); a record without them, or with
	// nulls, is in the global window.
	Window []string
	// Values lists the compared fields; empty means every field that is
	// not a key, window or Ignore field.
	Values []string
	// Ignore lists fields left out of the compared values (bookkeeping
	// such as pane_index, generation, updated_at).
	Ignore []string
}

// Row turns a record into a Row of the layout. The pane index is 0 (see
// Ordinals); numbers are compared by value (425, 425.0 and "425" read from
// CSV as a number are equal), timestamps as RFC 3339 UTC with
// milliseconds.
func (l *Layout) Row(rec map[string]any) (Row, error) {
	km := make(map[string]any, len(l.Key))
	for _, f := range l.Key {
		v, ok := rec[f]
		if !ok {
			return Row{}, fmt.Errorf("the record has no key field %q (fields: %s)", f, fieldNames(rec))
		}
		km[f] = Normalize(v)
	}
	key, err := CanonicalJSON(km)
	if err != nil {
		return Row{}, err
	}
	win, err := l.window(rec)
	if err != nil {
		return Row{}, err
	}
	skip := map[string]bool{}
	for _, list := range [][]string{l.Key, l.Window, l.Ignore} {
		for _, f := range list {
			skip[f] = true
		}
	}
	vm := map[string]any{}
	if len(l.Values) > 0 {
		for _, f := range l.Values {
			v, ok := rec[f]
			if !ok {
				return Row{}, fmt.Errorf("the record has no value field %q (fields: %s)", f, fieldNames(rec))
			}
			vm[f] = Normalize(v)
		}
	} else {
		for f, v := range rec {
			if !skip[f] {
				vm[f] = Normalize(v)
			}
		}
	}
	val, err := CanonicalJSON(vm)
	if err != nil {
		return Row{}, err
	}
	return Row{Output: l.Output, Key: key, Window: win, Timing: TimingUnknown, Value: val}, nil
}

func (l *Layout) window(rec map[string]any) (string, error) {
	parts := make([]string, 0, len(l.Window))
	for _, f := range l.Window {
		v := rec[f]
		if v == nil {
			continue
		}
		s, err := windowBound(v)
		if err != nil {
			return "", fmt.Errorf("window field %q: %w", f, err)
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "global", nil
	}
	return strings.Join(parts, "/"), nil
}

// windowBound renders a window bound: a time, an RFC 3339 text, epoch
// milliseconds, or any other text as it is.
func windowBound(v any) (string, error) {
	switch x := v.(type) {
	case time.Time:
		return x.UTC().Format(windowLayout), nil
	case string:
		if t, err := time.Parse(time.RFC3339Nano, x); err == nil {
			return t.UTC().Format(windowLayout), nil
		}
		return x, nil
	}
	switch n := Normalize(v).(type) {
	case json.Number:
		ms, err := n.Int64()
		if err != nil {
			return "", fmt.Errorf("%s is neither a time nor epoch milliseconds", n)
		}
		return time.UnixMilli(ms).UTC().Format(windowLayout), nil
	case string:
		return n, nil
	}
	return "", fmt.Errorf("a %T is not a window bound", v)
}

// RejectRow turns a rejected element of an error output into a Row of
// output: either weir's error-output record {"element": ..., "error":
// {"reason", "step", "message"}, "source": ...} or a flat record with a
// "reason" field (the element is then every other field but "step",
// "message" and "error"). The element is the row's key, so that the same
// element rejected for another reason is a reject_reason_changed; it is
// also returned, for conservation. A record without a reason is an error.
func RejectRow(output string, rec map[string]any) (Row, map[string]any, error) {
	var reason string
	var element any
	if e, ok := rec["error"].(map[string]any); ok {
		reason, _ = e["reason"].(string)
		element = rec["element"]
	}
	if reason == "" {
		r, ok := rec["reason"].(string)
		if !ok || r == "" {
			return Row{}, nil, fmt.Errorf("the reject carries no reason (neither error.reason nor reason; fields: %s)", fieldNames(rec))
		}
		reason = r
		if el, ok := rec["element"]; ok {
			element = el
		} else {
			m := map[string]any{}
			for f, v := range rec {
				switch f {
				case "reason", "step", "message", "error", "source":
				default:
					m[f] = v
				}
			}
			element = m
		}
	}
	element = Normalize(element)
	key, err := CanonicalJSON(element)
	if err != nil {
		return Row{}, nil, err
	}
	el, _ := element.(map[string]any)
	return Row{Output: output, Key: key, Window: "global", Timing: TimingUnknown, Value: "{}", Reject: reason}, el, nil
}

// Normalize returns v in the form rows compare it: every number as a
// json.Number in its shortest text (425.0 is 425), times as RFC 3339 UTC
// with milliseconds, bytes as text, maps and lists element by element.
// Non-finite floats become their text (NaN, +Inf).
func Normalize(v any) any {
	switch x := v.(type) {
	case nil, bool, string:
		return x
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return json.Number(strconv.FormatInt(i, 10))
		}
		if f, err := strconv.ParseFloat(string(x), 64); err == nil {
			return Normalize(f)
		}
		return string(x)
	case int:
		return json.Number(strconv.FormatInt(int64(x), 10))
	case int8:
		return json.Number(strconv.FormatInt(int64(x), 10))
	case int16:
		return json.Number(strconv.FormatInt(int64(x), 10))
	case int32:
		return json.Number(strconv.FormatInt(int64(x), 10))
	case int64:
		return json.Number(strconv.FormatInt(x, 10))
	case uint8:
		return json.Number(strconv.FormatUint(uint64(x), 10))
	case uint16:
		return json.Number(strconv.FormatUint(uint64(x), 10))
	case uint32:
		return json.Number(strconv.FormatUint(uint64(x), 10))
	case uint64:
		return json.Number(strconv.FormatUint(x, 10))
	case float32:
		return Normalize(float64(x))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return strconv.FormatFloat(x, 'g', -1, 64)
		}
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return json.Number(strconv.FormatInt(int64(x), 10))
		}
		return json.Number(strconv.FormatFloat(x, 'g', -1, 64))
	case time.Time:
		return x.UTC().Format(windowLayout)
	case []byte:
		return string(x)
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = Normalize(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = Normalize(e)
		}
		return l
	}
	return fmt.Sprint(v)
}

// fieldNames lists a record's field names, sorted, for messages.
func fieldNames(rec map[string]any) string {
	names := make([]string, 0, len(rec))
	for f := range rec {
		names = append(names, f)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// Ordinals numbers the rows of each group (output, key and window) of a
// sorted reader 0, 1, 2... in their order, as their pane index: rows read
// from a table or a file carry no pane, and several rows of one key and
// window (an append table, duplicates) then pair up by position.
func Ordinals(r RowReader) RowReader { return &ordinals{r: r} }

type ordinals struct {
	r    RowReader
	prev Row
	n    int64
	seen bool
}

// Next implements RowReader.
func (o *ordinals) Next() (Row, bool, error) {
	row, ok, err := o.r.Next()
	if err != nil || !ok {
		return row, ok, err
	}
	if o.seen && row.sameGroup(&o.prev) {
		o.n++
	} else {
		o.n = 0
	}
	o.prev, o.seen = row, true
	row.PaneIndex = o.n
	return row, true, nil
}
