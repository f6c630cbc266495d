package compat

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/graph"
)

// Check decides whether NEW (newp) can take over the state of the running
// pipeline OLD (old), listing every reason it cannot. A nil graph is an
// empty one. Check reads both graphs and changes neither.
func Check(old, newp *graph.Pipeline, opts Options) Report {
	c := &checker{
		old:     indexSteps(old),
		new:     indexSteps(newp),
		oldG:    old,
		newG:    newp,
		opts:    opts,
		targets: map[string]target{},
		claimed: map[string]bool{},
	}
	c.report = Report{Errors: []Finding{}, Warnings: []Finding{}, DroppedState: []DroppedState{}, Matches: []Match{}}
	c.checkMappingNames()
	c.resolveTargets()
	for _, name := range sortedKeys(c.old) {
		c.checkStep(c.old[name])
	}
	c.report.finish()
	return c.report
}

// target is where an OLD step goes in NEW.
type target struct {
	name     string // NEW step name; "" when deleted
	deleted  bool   // mapped to ""
	key      string // the mapping key that applied, "" when none did
	conflict bool   // another OLD step maps to the same name
}

type checker struct {
	old, new   map[string]*graph.Step
	oldG, newG *graph.Pipeline
	opts       Options
	targets    map[string]target
	// claimed holds the NEW names some OLD step maps to.
	claimed map[string]bool
	report  Report
}

func indexSteps(p *graph.Pipeline) map[string]*graph.Step {
	m := map[string]*graph.Step{}
	if p == nil {
		return m
	}
	for _, s := range p.Steps {
		m[s.Name] = s
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (c *checker) fail(step string, code errcode.Code, fix, format string, args ...any) {
	c.report.Errors = append(c.report.Errors, Finding{Step: step, Code: code, Reason: fmt.Sprintf(format, args...), Fix: fix})
}

func (c *checker) warn(step string, code errcode.Code, format string, args ...any) {
	c.report.Warnings = append(c.report.Warnings, Finding{Step: step, Code: code, Reason: fmt.Sprintf(format, args...)})
}

// checkMappingNames reports mapping keys that name no OLD step and values
// that name no NEW step.
func (c *checker) checkMappingNames() {
	for _, k := range c.opts.Mapping.keys() {
		if !anyUnder(c.old, k) {
			c.fail(k, errcode.MappingUnknownStep,
				fmt.Sprintf("check the spelling; the running pipeline's steps are: %s", strings.Join(topLevel(c.old), ", ")),
				"the transform name mapping renames %q, but the running pipeline has no step %s (nor steps under %s/)", k, k, k)
		}
		if v := c.opts.Mapping[k]; v != "" && !anyUnder(c.new, v) {
			c.fail(k, errcode.MappingUnknownStep,
				fmt.Sprintf(`check the spelling, or map %q to "" to drop its state on purpose; the new pipeline's steps are: %s`, k, strings.Join(topLevel(c.new), ", ")),
				"the transform name mapping renames %q to %q, but the new pipeline has no step %s (nor steps under %s/)", k, v, v, v)
		}
	}
}

// anyUnder reports whether some step is prefix or lies under it.
func anyUnder(steps map[string]*graph.Step, prefix string) bool {
	for name := range steps {
		if hasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// topLevel returns the sorted, distinct first name segments of steps.
func topLevel(steps map[string]*graph.Step) []string {
	seen := map[string]bool{}
	for name := range steps {
		first, _, _ := strings.Cut(name, "/")
		seen[first] = true
	}
	return sortedKeys(seen)
}

// resolveTargets applies the mapping to every OLD step and reports NEW
// names that two OLD steps map to.
func (c *checker) resolveTargets() {
	byNew := map[string][]string{}
	for _, name := range sortedKeys(c.old) {
		newName, key, applied := c.opts.Mapping.Rename(name)
		t := target{name: newName, key: key, deleted: applied && newName == ""}
		c.targets[name] = t
		if !t.deleted {
			byNew[newName] = append(byNew[newName], name)
			c.claimed[newName] = true
		}
	}
	for _, newName := range sortedKeys(byNew) {
		olds := byNew[newName]
		if len(olds) < 2 {
			continue
		}
		var via []string
		for _, o := range olds {
			t := c.targets[o]
			t.conflict = true
			c.targets[o] = t
			if t.key != "" {
				via = append(via, fmt.Sprintf("%s (mapped by %q)", o, t.key))
			} else {
				via = append(via, o+" (its own name)")
			}
		}
		c.fail(newName, errcode.MappingConflict,
			fmt.Sprintf(`map all but one of them to another name, or to "" to drop its state on purpose, e.g. --transform-name-mapping '%s'`, c.withEntry(olds[0], "")),
			"steps %s of the running pipeline all map to step %s of the new pipeline: a step can take over the state of one step only", strings.Join(via, ", "), newName)
	}
}

// withEntry returns the user's mapping plus key -> value, as JSON. Entries
// of the user's mapping that are wrong on their own (a key naming no step
// of the running pipeline, or a value naming no step of the new one) are
// left out, so that a suggested fix never repeats a mistake.
func (c *checker) withEntry(key, value string) string {
	m := Mapping{}
	for k, v := range c.opts.Mapping {
		if !anyUnder(c.old, k) || v != "" && !anyUnder(c.new, v) {
			continue
		}
		m[k] = v
	}
	m[key] = value
	return m.String()
}

// mappingFix suggests adding key -> value to the mapping.
func (c *checker) mappingFix(key, value string) string {
	return fmt.Sprintf("add --transform-name-mapping '%s'", c.withEntry(key, value))
}

// checkStep checks one OLD step against its NEW counterpart.
func (c *checker) checkStep(o *graph.Step) {
	t := c.targets[o.Name]
	switch {
	case t.conflict:
		return // reported as a conflict; which step to compare with is ambiguous
	case t.deleted:
		c.drop(o, fmt.Sprintf("mapped to \"\" by %q", t.key))
		return
	}
	n := c.new[t.name]
	if n == nil {
		c.missing(o, t)
		return
	}
	c.checkSideInputs(o, n)
	switch {
	case o.Kind == graph.KindSource:
		c.checkSource(o, n)
	case o.Kind.IsKeyed():
		c.checkKeyed(o, n)
	}
}

// stepRef names an OLD step and, when it was renamed, its NEW name.
func stepRef(o, n string) string {
	if o == n {
		return "step " + o
	}
	return fmt.Sprintf("step %s (now %s)", o, n)
}

// hasState reports whether the step keeps state an update carries over.
func hasState(s *graph.Step) bool { return s.Kind.IsKeyed() || s.Kind == graph.KindSource }

// drop records that o's state is dropped on purpose, why, and warns.
func (c *checker) drop(o *graph.Step, why string) {
	if !hasState(o) {
		return
	}
	d := DroppedState{Step: o.Name, Kind: o.Kind, KeyCoder: o.KeyCoder, StoredCoder: o.StoredCoder, State: o.State, Timers: o.Timers, Source: o.Source}
	d.What = describeStored(o)
	c.report.DroppedState = append(c.report.DroppedState, d)
	if o.Kind == graph.KindSource {
		c.warn(o.Name, errcode.SourcePositionsDropped, "source step %s is %s: its read positions (%s) are dropped", o.Name, why, describeIO(o.Source))
		return
	}
	c.warn(o.Name, errcode.StateDropped, "%s step %s is %s: its state is dropped: %s", o.Kind, o.Name, why, d.What)
}

// describeStored says what a step with state keeps.
func describeStored(s *graph.Step) string {
	if s.Kind == graph.KindSource {
		return "read positions of " + describeIO(s.Source)
	}
	var parts []string
	if s.KeyCoder != nil {
		parts = append(parts, "keys "+s.KeyCoder.String())
	}
	if s.StoredCoder != nil {
		switch s.Kind {
		case graph.KindCombinePerKey:
			parts = append(parts, "accumulators "+s.StoredCoder.String())
		case graph.KindGroupByKey:
			parts = append(parts, "buffered values "+s.StoredCoder.String())
		default:
			parts = append(parts, "stored values "+s.StoredCoder.String())
		}
	}
	for _, sp := range s.State {
		parts = append(parts, fmt.Sprintf("%s state %q %s", sp.Kind, sp.ID, sp.Coder.String()))
	}
	for _, tm := range s.Timers {
		parts = append(parts, fmt.Sprintf("pending %s timers %q", strings.ReplaceAll(string(tm.Domain), "_", "-"), tm.ID))
	}
	if s.Kind == graph.KindStatefulParDo || s.Kind == graph.KindGroupByKey || s.Kind == graph.KindCombinePerKey {
		parts = append(parts, "per key and window")
	}
	return strings.Join(parts, ", ")
}

// describeIO renders what a source reads, e.g. "pubsub topics/clicks".
func describeIO(id *graph.IOIdentity) string {
	if id == nil {
		return "an unnamed source"
	}
	return fmt.Sprintf("%s %s", id.Kind, id.Identity)
}

// missing handles an OLD step that has no step of its (mapped) name in NEW.
func (c *checker) missing(o *graph.Step, t target) {
	looked := ""
	if t.key != "" {
		looked = fmt.Sprintf(" (the mapping of %q renames it %s)", t.key, t.name)
	}
	switch {
	case o.Kind.IsKeyed():
		fix := fmt.Sprintf(`restore step %s, map it to its new name with --transform-name-mapping '%s', or map it to "" to drop its state on purpose: --transform-name-mapping '%s'`, o.Name, c.withEntry(o.Name, "NEW_NAME"), c.withEntry(o.Name, ""))
		if cands := c.candidates(o, sameKeyedShape(false)); len(cands) > 0 {
			fix = fmt.Sprintf("%s has the same kind, coders and windowing — %s", orList(cands), c.mappingFix(o.Name, cands[0]))
		} else if cands := c.candidates(o, sameKeyedShape(true)); len(cands) > 0 {
			fix = fmt.Sprintf("%s has the same kind and coders, and windowing that differs only in its numbers — %s", orList(cands), c.mappingFix(o.Name, cands[0]))
		}
		c.fail(o.Name, errcode.StepMissing, fix,
			"%s step %s has no match in the new pipeline%s: its state would be lost (%s)", o.Kind, o.Name, looked, describeStored(o))
	case o.Kind == graph.KindSource:
		if c.opts.AllowSourceChange {
			c.drop(o, "gone from the new pipeline and --allow-source-change is given")
			return
		}
		cands := c.candidates(o, sameSource)
		fix := fmt.Sprintf(`restore source step %s, map it to its new name, map it to "" to drop its positions on purpose (--transform-name-mapping '%s'), or pass --allow-source-change`, o.Name, c.withEntry(o.Name, ""))
		if len(cands) > 0 {
			fix = fmt.Sprintf("%s reads the same %s — %s", orList(cands), o.Source.Kind, c.mappingFix(o.Name, cands[0]))
		}
		c.fail(o.Name, errcode.SourceChanged, fix,
			"source step %s has no match in the new pipeline%s: its read positions (%s) would be lost", o.Name, looked, describeIO(o.Source))
	}
}

// orList renders names as "A", "A or B", "A, B or C".
func orList(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// candidates returns, sorted, the NEW steps no OLD step maps to that could
// be o renamed, per same.
func (c *checker) candidates(o *graph.Step, same func(c *checker, o, n *graph.Step) bool) []string {
	var out []string
	for _, name := range sortedKeys(c.new) {
		n := c.new[name]
		if !c.claimed[name] && same(c, o, n) {
			out = append(out, name)
		}
	}
	return out
}

// sameKeyedShape returns a test of whether n has o's kind, coders, state
// specs and input windowing: exactly the same windowing, or, with
// numbersMayDiffer, windowing that differs only in its numbers.
func sameKeyedShape(numbersMayDiffer bool) func(c *checker, o, n *graph.Step) bool {
	return func(c *checker, o, n *graph.Step) bool {
		return keyedShape(c, o, n, numbersMayDiffer)
	}
}

func keyedShape(c *checker, o, n *graph.Step, numbersMayDiffer bool) bool {
	if o.Kind != n.Kind || !coderEqual(o.KeyCoder, n.KeyCoder) || !coderEqual(o.StoredCoder, n.StoredCoder) {
		return false
	}
	if !slices.EqualFunc(o.State, n.State, func(a, b graph.StateSpec) bool {
		return a.ID == b.ID && a.Kind == b.Kind && a.Coder.Equal(b.Coder)
	}) || !slices.Equal(o.Timers, n.Timers) {
		return false
	}
	oi, ni := inputCollection(c.oldG, o), inputCollection(c.newG, n)
	if oi == nil || ni == nil {
		return oi == ni
	}
	if o.Kind == graph.KindGroupByKey && !bufferedCoder(oi.Coder).Equal(bufferedCoder(ni.Coder)) {
		return false
	}
	d := diffWindowing(oi.Windowing, ni.Windowing)
	if numbersMayDiffer {
		return d.fnKind == "" && d.trigger == "" && d.accumulation == ""
	}
	return d.same()
}

// sameSource reports whether n is a source reading what o reads.
func sameSource(_ *checker, o, n *graph.Step) bool {
	return o.Source != nil && n.Kind == graph.KindSource && sourceIdentity(o) == sourceIdentity(n)
}

// sourceIdentity is what a source reads, comparable across a rename:
// built-in sources that have no external identity (create, test_stream,
// generate, custom) use their own step name, which a rename changes, so a
// name-derived identity compares as its kind alone.
func sourceIdentity(s *graph.Step) string {
	if s.Source == nil {
		return ""
	}
	if s.Source.Identity == s.Name {
		return s.Source.Kind + "\x00<step name>"
	}
	return s.Source.Kind + "\x00" + s.Source.Identity
}

// goCoderPrefix starts the coder URN of a Go SDK type.
const goCoderPrefix = "weir:coder:go:"

// migratesFrom reports whether new combine step n declares a migration
// from the accumulator old step o stores (its identity without params:
// the combine function's name may change with it).
func migratesFrom(o, n *graph.Step) bool {
	if n.AccumulatorFrom == nil || o.StoredCoder == nil {
		return false
	}
	stored := *o.StoredCoder
	stored.Params = nil
	return stored.Equal(*n.AccumulatorFrom)
}

func coderEqual(a, b *graph.Coder) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func coderString(c *graph.Coder) string {
	if c == nil {
		return "none"
	}
	return c.String()
}

// bufferedCoder returns the coder of what a group_by_key buffers from its
// input coder c: the value of a KV (the key is checked on its own), or the
// whole element otherwise.
func bufferedCoder(c graph.Coder) graph.Coder {
	if c.URN == kvCoderURN && len(c.Components) == 2 {
		return c.Components[1]
	}
	return c
}

// kvCoderURN is the URN of the SDK's key-value coder.
const kvCoderURN = "weir:coder:kv"

// inputCollection returns the main input collection of s in p, or nil.
func inputCollection(p *graph.Pipeline, s *graph.Step) *graph.Collection {
	if p == nil {
		return nil
	}
	id, ok := s.Inputs[graph.MainTag]
	if !ok {
		return nil
	}
	return p.Collection(id)
}

// checkSideInputs reports side inputs added to or removed from a matched step.
func (c *checker) checkSideInputs(o, n *graph.Step) {
	names := func(s *graph.Step) map[string]bool {
		m := map[string]bool{}
		for _, si := range s.SideInputs {
			m[si.Name] = true
		}
		return m
	}
	on, nn := names(o), names(n)
	var added, removed []string
	for _, k := range sortedKeys(nn) {
		if !on[k] {
			added = append(added, k)
		}
	}
	for _, k := range sortedKeys(on) {
		if !nn[k] {
			removed = append(removed, k)
		}
	}
	if len(added) == 0 && len(removed) == 0 {
		return
	}
	var what []string
	if len(added) > 0 {
		what = append(what, "added "+strings.Join(added, ", "))
	}
	if len(removed) > 0 {
		what = append(what, "removed "+strings.Join(removed, ", "))
	}
	was := "none"
	if len(on) > 0 {
		was = strings.Join(sortedKeys(on), ", ")
	}
	fix := fmt.Sprintf("keep the side inputs of %s as they were (%s)", o.Name, was)
	if o.Kind.IsKeyed() {
		fix += fmt.Sprintf(`, or map the step to "" to drop its state on purpose: --transform-name-mapping '%s'`, c.withEntry(o.Name, ""))
	} else {
		fix += "; a side input's contents may change freely"
	}
	c.fail(o.Name, errcode.SideInputsChanged, fix, "%s: its side inputs changed (%s); side inputs cannot be added to or removed from a running step", stepRef(o.Name, n.Name), strings.Join(what, "; "))
}

// checkSource checks a matched source step.
func (c *checker) checkSource(o, n *graph.Step) {
	if n.Kind != graph.KindSource {
		c.fail(o.Name, errcode.StepKindChanged,
			fmt.Sprintf(`keep %s a source, or map it to "" to drop its read positions on purpose: --transform-name-mapping '%s'`, n.Name, c.withEntry(o.Name, "")),
			"%s was a source and is a %s step in the new pipeline: its read positions (%s) would be lost", stepRef(o.Name, n.Name), n.Kind, describeIO(o.Source))
		return
	}
	if sourceIdentity(o) == sourceIdentity(n) {
		c.report.Matches = append(c.report.Matches, Match{Old: o.Name, New: n.Name, Kind: o.Kind})
		return
	}
	if c.opts.AllowSourceChange {
		c.drop(o, fmt.Sprintf("now reading %s and --allow-source-change is given", describeIO(n.Source)))
		return
	}
	c.fail(o.Name, errcode.SourceChanged,
		fmt.Sprintf("read %s again, or pass --allow-source-change to drop the old source's positions and start reading %s from its start position", describeIO(o.Source), describeIO(n.Source)),
		"source %s read %s and would read %s: the running job's read positions do not apply to another source", stepRef(o.Name, n.Name), describeIO(o.Source), describeIO(n.Source))
}

// checkKey checks a matched keyed step's key: unchanged, or changed with
// a declared re-key from exactly the running step's key (a YAML Combine's
// migrations: rekey names its fields, the Go SDK's RekeyFrom its type).
func (c *checker) checkKey(o, n *graph.Step, ref, dropFix string) {
	if n.KeyFrom != nil {
		if !coderEqual(n.KeyFrom, o.KeyCoder) {
			c.fail(o.Name, errcode.RekeyFromMismatch, fmt.Sprintf("declare weir.RekeyFrom from the running step's key, %s", coderString(o.KeyCoder)),
				"%s declares a re-key from %s, but the running step's key is %s", ref, coderString(n.KeyFrom), coderString(o.KeyCoder))
			return
		}
		c.warn(o.Name, errcode.StateRekeyed, "%s: its key changes from %s to %s by the declared re-key (weir.RekeyFrom): every key the running version stored moves to its new key, and the accumulators of keys that meet there merge window by window",
			ref, coderString(o.KeyCoder), coderString(n.KeyCoder))
		return
	}
	old := keyFieldNames(o.KeyCoder)
	if from := RekeyedFrom(n); from != nil {
		switch {
		case !slices.Equal(from, old):
			c.fail(o.Name, errcode.RekeyFromMismatch, fmt.Sprintf("declare rekey: {from: [%s]}, the running step's key fields", strings.Join(old, ", ")),
				"%s declares a re-key from (%s), but the running step's key is %s", ref, strings.Join(from, ", "), coderString(o.KeyCoder))
		case !scalarKey(o.KeyCoder):
			c.fail(o.Name, errcode.KeyCoderChanged, fmt.Sprintf("keep the key as it was (%s), or %s", coderString(o.KeyCoder), dropFix),
				"%s: a re-key reads scalar key fields (int, float, bool, string, timestamp); the running step's key is %s", ref, coderString(o.KeyCoder))
		default:
			c.warn(o.Name, errcode.StateRekeyed, "%s: its key changes from %s to %s by the declared re-key: every key the running version stored moves to its new key, and the accumulators of keys that meet there merge window by window",
				ref, coderString(o.KeyCoder), coderString(n.KeyCoder))
		}
		return
	}
	if coderEqual(o.KeyCoder, n.KeyCoder) {
		return
	}
	fix := fmt.Sprintf("keep the key as it was (%s; for YAML, the group_by fields and their types), or %s", coderString(o.KeyCoder), dropFix)
	if o.Kind == graph.KindCombinePerKey && n.Kind == graph.KindCombinePerKey && (n.Fn == nil || !strings.HasSuffix(n.Fn.URN, ":Combine")) {
		fix = fmt.Sprintf("declare how a stored key becomes a new one with weir.RekeyFrom (each stored key moves, accumulators that meet merge), %s", fix)
	} else if old != nil && o.Kind == graph.KindCombinePerKey && scalarKey(o.KeyCoder) && scalarKey(n.KeyCoder) {
		fix = fmt.Sprintf("declare the re-key on the Combine (migrations: {rekey: {from: [%s]}}: each stored key moves to its new key and accumulators that meet there merge), %s", strings.Join(old, ", "), fix)
	}
	c.fail(o.Name, errcode.KeyCoderChanged, fix,
		"%s: its key changed from %s to %s: the keys of its stored state could not be read or would hash to other key groups", ref, coderString(o.KeyCoder), coderString(n.KeyCoder))
}

// keyFieldNames returns the field names of a YAML Combine's key coder
// (its group_by fields), or nil for another coder.
func keyFieldNames(k *graph.Coder) []string {
	if k == nil || len(k.Fields) == 0 {
		return nil
	}
	out := make([]string, len(k.Fields))
	for i, f := range k.Fields {
		out[i] = f.Name
	}
	return out
}

// scalarKey reports whether every field of key coder k is a scalar whose
// key encoding decodes to the value itself.
func scalarKey(k *graph.Coder) bool {
	if k == nil {
		return false
	}
	for _, f := range k.Fields {
		switch f.Type {
		case "int", "float", "bool", "string", "timestamp":
		default:
			return false
		}
	}
	return true
}

// checkKeyed checks a matched keyed step: what it stores and its input's windowing.
func (c *checker) checkKeyed(o, n *graph.Step) {
	ref := stepRef(o.Name, n.Name)
	dropFix := fmt.Sprintf(`map it to "" to drop its state on purpose: --transform-name-mapping '%s'`, c.withEntry(o.Name, ""))
	if n.Kind != o.Kind {
		c.fail(o.Name, errcode.StepKindChanged, fmt.Sprintf("keep %s a %s step, or %s", n.Name, o.Kind, dropFix),
			"%s was a %s step and is a %s step in the new pipeline: the new step cannot read the old one's state (%s)", ref, o.Kind, n.Kind, describeStored(o))
		return
	}
	c.checkKey(o, n, ref, dropFix)
	oi, ni := inputCollection(c.oldG, o), inputCollection(c.newG, n)
	switch o.Kind {
	case graph.KindCombinePerKey:
		if c.checkCombineOutputs(o, n, ref, dropFix) {
			break
		}
		o = c.retireSlots(o, n, ref)
		if dropped, ok := windowFieldsDropped(o.StoredCoder, n.StoredCoder); ok {
			c.warn(o.Name, errcode.StoredWindowFieldsDropped, "%s: the rows it stores lose their window and pane fields (%s), which are element metadata now (the window is the one each row is stored under): stored rows are read without them",
				ref, strings.Join(dropped, "; "))
		} else if at, ok := countsNowElements(o.StoredCoder, n.StoredCoder); ok {
			c.warn(o.Name, errcode.CombineFnChanged, "%s: the count at position %s of its accumulator counted the non-null values of a field and count elements now, as Beam's count does (accumulator %s, then %s): the stored counts are kept and added to, and leave out the elements counted before the update whose value was null",
				ref, intList(at), coderString(o.StoredCoder), coderString(n.StoredCoder))
		} else if cl, ok := classifyOutputs(o.StoredCoder, n.StoredCoder); ok && cl.kinds() > 0 {
			c.checkOutputClasses(o, n, ref, dropFix, cl)
		} else if !coderEqual(o.StoredCoder, n.StoredCoder) && migratesFrom(o, n) {
			c.warn(o.Name, errcode.AccumulatorMigrated, "%s: its accumulator changed from %s to %s, and the step declares the migration from %s: stored accumulators are read through it (a key whose accumulator it refuses starts afresh)",
				ref, coderString(o.StoredCoder), coderString(n.StoredCoder), coderString(n.AccumulatorFrom))
		} else if !coderEqual(o.StoredCoder, n.StoredCoder) {
			fix := "keep the combine functions and the types of their value fields as they were"
			switch {
			case n.AccumulatorFrom != nil:
				fix = fmt.Sprintf("the step declares a migration from %s, but the running step stores %s: migrate from that type (weir.MigrateAccumulator)", coderString(n.AccumulatorFrom), coderString(o.StoredCoder))
			case strings.HasPrefix(n.StoredCoder.URN, goCoderPrefix) || n.StoredCoder.URN == "weir:coder:kv" || n.StoredCoder.URN == "weir:coder:list":
				fix = "keep the accumulator type as it was, declare how the stored accumulators become the new ones (weir.MigrateAccumulator on the step)"
			}
			c.fail(o.Name, errcode.StateCoderChanged, fmt.Sprintf("%s, or %s", fix, dropFix),
				"%s: its accumulator changed from %s to %s: stored accumulators could not be read by the new combine", ref, coderString(o.StoredCoder), coderString(n.StoredCoder))
		} else if o.Fn != nil && n.Fn != nil && o.Fn.URN != n.Fn.URN {
			c.warn(o.Name, errcode.CombineFnChanged, "%s: its combine function changed from %s to %s with the same accumulator %s: stored accumulators are handed to the new function as they are",
				ref, o.Fn.URN, n.Fn.URN, coderString(o.StoredCoder))
		}
	case graph.KindGroupByKey:
		var what []string
		if !coderEqual(o.StoredCoder, n.StoredCoder) {
			what = append(what, fmt.Sprintf("buffered values from %s to %s", coderString(o.StoredCoder), coderString(n.StoredCoder)))
		}
		if oi != nil && ni != nil {
			if ov, nv := bufferedCoder(oi.Coder), bufferedCoder(ni.Coder); !ov.Equal(nv) {
				what = append(what, fmt.Sprintf("input values from %s to %s", ov.String(), nv.String()))
			}
		}
		if len(what) > 0 {
			c.fail(o.Name, errcode.BufferedElementChanged, fmt.Sprintf("keep the fields of the elements it groups as they were, or %s", dropFix),
				"%s buffers raw elements and their coder changed (%s): buffered elements could not be read", ref, strings.Join(what, "; "))
		}
	default:
		if o.StoredCoder != nil && !coderEqual(o.StoredCoder, n.StoredCoder) {
			c.fail(o.Name, errcode.StateCoderChanged, fmt.Sprintf("keep what it stores as it was, or %s", dropFix),
				"%s: what it stores changed from %s to %s", ref, coderString(o.StoredCoder), coderString(n.StoredCoder))
		}
	}
	c.checkStateSpecs(o, n, ref, dropFix)
	if oi != nil && ni != nil {
		c.checkWindowing(o, ref, dropFix, oi, ni)
	}
	// The match is listed even when the step is incompatible; see Report.Matches.
	c.report.Matches = append(c.report.Matches, Match{Old: o.Name, New: n.Name, Kind: o.Kind})
}

// checkStateSpecs compares state cells and timer families. New cells and
// timers start empty and pass.
func (c *checker) checkStateSpecs(o, n *graph.Step, ref, dropFix string) {
	newState := map[string]graph.StateSpec{}
	for _, sp := range n.State {
		newState[sp.ID] = sp
	}
	for _, sp := range o.State {
		ns, found := newState[sp.ID]
		switch {
		case !found:
			c.fail(o.Name, errcode.StateSpecChanged, fmt.Sprintf("keep declaring %s state %q, or %s", sp.Kind, sp.ID, dropFix),
				"%s: its %s state %q (%s) is gone from the new pipeline: its contents would be lost", ref, sp.Kind, sp.ID, sp.Coder.String())
		case ns.Kind != sp.Kind:
			c.fail(o.Name, errcode.StateSpecChanged, fmt.Sprintf("keep state %q a %s cell (declare a new cell under another ID for the new kind), or %s", sp.ID, sp.Kind, dropFix),
				"%s: its state %q changed from a %s cell to a %s cell", ref, sp.ID, sp.Kind, ns.Kind)
		case !ns.Coder.Equal(sp.Coder) && ns.MigratedFrom != nil && ns.MigratedFrom.Equal(sp.Coder):
			c.warn(o.Name, errcode.StateMigrated, "%s: the values of its %s state %q changed from %s to %s, and the step declares the migration from %s: stored values are read through it (one it refuses is left out)",
				ref, sp.Kind, sp.ID, sp.Coder.String(), ns.Coder.String(), ns.MigratedFrom.String())
		case !ns.Coder.Equal(sp.Coder):
			code := errcode.StateCoderChanged
			what := "values"
			if sp.Kind == graph.StateBag {
				code, what = errcode.BufferedElementChanged, "buffered elements"
			}
			fix := fmt.Sprintf("keep the type of state %q as it was, declare how the stored values become the new ones (weir.MigrateState on the step), or declare a new cell under another ID, or %s", sp.ID, dropFix)
			if ns.MigratedFrom != nil {
				fix = fmt.Sprintf("the step declares a migration of state %q from %s, but the running step stores %s: migrate from that type (weir.MigrateState)", sp.ID, ns.MigratedFrom.String(), sp.Coder.String())
			}
			c.fail(o.Name, code, fix,
				"%s: the %s of its %s state %q changed from %s to %s: stored %s could not be read", ref, what, sp.Kind, sp.ID, sp.Coder.String(), ns.Coder.String(), what)
		}
	}
	newTimers := map[string]graph.TimerSpec{}
	for _, tm := range n.Timers {
		newTimers[tm.ID] = tm
	}
	for _, tm := range o.Timers {
		nt, found := newTimers[tm.ID]
		switch {
		case !found:
			c.fail(o.Name, errcode.StateSpecChanged, fmt.Sprintf("keep declaring timer %q, or %s", tm.ID, dropFix),
				"%s: its %s timer %q is gone from the new pipeline: pending timers would never fire", ref, tm.Domain, tm.ID)
		case nt.Domain != tm.Domain:
			c.fail(o.Name, errcode.StateSpecChanged, fmt.Sprintf("keep timer %q in %s (declare a new timer under another ID), or %s", tm.ID, tm.Domain, dropFix),
				"%s: its timer %q changed from %s to %s: pending timers would fire at the wrong time", ref, tm.ID, tm.Domain, nt.Domain)
		}
	}
}

// checkWindowing compares the windowing of a keyed step's input.
func (c *checker) checkWindowing(o *graph.Step, ref, dropFix string, oi, ni *graph.Collection) {
	d := diffWindowing(oi.Windowing, ni.Windowing)
	if d.fnKind != "" {
		c.fail(o.Name, errcode.WindowFnChanged, fmt.Sprintf("keep %s windows for %s, or %s", d.oldKind, o.Name, dropFix),
			"%s: its input windows changed %s: windows already buffered cannot be re-assigned", ref, d.fnKind)
	}
	if d.trigger != "" {
		c.fail(o.Name, errcode.TriggerChanged, fmt.Sprintf("keep the trigger as it was (counts and delays may change), or %s", dropFix),
			"%s: its input's trigger changed %s: the trigger state of open windows could not be read", ref, d.trigger)
	}
	if d.accumulation != "" {
		c.fail(o.Name, errcode.AccumulationChanged, fmt.Sprintf("keep %s panes, or %s", oi.Windowing.Accumulation, dropFix),
			"%s: its input's accumulation mode changed %s: panes of open windows would be wrong (repeated or missing values)", ref, d.accumulation)
	}
	if len(d.params) > 0 {
		c.warn(o.Name, errcode.WindowParamsChanged, "%s: its input's windowing changed only in its numbers (%s): windows already buffered keep their old boundaries and settings until they fire and expire; new windows use the new ones",
			ref, strings.Join(d.params, "; "))
	}
}
