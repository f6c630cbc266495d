package yamlpipe

import (
	"fmt"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/yamlpipe/assertcheck"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// AssertEqual, Beam YAML's testing transform (apache_beam.yaml.yaml_provider):
// its input must be exactly config.elements, as a multiset (each element as
// many times as listed, in any order, whatever the windows), else the run
// fails. As in Beam's assert_that, the input is re-windowed into the global
// window, keyed to one key and grouped, so the check runs once, when the
// input ends; a marker element makes an empty input fail the check too.
//
// Elements compare as Beam's rows do after Beam unifies their schema: a
// missing field equals a null one, an int equals a float of the same value,
// and a timestamp equals its seconds since the epoch (Beam's Timestamp
// compares equal to a number of seconds). A mapping is a row; any other
// element is the row {element: value}, as Create makes it.

func buildAssertEqual(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	en := t.config.Get("elements")
	if en == nil || en.Kind != yamlnode.Seq {
		if en == nil {
			return nil, l.errf(t.typNode, "AssertEqual needs config.elements (the list of rows its input must be)")
		}
		return nil, l.errf(en, "AssertEqual elements must be a list, not %s", en.Kind)
	}
	want := map[string]int{}
	named := map[string]bool{}
	for _, e := range en.Seq {
		if e.Kind != yamlnode.Map {
			e = &yamlnode.Node{Kind: yamlnode.Map, Line: e.Line, Col: e.Col, Keys: []*yamlnode.Node{{Kind: yamlnode.String, Text: "element"}}, Vals: []*yamlnode.Node{e}}
		}
		for _, k := range e.Keys {
			named[k.Text] = true
		}
		want[string(assertcheck.AppendNode(nil, e))]++
	}
	check := &assertcheck.Check{Step: t.name, At: l.pos(t.typNode), Want: want}
	in := ins[0]
	skip := assertcheck.WindowColumns(in.schema, named)
	s := l.root.Sub(t.name)
	var canon weir.PCollection[string]
	if in.isReject {
		canon = weir.Map(s, "Canonical", in.rejects, func(rj contract.Reject) string { return string(assertcheck.AppendValue(nil, row.FromReject(rj))) })
	} else {
		canon = weir.Map(s, "Canonical", in.rows, func(r *rowT) string { return string(assertcheck.AppendRow(nil, r, skip)) })
	}
	global := weir.WindowInto(s, "Global", canon, weir.GlobalWindows())
	marker := weir.Create(s, "Marker", []string{assertcheck.Marker})
	all := weir.Flatten(s, "All", []weir.PCollection[string]{marker, global})
	keyed := weir.Map(s, "Key", all, func(v string) weir.KV[string, string] { return weir.KV[string, string]{Value: v} })
	grouped := weir.GroupByKey(s, "Group", keyed)
	weir.ParDo(s, "Check", grouped, func(_ *weir.Context, g weir.KV[string, []string], _ func(struct{})) error {
		return check.Check(g.Value)
	}, weir.WithConfig(t.config.Plain()))
	return nil, nil
}

// pos renders n's position as file:line:column.
func (l *loader) pos(n *yamlnode.Node) string {
	if n == nil {
		return l.file
	}
	return fmt.Sprintf("%s:%d:%d", l.file, n.Line, n.Col)
}

// buildReshuffle is Beam's Reshuffle: its output is its input. Beam
// redistributes elements among workers and checkpoints them (a fusion
// break); weir's workers already share a step's input by key, and its
// checkpoints cover every step, so the step passes elements on unchanged.
// num_buckets is accepted and has no effect.
func buildReshuffle(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	if n := t.config.Get("num_buckets"); n != nil && (n.Kind != yamlnode.Int || n.I <= 0) {
		return nil, l.errf(n, "Reshuffle num_buckets must be a positive integer")
	}
	in := ins[0]
	if in.isReject {
		out := weir.Map(l.root, t.name, in.rejects, func(rj contract.Reject) contract.Reject { return rj }, stepOpts(t)...)
		return &coll{schema: in.schema, rejects: out, isReject: true}, nil
	}
	out := weir.Map(l.root, t.name, in.rows, func(r *rowT) *rowT { return r }, stepOpts(t, weir.WithCoder(in.schema.Coder()))...)
	return rowsColl(in.schema, out), nil
}
