package join

import "github.com/weir-dev/weir/row"

// The Join's state migration: the rows a Join stores are those of its
// inputs, so when an input's row type changes in a way the compatibility
// check accepts (compat's STORED_WINDOW_FIELDS_DROPPED: a windowed Beam
// Combine's rows lost their window_start, window_end and pane fields,
// which are element metadata now), the state the new execution inherits
// holds rows of the old type. They reach it two ways, and both end as rows
// of the input's schema today:
//
//   - from the store (a restart, or an update of a job that has no live
//     execution): DecodeState reads each stored row's JSON by field name
//     into the input's schema, so fields the schema no longer has are
//     dropped and every remaining field lands at its new position;
//   - in memory (an in-place update adopts the paused execution's
//     accumulators as they are): conformAcc maps each row whose schema is
//     not the input's by field name, before the rows are read (Output) or
//     stored again (EncodeState).
//
// A stored row's window_start and window_end are the window it is stored
// under, which the element carries as metadata, and the new pipeline
// reads no pane from a row, so what is dropped is nothing the new
// execution could read.

// conformAcc makes every row of a the schema of its input, in place.
func (j *Aggregator) conformAcc(a *Acc) {
	for i, rs := range a.Rows {
		if i >= len(j.Ins) {
			return
		}
		for k, r := range rs {
			rs[k] = conformRow(r, j.Ins[i])
		}
	}
}

// conformRow returns r as a row of schema s: r itself when it has s's
// fields (the common case: one pointer comparison, or a comparison of
// names), otherwise a new row of s whose fields take the values of r's
// fields of the same name; a field r lacks is null.
func conformRow(r *row.Row, s *row.Schema) *row.Row {
	if r == nil || r.Schema == s || r.Schema == nil || sameFieldNames(r.Schema, s) {
		return r
	}
	out := row.New(s)
	for i, f := range s.Fields {
		if k := r.Schema.Index(f.Name); k >= 0 && k < len(r.Values) {
			out.Values[i] = r.Values[k]
		}
	}
	return out
}

// sameFieldNames reports whether a and b name the same fields in the same
// order.
func sameFieldNames(a, b *row.Schema) bool {
	if len(a.Fields) != len(b.Fields) {
		return false
	}
	for i := range a.Fields {
		if a.Fields[i].Name != b.Fields[i].Name {
			return false
		}
	}
	return true
}
