package yamlpipe

import (
	"maps"
	"slices"
	"strings"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// Nested composite and chain transforms, as Beam YAML writes them:
//
//	- type: composite            # or chain
//	  name: Clean
//	  input: Create              # or {name: Transform, ...}
//	  transforms: [...]          # read the input as `input` (or its names)
//	  output: MapToFields        # or {name: Transform, ...}; a chain's is its last transform
//
// A composite expands into its transforms, named Clean/Inner; references
// inside it resolve first to its own transforms and inputs, and outside
// references to Clean (or Clean.name) resolve to its output.

// isComposite reports whether n is a composite or chain transform.
func isComposite(n *yamlnode.Node) bool {
	if n.Kind != yamlnode.Map {
		return false
	}
	t := n.Get("type")
	return t != nil && t.Kind == yamlnode.String && (t.Text == "composite" || t.Text == "chain")
}

// expandComposite parses the composite n, nested under prefix ("" at the
// top level), into its transforms, recording its outputs in l.alias.
// outer resolves the composite's inputs in the enclosing composite (nil at
// the top level).
func (l *loader) expandComposite(n *yamlnode.Node, prefix string, outer func(*inputRef) error) (specs []*transformSpec, err error) {
	if err := l.checkKeys(n, "a composite transform", "type", "name", "input", "transforms", "output", "resource_hints"); err != nil {
		return nil, err
	}
	hints, err := l.readHints(n.Get("resource_hints"))
	if err != nil {
		return nil, err
	}
	if hints != nil {
		defer func() {
			for _, t := range specs {
				t.hints = mergeHints(hints, t.hints)
			}
		}()
	}
	typ := n.Get("type").Text
	chain := typ == "chain"
	name := typ
	if nn := n.Get("name"); nn != nil {
		var err error
		if name, err = l.str(nn, "transform name"); err != nil {
			return nil, err
		}
		if err := graph.ValidateName(name); err != nil {
			return nil, l.wrapf(nn, err, "bad transform name")
		}
		if strings.ContainsAny(name, "/.") {
			return nil, l.errf(nn, "composite name %q must not contain '/' or '.'", name)
		}
	}
	full := name
	if prefix != "" {
		full = prefix + "/" + name
	}
	if prefix == "" {
		l.composites = append(l.composites, compositeAt{name: full, n: n})
	}
	// The composite's inputs, by the names its transforms read them by.
	inputs := map[string]inputRef{}
	if in := n.Get("input"); in != nil {
		switch in.Kind {
		case yamlnode.Map:
			for i, k := range in.Keys {
				s, err := l.str(in.Vals[i], "input")
				if err != nil {
					return nil, err
				}
				inputs[k.Text] = inputRef{text: s, n: in.Vals[i]}
			}
		default:
			s, err := l.str(in, "input")
			if err != nil {
				return nil, err
			}
			inputs["input"] = inputRef{text: s, n: in}
		}
	}
	if outer != nil {
		for k, in := range inputs {
			if err := outer(&in); err != nil {
				return nil, err
			}
			inputs[k] = in
		}
	}
	tn := n.Get("transforms")
	if tn == nil || tn.Kind != yamlnode.Seq || len(tn.Seq) == 0 {
		at := tn
		if at == nil {
			at = n
		}
		return nil, l.errf(at, "a %s transform needs a non-empty transforms list", typ)
	}
	// local maps the names of this scope's transforms to their full names.
	local := map[string]string{}
	for _, it := range tn.Seq {
		if it.Kind != yamlnode.Map {
			continue // parseTransform reports it
		}
		nm := ""
		if nn := it.Get("name"); nn != nil && nn.Kind == yamlnode.String {
			nm = nn.Text
		} else if tn := it.Get("type"); tn != nil && tn.Kind == yamlnode.String {
			nm = tn.Text
		}
		if _, dup := local[nm]; dup {
			return nil, l.errf(it, "duplicate transform name %q in %s (name the transforms of a composite uniquely)", nm, full)
		}
		local[nm] = full + "/" + nm
	}
	scope := func(r *inputRef) error {
		if in, ok := inputs[r.text]; ok {
			r.text = in.text
			return nil
		}
		if f, ok := local[r.text]; ok {
			r.text = f
			return nil
		}
		if i := strings.LastIndexByte(r.text, '.'); i > 0 {
			if f, ok := local[r.text[:i]]; ok {
				r.text = f + r.text[i:]
				return nil
			}
		}
		return l.errf(r.n, "unknown input %q in %s (its transforms: %s; its inputs: %s)", r.text, full, strings.Join(slices.Sorted(maps.Keys(local)), ", "), strings.Join(slices.Sorted(maps.Keys(inputs)), ", "))
	}
	var own []*transformSpec // the transforms of this scope (not nested ones)
	var all []*transformSpec
	for _, it := range tn.Seq {
		if isComposite(it) {
			if chain {
				return nil, l.errf(it, "a chain cannot hold a nested %s: give it a name in a composite instead", it.Get("type").Text)
			}
			inner, err := l.expandComposite(it, full, scope)
			if err != nil {
				return nil, err
			}
			all = append(all, inner...)
			continue
		}
		t, err := l.parseTransform(it, chain)
		if err != nil {
			return nil, err
		}
		nm := t.typ
		if t.nameNode != nil {
			nm = t.name
		} else {
			t.nameNode = t.typNode
		}
		t.name = full + "/" + nm
		own = append(own, t)
		all = append(all, t)
	}
	for i, t := range own {
		if chain {
			switch {
			case i > 0:
				t.inputs = []inputRef{{text: own[i-1].name, n: t.typNode}}
			case len(inputs) == 1:
				for _, in := range inputs {
					t.inputs = []inputRef{in}
				}
			case len(inputs) > 1:
				return nil, l.errf(n.Get("input"), "a chain reads one input, not %d", len(inputs))
			case !t.def.source:
				return nil, l.errf(t.typNode, "a chain without input must start with a source, not %s", t.typ)
			}
			continue
		}
		for j := range t.inputs {
			if err := scope(&t.inputs[j]); err != nil {
				return nil, err
			}
		}
		for j := range t.sides {
			if err := scope(&t.sides[j].inputRef); err != nil {
				return nil, err
			}
		}
	}
	// Outputs.
	on := n.Get("output")
	switch {
	case on == nil && chain:
		l.alias[full] = own[len(own)-1].name
	case on == nil:
		if len(own) > 0 && len(all) == len(own) {
			l.alias[full] = own[len(own)-1].name
		}
	case on.Kind == yamlnode.Map:
		for i, k := range on.Keys {
			s, err := l.str(on.Vals[i], "output")
			if err != nil {
				return nil, err
			}
			r := inputRef{text: s, n: on.Vals[i]}
			if err := scope(&r); err != nil {
				return nil, err
			}
			l.alias[full+"."+k.Text] = r.text
		}
	default:
		s, err := l.str(on, "output")
		if err != nil {
			return nil, err
		}
		r := inputRef{text: s, n: on}
		if err := scope(&r); err != nil {
			return nil, err
		}
		l.alias[full] = r.text
	}
	return all, nil
}

// compositeAt is a top-level composite, for the check that its name is
// unique among the top-level transforms.
type compositeAt struct {
	name string
	n    *yamlnode.Node
}

// checkCompositeNames reports a top-level composite named like a
// transform or another composite.
func (l *loader) checkCompositeNames() error {
	seen := map[string]bool{}
	for _, c := range l.composites {
		if _, dup := l.byName[c.name]; dup || seen[c.name] {
			return l.errf(c.n, "duplicate transform name %q: names must be unique", c.name)
		}
		seen[c.name] = true
	}
	return nil
}

// unalias resolves a reference to a composite (or one of its named
// outputs) to the transform that produces it.
func (l *loader) unalias(text string) string {
	for range 64 {
		a, ok := l.alias[text]
		if !ok {
			return text
		}
		text = a
	}
	return text
}
