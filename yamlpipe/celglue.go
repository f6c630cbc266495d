package yamlpipe

import (
	"cel.dev/cel-go/cel"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/yamlpipe/celexpr"
	"github.com/weir-dev/weir/yamlpipe/combine"
	"github.com/weir-dev/weir/yamlpipe/wininfo"
)

// metaVars are the element metadata an expression reads by name when the
// row has no field of that name: the element's window and pane, as
// ExtractWindowingInfo gives them. A Combine written for Beam (with
// language) keeps its rows to the group_by fields and the aggregates, so
// window_start, window_end and pane after it are these, not fields.
var metaVars = []wininfo.Info{wininfo.WindowStart, wininfo.WindowEnd, wininfo.PaneInfo}

// metaVarName is the variable name of metadata w.
func metaVarName(w wininfo.Info) string {
	if w == wininfo.PaneInfo {
		return combine.FieldPane
	}
	return string(w)
}

// celMeta declares metaVars to CEL.
func celMeta() []celexpr.Meta {
	out := make([]celexpr.Meta, len(metaVars))
	for i, w := range metaVars {
		out[i] = celexpr.Meta{Name: metaVarName(w), Type: w.Type(), Value: w.Value}
	}
	return out
}

// newCELScope builds the CEL environment of a step over rows of schema,
// with the element metadata of metaVars.
func newCELScope(schema *row.Schema, sides []celexpr.Side, prgOpts ...cel.ProgramOption) (*celexpr.Scope, error) {
	return celexpr.NewScope(schema, sides, celMeta(), prgOpts...)
}
