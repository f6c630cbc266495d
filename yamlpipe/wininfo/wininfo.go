package wininfo

import (
	"fmt"
	"math"
	"strconv"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// Info is one piece of element metadata ExtractWindowingInfo can
// extract.
type Info string

// The metadata ExtractWindowingInfo knows, with Beam's names.
const (
	Timestamp    Info = "timestamp"
	WindowStart  Info = "window_start"
	WindowEnd    Info = "window_end"
	WindowString Info = "window_string"
	WindowType   Info = "window_type"
	WindowObject Info = "window_object"
	PaneInfo     Info = "pane_info"
)

// All lists the metadata ExtractWindowingInfo knows, for messages.
var All = []Info{Timestamp, WindowStart, WindowEnd, WindowString, WindowType, WindowObject, PaneInfo}

// windowObjectSchema is the row weir gives for window_object: the window's
// bounds, null for the global window.
var windowObjectSchema = row.MustSchema(
	row.Field{Name: "start", Type: row.Of(row.KindTimestamp)},
	row.Field{Name: "end", Type: row.Of(row.KindTimestamp)},
)

// Type is the row type of w's field.
func (w Info) Type() row.Type {
	switch w {
	case Timestamp, WindowStart, WindowEnd:
		return row.Of(row.KindTimestamp)
	case WindowString, WindowType:
		return row.Of(row.KindString)
	case WindowObject:
		return row.RowOf(windowObjectSchema)
	}
	return row.RowOf(row.PaneSchema())
}

// beamSeconds renders an event time as Beam's Timestamp prints in a window
// string: seconds with a decimal point.
func beamSeconds(t mtime.Time) string {
	s := strconv.FormatFloat(float64(t)/1000, 'f', -1, 64)
	for _, c := range s {
		if c == '.' || c == 'e' {
			return s
		}
	}
	return s + ".0"
}

// Value is w of element e.
func (w Info) Value(e *contract.Element) any {
	win := e.Window
	global := win.IsGlobal()
	switch w {
	case Timestamp:
		return e.Time
	case WindowStart:
		if global {
			return nil
		}
		return win.Start
	case WindowEnd:
		if global {
			return nil
		}
		return win.End
	case WindowString:
		if global {
			return "GlobalWindow"
		}
		return "[" + beamSeconds(win.Start) + ", " + beamSeconds(win.End) + ")"
	case WindowType:
		if global {
			return "GlobalWindow"
		}
		return "IntervalWindow"
	case WindowObject:
		if global {
			return &row.Row{Schema: windowObjectSchema, Values: []any{nil, nil}}
		}
		return &row.Row{Schema: windowObjectSchema, Values: []any{win.Start, win.End}}
	}
	return row.PaneRow(e.Pane)
}

// ExtractFn is ExtractWindowingInfo's DoFn.
type ExtractFn struct {
	// Out is the output rows' schema.
	Out *row.Schema
	// At[i] is where Info[i] goes in the output row.
	At   []int
	Info []Info
	// N is the number of the input rows' fields.
	N int
}

// Process implements contract.DoFn.
func (f *ExtractFn) Process(pc *contract.ProcessContext, e contract.Element) error {
	in, ok := row.AsRow(e.Value)
	if !ok {
		return notARow(e.Value)
	}
	vals := make([]any, len(f.Out.Fields))
	copy(vals, in.Values[:min(f.N, len(in.Values))])
	for i, w := range f.Info {
		vals[f.At[i]] = w.Value(&e)
	}
	e.Value = &row.Row{Schema: f.Out, Values: vals}
	pc.Emit(0, e)
	return nil
}

// EventTime converts a value to an event time as Beam's Timestamp does:
// numbers are seconds since the epoch; strings are RFC 3339.
func EventTime(x any) (mtime.Time, error) {
	switch y := x.(type) {
	case mtime.Time:
		return y, nil
	case int64:
		if y > int64(mtime.MaxTimestamp)/1000 || y < int64(mtime.MinTimestamp)/1000 {
			return 0, fmt.Errorf("%d seconds is out of range", y)
		}
		return mtime.Time(y * 1000), nil
	case float64:
		ms := math.Round(y * 1000)
		if math.IsNaN(ms) || ms > float64(mtime.MaxTimestamp) || ms < float64(mtime.MinTimestamp) {
			return 0, fmt.Errorf("%v seconds is out of range", y)
		}
		return mtime.Time(ms), nil
	case string:
		ts, err := mtime.Parse(y)
		if err != nil {
			return 0, fmt.Errorf("%q is not RFC 3339 (e.g. 2026-03-01T10:05:00Z): %w", y, err)
		}
		return ts, nil
	case nil:
		return 0, fmt.Errorf("the value is null")
	}
	return 0, fmt.Errorf("a %s is not a timestamp (want seconds since the epoch, RFC 3339 or a timestamp)", row.GoTypeName(x))
}

// notARow is the error of an element that is no row.
func notARow(v any) error {
	return &contract.ElementError{Reason: "type_mismatch", Message: fmt.Sprintf("expected a row, got %T", v)}
}
