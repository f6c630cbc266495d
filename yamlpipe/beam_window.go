package yamlpipe

import (
	"slices"
	"strconv"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// ---- ExtractWindowingInfo ----

// Beam's ExtractWindowingInfo (apache_beam.yaml.yaml_mapping) appends an
// element's metadata to its row: its event time, its window and the pane
// that produced it. In weir, as in Beam, window and pane are metadata of
// every element (contract.Element.Window and Pane); this transform is how
// a pipeline reads them as fields.

// windowInfo is one piece of element metadata ExtractWindowingInfo can
// extract.
type windowInfo string

// The metadata ExtractWindowingInfo knows, with Beam's names.
const (
	infoTimestamp    windowInfo = "timestamp"
	infoWindowStart  windowInfo = "window_start"
	infoWindowEnd    windowInfo = "window_end"
	infoWindowString windowInfo = "window_string"
	infoWindowType   windowInfo = "window_type"
	infoWindowObject windowInfo = "window_object"
	infoPaneInfo     windowInfo = "pane_info"
)

var windowInfos = []windowInfo{infoTimestamp, infoWindowStart, infoWindowEnd, infoWindowString, infoWindowType, infoWindowObject, infoPaneInfo}

// windowObjectSchema is the row weir gives for window_object: the window's
// bounds, null for the global window.
var windowObjectSchema = row.MustSchema(
	row.Field{Name: "start", Type: row.Of(row.KindTimestamp)},
	row.Field{Name: "end", Type: row.Of(row.KindTimestamp)},
)

func (w windowInfo) typ() row.Type {
	switch w {
	case infoTimestamp, infoWindowStart, infoWindowEnd:
		return row.Of(row.KindTimestamp)
	case infoWindowString, infoWindowType:
		return row.Of(row.KindString)
	case infoWindowObject:
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

func (w windowInfo) value(e *contract.Element) any {
	win := e.Window
	global := win.IsGlobal()
	switch w {
	case infoTimestamp:
		return e.Time
	case infoWindowStart:
		if global {
			return nil
		}
		return win.Start
	case infoWindowEnd:
		if global {
			return nil
		}
		return win.End
	case infoWindowString:
		if global {
			return "GlobalWindow"
		}
		return "[" + beamSeconds(win.Start) + ", " + beamSeconds(win.End) + ")"
	case infoWindowType:
		if global {
			return "GlobalWindow"
		}
		return "IntervalWindow"
	case infoWindowObject:
		if global {
			return &rowT{Schema: windowObjectSchema, Values: []any{nil, nil}}
		}
		return &rowT{Schema: windowObjectSchema, Values: []any{win.Start, win.End}}
	}
	return row.PaneRow(e.Pane)
}

// extractWindowingFn is ExtractWindowingInfo's DoFn.
type extractWindowingFn struct {
	out *row.Schema
	// at[i] is where info[i] goes in the output row.
	at   []int
	info []windowInfo
	n    int // input fields
}

// Process implements contract.DoFn.
func (f *extractWindowingFn) Process(pc *contract.ProcessContext, e contract.Element) error {
	in, ok := row.AsRow(e.Value)
	if !ok {
		return notARow(e.Value)
	}
	vals := make([]any, len(f.out.Fields))
	copy(vals, in.Values[:min(f.n, len(in.Values))])
	for i, w := range f.info {
		vals[f.at[i]] = w.value(&e)
	}
	e.Value = &rowT{Schema: f.out, Values: vals}
	pc.Emit(0, e)
	return nil
}

func buildExtractWindowingInfo(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	in := ins[0]
	if in.isReject {
		return nil, l.errf(t.typNode, "ExtractWindowingInfo reads rows, not an error output")
	}
	type pick struct {
		name string
		info windowInfo
		n    *yamlnode.Node
	}
	var picks []pick
	fn := t.config.Get("fields")
	switch {
	case fn == nil || fn.Kind == yamlnode.Null:
		// Beam's default.
		for _, w := range []windowInfo{infoTimestamp, infoWindowStart, infoWindowEnd} {
			picks = append(picks, pick{string(w), w, t.typNode})
		}
	case fn.Kind == yamlnode.Map:
		for i, k := range fn.Keys {
			v, err := l.str(fn.Vals[i], "fields."+k.Text)
			if err != nil {
				return nil, err
			}
			picks = append(picks, pick{k.Text, windowInfo(v), fn.Vals[i]})
		}
	default:
		names, nodes, err := l.strList(fn, "fields")
		if err != nil {
			return nil, err
		}
		for i, nm := range names {
			picks = append(picks, pick{nm, windowInfo(nm), nodes[i]})
		}
	}
	if len(picks) == 0 {
		return nil, l.errf(fn, "ExtractWindowingInfo: fields is empty")
	}
	fields := slices.Clone(in.schema.Fields)
	f := &extractWindowingFn{n: len(in.schema.Fields)}
	seen := map[string]bool{}
	for _, p := range picks {
		if !slices.Contains(windowInfos, p.info) {
			return nil, l.errf(p.n, "ExtractWindowingInfo: unknown windowing info %q (want one of %v)", p.info, windowInfos)
		}
		if seen[p.name] {
			return nil, l.errf(p.n, "ExtractWindowingInfo: field %q is given twice", p.name)
		}
		seen[p.name] = true
		at := in.schema.Index(p.name)
		if at >= 0 {
			// As Beam's with_fields, a field of the same name is replaced.
			fields[at].Type = p.info.typ()
		} else {
			at = len(fields)
			fields = append(fields, row.Field{Name: p.name, Type: p.info.typ()})
		}
		f.at = append(f.at, at)
		f.info = append(f.info, p.info)
	}
	out, err := row.NewSchema(fields...)
	if err != nil {
		return nil, l.wrapf(t.typNode, err, "ExtractWindowingInfo")
	}
	f.out = out
	res := parDo(l.root, t.name, in, f, stepOpts(t, weir.WithCoder(out.Coder()))...)
	return rowsColl(out, res), nil
}
