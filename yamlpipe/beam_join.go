package yamlpipe

import (
	"slices"
	"strconv"
	"strings"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/yamlpipe/join"
	"github.com/weir-dev/weir/yamlpipe/keyenc"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// ---- Join ----

func buildJoin(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	in := t.inputNode
	if in == nil || in.Kind != yamlnode.Map || len(in.Keys) < 2 {
		at := in
		if at == nil {
			at = t.typNode
		}
		return nil, l.errf(at, "Join needs at least 2 named inputs (input: {a: TransformA, b: TransformB})")
	}
	aliases := make([]string, len(in.Keys))
	index := map[string]int{}
	for i, k := range in.Keys {
		aliases[i] = k.Text
		index[k.Text] = i
		if ins[i].isReject {
			return nil, l.errf(in.Vals[i], "Join reads rows, not an error output")
		}
	}
	j := &join.Aggregator{AppendKeyValue: keyenc.Append}
	for _, c := range ins {
		j.Ins = append(j.Ins, c.schema)
	}
	if err := l.joinEqualities(t, j, aliases, index); err != nil {
		return nil, err
	}
	if err := l.joinTypes(t, j, aliases, index); err != nil {
		return nil, err
	}
	if err := l.joinFields(t, j, aliases, index); err != nil {
		return nil, err
	}
	union, err := unionSchema(j.Ins)
	if err != nil {
		return nil, l.wrapf(t.typNode, err, "Join")
	}
	var tagged []weir.PCollection[*rowT]
	for i, c := range ins {
		fn := &join.TagFn{Tag: int64(i), Union: union}
		tagged = append(tagged, parDo(l.root, t.name+"/tag-"+strconv.Itoa(i), c, fn, stepOpts(t, weir.WithCoder(union.Coder()))...))
	}
	flat := weir.Flatten(l.root, t.name+"/inputs", tagged, stepOpts(t, weir.WithCoder(union.Coder()))...)
	j.Batch = row.MustSchema(row.Field{Name: "rows", Type: row.ListOf(row.RowOf(j.Out))})
	var keyFields []graph.Field
	keyCoder := graph.Coder{URN: "weir:yaml:join_window", Version: 1}
	if j.Shared {
		for _, ki := range j.Keys[0] {
			keyFields = append(keyFields, graph.Field{Name: j.Ins[0].Fields[ki].Name, Type: j.Ins[0].Fields[ki].Type.String()})
		}
		keyCoder = graph.Coder{URN: "weir:yaml:join_key", Version: 1, Fields: keyFields}
	}
	var stored []graph.Field
	for i, s := range j.Ins {
		stored = append(stored, graph.Field{Name: aliases[i], Type: s.String()})
	}
	storedCoder := graph.Coder{URN: "weir:yaml:join_rows", Version: 1, Fields: stored}
	grouped := weir.Aggregate[*rowT, *rowT](l.root, t.name+"/group", flat, j, keyCoder, storedCoder, stepOpts(t, weir.WithCoder(j.Batch.Coder()))...)
	res := parDo(l.root, t.name, rowsColl(j.Batch, grouped), join.EmitFn{}, stepOpts(t, weir.WithCoder(j.Out.Coder()))...)
	return rowsColl(j.Out, res), nil
}

// unionSchema is the row that carries any input of a Join or a Sql into
// one collection: the input's tag, then one nullable row field per input.
func unionSchema(ins []*row.Schema) (*row.Schema, error) {
	ufields := []row.Field{{Name: "tag", Type: row.Of(row.KindInt)}}
	for i, s := range ins {
		ufields = append(ufields, row.Field{Name: "in" + strconv.Itoa(i), Type: row.RowOf(s)})
	}
	return row.NewSchema(ufields...)
}

// joinEqualities reads equalities: a field name shared by all inputs, or a
// list of {alias: field, ...}, each naming two or more inputs, as Beam's;
// different pairs of inputs may join on different fields.
func (l *loader) joinEqualities(t *transformSpec, j *join.Aggregator, aliases []string, index map[string]int) error {
	en := t.config.Get("equalities")
	if en == nil {
		return l.errf(t.typNode, "Join needs config.equalities (a field in every input, or a list of {input: field, ...})")
	}
	type equality struct {
		ins    []int // inputs, in the order the equality names them
		fields map[int]int
		at     *yamlnode.Node
	}
	var eqs []equality
	field := func(eq *equality, i int, name string, at *yamlnode.Node) error {
		fi := j.Ins[i].Index(name)
		if fi < 0 {
			return l.errf(at, "equalities: %q is not a field of input %s (%s)", name, aliases[i], j.Ins[i])
		}
		if _, dup := eq.fields[i]; !dup {
			eq.ins = append(eq.ins, i)
		}
		eq.fields[i] = fi
		return nil
	}
	switch en.Kind {
	case yamlnode.String:
		eq := equality{fields: map[int]int{}, at: en}
		for i := range aliases {
			if err := field(&eq, i, en.Text, en); err != nil {
				return err
			}
		}
		eqs = append(eqs, eq)
	case yamlnode.Seq:
		if len(en.Seq) == 0 {
			return l.errf(en, "equalities is empty")
		}
		for _, en := range en.Seq {
			if en.Kind != yamlnode.Map || len(en.Keys) < 2 {
				return l.errf(en, "each equality must map at least 2 inputs to fields ({%s: field, %s: field})", aliases[0], aliases[1])
			}
			eq := equality{fields: map[int]int{}, at: en}
			for k, kn := range en.Keys {
				i, ok := index[kn.Text]
				if !ok {
					return l.errf(kn, "equalities: %q is not an input of the Join (inputs: %s)", kn.Text, strings.Join(aliases, ", "))
				}
				name, err := l.str(en.Vals[k], "equality field")
				if err != nil {
					return err
				}
				if err := field(&eq, i, name, en.Vals[k]); err != nil {
					return err
				}
			}
			eqs = append(eqs, eq)
		}
	default:
		return l.errf(en, "equalities must be a field name or a list of {input: field} mappings, not %s", en.Kind)
	}
	// The fields an equality compares have one type.
	for _, eq := range eqs {
		a := eq.ins[0]
		ta := j.Ins[a].Fields[eq.fields[a]].Type
		for _, b := range eq.ins[1:] {
			tb := j.Ins[b].Fields[eq.fields[b]].Type
			if !ta.Equal(tb) && ta.Kind != row.KindAny && tb.Kind != row.KindAny {
				return l.errf(eq.at, "equalities: %s.%s is %s but %s.%s is %s; cast one in MapToFields first", aliases[a], j.Ins[a].Fields[eq.fields[a]].Name, ta, aliases[b], j.Ins[b].Fields[eq.fields[b]].Name, tb)
			}
		}
	}
	// One shared key when every equality names every input.
	j.Shared = true
	for _, eq := range eqs {
		if len(eq.ins) != len(aliases) {
			j.Shared = false
		}
	}
	j.Keys = make([][]int, len(aliases))
	if j.Shared {
		for _, eq := range eqs {
			for i := range aliases {
				j.Keys[i] = append(j.Keys[i], eq.fields[i])
			}
		}
	}
	// The join order: the inputs as given, each after one it is linked to.
	joined := map[int]bool{0: true}
	j.Order, j.Conds = []int{0}, [][]join.Cond{nil}
	for len(j.Order) < len(aliases) {
		next := -1
		var conds []join.Cond
		for i := range aliases {
			if joined[i] {
				continue
			}
			conds = nil
			for _, eq := range eqs {
				fi, ok := eq.fields[i]
				if !ok {
					continue
				}
				for _, p := range eq.ins {
					if joined[p] {
						conds = append(conds, join.Cond{Prev: p, PrevField: eq.fields[p], Field: fi})
					}
				}
			}
			if len(conds) > 0 {
				next = i
				break
			}
		}
		if next < 0 {
			var loose []string
			for i := range aliases {
				if !joined[i] {
					loose = append(loose, aliases[i])
				}
			}
			return l.errf(en, "equalities do not link input(s) %s to %s: every input must be joined to another by an equality", strings.Join(loose, ", "), aliases[0])
		}
		joined[next] = true
		j.Order = append(j.Order, next)
		j.Conds = append(j.Conds, conds)
	}
	return nil
}

// joinTypes reads type: inner (default), left, right, outer or {outer:
// [inputs]}, into how each input joins those before it, as Beam's SQL.
func (l *loader) joinTypes(t *transformSpec, j *join.Aggregator, aliases []string, index map[string]int) error {
	j.Types = make([]join.Type, len(aliases))
	tn := t.config.Get("type")
	typ := "inner"
	var outer []string
	switch {
	case tn == nil:
	case tn.Kind == yamlnode.String:
		typ = tn.Text
		switch typ {
		case "inner", "left", "right", "outer":
		default:
			return l.errf(tn, "Join type %q is not one of inner, left, right, outer (or {outer: [inputs]})", typ)
		}
	case tn.Kind == yamlnode.Map:
		if err := l.checkKeys(tn, "Join type", "outer"); err != nil {
			return err
		}
		names, nodes, err := l.strList(tn.Get("outer"), "outer")
		if err != nil {
			return err
		}
		if len(names) == 0 {
			return l.errf(tn, "Join type {outer: [...]} needs a list of inputs")
		}
		for i, n := range names {
			if _, ok := index[n]; !ok {
				return l.errf(nodes[i], "Join type: %q is not an input of the Join (inputs: %s)", n, strings.Join(aliases, ", "))
			}
		}
		outer = names
	default:
		return l.errf(tn, "Join type must be a string or {outer: [inputs]}, not %s", tn.Kind)
	}
	for k := 1; k < len(j.Order); k++ {
		prev, cur := slices.Contains(outer, aliases[j.Order[k-1]]), slices.Contains(outer, aliases[j.Order[k]])
		switch {
		case prev && cur:
			j.Types[k] = join.Full
		case prev:
			j.Types[k] = join.Left
		case cur:
			j.Types[k] = join.Right
		case outer == nil:
			j.Types[k] = map[string]join.Type{"inner": join.Inner, "left": join.Left, "right": join.Right, "outer": join.Full}[typ]
		default:
			j.Types[k] = join.Inner
		}
	}
	return nil
}

// joinFields reads fields: per input a list of fields or {new: old}; an
// input not listed contributes all its fields, as SQL's input.*. A name
// given twice by * expansion gets a numeric suffix, as Calcite's does.
func (l *loader) joinFields(t *transformSpec, j *join.Aggregator, aliases []string, index map[string]int) error {
	fn := t.config.Get("fields")
	if fn != nil && fn.Kind != yamlnode.Map {
		return l.errf(fn, "Join fields must map inputs to a list of fields or {new_name: field}, not %s", fn.Kind)
	}
	var fields []row.Field
	used := map[string]bool{}
	add := func(name string, i, fi int, at *yamlnode.Node, explicit bool) error {
		if used[name] {
			if explicit {
				return l.errf(at, "Join fields: the field name %q is given more than once", name)
			}
			for n := 0; ; n++ {
				if c := name + strconv.Itoa(n); !used[c] {
					name = c
					break
				}
			}
		}
		used[name] = true
		ft := j.Ins[i].Fields[fi].Type
		fields = append(fields, row.Field{Name: name, Type: ft})
		j.Pick = append(j.Pick, [2]int{i, fi})
		return nil
	}
	listed := map[int]bool{}
	if fn != nil {
		for k, kn := range fn.Keys {
			i, ok := index[kn.Text]
			if !ok {
				return l.errf(kn, "Join fields: %q is not an input of the Join (inputs: %s)", kn.Text, strings.Join(aliases, ", "))
			}
			listed[i] = true
			v := fn.Vals[k]
			lookup := func(name string, at *yamlnode.Node) (int, error) {
				fi := j.Ins[i].Index(name)
				if fi < 0 {
					return 0, l.errf(at, "Join fields: %q is not a field of input %s (%s)", name, kn.Text, j.Ins[i])
				}
				return fi, nil
			}
			switch v.Kind {
			case yamlnode.Map:
				for m, nk := range v.Keys {
					old, err := l.str(v.Vals[m], "field")
					if err != nil {
						return err
					}
					fi, err := lookup(old, v.Vals[m])
					if err != nil {
						return err
					}
					if err := add(nk.Text, i, fi, nk, true); err != nil {
						return err
					}
				}
			default:
				names, nodes, err := l.strList(v, "fields of "+kn.Text)
				if err != nil {
					return err
				}
				for m, name := range names {
					fi, err := lookup(name, nodes[m])
					if err != nil {
						return err
					}
					if err := add(name, i, fi, nodes[m], true); err != nil {
						return err
					}
				}
			}
		}
	}
	for i := range aliases {
		if listed[i] {
			continue
		}
		for fi, f := range j.Ins[i].Fields {
			if err := add(f.Name, i, fi, t.typNode, false); err != nil {
				return err
			}
		}
	}
	out, err := row.NewSchema(fields...)
	if err != nil {
		return l.wrapf(t.typNode, err, "Join fields")
	}
	if len(fields) == 0 {
		return l.errf(fn, "Join produces no fields")
	}
	j.Out = out
	return nil
}
