package runner

// This file is the in-memory handover of keyed state from a paused
// execution to the one that replaces it (Options.Adopt), of sources' state
// (contract.SourceAdopter), and the helpers that split key groups among
// new workers when rescaling.

import (
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner/contract"
)

// Adoption names a paused execution whose keyed state a new execution
// takes over in memory.
type Adoption struct {
	// From is the paused (then cancelled) execution.
	From *Execution
	// Steps maps the new execution's keyed step names to the old ones
	// (identity for steps that kept their name). Steps not listed start
	// from the store (Options.Restore) or empty.
	Steps map[string]string
}

// adoptable returns the old execution's instances (one per old worker) of
// the keyed step that new step name takes over, or nil. Adoption needs the
// same number of key groups; the worker count may differ (rescaling): each
// new instance then takes the key groups the new routing table gives it.
func (r *run) adoptable(step string) []node {
	a := r.opts.Adopt
	if a == nil || a.From == nil {
		return nil
	}
	old := a.From.r
	if old.opts.KeyGroups != r.opts.KeyGroups || old.pauseEpoch.Load() == 0 {
		return nil
	}
	name, ok := a.Steps[step]
	if !ok {
		return nil
	}
	sp := old.byName[name]
	if sp == nil {
		return nil
	}
	out := make([]node, len(old.workers))
	for i, w := range old.workers {
		out[i] = w.nodes[sp.idx]
	}
	return out
}

// adoptFrom hands a keyed node on worker w the instances (one per old
// worker) of the paused execution it adopts from. With the same worker
// count, whole gets w's predecessor, whose state the node takes as a whole,
// and adoptFrom reports true; when rescaling, part gets every old instance
// in turn, to take the key groups w now owns.
func adoptFrom[T node](w *worker, olds []node, whole, part func(old T)) bool {
	if len(olds) == len(w.r.workers) {
		if old, ok := olds[w.id].(T); ok {
			whole(old)
			return true
		}
	}
	for _, o := range olds {
		if old, ok := o.(T); ok {
			part(old)
		}
	}
	return false
}

// adoptableSource returns the paused execution's source of the step that
// new source step takes over — the step Adoption.Steps maps it to, else
// the step of the same name — or nil.
func (r *run) adoptableSource(step string) contract.Source {
	a := r.opts.Adopt
	if a == nil || a.From == nil {
		return nil
	}
	name, ok := a.Steps[step]
	if !ok {
		name = step
	}
	sp := a.From.r.byName[name]
	if sp == nil || sp.step.Kind != graph.KindSource {
		return nil
	}
	src, _ := sp.code.(contract.Source)
	return src
}

// ownedBy returns the elements of src whose key group route gives to
// worker w, appended to dst: how rescaling splits key-group states and
// timer heaps among new workers.
func ownedBy[T any](dst, src []T, kg func(T) int, route RoutingTable, w int) []T {
	for _, x := range src {
		if int(route[kg(x)]) == w {
			dst = append(dst, x)
		}
	}
	return dst
}

// keepOwnedGroups copies into dst the non-nil key-group states of src that
// route gives to worker w.
func keepOwnedGroups[G any](dst, src []*G, route RoutingTable, w int) {
	for kg, g := range src {
		if g != nil && int(route[kg]) == w {
			dst[kg] = g
		}
	}
}
