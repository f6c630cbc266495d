package yamlpipe

import (
	"maps"

	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// Beam YAML's resource_hints (pipeline, composite and transform level) ask
// a runner for resources: min_ram, accelerator, cpu_count and the like.
// weir accepts and records them — each step's config in the graph carries
// its merged hints under "resource_hints" — but they are advisory: they do
// not change how weir executes the step. A transform's own hints override
// its composite's, which override the pipeline's.

// resourceHintsKey is the config key the merged hints are recorded under.
const resourceHintsKey = "resource_hints"

// readHints reads a resource_hints mapping of scalar values.
func (l *loader) readHints(n *yamlnode.Node) (map[string]any, error) {
	if n == nil || n.Kind == yamlnode.Null {
		return nil, nil
	}
	if n.Kind != yamlnode.Map {
		return nil, l.errf(n, "resource_hints must be a mapping (hint: value, e.g. min_ram: 4GB), not %s", n.Kind)
	}
	out := map[string]any{}
	for i, k := range n.Keys {
		v := n.Vals[i]
		if v.Kind == yamlnode.Map || v.Kind == yamlnode.Seq {
			return nil, l.errf(v, "resource hint %s must be a scalar (a number or a string such as 4GB), not %s", k.Text, v.Kind)
		}
		out[k.Text] = v.Plain()
	}
	return out, nil
}

// mergeHints returns inner over outer, without changing either.
func mergeHints(outer, inner map[string]any) map[string]any {
	if len(outer) == 0 {
		return inner
	}
	m := maps.Clone(outer)
	maps.Copy(m, inner)
	return m
}

// refuseProviders explains that a providers section cannot run in weir.
func (l *loader) refuseProviders(root *yamlnode.Node) error {
	if pn := root.KeyNode("providers"); pn != nil {
		return l.errf(pn, "providers are not supported: weir runs its own transforms and does not start Beam expansion services or load Java, Python or YAML providers; remove the providers section and use the built-in transforms (see docs/BEAM_YAML.md)")
	}
	return nil
}
