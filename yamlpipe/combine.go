package yamlpipe

import (
	"fmt"
	"maps"
	"slices"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/yamlpipe/combine"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

func buildCombine(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	in := ins[0]
	lang, beamShape, err := l.combineLanguage(t)
	if err != nil {
		return nil, err
	}
	// A Combine written for Beam (with language) has Beam's rows in every
	// windowing: the window and pane are element metadata only (as they are
	// of every element), which ExtractWindowingInfo, CEL's window_start,
	// window_end and pane, and WriteToSql's window and pane columns read.
	// weir's Combine (no language) keeps them as columns too (docs/ARCHITECTURE.md, "Contracts").
	groups, groupNodes, err := l.strList(t.config.Get("group_by"), "group_by")
	if err != nil {
		return nil, err
	}
	agg := &combine.Aggregator{Step: t.name, Beam: beamShape}
	var keyFields, outFields []row.Field
	seen := map[string]bool{}
	if !beamShape {
		seen = map[string]bool{combine.FieldWindowStart: true, combine.FieldWindowEnd: true, combine.FieldPane: true}
	}
	for i, g := range groups {
		idx := in.schema.Index(g)
		if idx < 0 {
			return nil, l.errf(groupNodes[i], "group_by: %q is not a field of the input (%s)", g, in.schema)
		}
		if seen[g] {
			return nil, l.errf(groupNodes[i], "group_by: %q is listed twice or is a reserved output name", g)
		}
		seen[g] = true
		agg.Group = append(agg.Group, idx)
		keyFields = append(keyFields, in.schema.Fields[idx])
	}
	agg.ScalarKeys = combine.ScalarFields(keyFields)
	outFields = append(outFields, keyFields...)
	cn := t.config.Get("combine")
	if cn == nil || cn.Kind != yamlnode.Map || len(cn.Keys) == 0 {
		at := cn
		if at == nil {
			at = t.typNode
		}
		return nil, l.errf(at, "Combine needs config.combine (out: {value: field, fn: sum|count|min|max|mean|latest|all|any|group|concat}, or field: fn)")
	}
	var stored []graph.Field
	for i, k := range cn.Keys {
		out, v := k.Text, cn.Vals[i]
		if seen[out] {
			return nil, l.errf(k, "combine output %q clashes with a group_by field or a reserved name (window_start, window_end, pane)", out)
		}
		seen[out] = true
		cs, err := l.parseCombineSpec(k, v)
		if err != nil {
			return nil, err
		}
		fn, reverse, ok := combineFnOf(cs.fnName)
		if !ok {
			return nil, l.errf(cs.fnNode, "unknown combine fn %q (want %s)", cs.fnName, combineFnNames)
		}
		op := combine.Op{Out: out, Fn: fn, Src: -1, Reverse: reverse}
		if fn == combine.FnTop {
			if err := l.topConfig(&op, cs); err != nil {
				return nil, err
			}
		} else if cs.configNode != nil {
			return nil, l.errf(cs.configNode, "combine %q: %s takes no config", out, cs.fnName)
		}
		value, valueNode := cs.value, cs.valueNode
		if value == "" && fn != combine.FnCount && in.schema.Index(out) >= 0 {
			// Beam: without value, the output aggregates the field of its name.
			value, valueNode = out, k
		}
		var vt row.Type
		// Beam's count counts elements, whatever their value.
		countRows := fn == combine.FnCount && (beamShape || (v.Kind == yamlnode.String && in.schema.Index(value) < 0))
		if value != "" && !countRows {
			op.Src = in.schema.Index(value)
			if op.Src < 0 {
				at := valueNode
				if at == nil {
					at = k
				}
				hint := ""
				if lang == "python" || lang == "javascript" {
					hint = "; expressions in value are not supported yet: compute the field in MapToFields (CEL) first"
				}
				return nil, l.errf(at, "combine %q: %q is not a field of the input (%s)%s", out, value, in.schema, hint)
			}
			vt = in.schema.Fields[op.Src].Type
		} else if fn != combine.FnCount {
			return nil, l.errf(v, "combine %q: %s needs a value field", out, fn)
		}
		switch fn {
		case combine.FnSum, combine.FnMean:
			if !vt.IsNumeric() {
				return nil, l.errf(cs.fnNode, "combine %q: %s needs a numeric field; %q is %s (cast it in MapToFields, e.g. int(x))", out, fn, value, vt)
			}
			op.Typ = vt
			if fn == combine.FnMean {
				op.Typ = row.Of(row.KindFloat)
			}
		case combine.FnCount:
			op.Typ = row.Of(row.KindInt)
		case combine.FnMin, combine.FnMax, combine.FnTop:
			switch vt.Kind {
			case row.KindInt, row.KindFloat, row.KindString, row.KindTimestamp, row.KindBool:
			default:
				return nil, l.errf(cs.fnNode, "combine %q: %s needs an ordered field (int, float, string, timestamp, bool); %q is %s", out, cs.fnName, value, vt)
			}
			op.Typ = vt
			if fn == combine.FnTop {
				op.Typ = row.ListOf(vt)
			}
		case combine.FnAll, combine.FnAny:
			op.Typ = row.Of(row.KindBool)
		case combine.FnGroup:
			op.Typ = row.ListOf(vt)
		case combine.FnConcat:
			if vt.Kind != row.KindList {
				return nil, l.errf(cs.fnNode, "combine %q: concat needs a list field; %q is %s (group collects scalar values)", out, value, vt)
			}
			op.Typ = vt
		case combine.FnLatest:
			op.Typ = vt
		}
		agg.Ops = append(agg.Ops, op)
		outFields = append(outFields, row.Field{Name: out, Type: op.Typ})
		// The accumulator's identity is positional: the fn and the type of
		// its value field, never the output's name or unrelated fields.
		valueType := "none"
		if op.Src >= 0 {
			valueType = vt.String()
		}
		name := string(op.Fn)
		if fn == combine.FnTop {
			name = fmt.Sprintf("top(%d,reverse=%t)", op.N, op.Reverse)
		}
		stored = append(stored, graph.Field{Name: name, Type: valueType})
	}
	if !beamShape {
		outFields = append(outFields,
			row.Field{Name: combine.FieldWindowStart, Type: row.Of(row.KindTimestamp)},
			row.Field{Name: combine.FieldWindowEnd, Type: row.Of(row.KindTimestamp)},
			row.Field{Name: combine.FieldPane, Type: row.RowOf(row.PaneSchema())},
		)
	}
	out, err := row.NewSchema(outFields...)
	if err != nil {
		return nil, l.wrapf(cn, err, "bad combine outputs")
	}
	agg.Out = out
	if agg.Migrations, err = l.parseCombineMigrations(t, agg); err != nil {
		return nil, err
	}
	if agg.KeyMigration, err = l.parseRekey(t, in.schema, keyFields, agg.Ops); err != nil {
		return nil, err
	}
	stored, slots, notRenames := l.combineSlots(t, agg, stored)
	keyCoder := row.FieldsCoder(keyFields)
	storedCoder := graph.Coder{URN: combine.AccumulatorURN, Version: 1, Fields: stored}
	opts := stepOpts(t, append([]weir.StepOption{weir.WithCoder(out.Coder())}, errorOpt(t)...)...)
	var renamed map[string]string
	var lossy map[string]bool
	var inited []string
	if m := agg.Migrations; m != nil {
		renamed, lossy = m.Renamed, m.Lossy
		for k, init := range m.Init {
			if init != nil {
				inited = append(inited, agg.Ops[k].Out)
			}
		}
	}
	if len(renamed) > 0 || len(lossy) > 0 || len(inited) > 0 || agg.KeyMigration != nil || slots != nil || notRenames != nil {
		// The declared renames, lossy conversions, inits and re-key go
		// in the step's recorded config, where the compatibility check
		// reads them (compat.RenamedOutputs, compat.LossyOutputs,
		// compat.RekeyedFrom; the inits for its warning's words).
		opts = append(opts, weir.WithConfig(combineConfigWithMigrations(t, renamed, lossy, inited, agg.KeyMigration, slots, notRenames)))
	}
	var res weir.PCollection[*rowT]
	if in.isReject {
		res = weir.Aggregate[contract.Reject, *rowT](l.root, t.name, in.rejects, agg, keyCoder, storedCoder, opts...)
	} else {
		res = weir.Aggregate[*rowT, *rowT](l.root, t.name, in.rows, agg, keyCoder, storedCoder, opts...)
	}
	l.registerErrors(t, res)
	c := rowsColl(out, res)
	c.renamed, c.notRenames = renamed, notRenames
	c.keyStep = t.name
	if agg.KeyMigration != nil {
		c.rekey = &combineRekey{step: t.name, m: agg.KeyMigration, merges: map[string]string{}}
		for _, op := range agg.Ops {
			if op.Retired {
				continue
			}
			if m, ok := agg.KeyMigration.Merge[op.Out]; ok {
				c.rekey.merges[op.Out] = m
				continue
			}
			switch op.Fn {
			case combine.FnSum, combine.FnCount:
				c.rekey.merges[op.Out] = "sum"
			case combine.FnMin:
				c.rekey.merges[op.Out] = "min"
			case combine.FnMax:
				c.rekey.merges[op.Out] = "max"
			}
		}
	}
	return c, nil
}

// combineRekey is a Combine's declared re-key as a WriteToSql fed by it
// sees it: the migration, and how each output merges (sum, min, max).
type combineRekey struct {
	step   string
	m      *combine.KeyMigration
	merges map[string]string
}

// combineConfigWithMigrations is t's recorded config with the outputs
// renamed in place, as {"renamed_outputs": {NEW: OLD}}, those allowed a
// lossy conversion, as {"lossy_outputs": [NAME...]} (sorted), and the
// earlier key fields of a re-key, as {"rekeyed_from": [FIELD...]}.
func combineConfigWithMigrations(t *transformSpec, renamed map[string]string, lossy map[string]bool, inited []string, rk *combine.KeyMigration, slots []string, notRenames map[string][]string) any {
	cfg, _ := t.config.Plain().(map[string]any)
	if cfg == nil {
		cfg = map[string]any{}
	}
	if len(t.hints) > 0 {
		cfg[resourceHintsKey] = t.hints
	}
	if len(renamed) > 0 {
		r := make(map[string]any, len(renamed))
		for k, v := range renamed {
			r[k] = v
		}
		cfg[renamedOutputsKey] = r
	}
	if len(lossy) > 0 {
		cfg[lossyOutputsKey] = anyList(slices.Sorted(maps.Keys(lossy)))
	}
	if len(inited) > 0 {
		cfg[initializedOutputsKey] = anyList(inited)
	}
	if notRenames != nil {
		m := make(map[string]any, len(notRenames))
		for k, v := range notRenames {
			m[k] = anyList(v)
		}
		cfg[notRenamedFromKey] = m
	}
	if slots != nil {
		cfg[slotOutputsKey] = anyList(slots)
	}
	if rk != nil {
		cfg[rekeyedFromKey] = anyList(rk.From)
	}
	return cfg
}

// anyList is ss as the []any a step's recorded config (plain YAML values)
// holds a list in.
func anyList(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// notRenamedFromKey is the key of a Combine's recorded step config that
// maps each output this version added to the outputs it removed that
// stored something else (combineSlots): not renames of one another.
const notRenamedFromKey = "not_renamed_from"

// slotOutputsKey is the key of a Combine's recorded step config that
// lists its outputs in accumulator slot order ("" for a retired slot),
// when that is not the order the pipeline declares them in
// (combineSlots).
const slotOutputsKey = "slot_outputs"

// initializedOutputsKey is the key of a Combine's recorded step config
// that lists the outputs given an init (migrations), in output order.
const initializedOutputsKey = "initialized_outputs"

// rekeyedFromKey is the key of a Combine's recorded step config that
// lists the earlier key fields of its declared re-key.
const rekeyedFromKey = "rekeyed_from"

// lossyOutputsKey is the key of a Combine's recorded step config that
// lists the outputs declared allow_lossy.
const lossyOutputsKey = "lossy_outputs"

// renamedOutputsKey is the key of a Combine's recorded step config (its
// graph FnRef's config) that maps each output renamed in place to its old
// name (migrations: renamed_from).
const renamedOutputsKey = "renamed_outputs"
