package compat

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/graph"
)

// A YAML Combine's accumulators are kept in slots (its stored coder lists
// each slot's fn and value type, not its output's name). A new version
// loaded with the running version's slots (yamlpipe's
// Options.PriorCombineSlots) keeps them where they are, whatever order it
// declares its outputs in, and records the slot order in its config
// (slot_outputs), retiring the slot of an output removed from the middle.
// The check compares the outputs of each slot by name as well, so that an
// output that moved to another slot — a new version loaded without the
// running one's slots — is refused instead of carrying another output's
// values.

// CombineSlotsByStep returns, by YAML Combine step of g, the names of
// its outputs in accumulator slot order (combineOutputNames) and what each
// slot stores (its stored coder's fields: the slot's fn and value type),
// under the names m gives the steps (RenameSteps); both nil without g.
func CombineSlotsByStep(g *graph.Pipeline, m Mapping) (outputs map[string][]string, stored map[string][]graph.Field) {
	if g == nil {
		return nil, nil
	}
	outputs, stored = map[string][]string{}, map[string][]graph.Field{}
	for _, st := range g.Steps {
		if names, ok := combineOutputNames(g, st); ok {
			outputs[st.Name], stored[st.Name] = names, slices.Clone(st.StoredCoder.Fields)
		}
	}
	return RenameSteps(outputs, m), RenameSteps(stored, m)
}

// combineOutputNames returns the names of YAML Combine step s's outputs,
// one per accumulator slot, in slot order ("" for a retired slot): the
// slot order its config records (slot_outputs, when an update kept the
// stored slots of another order), else the fields of its output rows
// after the group-by fields. False when s is not a YAML Combine of g or
// its outputs cannot be read.
func combineOutputNames(g *graph.Pipeline, s *graph.Step) ([]string, bool) {
	if g == nil || s == nil || s.StoredCoder == nil || s.StoredCoder.URN != accumulatorURN || s.KeyCoder == nil {
		return nil, false
	}
	if slots := combineMigrations(s).Slots; slots != nil {
		if len(slots) != len(s.StoredCoder.Fields) {
			return nil, false
		}
		return slots, true
	}
	id, ok := s.Outputs[graph.MainTag]
	if !ok {
		return nil, false
	}
	col := g.Collection(id)
	if col == nil {
		return nil, false
	}
	from, n := len(s.KeyCoder.Fields), len(s.StoredCoder.Fields)
	if len(col.Coder.Fields) < from+n {
		return nil, false
	}
	names := make([]string, n)
	for i := range n {
		names[i] = col.Coder.Fields[from+i].Name
	}
	return names, true
}

// RenamedOutputs returns the outputs a YAML Combine step declares renamed
// in place (migrations: renamed_from), new name to old; nil for none (and
// for a nil step).
func RenamedOutputs(s *graph.Step) map[string]string {
	return combineMigrations(s).Renamed
}

// combineMigrationConfig is the part of a YAML Combine's recorded config
// (its FnRef config) that holds its declared migrations (yamlpipe's
// migrations:, recorded under these keys).
type combineMigrationConfig struct {
	// Renamed maps an output renamed in place to its old name.
	Renamed map[string]string `json:"renamed_outputs"`
	// Lossy lists the outputs declared allow_lossy.
	Lossy []string `json:"lossy_outputs"`
	// RekeyedFrom lists the key fields of the earlier version a declared
	// re-key reads (migrations: rekey: from).
	RekeyedFrom []string `json:"rekeyed_from"`
	// Initialized lists the outputs given an init (migrations: init).
	Initialized []string `json:"initialized_outputs"`
	// Slots lists the outputs in accumulator slot order ("" for a
	// retired slot) when that is not the declared order.
	Slots []string `json:"slot_outputs"`
	// NotRenamedFrom maps an output the update added to the outputs it
	// removed that stored something else.
	NotRenamedFrom map[string][]string `json:"not_renamed_from"`
}

// NotRenamedFrom returns, by output YAML Combine s added in its update,
// the outputs the update removed that aggregated something else (so the
// new one is not their rename); nil for none (and for a nil step).
func NotRenamedFrom(s *graph.Step) map[string][]string {
	return combineMigrations(s).NotRenamedFrom
}

// appendedStart splits the names of YAML Combine n's outputs from
// position from on (those appended by the update) into those the step
// gives an init (migrations) and the others; both nil when the names are
// unknown or none was appended.
func (c *checker) appendedStart(n *graph.Step, from int) (st appendedStart) {
	names, ok := combineOutputNames(c.newG, n)
	if !ok || from > len(names) {
		return st
	}
	init := map[string]bool{}
	for _, name := range combineMigrations(n).Initialized {
		init[name] = true
	}
	for _, name := range names[from:] {
		if init[name] {
			st.inited = append(st.inited, name)
		} else {
			st.empty = append(st.empty, name)
		}
	}
	return st
}

// InitializedOutputs returns the outputs a YAML Combine step gives an
// init (migrations: init), in declared order; nil for none.
func InitializedOutputs(s *graph.Step) []string {
	return combineMigrations(s).Initialized
}

// RekeyedFrom returns the earlier key fields YAML Combine s declares a
// re-key from (migrations: rekey), or nil.
func RekeyedFrom(s *graph.Step) []string {
	return combineMigrations(s).RekeyedFrom
}

// combineMigrations reads the migrations step s recorded; none for a nil
// step, a step without config or a config that does not parse.
func combineMigrations(s *graph.Step) combineMigrationConfig {
	var cfg combineMigrationConfig
	if s == nil || s.Fn == nil || len(s.Fn.Config) == 0 || json.Unmarshal(s.Fn.Config, &cfg) != nil {
		return combineMigrationConfig{}
	}
	return cfg
}

// checkCombineOutputs compares a matched YAML Combine's outputs by name
// and reports whether it refused the step.
func (c *checker) checkCombineOutputs(o, n *graph.Step, ref, dropFix string) bool {
	on, ok := combineOutputNames(c.oldG, o)
	if !ok {
		return false
	}
	nn, ok := combineOutputNames(c.newG, n)
	if !ok {
		return false
	}
	renamed := RenamedOutputs(n)
	oldAt := make(map[string]int, len(on))
	for i, name := range on {
		if name != "" {
			oldAt[name] = i
		}
	}
	failed := false
	var moved, undeclared, suggest []string
	for j, name := range nn {
		if name == "" {
			continue // a retired slot
		}
		src := name
		if r, ok := renamed[name]; ok {
			src = r
			if _, found := oldAt[r]; !found {
				c.fail(o.Name, errcode.CombineRenameUnknown,
					fmt.Sprintf("name one of the running Combine's outputs (%s) in renamed_from, or drop the migration", strings.Join(on, ", ")),
					"%s: output %s is declared renamed_from %q, which the running Combine has no output of", ref, name, r)
				failed = true
				continue
			}
		}
		i, found := oldAt[src]
		switch {
		case found && i != j:
			moved = append(moved, fmt.Sprintf("%s from position %d to %d", name, i+1, j+1))
		case !found && j < len(on) && on[j] != "" && nameAbsent(nn, on[j]):
			undeclared = append(undeclared, fmt.Sprintf("%s (was %s)", name, on[j]))
			suggest = append(suggest, fmt.Sprintf("%s: {renamed_from: %s}", name, on[j]))
		}
	}
	if len(moved) > 0 {
		sort.Strings(moved)
		c.fail(o.Name, errcode.CombineOutputsReordered,
			fmt.Sprintf("check NEW against the running job or OLD's pipeline, whose accumulator slots weir then keeps where they are, or keep the outputs in their order (%s), append new ones after them and remove only the last ones, or %s", strings.Join(on, ", "), dropFix),
			"%s: its outputs moved (%s): stored accumulators are kept by position, so they would carry another output's values", ref, strings.Join(moved, "; "))
		return true
	}
	if len(undeclared) > 0 && !failed {
		c.warn(o.Name, errcode.CombineOutputRenamed,
			"%s: output renamed in place, %s: its stored accumulator carries on under the new name; declare it with migrations: {accumulators: {%s}} (then a WriteToSql reading the step renames its column), or map the step to \"\" if it is another aggregate",
			ref, strings.Join(undeclared, ", "), strings.Join(suggest, ", "))
	}
	return failed
}

// nameAbsent reports whether name is not among names.
func nameAbsent(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return false
		}
	}
	return true
}

// widenable lists the combine functions whose stored accumulator a float
// value field reads exactly as it was when the field was an int: a sum
// (its int total carries on beside the float one), a min, max or latest
// (the stored int is read as a float), a mean (kept as a float either
// way), a count (of elements, whatever their type).
var widenable = map[string]bool{"sum": true, "min": true, "max": true, "mean": true, "latest": true, "count": true}

// narrowable lists the combine functions whose stored accumulator an int
// value field can read after the field was a float: lossily (truncated,
// declared allow_lossy) a sum, whose float total carries on beside the
// int one, a min, max or latest; exactly a count (of elements) and a mean
// (a float either way).
var narrowable = map[string]bool{"sum": true, "min": true, "max": true, "latest": true, "count": true, "mean": true}

// narrowedLossless lists the narrowable functions whose accumulator loses
// nothing when their value field narrows.
var narrowedLossless = map[string]bool{"count": true, "mean": true}

// toText lists the value types whose stored latest value a string output
// reads as its text, losing nothing.
var toText = map[string]bool{"int": true, "float": true, "bool": true, "timestamp": true}

// checkFromString decides a matched Combine whose latest outputs at
// positions at (1-based) read a string value field before and a number
// now: allowed, with a warning, when each is declared allow_lossy in the
// new pipeline; refused otherwise, naming the declaration.
func (c *checker) checkFromString(o, n *graph.Step, ref, dropFix string, at []int) {
	outs, undeclared := c.lossyOutputs(n, at)
	if len(undeclared) > 0 {
		c.fail(o.Name, errcode.StateCoderChanged,
			fmt.Sprintf("declare the lossy conversion on the Combine, migrations: {accumulators: {%s}} (a stored string that is not a number then reads null), keep the value field a string, or %s", strings.Join(undeclared, ", "), dropFix),
			"%s: the value field of latest output(s) %s was a string and is a number (accumulator %s, then %s): a stored string that is not a number has no value to carry on",
			ref, strings.Join(outs, ", "), coderString(o.StoredCoder), coderString(n.StoredCoder))
		return
	}
	c.warn(o.Name, errcode.CombineOutputConverted, "%s: the value field of latest output(s) %s was a string and is a number, declared allow_lossy (accumulator %s, then %s): the stored strings carry on as the numbers they spell, as JSON writes numbers (one that is not, or an int's that is not an integer, reads null)",
		ref, strings.Join(outs, ", "), coderString(o.StoredCoder), coderString(n.StoredCoder))
}

// outputClasses sorts the changes between two YAML Combine accumulator
// coders by kind: the positions (1-based) whose value field widened,
// narrowed, or became or stopped being a string, and the outputs appended
// or removed at the end.
type outputClasses struct {
	widened, narrowed, toString, fromString []int
	added, removed                          []graph.Field
}

// classifyOutputs sorts the changes between o and n by kind (ok false when
// a change is of none: another function or type at a position, which the
// rest of the check refuses).
func classifyOutputs(o, n *graph.Coder) (outputClasses, bool) {
	var cl outputClasses
	if !accumulatorCoders(o, n) {
		return cl, false
	}
	k := min(len(o.Fields), len(n.Fields))
	for i := range k {
		of, nf := o.Fields[i], n.Fields[i]
		switch {
		case of == nf:
		case of.Name != nf.Name:
			return cl, false
		case widenable[of.Name] && of.Type == "int" && nf.Type == "float":
			cl.widened = append(cl.widened, i+1)
		case narrowable[of.Name] && of.Type == "float" && nf.Type == "int":
			cl.narrowed = append(cl.narrowed, i+1)
		case of.Name == "latest" && toText[of.Type] && nf.Type == "string":
			cl.toString = append(cl.toString, i+1)
		case of.Name == "latest" && of.Type == "string" && (nf.Type == "int" || nf.Type == "float"):
			cl.fromString = append(cl.fromString, i+1)
		default:
			return cl, false
		}
	}
	cl.added, cl.removed = n.Fields[k:], o.Fields[k:]
	return cl, true
}

// kinds counts the kinds of change cl holds (appended and removed outputs
// count as one).
func (cl outputClasses) kinds() int {
	n := 0
	for _, l := range [][]int{cl.widened, cl.narrowed, cl.toString, cl.fromString} {
		if len(l) > 0 {
			n++
		}
	}
	if len(cl.added) > 0 || len(cl.removed) > 0 {
		n++
	}
	return n
}

// checkOutputClasses decides an update that makes several kinds of change
// to a YAML Combine's outputs at once (a conversion beside an appended
// output, say): each kind as the check decides it alone.
func (c *checker) checkOutputClasses(o, n *graph.Step, ref, dropFix string, cl outputClasses) {
	if len(cl.widened) > 0 {
		c.warnWidened(o, n, ref, cl.widened)
	}
	if len(cl.narrowed) > 0 {
		c.checkNarrowed(o, n, ref, dropFix, cl.narrowed)
	}
	if len(cl.fromString) > 0 {
		c.checkFromString(o, n, ref, dropFix, cl.fromString)
	}
	if len(cl.toString) > 0 {
		c.warnToString(o, n, ref, cl.toString)
	}
	if len(cl.added) > 0 || len(cl.removed) > 0 {
		c.warnResized(o, n, ref, cl.added, cl.removed)
	}
}

// warnWidened warns of the outputs at positions at whose value field
// widened from int to float (COMBINE_OUTPUT_WIDENED).
func (c *checker) warnWidened(o, n *graph.Step, ref string, at []int) {
	c.warn(o.Name, errcode.CombineOutputWidened, "%s: the value field of the output(s) at position %s widened from int to float (accumulator %s, then %s): the stored accumulators carry on, read as floats (an int sum's total is added to the float one, an int min or max is read as a float); a WriteToSql table's column is widened in place",
		ref, intList(at), coderString(o.StoredCoder), coderString(n.StoredCoder))
}

// warnToString warns of the latest outputs at positions at whose value
// field became a string (COMBINE_OUTPUT_CONVERTED).
func (c *checker) warnToString(o, n *graph.Step, ref string, at []int) {
	c.warn(o.Name, errcode.CombineOutputConverted, "%s: the value field of the latest output(s) at position %s became a string (accumulator %s, then %s): the stored values carry on, read as their text (an int in decimal, a float in its shortest form, a timestamp in RFC 3339), as string() in CEL writes them; a WriteToSql table's column converts only where the sink declares it (convert, layout: staged)",
		ref, intList(at), coderString(o.StoredCoder), coderString(n.StoredCoder))
}

// warnResized warns of outputs appended or removed at the end
// (COMBINE_OUTPUTS_CHANGED).
func (c *checker) warnResized(o, n *graph.Step, ref string, added, removed []graph.Field) {
	c.warn(o.Name, errcode.CombineOutputsChanged, "%s: %s; the other outputs' stored accumulators carry on (accumulator %s, then %s)",
		ref, outputsChangeText(added, removed, c.appendedStart(n, len(o.StoredCoder.Fields))), coderString(o.StoredCoder), coderString(n.StoredCoder))
}

// ConvertedColumns returns the columns a WriteToSql step declares
// converted (its config's convert: a list of columns, or a map of columns
// to {allow_lossy: BOOL}), each with whether a lossy conversion is
// allowed; nil for none, or for a step that is not a SQL sink.
func ConvertedColumns(s *graph.Step) map[string]bool {
	if s == nil || s.Sink == nil || s.Sink.Kind != "sql" || s.Fn == nil {
		return nil
	}
	var cfg struct {
		Convert any `json:"convert"`
	}
	if json.Unmarshal(s.Fn.Config, &cfg) != nil {
		return nil
	}
	var out map[string]bool
	set := func(name string, allow bool) {
		if out == nil {
			out = map[string]bool{}
		}
		out[name] = allow
	}
	switch v := cfg.Convert.(type) {
	case []any:
		for _, x := range v {
			if name, ok := x.(string); ok {
				set(name, false)
			}
		}
	case map[string]any:
		for name, x := range v {
			m, _ := x.(map[string]any)
			allow, _ := m["allow_lossy"].(bool)
			set(name, allow)
		}
	}
	return out
}

// LossyOutputs returns the outputs a YAML Combine step declares
// allow_lossy (migrations), as a set; nil for none (and for a nil step).
func LossyOutputs(s *graph.Step) map[string]bool {
	lossy := combineMigrations(s).Lossy
	if len(lossy) == 0 {
		return nil
	}
	out := make(map[string]bool, len(lossy))
	for _, n := range lossy {
		out[n] = true
	}
	return out
}

// checkNarrowed decides a matched Combine whose outputs at positions at
// (1-based) narrowed from float to int: allowed, with a warning, when
// each is declared allow_lossy in the new pipeline; refused otherwise,
// naming the declaration.
func (c *checker) checkNarrowed(o, n *graph.Step, ref, dropFix string, at []int) {
	outs, undeclared := c.lossyOutputs(n, slices.DeleteFunc(slices.Clone(at), func(p int) bool {
		return narrowedLossless[o.StoredCoder.Fields[p-1].Name]
	}))
	if len(outs) == 0 {
		c.warn(o.Name, errcode.CombineOutputNarrowed, "%s: the value field of its count or mean output(s) at position %s narrowed from float to int (accumulator %s, then %s): the stored accumulators carry on unchanged",
			ref, intList(at), coderString(o.StoredCoder), coderString(n.StoredCoder))
		return
	}
	if len(undeclared) > 0 {
		c.fail(o.Name, errcode.StateCoderChanged,
			fmt.Sprintf("declare the lossy conversion on the Combine, migrations: {accumulators: {%s}} (the stored float accumulators are then truncated toward zero), keep the value field a float, or %s", strings.Join(undeclared, ", "), dropFix),
			"%s: the value field of output(s) %s narrowed from float to int (accumulator %s, then %s): the stored float accumulators would lose their fractions",
			ref, strings.Join(outs, ", "), coderString(o.StoredCoder), coderString(n.StoredCoder))
		return
	}
	c.warn(o.Name, errcode.CombineOutputNarrowed, "%s: the value field of output(s) %s narrowed from float to int, declared allow_lossy (accumulator %s, then %s): the stored float accumulators carry on truncated toward zero (a sum's float total is added to the int one, truncated)",
		ref, strings.Join(outs, ", "), coderString(o.StoredCoder), coderString(n.StoredCoder))
}

// lossyOutputs names the outputs of YAML Combine n at slot positions at
// (1-based; "at position N" when a name cannot be read), and the
// declarations those of them not declared allow_lossy need
// ("OUT: {allow_lossy: true}").
func (c *checker) lossyOutputs(n *graph.Step, at []int) (outs, undeclared []string) {
	names, _ := combineOutputNames(c.newG, n)
	lossy := LossyOutputs(n)
	for _, p := range at {
		name := fmt.Sprintf("at position %d", p)
		if p-1 < len(names) {
			name = names[p-1]
		}
		outs = append(outs, name)
		if !lossy[name] {
			undeclared = append(undeclared, name+": {allow_lossy: true}")
		}
	}
	return outs, undeclared
}

// retireSlots returns o as the rest of the check compares it with n: a
// slot n retires counts as retired in o too, since nothing reads it any
// more. It warns of the outputs n retires (COMBINE_OUTPUTS_CHANGED).
func (c *checker) retireSlots(o, n *graph.Step, ref string) *graph.Step {
	if !accumulatorCoders(o.StoredCoder, n.StoredCoder) {
		return o
	}
	var fields []graph.Field
	var names []string
	on, _ := combineOutputNames(c.oldG, o)
	for i, nf := range n.StoredCoder.Fields {
		if nf != graph.RetiredSlot() || i >= len(o.StoredCoder.Fields) || o.StoredCoder.Fields[i] == graph.RetiredSlot() {
			continue
		}
		if fields == nil {
			fields = slices.Clone(o.StoredCoder.Fields)
		}
		fields[i] = graph.RetiredSlot()
		name := fmt.Sprintf("at position %d", i+1)
		if i < len(on) && on[i] != "" {
			name = on[i]
		}
		names = append(names, name)
	}
	if fields == nil {
		return o
	}
	c.warn(o.Name, errcode.CombineOutputsChanged, "%s: output(s) %s removed; the other outputs' stored accumulators carry on (the removed ones' slots are kept empty)",
		ref, strings.Join(names, ", "))
	oc := *o.StoredCoder
	oc.Fields = fields
	ro := *o
	ro.StoredCoder = &oc
	return &ro
}
