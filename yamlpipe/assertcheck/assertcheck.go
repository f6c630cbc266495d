package assertcheck

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// Reason is the reject reason of a failed AssertEqual.
const Reason = "assert_equal"

// Marker is the value every AssertEqual groups besides its input: no
// canonical element is empty.
const Marker = ""

// maxShown bounds the missing and unexpected elements a failure lists.
const maxShown = 20

// Check compares the grouped canonical input with the elements.
type Check struct {
	// Step is the step's name; At its position (file:line:column).
	Step, At string
	// Want counts the canonical forms of config.elements.
	Want map[string]int
}

// Check returns nil when got, the canonical input and one Marker, is
// Want as a multiset, else the fatal element error that lists the
// differences.
func (c *Check) Check(got []string) error {
	left := make(map[string]int, len(c.Want))
	for k, n := range c.Want {
		left[k] = n
	}
	var unexpected []string
	for _, g := range got {
		if g == Marker {
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
	fmt.Fprintf(&b, "AssertEqual %q (%s): its input (%d elements) is not config.elements (%d)", c.Step, c.At, len(got)-1, countAll(c.Want))
	list := func(what string, vs []string) {
		if len(vs) == 0 {
			return
		}
		fmt.Fprintf(&b, "; %d %s: ", len(vs), what)
		for i, v := range vs {
			if i == maxShown {
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
	return &contract.ElementError{Reason: Reason, Message: b.String(), Fatal: true}
}

func countAll(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// AppendNode appends the canonical form of a YAML literal.
func AppendNode(dst []byte, n *yamlnode.Node) []byte {
	switch n.Kind {
	case yamlnode.Null:
		return append(dst, "null"...)
	case yamlnode.Bool:
		return strconv.AppendBool(dst, n.B)
	case yamlnode.Int:
		return strconv.AppendInt(dst, n.I, 10)
	case yamlnode.Float:
		return appendFloat(dst, n.F)
	case yamlnode.String:
		return row.AppendJSONString(dst, n.Text)
	case yamlnode.Seq:
		dst = append(dst, '[')
		for i, e := range n.Seq {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendNode(dst, e)
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
			dst = AppendNode(dst, n.Vals[i])
		}
		return append(dst, '}')
	}
	return append(dst, "null"...)
}

// AppendValue appends the canonical form of a row value, comparable with
// AppendNode's.
func AppendValue(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case float64:
		return appendFloat(dst, x)
	case string:
		return row.AppendJSONString(dst, x)
	case mtime.Time:
		// Beam's Timestamp equals its seconds since the epoch.
		return appendFloat(dst, float64(x)/1000)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendValue(dst, e)
		}
		return append(dst, ']')
	case *row.Row:
		return AppendRow(dst, x, nil)
	case contract.Reject:
		return AppendValue(dst, row.FromReject(x))
	}
	if r, ok := row.AsRow(v); ok {
		return AppendValue(dst, r)
	}
	return row.AppendJSONValue(dst, v)
}

// AppendRow appends the canonical form of a row: its non-null fields but
// those in skip, sorted by name.
func AppendRow(dst []byte, x *row.Row, skip map[string]bool) []byte {
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
		dst = AppendValue(dst, x.Values[i])
	}
	return append(dst, '}')
}

// WindowColumns returns the window and pane columns a Combine without
// language adds to its rows (weir's shape; docs/ARCHITECTURE.md, "Contracts") that no expected
// element names: Beam keeps the window and pane as element metadata, so its
// tests expect the rows without them.
func WindowColumns(s *row.Schema, named map[string]bool) map[string]bool {
	skip := map[string]bool{}
	for _, f := range s.Fields {
		if named[f.Name] {
			continue
		}
		switch {
		case (f.Name == "window_start" || f.Name == "window_end") && f.Type.Kind == row.KindTimestamp,
			f.Name == "pane" && f.Type.Kind == row.KindRow && f.Type.Row.Equal(row.PaneSchema()):
			skip[f.Name] = true
		}
	}
	return skip
}

// appendFloat renders an integral float as the integer it equals (1.0 is 1,
// as in Python), others in the shortest form that reads back.
func appendFloat(dst []byte, f float64) []byte {
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
