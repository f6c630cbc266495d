package yamlpipe

import (
	"slices"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/yamlpipe/wininfo"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// ---- ExtractWindowingInfo ----

// Beam's ExtractWindowingInfo (apache_beam.yaml.yaml_mapping) appends an
// element's metadata to its row: its event time, its window and the pane
// that produced it. In weir, as in Beam, window and pane are metadata of
// every element (contract.Element.Window and Pane); this transform is how
// a pipeline reads them as fields.

func buildExtractWindowingInfo(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	in := ins[0]
	if in.isReject {
		return nil, l.errf(t.typNode, "ExtractWindowingInfo reads rows, not an error output")
	}
	type pick struct {
		name string
		info wininfo.Info
		n    *yamlnode.Node
	}
	var picks []pick
	fn := t.config.Get("fields")
	switch {
	case fn == nil || fn.Kind == yamlnode.Null:
		// Beam's default.
		for _, w := range []wininfo.Info{wininfo.Timestamp, wininfo.WindowStart, wininfo.WindowEnd} {
			picks = append(picks, pick{string(w), w, t.typNode})
		}
	case fn.Kind == yamlnode.Map:
		for i, k := range fn.Keys {
			v, err := l.str(fn.Vals[i], "fields."+k.Text)
			if err != nil {
				return nil, err
			}
			picks = append(picks, pick{k.Text, wininfo.Info(v), fn.Vals[i]})
		}
	default:
		names, nodes, err := l.strList(fn, "fields")
		if err != nil {
			return nil, err
		}
		for i, nm := range names {
			picks = append(picks, pick{nm, wininfo.Info(nm), nodes[i]})
		}
	}
	if len(picks) == 0 {
		return nil, l.errf(fn, "ExtractWindowingInfo: fields is empty")
	}
	fields := slices.Clone(in.schema.Fields)
	f := &wininfo.ExtractFn{N: len(in.schema.Fields)}
	seen := map[string]bool{}
	for _, p := range picks {
		if !slices.Contains(wininfo.All, p.info) {
			return nil, l.errf(p.n, "ExtractWindowingInfo: unknown windowing info %q (want one of %v)", p.info, wininfo.All)
		}
		if seen[p.name] {
			return nil, l.errf(p.n, "ExtractWindowingInfo: field %q is given twice", p.name)
		}
		seen[p.name] = true
		at := in.schema.Index(p.name)
		if at >= 0 {
			// As Beam's with_fields, a field of the same name is replaced.
			fields[at].Type = p.info.Type()
		} else {
			at = len(fields)
			fields = append(fields, row.Field{Name: p.name, Type: p.info.Type()})
		}
		f.At = append(f.At, at)
		f.Info = append(f.Info, p.info)
	}
	out, err := row.NewSchema(fields...)
	if err != nil {
		return nil, l.wrapf(t.typNode, err, "ExtractWindowingInfo")
	}
	f.Out = out
	res := parDo(l.root, t.name, in, f, stepOpts(t, weir.WithCoder(out.Coder()))...)
	return rowsColl(out, res), nil
}
