package yamlpipe

import (
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// Type inference for the literal elements of Create and TestStream: a field
// takes the type of its YAML literals (int, float, bool, string; a string
// in the timestamp field is a timestamp; mappings are rows, lists lists).
// Ints and floats mix into float; other disagreements are errors.

// itype is a type being inferred.
type itype struct {
	kind   row.Kind
	known  bool // false while only nulls were seen
	fields []*ifield
	elem   *itype
}

type ifield struct {
	name string
	t    *itype
}

func (t *itype) field(name string) *ifield {
	for _, f := range t.fields {
		if f.name == name {
			return f
		}
	}
	return nil
}

// observe merges the literal n into t; ts marks the timestamp field.
func (l *loader) observe(t *itype, n *yamlnode.Node, ts bool, field string) error {
	var k row.Kind
	switch n.Kind {
	case yamlnode.Null:
		return nil
	case yamlnode.Int:
		k = row.KindInt
	case yamlnode.Float:
		k = row.KindFloat
	case yamlnode.Bool:
		k = row.KindBool
	case yamlnode.String:
		k = row.KindString
		if ts {
			k = row.KindTimestamp
		}
	case yamlnode.Map:
		k = row.KindRow
	case yamlnode.Seq:
		k = row.KindList
	}
	switch {
	case !t.known:
		t.kind, t.known = k, true
	case t.kind == k:
	case t.kind == row.KindAny:
		return nil
	case (t.kind == row.KindInt && k == row.KindFloat) || (t.kind == row.KindFloat && k == row.KindInt):
		t.kind = row.KindFloat
	default:
		// As Beam's schema inference does: a field whose literals disagree
		// holds any value (a step that needs one type rejects the others,
		// as ValidateWithSchema does).
		t.kind, t.fields, t.elem = row.KindAny, nil, nil
		return nil
	}
	switch k {
	case row.KindRow:
		for i, key := range n.Keys {
			f := t.field(key.Text)
			if f == nil {
				f = &ifield{name: key.Text, t: &itype{}}
				t.fields = append(t.fields, f)
			}
			if err := l.observe(f.t, n.Vals[i], false, field+"."+key.Text); err != nil {
				return err
			}
		}
	case row.KindList:
		if t.elem == nil {
			t.elem = &itype{}
		}
		for _, e := range n.Seq {
			if err := l.observe(t.elem, e, false, field+"[]"); err != nil {
				return err
			}
		}
	}
	return nil
}

// rowType turns an inferred type into a row type; fields seen only as null
// are of type any.
func (t *itype) rowType() (row.Type, error) {
	if !t.known {
		return row.Of(row.KindAny), nil
	}
	switch t.kind {
	case row.KindRow:
		s, err := t.schema()
		if err != nil {
			return row.Type{}, err
		}
		return row.RowOf(s), nil
	case row.KindList:
		if t.elem == nil {
			return row.ListOf(row.Of(row.KindAny)), nil
		}
		e, err := t.elem.rowType()
		if err != nil {
			return row.Type{}, err
		}
		return row.ListOf(e), nil
	}
	return row.Of(t.kind), nil
}

func (t *itype) schema() (*row.Schema, error) {
	fields := make([]row.Field, len(t.fields))
	for i, f := range t.fields {
		ft, err := f.t.rowType()
		if err != nil {
			return nil, err
		}
		fields[i] = row.Field{Name: f.name, Type: ft}
	}
	return row.NewSchema(fields...)
}

// literals is the result of inferring a list of literal elements.
type literals struct {
	schema *row.Schema
	rows   []*rowT
	// nodes are the elements as mappings (scalars wrapped as {element: x}).
	nodes []*yamlnode.Node
}

// literalRows infers the schema of elements and converts them to rows. A
// scalar element becomes a row with one field, element.
func (l *loader) literalRows(elems []*yamlnode.Node, tsField string) (*literals, error) {
	top := &itype{kind: row.KindRow, known: true}
	lit := &literals{}
	for _, e := range elems {
		m := e
		if e.Kind != yamlnode.Map {
			m = &yamlnode.Node{Kind: yamlnode.Map, Line: e.Line, Col: e.Col, Keys: []*yamlnode.Node{{Kind: yamlnode.String, Text: "element", Line: e.Line, Col: e.Col}}, Vals: []*yamlnode.Node{e}}
		}
		lit.nodes = append(lit.nodes, m)
		for i, k := range m.Keys {
			f := top.field(k.Text)
			if f == nil {
				f = &ifield{name: k.Text, t: &itype{}}
				top.fields = append(top.fields, f)
			}
			if err := l.observe(f.t, m.Vals[i], k.Text == tsField, k.Text); err != nil {
				return nil, err
			}
		}
	}
	s, err := top.schema()
	if err != nil {
		at := &yamlnode.Node{Line: 1, Col: 1}
		if len(elems) > 0 {
			at = elems[0]
		}
		return nil, l.wrapf(at, err, "bad elements")
	}
	lit.schema = s
	for _, m := range lit.nodes {
		r, err := l.literalRow(m, s, tsField)
		if err != nil {
			return nil, err
		}
		lit.rows = append(lit.rows, r)
	}
	return lit, nil
}

func (l *loader) literalRow(m *yamlnode.Node, s *row.Schema, tsField string) (*rowT, error) {
	r := row.New(s)
	for i, f := range s.Fields {
		v := m.Get(f.Name)
		if v == nil {
			continue
		}
		if f.Name == tsField && f.Type.Kind == row.KindTimestamp && v.Kind == yamlnode.String {
			// An unparsable timestamp stays null: the element becomes a bad_timestamp reject.
			if ts, err := mtime.Parse(v.Text); err == nil {
				r.Values[i] = ts
			}
			continue
		}
		x, err := l.literalValue(v, f.Type)
		if err != nil {
			return nil, err
		}
		r.Values[i] = x
	}
	return r, nil
}

func (l *loader) literalValue(n *yamlnode.Node, t row.Type) (any, error) {
	if n.Kind == yamlnode.Null {
		return nil, nil
	}
	switch t.Kind {
	case row.KindInt:
		return n.I, nil
	case row.KindFloat:
		if n.Kind == yamlnode.Int {
			return float64(n.I), nil
		}
		return n.F, nil
	case row.KindBool:
		return n.B, nil
	case row.KindString:
		return n.Text, nil
	case row.KindTimestamp:
		ts, err := mtime.Parse(n.Text)
		if err != nil {
			return nil, l.wrapf(n, err, "bad timestamp")
		}
		return ts, nil
	case row.KindRow:
		return l.literalRow(n, t.Row, "")
	case row.KindList:
		out := make([]any, len(n.Seq))
		for i, e := range n.Seq {
			x, err := l.literalValue(e, *t.Elem)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	}
	return plainValue(n), nil
}

// plainValue converts a literal to a row value of type any.
func plainValue(n *yamlnode.Node) any {
	switch n.Kind {
	case yamlnode.Int:
		return n.I
	case yamlnode.Float:
		return n.F
	case yamlnode.Bool:
		return n.B
	case yamlnode.String:
		return n.Text
	case yamlnode.Map:
		m := make(map[string]any, len(n.Keys))
		for i, k := range n.Keys {
			m[k.Text] = plainValue(n.Vals[i])
		}
		return m
	case yamlnode.Seq:
		out := make([]any, len(n.Seq))
		for i, e := range n.Seq {
			out[i] = plainValue(e)
		}
		return out
	}
	return nil
}
