// Package diff compares what two runs of a pipeline wrote: the rows of
// every output (each sink step, each error or dead-letter output), keyed by
// the sink's key, the window and the pane (index and timing). It classifies
// each difference (value changed, missing in new, extra in new, pane timing
// shifted, pane accumulation changed, reject reason changed, late-data path
// changed), computes what a consumer of each output sees after the run
// (upsert by revision: the newest pane per key and window; append: every
// pane), subtracts noise (the differences of the old pipeline with itself
// when it ran twice over the same input) and checks conservation of a
// quantity (input = accepted + rejected, Conserve).
//
// Rows are compared as sorted streams, group by group (one output, key and
// window at a time), so neither side is held in memory: a Sorter sorts rows
// in memory up to a limit and in sorted runs on disk beyond it.
//
// The CLI's `weir rehearse`, a parity gate of a parallel replacement and a
// bounded job's parity check all compare through this package; it knows
// nothing of pipelines, runners or servers. It may import only the standard
// library.
package diff

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// Pane timings, as Beam names them.
const (
	TimingEarly   = "EARLY"
	TimingOnTime  = "ON_TIME"
	TimingLate    = "LATE"
	TimingUnknown = "UNKNOWN"
)

// ReasonTooLate is the reject reason of an element dropped because its
// window had expired (runner/contract.ReasonTooLate).
const ReasonTooLate = "too_late"

// Row is one row an output received: one pane of one key and window, or
// one rejected element.
type Row struct {
	// Output names the output: a sink step, an error output, the
	// dead-letter output.
	Output string `json:"output"`
	// Key is the row's key in the output, canonical JSON: the sink's key
	// fields, the group-by fields of the step that produced it, or the
	// whole row when the output has no key. For a reject, where it came
	// from (its source position, or the element).
	Key string `json:"key"`
	// Window is the window in a form that sorts by time (see
	// FormatWindow); "global" for the global window.
	Window string `json:"window"`
	// PaneIndex and Timing identify the pane within the key and window.
	PaneIndex int64  `json:"pane_index"`
	Timing    string `json:"timing"`
	// Value is the row's other fields as a canonical JSON object (see
	// CanonicalJSON); for a reject, its step and message.
	Value string `json:"value"`
	// Reject is the reason of a rejected element; empty for other rows.
	Reject string `json:"reject,omitempty"`
}

// groupKey is what rows are grouped by.
func (r *Row) sameGroup(o *Row) bool {
	return r.Output == o.Output && r.Key == o.Key && r.Window == o.Window
}

// Compare orders rows: output, key, window, pane index, timing, reject
// reason, value. Both sides of a comparison must be sorted in this order.
func Compare(a, b *Row) int {
	if c := compareGroup(a, b); c != 0 {
		return c
	}
	if c := cmp.Compare(a.PaneIndex, b.PaneIndex); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Timing, b.Timing); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Reject, b.Reject); c != 0 {
		return c
	}
	return cmp.Compare(a.Value, b.Value)
}

func compareGroup(a, b *Row) int {
	if c := cmp.Compare(a.Output, b.Output); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	return cmp.Compare(a.Window, b.Window)
}

// SortRows sorts rows in place in Compare's order.
func SortRows(rows []Row) {
	sort.Slice(rows, func(i, j int) bool { return Compare(&rows[i], &rows[j]) < 0 })
}

// CanonicalJSON returns v as JSON with object keys sorted and no
// insignificant space, so that equal values have equal text. Numbers keep
// the text they were given (json.Number) or Go's shortest form.
func CanonicalJSON(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("encoding a value as JSON: %w", err)
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// Mode is how a consumer of an output sees its rows.
type Mode string

const (
	// ModeUpsert keeps one row per key and window, the newest pane's
	// (upsert by revision).
	ModeUpsert Mode = "upsert"
	// ModeAppend keeps every pane as a row of its own; a reader summing a
	// key and window adds every pane.
	ModeAppend Mode = "append"
)

// OutputInfo describes one output on one side of a comparison.
type OutputInfo struct {
	// Mode is how its consumers see its rows (default ModeAppend).
	Mode Mode `json:"mode"`
	// Accumulating says each pane carries the window's whole content so far
	// (Beam's accumulating mode) rather than what arrived since the last
	// pane (discarding).
	Accumulating bool `json:"accumulating"`
	// Records says the rows are records read from a file or a table, not
	// panes: rows of a key and window pair up by position (Ordinals), and
	// their differences are only value_changed, missing_in_new,
	// extra_in_new and the reject classes, never a pane class.
	Records bool `json:"records,omitempty"`
}

// decodeObject parses a canonical JSON object value; a value that is not
// an object is returned under the empty name.
func decodeObject(s string) (map[string]any, error) {
	if s == "" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("row value %q is not JSON: %w", s, err)
	}
	if m, ok := v.(map[string]any); ok {
		return m, nil
	}
	return map[string]any{"": v}, nil
}

// number returns v as a float64 when it is a JSON number.
func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	return f, err == nil
}

// sumValues adds rows' values field by field: numbers are summed, other
// fields take the last row's value. It returns the canonical JSON of the
// sum.
func sumValues(values []string) (string, error) {
	sum := map[string]any{}
	nums := map[string]float64{}
	for _, s := range values {
		m, err := decodeObject(s)
		if err != nil {
			return "", err
		}
		for k, v := range m {
			if f, ok := number(v); ok {
				nums[k] += f
				continue
			}
			sum[k] = v
			delete(nums, k)
		}
	}
	for k, f := range nums {
		sum[k] = json.Number(strconv.FormatFloat(f, 'f', -1, 64))
	}
	if len(sum) == 1 {
		if v, ok := sum[""]; ok {
			return CanonicalJSON(v)
		}
	}
	return CanonicalJSON(sum)
}
