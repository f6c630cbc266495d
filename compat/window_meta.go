package compat

import (
	"fmt"
	"strings"

	"github.com/weir-dev/weir/graph"
)

// This file is the one registered evolution of a stored coder: rows that
// lose their window and pane fields.
//
// Until window and pane became element metadata, a windowed Combine
// written for Beam (with language) gave its rows window_start, window_end
// and pane fields; today its rows are exactly the group_by fields and the
// aggregates, and the window and pane travel with the element. A step that
// stores such rows (a Join buffers its inputs' rows per key and window)
// therefore has a stored coder whose row types lost those fields, though
// nothing it stores changed meaning: a stored row's window_start and
// window_end are the window the row is stored under (the state is per key
// and window), and the new pipeline reads neither them nor the pane from
// the row. The new execution reads the old rows by field name and drops
// the three (yamlpipe's Join conforms every stored row to its input's
// schema), so the check reports the change as a warning,
// STORED_WINDOW_FIELDS_DROPPED, not as STATE_CODER_CHANGED.
//
// Only these fields, with exactly these types, may go; every other field
// must stay, in order, with its type. A name with a numeric suffix
// (window_start0, pane1) is such a field too: a Join names the window
// fields of its second input so when it takes all fields of both.

// rowsCoderURN reports whether a stored coder of this URN has, per input
// of its step, the row type of the rows the step buffers.
func rowsCoderURN(urn string) bool { return urn == "weir:yaml:join_rows" }

// paneRowType is the type of a pane field, as a row type renders it.
const paneRowType = "row{index:int,timing:string,is_first:bool,is_last:bool}"

// windowMetaField reports whether a stored row's field name of type typ is
// one of the window and pane fields that became element metadata.
func windowMetaField(name, typ string) bool {
	switch strings.TrimRight(name, "0123456789") {
	case "window_start", "window_end":
		return typ == "timestamp"
	case "pane":
		return typ == paneRowType
	}
	return false
}

// windowFieldsDropped reports whether the only difference between the
// stored coders o and n is window and pane fields that o's row types have
// and n's do not, and returns, per input whose rows lost some, "input:
// field, field".
func windowFieldsDropped(o, n *graph.Coder) ([]string, bool) {
	if o == nil || n == nil || o.URN != n.URN || o.Version != n.Version || !rowsCoderURN(o.URN) ||
		len(o.Fields) != len(n.Fields) || len(o.Components) != 0 || len(n.Components) != 0 {
		return nil, false
	}
	var dropped []string
	for i, of := range o.Fields {
		nf := n.Fields[i]
		if of.Name != nf.Name {
			return nil, false
		}
		if of.Type == nf.Type {
			continue
		}
		gone, ok := rowFieldsDropped(of.Type, nf.Type)
		if !ok {
			return nil, false
		}
		dropped = append(dropped, fmt.Sprintf("%s: %s", of.Name, strings.Join(gone, ", ")))
	}
	return dropped, len(dropped) > 0
}

// rowFieldsDropped reports whether row type nt is row type ot without some
// of its window and pane fields, and returns their names.
func rowFieldsDropped(ot, nt string) ([]string, bool) {
	of, ok := rowTypeFields(ot)
	if !ok {
		return nil, false
	}
	nf, ok := rowTypeFields(nt)
	if !ok {
		return nil, false
	}
	var gone []string
	j := 0
	for _, f := range of {
		if j < len(nf) && f == nf[j] {
			j++
			continue
		}
		if !windowMetaField(f[0], f[1]) {
			return nil, false
		}
		gone = append(gone, f[0])
	}
	return gone, j == len(nf) && len(gone) > 0
}

// rowTypeFields splits a row type as row.Schema renders it ("{a:int,
// b:row{c:string}}", optionally prefixed "row") into its top-level (name,
// type) pairs.
func rowTypeFields(t string) ([][2]string, bool) {
	t = strings.TrimPrefix(t, "row")
	if len(t) < 2 || t[0] != '{' || t[len(t)-1] != '}' {
		return nil, false
	}
	body := t[1 : len(t)-1]
	if body == "" {
		return nil, true
	}
	var out [][2]string
	depth, start := 0, 0
	for i := 0; i <= len(body); i++ {
		if i < len(body) {
			switch body[i] {
			case '{', '<':
				depth++
				continue
			case '}', '>':
				depth--
				if depth < 0 {
					return nil, false
				}
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		name, typ, ok := strings.Cut(body[start:i], ":")
		if !ok || name == "" || typ == "" {
			return nil, false
		}
		out = append(out, [2]string{name, typ})
		start = i + 1
	}
	return out, depth == 0
}

// The same change made a windowed Combine written for Beam count as
// Beam's count does, elements whatever their value, where it counted the
// non-null values of its value field: its accumulator's identity went from
// count:<the field's type> to count:none. The stored counter is the same
// (the new combine adds to it), so the check reports COMBINE_FN_CHANGED,
// saying that counts stored before the update left out elements whose
// value was null, instead of STATE_CODER_CHANGED.

// accumulatorURN is the stored coder of a YAML Combine.
const accumulatorURN = "weir:yaml:combine_accumulator"

// countsNowElements reports whether the only difference between the
// accumulator coders o and n is counts of a value field that became counts
// of elements, and returns the positions (from 1) of those outputs.
func countsNowElements(o, n *graph.Coder) ([]int, bool) {
	return slotsChanged(o, n, func(of, nf graph.Field) bool {
		return of.Name == "count" && nf.Name == "count" && of.Type != "none" && nf.Type == "none"
	})
}

// accumulatorCoders reports whether o and n are both YAML Combine
// accumulator coders of one version.
func accumulatorCoders(o, n *graph.Coder) bool {
	return o != nil && n != nil && o.URN == accumulatorURN && n.URN == accumulatorURN && o.Version == n.Version &&
		len(o.Components) == 0 && len(n.Components) == 0
}

// slotsChanged reports whether the YAML Combine accumulator coders o and
// n have the same number of slots, each unchanged or changed as changed
// allows, at least one changed, and returns the positions (from 1) of the
// changed ones.
func slotsChanged(o, n *graph.Coder, changed func(of, nf graph.Field) bool) ([]int, bool) {
	if !accumulatorCoders(o, n) || len(o.Fields) != len(n.Fields) {
		return nil, false
	}
	var at []int
	for i, of := range o.Fields {
		nf := n.Fields[i]
		switch {
		case of == nf:
		case changed(of, nf):
			at = append(at, i+1)
		default:
			return nil, false
		}
	}
	return at, len(at) > 0
}

// intList renders positions as "1", "1 and 3", "1, 2 and 4".
func intList(at []int) string {
	s := make([]string, len(at))
	for i, n := range at {
		s[i] = fmt.Sprint(n)
	}
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// appendedStart is how the outputs an update appends to a YAML Combine
// start in the windows open at the update: inited have a declared init,
// empty do not (both nil: not known).
type appendedStart struct{ inited, empty []string }

// outputsChangeText says which outputs a change appended or removed at
// the end (classifyOutputs), for the report.
func outputsChangeText(added, removed []graph.Field, st appendedStart) string {
	list := func(fs []graph.Field) string {
		s := make([]string, len(fs))
		for i, f := range fs {
			s[i] = f.Name + " of " + f.Type
		}
		return strings.Join(s, ", ")
	}
	if len(added) > 0 {
		head := fmt.Sprintf("its combine gained %d output(s) after its existing ones (%s)", len(added), list(added))
		switch {
		case len(st.inited) > 0 && len(st.empty) == 0:
			return fmt.Sprintf("%s: in windows open at the update they start from their declared init (%s)", head, strings.Join(st.inited, ", "))
		case len(st.inited) > 0:
			return fmt.Sprintf("%s: in windows open at the update %s start from their declared init, and %s start empty and cover only the elements that arrive after it, unless the step's migrations: give them an init too",
				head, strings.Join(st.inited, ", "), strings.Join(st.empty, ", "))
		}
		return head + ": in windows open at the update they start empty and cover only the elements that arrive after it, unless the step's migrations: give them an init"
	}
	return fmt.Sprintf("its combine lost its last %d output(s) (%s): their stored accumulators are dropped", len(removed), list(removed))
}
