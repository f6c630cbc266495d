package plan

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/graph"
)

// sinks pairs the sinks of OLD and NEW (by mapped name, else by what they
// write) and lists what changes for each.
func (p *Plan) sinks(old, newp *graph.Pipeline, oldSteps, newSteps map[string]*graph.Step, opts Options) {
	isSink := func(s *graph.Step) bool { return s.Kind == graph.KindSink }
	newNames := sortedNames(newSteps, isSink)
	taken := map[string]bool{}
	for _, name := range sortedNames(oldSteps, isSink) {
		o := oldSteps[name]
		n := pairSink(o, newSteps, newNames, taken, opts.Check.Mapping)
		if n == nil {
			p.Sinks = append(p.Sinks, Sink{Old: name, Action: Removed, Kind: ioKind(o.Sink), Identity: ioIdentity(o.Sink), Columns: []Column{},
				Detail: "NEW no longer writes this output; what was written stays"})
			continue
		}
		taken[n.Name] = true
		p.Sinks = append(p.Sinks, compareSink(o, n, old, newp, opts.Strategy))
	}
	for _, name := range newNames {
		if taken[name] {
			continue
		}
		n := newSteps[name]
		s := Sink{New: name, Action: Added, Kind: ioKind(n.Sink), Identity: ioIdentity(n.Sink), Columns: []Column{},
			Detail: "a new output: written from the update on"}
		if cfg := sqlConfigOf(n); cfg != nil {
			s.Key, s.Mode, s.Layout = Change{New: cfg.key()}, Change{New: cfg.mode()}, Change{New: cfg.layout()}
		}
		p.Sinks = append(p.Sinks, s)
	}
}

func pairSink(o *graph.Step, newSteps map[string]*graph.Step, newNames []string, taken map[string]bool, m compat.Mapping) *graph.Step {
	name, _, _ := m.Rename(o.Name)
	if n := newSteps[name]; n != nil && n.Kind == graph.KindSink && !taken[name] {
		return n
	}
	for _, nn := range newNames {
		n := newSteps[nn]
		if !taken[nn] && o.Sink != nil && n.Sink != nil && *o.Sink == *n.Sink {
			return n
		}
	}
	return nil
}

func ioKind(id *graph.IOIdentity) string {
	if id == nil {
		return "other"
	}
	return id.Kind
}

func ioIdentity(id *graph.IOIdentity) string {
	if id == nil {
		return ""
	}
	return id.Identity
}

// sqlConfig is what a plan reads of a WriteToSql step's config.
type sqlConfig struct {
	Key    any    `json:"key"`
	Mode   string `json:"mode"`
	Layout string `json:"layout"`
}

// sqlConversion says whether a staged SQL table converts a column from
// type from to type to behind its view (as the sink does), and whether the
// conversion is lossy.
func sqlConversion(from, to string) (lossy, ok bool) {
	switch {
	case to == "string" && (from == "int" || from == "float" || from == "timestamp"):
		return false, true
	case from == "string" && (to == "int" || to == "float"):
		return true, true
	case from == "float" && to == "int":
		return true, true
	}
	return false, false
}

func sqlConfigOf(s *graph.Step) *sqlConfig {
	if s.Sink == nil || s.Sink.Kind != "sql" || s.Fn == nil {
		return nil
	}
	var c sqlConfig
	if err := json.Unmarshal(s.Fn.Config, &c); err != nil {
		return nil
	}
	return &c
}

// key is the sink's key columns, comma-separated; "" for a sink without
// a key (an append sink, whose rows are keyed by their element_id).
func (c *sqlConfig) key() string {
	if c.Key == nil {
		return ""
	}
	return groupBy(c.Key)
}

func (c *sqlConfig) mode() string {
	switch {
	case c.Mode != "":
		return c.Mode
	case c.Key != nil:
		return "upsert"
	}
	return "append"
}

func (c *sqlConfig) layout() string {
	if c.Layout == "" {
		return "table"
	}
	return c.Layout
}

// fieldsOf returns the row fields a sink step receives.
func fieldsOf(g *graph.Pipeline, s *graph.Step) []graph.Field {
	id := s.Inputs["main"]
	for _, c := range g.Collections {
		if c.ID == id {
			return c.Coder.Fields
		}
	}
	return nil
}

func compareSink(o, n *graph.Step, old, newp *graph.Pipeline, strategy Strategy) Sink {
	s := Sink{Old: o.Name, New: n.Name, Action: Kept, Kind: ioKind(n.Sink), Identity: ioIdentity(n.Sink), Columns: []Column{}}
	if o.Name != n.Name {
		s.Action = Renamed
	}
	var notes []string
	if ioIdentity(o.Sink) != ioIdentity(n.Sink) {
		s.Action = Changed
		notes = append(notes, fmt.Sprintf("writes %s instead of %s", ioIdentity(n.Sink), ioIdentity(o.Sink)))
	}
	oc, nc := sqlConfigOf(o), sqlConfigOf(n)
	refused := false
	if oc != nil && nc != nil {
		s.Key = Change{Old: oc.key(), New: nc.key()}
		s.Mode = Change{Old: oc.mode(), New: nc.mode()}
		s.Layout = Change{Old: oc.layout(), New: nc.layout()}
		step := rekeyedProducer(old, newp, n)
		if s.Key.changed() && step == "" || s.Mode.changed() {
			s.Action, refused = Refused, true
			notes = append(notes, fmt.Sprintf("the table keys its rows by (%s) in %s mode; NEW writes (%s) in %s mode: re-keying a table is refused — write to a new table",
				s.Key.Old, s.Mode.Old, s.Key.New, s.Mode.New))
		}
		if s.Layout.changed() {
			s.Action = Changed
			notes = append(notes, fmt.Sprintf("layout %s → %s", s.Layout.Old, s.Layout.New))
		}
		if step != "" && !refused {
			switch {
			case strategy == Parallel:
				s.Action, refused = Refused, true
				notes = append(notes, fmt.Sprintf("%s re-keys its rows (migrations: rekey) while the running job goes on writing the earlier keys (SQL_SCHEMA_CHANGE_REFUSED): re-key it by an update in place, with layout: staged, or write to a new table", step))
			case nc.layout() == "staged" && oc.layout() == "staged":
				s.Action = Changed
				notes = append(notes, fmt.Sprintf("re-keyed by %s: the rows written before stay where they are, and the view serves them under their new keys (keys that meet merged by the Combine's fns) until the next merge moves them into a principal keyed anew; no copy at the update", step))
			case nc.layout() == "staged":
				s.Action = Changed
				notes = append(notes, fmt.Sprintf("re-keyed by %s: the plain table becomes the staged table's principal, moved aside with its rows under their earlier keys, and the view serves them under their new keys (keys that meet merged by the Combine's fns) until the next merge moves them into a principal keyed anew; no copy at the update", step))
			default:
				s.Action, refused = Refused, true
				notes = append(notes, fmt.Sprintf("%s re-keys its rows (migrations: rekey), and a plain table would keep the rows written before under the earlier keys (SQL_SCHEMA_CHANGE_REFUSED when it holds rows): write it with layout: staged from the running version on, or write to a new table", step))
			}
		}
	}
	s.Columns = compareColumns(fieldsOf(old, o), fieldsOf(newp, n), s.Kind, keySet(nc), declaredRenames(newp, n))
	if s.Kind == "sql" {
		layout := ""
		if nc != nil {
			layout = nc.layout()
		}
		markRenames(s.Columns, layout, strategy, notRenamedFrom(newp, n), compat.ConvertedColumns(n))
	}
	for _, c := range s.Columns {
		switch {
		case c.Action == Converted && s.Kind == "sql":
			// markRenames refused what the table cannot convert: a
			// float column narrowed (a table keeps its float column; a
			// staged view truncates the older members' floats), or a
			// conversion the sink declares, goes through.
			if !refused {
				s.Action = Changed
			}
		case c.Action == Converted || c.Action == Refused:
			if s.Kind == "sql" {
				s.Action, refused = Refused, true
			} else if !refused {
				s.Action = Changed
			}
		default:
			if !refused {
				s.Action = Changed
			}
		}
	}
	if strategy == Parallel && s.Kind == "sql" && !refused {
		notes = append(notes, "both jobs write their own generation table behind a façade view of the table's name; readers see one row per key and window throughout")
	}
	s.Detail = strings.Join(notes, "; ")
	return s
}

func keySet(c *sqlConfig) map[string]bool {
	m := map[string]bool{}
	if c != nil {
		for k := range strings.SplitSeq(c.key(), ",") {
			m[k] = true
		}
	}
	return m
}

// widens reports the type changes a column takes without a conversion.
func widens(from, to string) bool {
	return from == "int" && to == "float"
}

// notRenamedFrom returns, by field of sink s's rows that the Combine
// feeding it added, the fields it removed that aggregated something else:
// no rename of one another (compat.NotRenamedFrom).
func notRenamedFrom(g *graph.Pipeline, s *graph.Step) map[string][]string {
	if c := g.Collection(s.Inputs[graph.MainTag]); c != nil {
		return compat.NotRenamedFrom(g.Step(c.Producer))
	}
	return nil
}

// declaredRenames returns the fields renamed in place (new name to old)
// that the step feeding sink s declares: a Combine's renamed_from.
func declaredRenames(g *graph.Pipeline, s *graph.Step) map[string]string {
	if c := g.Collection(s.Inputs[graph.MainTag]); c != nil {
		return compat.RenamedOutputs(g.Step(c.Producer))
	}
	return nil
}

func compareColumns(oldF, newF []graph.Field, kind string, keys map[string]bool, renames map[string]string) []Column {
	oldT := map[string]string{}
	for _, f := range oldF {
		oldT[f.Name] = f.Type
	}
	newT := map[string]string{}
	for _, f := range newF {
		newT[f.Name] = f.Type
	}
	cols := []Column{}
	renamedFrom := map[string]bool{}
	for _, f := range newF {
		ot, ok := oldT[f.Name]
		if from, declared := renames[f.Name]; declared && !ok {
			if ft, had := oldT[from]; had {
				renamedFrom[from] = true
				e := fmt.Sprintf("renamed from %s in place (ALTER TABLE … RENAME COLUMN, in the update's own DDL): rows written before the update keep their values under %s", from, f.Name)
				if kind != "sql" {
					e = fmt.Sprintf("written as %s instead of %s from the update on", f.Name, from)
				}
				cols = append(cols, Column{Name: f.Name, From: from, Action: Renamed, OldType: ft, NewType: f.Type, Effect: e})
				continue
			}
		}
		switch {
		case !ok && kind == "sql" && keys[f.Name]:
			cols = append(cols, Column{Name: f.Name, Action: Refused, NewType: f.Type,
				Effect: "a new key column cannot be added to a keyed table: write to a new table"})
		case !ok && kind == "sql":
			cols = append(cols, Column{Name: f.Name, Action: Added, NewType: f.Type,
				Effect: "added to the table in place as a nullable column; rows written before the update read null"})
		case !ok:
			cols = append(cols, Column{Name: f.Name, Action: Added, NewType: f.Type, Effect: "written from the update on; earlier output lacks it"})
		case ot == f.Type:
		case widens(ot, f.Type) && kind != "sql":
			cols = append(cols, Column{Name: f.Name, Action: Widened, OldType: ot, NewType: f.Type,
				Effect: fmt.Sprintf("%s → %s from the update on", ot, f.Type)})
		case widens(ot, f.Type):
			cols = append(cols, Column{Name: f.Name, Action: Widened, OldType: ot, NewType: f.Type,
				Effect: fmt.Sprintf("%s → %s: the column is widened in place (PostgreSQL: ALTER COLUMN … TYPE double precision; SQLite: its INTEGER column stores floats as given); rows written before keep their values", ot, f.Type)})
		case ot == "float" && f.Type == "int" && kind == "sql":
			cols = append(cols, Column{Name: f.Name, Action: Converted, OldType: ot, NewType: f.Type,
				Effect: "float → int: the float column stays and holds the ints exactly (to 2^53); rows written before keep their floats"})
		default:
			cols = append(cols, Column{Name: f.Name, Action: Converted, OldType: ot, NewType: f.Type,
				Effect: fmt.Sprintf("%s → %s is not a widening: a SQL table refuses it (write to a new table); files and topics carry the new type from the update on", ot, f.Type)})
		}
	}
	for _, f := range oldF {
		if _, ok := newT[f.Name]; ok || renamedFrom[f.Name] {
			continue
		}
		e := "no longer written: the column stays, and rows written from the update on hold null in it"
		if kind != "sql" {
			e = "no longer written from the update on"
		}
		cols = append(cols, Column{Name: f.Name, Action: Removed, OldType: f.Type, Effect: e})
	}
	slices.SortStableFunc(cols, func(a, b Column) int { return strings.Compare(a.Name, b.Name) })
	return cols
}

// markRenames settles the renames of a SQL sink's columns as the sink
// does: a new column beside a removed one of the same type is how an
// undeclared rename looks, and the sink refuses it (its old rows would
// keep their values under the old name and read null under the new),
// unless notRenamed says the new field is not a rename of the removed one
// (a Combine's new output beside a removed one that aggregated something
// else);
// a declared rename is applied in place to a plain table, and behind the
// view of a staged table or of a parallel replacement's façade. An int
// widened to float is altered in place, and served beside the older
// tables' ints by a staged table's or a façade's view.
//
// A type change other than those is a conversion (convert on the sink):
// served converted behind a staged table's view when declared, refused
// otherwise, with the fix.
func markRenames(cols []Column, layout string, strategy Strategy, notRenamed map[string][]string, convert map[string]bool) {
	for i := range cols {
		c := &cols[i]
		switch {
		case c.Action == Converted && !(c.OldType == "float" && c.NewType == "int"):
			markConversion(c, layout, strategy, convert)
		case c.Action == Converted && declaredWithout(convert, c.Name):
			// A float narrowed is a Combine's (allow_lossy there, below)
			// unless the sink declares it, and without leave it refuses.
			markConversion(c, layout, strategy, convert)
		case c.Action == Renamed && layout == "staged":
			c.Effect = fmt.Sprintf("renamed from %s behind the view: the older staging tables keep their column %s (a job still writing one goes on), the view and the merges read it as %s, the principal is renamed in place (ALTER TABLE … RENAME COLUMN); no row is copied", c.From, c.From, c.Name)
		case c.Action == Renamed && strategy == Parallel:
			c.Effect = fmt.Sprintf("renamed from %s behind the façade: the running job's table keeps its column %s (its writes go on), the view, the parity check and the compaction read it as %s; the new generation's table has %s; no row is copied, and a rollback serves %s again", c.From, c.From, c.Name, c.Name, c.From)
		case c.Action == Converted && c.OldType == "float" && c.NewType == "int" && layout == "staged" && strategy != Parallel:
			c.Effect = "float → int: the new staging table holds ints, and the view serves the older members' floats truncated toward zero (as the state's conversion truncates); the principal keeps its float column, read the same way; no row is copied"
		case c.Action == Converted && c.OldType == "float" && c.NewType == "int" && (layout == "staged" || strategy == Parallel):
			c.Action = Refused
			c.Effect = "float → int, which a parallel replacement does not support: its façade would serve the running job's floats truncated, but the parity check compares them with the new ints and never finds parity: update in place, or write to a new table"
		case c.Action == Widened && layout == "staged" && c.OldType == "int" && c.NewType == "float":
			c.Effect = "int → float: the new staging table holds floats, the view serves them beside the older staging tables' ints, and the next merge widens the principal's column (PostgreSQL: bigint to double precision, which rewrites it)"
		case c.Action == Widened && strategy == Parallel && c.OldType == "int" && c.NewType == "float":
			c.Effect = "int → float: the new generation's table holds floats, the façade's view serves them beside the running job's ints, and the compaction moves the ints into the float column"
		case c.Action == Widened && (layout == "staged" || strategy == Parallel):
			c.Action = Refused
			c.Effect = fmt.Sprintf("%s → %s widens, but a staged table or the façade of a parallel replacement keeps each column's type and refuses the new values: update in place, or write to a new table", c.OldType, c.NewType)
		case c.Action == Added:
			for _, r := range cols {
				if r.Action == Removed && r.OldType == c.NewType && !slices.Contains(notRenamed[c.Name], r.Name) {
					c.Action = Refused
					c.Effect = fmt.Sprintf("with %s no longer written, the sink takes %s for a rename of %s, which would leave the rows written before under %s (SQL_SCHEMA_CHANGE_REFUSED): for a Combine output renamed in place declare it (migrations: {accumulators: {%s: {renamed_from: %s}}}); else keep %s and add %s beside it, or write to a new table",
						r.Name, c.Name, r.Name, r.Name, c.Name, r.Name, r.Name, c.Name)
					break
				}
			}
		}
	}
}

// declaredWithout reports whether convert declares name without leave
// for a lossy conversion.
func declaredWithout(convert map[string]bool, name string) bool {
	allow, ok := convert[name]
	return ok && !allow
}

// markConversion settles a SQL sink's column whose type changes other than
// by a widening: converted behind a staged table's view when the sink
// declares it (convert; a lossy one with allow_lossy), refused otherwise
// with the fix.
func markConversion(c *Column, layout string, strategy Strategy, convert map[string]bool) {
	lossy, ok := sqlConversion(c.OldType, c.NewType)
	allow, declared := convert[c.Name]
	fix := "convert: [" + c.Name + "]"
	if lossy {
		fix = "convert: {" + c.Name + ": {allow_lossy: true}}"
	}
	refuse := func(why string) {
		c.Action = Refused
		c.Effect = fmt.Sprintf("%s → %s: %s", c.OldType, c.NewType, why)
	}
	switch {
	case !ok:
		refuse("no SQL table converts it (a staged table converts an int, a float or a timestamp to a string, and a string to an int or a float): keep the type, or write to a new table")
	case layout != "staged":
		refuse("a plain table would hold two types in one column (SQL_SCHEMA_CHANGE_REFUSED): write it with layout: staged from the running version on and declare " + fix + ", or write to a new table")
	case strategy == Parallel:
		refuse("a parallel replacement's façade does not convert a column: update in place (layout: staged, " + fix + "), or write to a new table")
	case !declared:
		refuse("a conversion of the rows written before, which the staged table's view applies only where the sink declares it (SQL_SCHEMA_CHANGE_REFUSED): add " + fix + " to the WriteToSql config")
	case lossy && !allow:
		refuse("lossy (a value that does not convert reads null; a float's fraction is truncated), declared without leave: declare " + fix)
	case lossy:
		c.Effect = fmt.Sprintf("%s → %s, declared lossy (convert, allow_lossy): the new staging table holds %ss; the view serves the older members' values converted (a %s that does not convert reads null), and the principal keeps them as they are, read the same way; no row is copied", c.OldType, c.NewType, c.NewType, c.OldType)
	default:
		c.Effect = fmt.Sprintf("%s → %s, declared (convert): the new staging table holds %ss; the view serves the older members' values as their text, and the next merge converts the principal's column (PostgreSQL: ALTER COLUMN … TYPE text; SQLite keeps its column and the view converts it); no row is copied at the update", c.OldType, c.NewType, c.NewType)
	}
}

// sources says where each source reads from after the change.
func (p *Plan) sources(rep compat.Report, oldSteps, newSteps map[string]*graph.Step, opts Options) {
	isSource := func(s *graph.Step) bool { return s.Kind == graph.KindSource }
	matched := map[string]string{}
	taken := map[string]bool{}
	for _, m := range rep.Matches {
		if m.Kind == graph.KindSource {
			matched[m.Old], taken[m.New] = m.New, true
		}
	}
	rewind := opts.Rewind == nil || *opts.Rewind
	errs := findings(rep.Errors)
	for _, name := range sortedNames(oldSteps, isSource) {
		o := oldSteps[name]
		s := Source{Old: name, Identity: ioIdentity(o.Source)}
		n, ok := matched[name]
		switch {
		case len(errs[name]) > 0:
			s.Action, s.Position = Refused, detailOf(errs[name])
		case !ok && newSteps[name] != nil && newSteps[name].Kind == graph.KindSource:
			s.New, s.Action = name, Changed
			s.Position = "reads something else (" + ioIdentity(newSteps[name].Source) + "): the old read positions are dropped and it starts where a new job would"
			taken[name] = true
		case !ok:
			s.Action, s.Position = Dropped, "no longer read: its read positions are dropped"
		default:
			s.New, s.Action = n, Kept
			if n != name {
				s.Action = Renamed
			}
			s.Position = position(o, opts.Strategy, rewind)
		}
		p.Sources = append(p.Sources, s)
	}
	for _, name := range sortedNames(newSteps, isSource) {
		if taken[name] {
			continue
		}
		n := newSteps[name]
		p.Sources = append(p.Sources, Source{New: name, Action: Added, Identity: ioIdentity(n.Source),
			Position: "a new source: a subscription is read from its first unacknowledged message, a bounded input from its start"})
	}
}

func position(o *graph.Step, strategy Strategy, rewind bool) string {
	bounded := o.Source == nil || o.Source.Bounded
	switch {
	case bounded:
		return "bounded input: read again from its start by a new job"
	case strategy == InPlace:
		return "continues at the running job's read position: nothing is read twice or skipped"
	case rewind:
		return "the new job re-reads retained input from the earliest message of the old job's open windows (weir_replace_rewind), then continues"
	}
	return "the new job continues from the old job's acknowledged position (weir_replace_rewind=false): windows open at the switch are cut short"
}

// rekeyedProducer returns the name of the YAML Combine feeding sink n of
// NEW when it declares a re-key that the step of its name in OLD did not
// (so the update moves its keys, and the rows of the sink's table with
// them), else "".
func rekeyedProducer(old, newp *graph.Pipeline, n *graph.Step) string {
	c := newp.Collection(n.Inputs[graph.MainTag])
	if c == nil {
		return ""
	}
	p := newp.Step(c.Producer)
	if p == nil || compat.RekeyedFrom(p) == nil {
		return ""
	}
	if o := old.Step(p.Name); o != nil && compat.RekeyedFrom(o) != nil && o.KeyCoder != nil && p.KeyCoder != nil && o.KeyCoder.Equal(*p.KeyCoder) {
		return "" // the running version declared this re-key already
	}
	return p.Name
}
