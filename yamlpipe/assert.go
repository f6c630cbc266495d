package yamlpipe

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
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

// reasonAssertEqual is the reject reason of a failed AssertEqual.
const reasonAssertEqual = "assert_equal"

// assertMarker is the value every AssertEqual groups besides its input: no
// canonical element is empty.
const assertMarker = ""

// maxAssertShown bounds the missing and unexpected elements a failure lists.
const maxAssertShown = 20

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
		want[string(canonNode(nil, e))]++
	}
	check := &assertCheck{step: t.name, at: l.pos(t.typNode), want: want}
	in := ins[0]
	skip := weirWindowColumns(in.schema, named)
	s := l.root.Sub(t.name)
	var canon weir.PCollection[string]
	if in.isReject {
		canon = weir.Map(s, "Canonical", in.rejects, func(rj contract.Reject) string { return string(canonValue(nil, row.FromReject(rj))) })
	} else {
		canon = weir.Map(s, "Canonical", in.rows, func(r *rowT) string { return string(canonRow(nil, r, skip)) })
	}
	global := weir.WindowInto(s, "Global", canon, weir.GlobalWindows())
	marker := weir.Create(s, "Marker", []string{assertMarker})
	all := weir.Flatten(s, "All", []weir.PCollection[string]{marker, global})
	keyed := weir.Map(s, "Key", all, func(v string) weir.KV[string, string] { return weir.KV[string, string]{Value: v} })
	grouped := weir.GroupByKey(s, "Group", keyed)
	weir.ParDo(s, "Check", grouped, func(_ *weir.Context, g weir.KV[string, []string], _ func(struct{})) error {
		return check.check(g.Value)
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

// assertCheck compares the grouped canonical input with the elements.
type assertCheck struct {
	step string
	at   string
	want map[string]int
}

func (c *assertCheck) check(got []string) error {
	left := make(map[string]int, len(c.want))
	for k, n := range c.want {
		left[k] = n
	}
	var unexpected []string
	for _, g := range got {
		if g == assertMarker {
			continue
		}
		if left[g] > 0 {
			left[g]--
			continue
		}
		unexpected = append(unexpected, g)
	}
	var missing []string
	for k, n := range left {
		for ; n > 0; n-- {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 && len(unexpected) == 0 {
		return nil
	}
	sort.Strings(missing)
	sort.Strings(unexpected)
	var b strings.Builder
	fmt.Fprintf(&b, "AssertEqual %q (%s): its input (%d elements) is not config.elements (%d)", c.step, c.at, len(got)-1, countAll(c.want))
	list := func(what string, vs []string) {
		if len(vs) == 0 {
			return
		}
		fmt.Fprintf(&b, "; %d %s: ", len(vs), what)
		for i, v := range vs {
			if i == maxAssertShown {
				fmt.Fprintf(&b, " … and %d more", len(vs)-i)
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(v)
		}
	}
	list("missing (expected, not in the input)", missing)
	list("unexpected (in the input, not expected)", unexpected)
	// Beam fails the pipeline: never a dead letter, even in a server job.
	return &contract.ElementError{Reason: reasonAssertEqual, Message: b.String(), Fatal: true}
}

func countAll(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// canonNode appends the canonical form of a YAML literal.
func canonNode(dst []byte, n *yamlnode.Node) []byte {
	switch n.Kind {
	case yamlnode.Null:
		return append(dst, "null"...)
	case yamlnode.Bool:
		return strconv.AppendBool(dst, n.B)
	case yamlnode.Int:
		return strconv.AppendInt(dst, n.I, 10)
	case yamlnode.Float:
		return canonFloat(dst, n.F)
	case yamlnode.String:
		return row.AppendJSONString(dst, n.Text)
	case yamlnode.Seq:
		dst = append(dst, '[')
		for i, e := range n.Seq {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = canonNode(dst, e)
		}
		return append(dst, ']')
	case yamlnode.Map:
		idx := make([]int, 0, len(n.Keys))
		for i := range n.Keys {
			if n.Vals[i].Kind != yamlnode.Null {
				idx = append(idx, i)
			}
		}
		sort.Slice(idx, func(a, b int) bool { return n.Keys[idx[a]].Text < n.Keys[idx[b]].Text })
		dst = append(dst, '{')
		for j, i := range idx {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(row.AppendJSONString(dst, n.Keys[i].Text), ':')
			dst = canonNode(dst, n.Vals[i])
		}
		return append(dst, '}')
	}
	return append(dst, "null"...)
}

// canonValue appends the canonical form of a row value, comparable with
// canonNode's.
func canonValue(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case float64:
		return canonFloat(dst, x)
	case string:
		return row.AppendJSONString(dst, x)
	case mtime.Time:
		// Beam's Timestamp equals its seconds since the epoch.
		return canonFloat(dst, float64(x)/1000)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = canonValue(dst, e)
		}
		return append(dst, ']')
	case *rowT:
		return canonRow(dst, x, nil)
	case contract.Reject:
		return canonValue(dst, row.FromReject(x))
	}
	if r, ok := row.AsRow(v); ok {
		return canonValue(dst, r)
	}
	return row.AppendJSONValue(dst, v)
}

// canonRow appends the canonical form of a row: its non-null fields but
// those in skip, sorted by name.
func canonRow(dst []byte, x *rowT, skip map[string]bool) []byte {
	idx := make([]int, 0, len(x.Schema.Fields))
	for i, f := range x.Schema.Fields {
		if i < len(x.Values) && x.Values[i] != nil && !skip[f.Name] {
			idx = append(idx, i)
		}
	}
	sort.Slice(idx, func(a, b int) bool { return x.Schema.Fields[idx[a]].Name < x.Schema.Fields[idx[b]].Name })
	dst = append(dst, '{')
	for j, i := range idx {
		if j > 0 {
			dst = append(dst, ',')
		}
		dst = append(row.AppendJSONString(dst, x.Schema.Fields[i].Name), ':')
		dst = canonValue(dst, x.Values[i])
	}
	return append(dst, '}')
}

// weirWindowColumns returns the window and pane columns a Combine without
// language adds to its rows (weir's shape; docs/ARCHITECTURE.md, "Contracts") that no expected
// element names: Beam keeps the window and pane as element metadata, so its
// tests expect the rows without them.
func weirWindowColumns(s *row.Schema, named map[string]bool) map[string]bool {
	skip := map[string]bool{}
	for _, f := range s.Fields {
		if named[f.Name] {
			continue
		}
		switch {
		case (f.Name == fieldWindowStart || f.Name == fieldWindowEnd) && f.Type.Kind == row.KindTimestamp,
			f.Name == fieldPane && f.Type.Kind == row.KindRow && f.Type.Row.Equal(row.PaneSchema()):
			skip[f.Name] = true
		}
	}
	return skip
}

// canonFloat renders an integral float as the integer it equals (1.0 is 1,
// as in Python), others in the shortest form that reads back.
func canonFloat(dst []byte, f float64) []byte {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return strconv.AppendInt(dst, int64(f), 10)
	}
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64)
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
