package yamlpipe

import (
	"slices"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/yamlpipe/combine"
)

// A Combine's accumulators are stored by slot: the running version's
// outputs, in the order it declared them. An update may declare the
// outputs in another order, insert one anywhere, or remove one from the
// middle: the new version keeps the slots the stored state has where they
// are (a removed output's slot retired, kept empty), appends the slots of
// its new outputs after them, and writes its rows in the order it
// declares (combine.Aggregator.Pos). The slot order is recorded in the
// step's config (slot_outputs), where the next version and the
// compatibility check read it.

// combineSlots puts agg's ops, declared in the pipeline's order, in the
// slot order of the state this job reads (Options.PriorCombineSlots), and
// permutes stored (each declared output's stored identity) and the
// migrations' inits likewise. It returns the stored identities in slot
// order, the outputs in slot order ("" for a retired slot), or stored
// unchanged and nil when the slots are the declared order, and the
// outputs that cannot be renames: by new output, the outputs the running
// version had and this one removed that stored something else (a
// WriteToSql below then does not take the new column for a rename of the
// removed one).
func (l *loader) combineSlots(t *transformSpec, agg *combine.Aggregator, stored []graph.Field) ([]graph.Field, []string, map[string][]string) {
	prior, ok := l.opts.PriorCombineSlots[t.name]
	if !ok {
		return stored, nil, nil
	}
	priorStored := l.opts.PriorCombineStored[t.name]
	if len(priorStored) != len(prior) {
		priorStored = nil
	}
	declared := make([]string, len(agg.Ops))
	for i, op := range agg.Ops {
		declared[i] = op.Out
	}
	var renamed map[string]string
	if agg.Migrations != nil {
		renamed = agg.Migrations.Renamed
	}
	order := slotOrder(prior, priorStored, declared, stored, renamed)
	notRenames := unrelatedOutputs(prior, priorStored, declared, stored, order)
	identity := len(order) == len(declared)
	for k, d := range order {
		identity = identity && d == k
	}
	if identity {
		return stored, nil, notRenames
	}
	ops := make([]combine.Op, len(order))
	pos := make([]int, len(order))
	outStored := make([]graph.Field, len(order))
	names := make([]string, len(order))
	var init []func(*row.Row) (any, error)
	if agg.Migrations != nil {
		init = make([]func(*row.Row) (any, error), len(order))
	}
	for k, d := range order {
		pos[k] = d
		if d < 0 {
			ops[k] = combine.Op{Src: -1, Fn: combine.FnCount, Retired: true}
			outStored[k] = graph.RetiredSlot()
			continue
		}
		ops[k], outStored[k], names[k] = agg.Ops[d], stored[d], declared[d]
		if init != nil {
			init[k] = agg.Migrations.Init[d]
		}
	}
	agg.Ops, agg.Pos = ops, pos
	if init != nil {
		agg.Migrations.Init = init
	}
	return outStored, names, notRenames
}

// unrelatedOutputs returns, by declared output that no prior slot holds
// (new), the prior outputs no slot holds any more (removed) that stored
// something else: the new one is not a rename of those. Nil when the
// prior slots' stored identities are unknown.
func unrelatedOutputs(prior []string, priorStored []graph.Field, declared []string, stored []graph.Field, order []int) map[string][]string {
	if priorStored == nil {
		return nil
	}
	held := make([]bool, len(declared))
	kept := make([]bool, len(prior))
	for k, d := range order {
		if d < 0 {
			continue
		}
		if k < len(prior) {
			held[d], kept[k] = true, true
		}
	}
	var out map[string][]string
	for d, name := range declared {
		if held[d] {
			continue
		}
		for i, pn := range prior {
			if pn == "" || kept[i] || slices.Contains(declared, pn) || priorStored[i] == stored[d] {
				continue
			}
			if out == nil {
				out = map[string][]string{}
			}
			out[name] = append(out[name], pn)
		}
	}
	return out
}

// slotOrder returns, for each accumulator slot, the index in declared of
// the output it holds (-1: retired), given the outputs of the slots the
// stored state has (prior, "" for one already retired) and what each
// stores (priorStored; nil when unknown), the declared outputs and what
// each stores, and the outputs' declared renames (new name to old). A
// prior slot holds the output of its name, or the one declared renamed
// from it; failing both, a declared output at its position whose name the
// prior slots do not have, while the slot's output is no longer declared,
// carries it on when it stores the same (an undeclared rename in place, as
// the compatibility check warns of); otherwise it is retired. The
// declared outputs no slot holds are appended in declared order; without
// any, retired slots at the end are dropped.
func slotOrder(prior []string, priorStored []graph.Field, declared []string, stored []graph.Field, renamed map[string]string) []int {
	at := make(map[string]int, len(declared))
	for i, n := range declared {
		at[n] = i
	}
	fromOld := make(map[string]string, len(renamed))
	for n, o := range renamed {
		fromOld[o] = n
	}
	used := make([]bool, len(declared))
	order := make([]int, len(prior))
	for i, pn := range prior {
		order[i] = -1
		if pn == "" {
			continue
		}
		d, ok := -1, false
		if nn, r := fromOld[pn]; r {
			d, ok = at[nn]
		} else if _, target := renamed[pn]; !target {
			d, ok = at[pn]
		}
		if ok && !used[d] {
			order[i], used[d] = d, true
		}
	}
	for i, pn := range prior {
		if order[i] >= 0 || pn == "" || i >= len(declared) || used[i] {
			continue
		}
		if _, declaredNow := at[pn]; declaredNow {
			continue
		}
		if _, r := renamed[declared[i]]; r || slices.Contains(prior, declared[i]) {
			continue
		}
		if priorStored != nil && priorStored[i] != stored[i] {
			continue // another aggregate in its place: the old one is retired
		}
		order[i], used[i] = i, true
	}
	var added []int
	for d := range declared {
		if !used[d] {
			added = append(added, d)
		}
	}
	if len(added) == 0 {
		// Retired slots at the end are dropped; before new slots they
		// stay, so that no new output reads a removed one's accumulators.
		for len(order) > 0 && order[len(order)-1] < 0 {
			order = order[:len(order)-1]
		}
	}
	return append(order, added...)
}
