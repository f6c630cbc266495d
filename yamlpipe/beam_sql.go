package yamlpipe

import (
	"context"
	"strconv"
	"strings"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/window"
	"github.com/weir-dev/weir/yamlpipe/join"
	"github.com/weir-dev/weir/yamlpipe/keyenc"
	"github.com/weir-dev/weir/yamlpipe/sqlquery"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// ---- Sql ----

// buildSql builds Beam YAML's Sql: config.query over the input (table
// PCOLLECTION) or the named inputs (tables by their names), run by SQLite
// (package sqlquery). A projection or filter runs per element; any other
// query per window of its inputs, its rows emitted when the window's pane
// fires.
func buildSql(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	qn := t.config.Get("query")
	if qn == nil {
		return nil, l.errf(t.typNode, "Sql needs config.query (a SELECT over PCOLLECTION, or over its named inputs)")
	}
	text, err := l.str(qn, "Sql query")
	if err != nil {
		return nil, err
	}
	if d, dn, err := l.optStr(t.config, "dialect"); err != nil {
		return nil, err
	} else if dn != nil && !strings.EqualFold(d, "calcite") && !strings.EqualFold(d, "sqlite") {
		return nil, l.errf(dn, "Sql dialect %q is not supported: weir runs queries with SQLite (dialect calcite or sqlite)", d)
	}
	var tables []sqlquery.Table
	for i, c := range ins {
		at := t.typNode
		name := sqlquery.DefaultTable
		if t.inputNode != nil && t.inputNode.Kind == yamlnode.Map {
			name, at = t.inputNode.Keys[i].Text, t.inputNode.Vals[i]
		} else if len(ins) > 1 {
			return nil, l.errf(t.inputNode, "Sql with several inputs names them (input: {orders: ReadOrders, users: ReadUsers}); the query reads each by its name")
		}
		if c.isReject {
			return nil, l.errf(at, "Sql reads rows, not an error output")
		}
		tables = append(tables, sqlquery.Table{Name: name, Schema: c.schema})
	}
	q, err := sqlquery.Compile(context.Background(), text, tables)
	if err != nil {
		return nil, l.wrapf(qn, err, "Sql query")
	}
	if q.PerRow {
		fn := &sqlquery.RowFn{Q: q}
		res := parDo(l.root, t.name, ins[0], fn, stepOpts(t, append(errorOpt(t), weir.WithCoder(q.Out.Coder()))...)...)
		l.registerErrors(t, res)
		return rowsColl(q.Out, res), nil
	}
	for i, c := range ins {
		if !l.bounded(c) {
			if ws := l.p.Graph().Collection(c.rows.ID()).Windowing; ws.Fn.Kind == window.KindGlobal && ws.Trigger.Kind == window.TriggerDefault {
				return nil, l.errf(qn, "Sql: the query aggregates, sorts, deduplicates, limits or joins, so it runs once per window, but input %q is unbounded in the global window without a trigger: it would never emit a row. Window the input first (WindowInto, or windowing: on the Sql)", tables[i].Name)
			}
		}
	}
	a := sqlquery.NewAggregator(q, keyenc.Append)
	// The union row: the input's tag, then one nullable row field per input.
	union, err := unionSchema(a.Ins)
	if err != nil {
		return nil, l.wrapf(t.typNode, err, "Sql")
	}
	var tagged []weir.PCollection[*rowT]
	for i, c := range ins {
		fn := &join.TagFn{Tag: int64(i), Union: union}
		tagged = append(tagged, parDo(l.root, t.name+"/tag-"+strconv.Itoa(i), c, fn, stepOpts(t, weir.WithCoder(union.Coder()))...))
	}
	flat := weir.Flatten(l.root, t.name+"/inputs", tagged, stepOpts(t, weir.WithCoder(union.Coder()))...)
	var stored []graph.Field
	for _, tb := range tables {
		stored = append(stored, graph.Field{Name: tb.Name, Type: tb.Schema.String()})
	}
	keyCoder := graph.Coder{URN: "weir:yaml:sql_window", Version: 1}
	storedCoder := graph.Coder{URN: "weir:yaml:sql_rows", Version: 1, Fields: stored}
	grouped := weir.Aggregate[*rowT, *rowT](l.root, t.name+"/group", flat, a, keyCoder, storedCoder, stepOpts(t, weir.WithCoder(a.Batch.Coder()))...)
	res := parDo(l.root, t.name, rowsColl(a.Batch, grouped), sqlquery.EmitFn{}, stepOpts(t, append(errorOpt(t), weir.WithCoder(q.Out.Coder()))...)...)
	l.registerErrors(t, res)
	return rowsColl(q.Out, res), nil
}

// ---- language: sql in MapToFields and Filter ----

// sqlFieldNames reports whether every field of a MapToFields with
// language: sql only names an input field (quoted with backticks or not):
// those copy the field, no SQL runs.
func (l *loader) sqlFieldNames(in *coll, fields *yamlnode.Node) bool {
	for _, en := range fields.Vals {
		if en.Kind == yamlnode.Map {
			en = en.Get("expression")
		}
		if en == nil || en.Kind != yamlnode.String {
			return false
		}
		name := en.Text
		if len(name) >= 2 && name[0] == '`' && name[len(name)-1] == '`' {
			name = name[1 : len(name)-1]
		}
		if in.schema.Index(name) < 0 {
			return false
		}
	}
	return true
}

// sqlMapToFields builds a MapToFields whose fields are SQL expressions, as
// Beam does: SELECT expr AS name, ... FROM PCOLLECTION (with append: true,
// the input's fields not dropped come first, in order, a field of the same
// name replaced in place), run per element.
func (l *loader) sqlMapToFields(t *transformSpec, in *coll, appendIn bool, drops []string, fn *yamlnode.Node) (*coll, error) {
	if in.isReject {
		return nil, l.errf(t.typNode, "MapToFields with language: sql reads rows, not an error output")
	}
	if mn := t.config.Get("metrics"); mn != nil {
		return nil, l.errf(mn, "metrics are CEL expressions over a MapToFields' output; with language: sql they are not supported")
	}
	type sel struct{ name, expr string }
	var sels []sel
	if appendIn {
		dropped := map[string]bool{}
		for _, d := range drops {
			dropped[d] = true
		}
		for _, f := range in.schema.Fields {
			if !dropped[f.Name] {
				sels = append(sels, sel{f.Name, sqlquery.Quote(f.Name)})
			}
		}
	}
	for i, k := range fn.Keys {
		en := fn.Vals[i]
		if en.Kind == yamlnode.Map {
			if err := l.checkKeys(en, "a field", "expression"); err != nil {
				return nil, err
			}
			if en = en.Get("expression"); en == nil {
				return nil, l.errf(fn.Vals[i], "field %q needs an expression", k.Text)
			}
		}
		expr, err := l.str(en, "field "+k.Text)
		if err != nil {
			return nil, err
		}
		// Each expression alone first, so that an error names its field.
		if _, err := sqlquery.Compile(context.Background(), "SELECT "+expr+" FROM "+sqlquery.DefaultTable, []sqlquery.Table{{Name: sqlquery.DefaultTable, Schema: in.schema}}); err != nil {
			return nil, l.wrapf(en, err, "field %s: SQL expression", k.Text)
		}
		s := sel{k.Text, "(" + expr + ")"}
		replaced := false
		for j := range sels {
			if sels[j].name == k.Text {
				sels[j], replaced = s, true
			}
		}
		if !replaced {
			sels = append(sels, s)
		}
	}
	if len(sels) == 0 {
		return nil, l.errf(t.typNode, "MapToFields produces no fields")
	}
	parts := make([]string, len(sels))
	for i, s := range sels {
		parts[i] = s.expr + " AS " + sqlquery.Quote(s.name)
	}
	q, err := sqlquery.Compile(context.Background(), "SELECT "+strings.Join(parts, ", ")+" FROM "+sqlquery.DefaultTable,
		[]sqlquery.Table{{Name: sqlquery.DefaultTable, Schema: in.schema}})
	if err != nil {
		return nil, l.wrapf(fn, err, "fields: SQL")
	}
	if !q.PerRow {
		return nil, l.errf(fn, "fields: a MapToFields expression works on one row at a time; aggregates, window functions and subqueries over the input belong in a Sql transform")
	}
	res := parDo(l.root, t.name, in, &sqlquery.RowFn{Q: q}, stepOpts(t, append(errorOpt(t), weir.WithCoder(q.Out.Coder()))...)...)
	l.registerErrors(t, res)
	return rowsColl(q.Out, res), nil
}

// sqlFilter builds a Filter whose keep is a SQL condition, as Beam does:
// the element passes on unchanged when SELECT 1 FROM PCOLLECTION WHERE
// keep returns a row for it (a NULL condition does not keep it).
func (l *loader) sqlFilter(t *transformSpec, in *coll, kn *yamlnode.Node) (*coll, error) {
	if in.isReject {
		return nil, l.errf(t.typNode, "Filter with language: sql reads rows, not an error output")
	}
	if mn := t.config.Get("metrics"); mn != nil {
		return nil, l.errf(mn, "metrics are CEL expressions; with language: sql they are not supported")
	}
	keep, err := l.str(kn, "keep")
	if err != nil {
		return nil, err
	}
	q, err := sqlquery.Compile(context.Background(), "SELECT 1 FROM "+sqlquery.DefaultTable+" WHERE "+keep,
		[]sqlquery.Table{{Name: sqlquery.DefaultTable, Schema: in.schema}})
	if err != nil {
		return nil, l.wrapf(kn, err, "keep: SQL condition")
	}
	if !q.PerRow {
		return nil, l.errf(kn, "keep: a Filter condition works on one row at a time; aggregates and subqueries over the input belong in a Sql transform")
	}
	res := parDo(l.root, t.name, in, &sqlquery.RowFn{Q: q, Keep: true}, stepOpts(t, append(errorOpt(t), weir.WithCoder(in.schema.Coder()))...)...)
	l.registerErrors(t, res)
	return rowsColl(in.schema, res), nil
}
