package sqlsink

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Re-keying a staged table (see the package documentation, "Re-keying a
// staged table"): when the rows' key changes by a declared re-key (a
// Combine's migrations: rekey), the sink of the first generation that
// writes the new keys, in its setup's transaction:
//
//  1. moves the members written under the earlier keys (the principal and
//     every staging table) aside: they are read-only from then on, and
//     the principal is renamed <table>__rkp_<seq>;
//  2. builds, once, a view over them (<table>__rkold_<seq>, the newest
//     revision of each earlier key and window) and a map from each earlier
//     key to its new key (<table>__rkmap_<seq>, computed by Rekey.Map);
//  3. builds a view (<table>__rkagg_<seq>) of those rows under their new
//     keys, the rows of the earlier keys that meet at one new key merged by
//     the declared merges (sum, min, max), per window;
//  4. creates an empty principal keyed by the new key, and serves the view
//     of the table's name over the new staging tables, the new principal
//     and, last, the re-keyed rows: a new key and window that the new
//     version has written is served from its own rows (its state holds the
//     merged accumulators already), every other one from the merge.
//
// Nothing is copied at the update. The first merge after it folds the
// re-keyed rows into the new principal and drops the earlier members, in
// its one transaction. Until then, a rollback (Config.UndoRekey) puts the
// earlier members back and drops the new version's tables: the rolled back
// version writes the rows again from its snapshot.

// StagedRekeysTable records, per staged view, its re-keys: the members
// moved aside, the views and the map, and when a merge folded them.
const StagedRekeysTable = "weir_staged_rekeys"

const stagedRekeysDDL = "CREATE TABLE IF NOT EXISTS " + StagedRekeysTable + " (view_name TEXT NOT NULL, seq BIGINT NOT NULL, " +
	"before_members TEXT NOT NULL, before_key_columns TEXT NOT NULL, key_columns TEXT NOT NULL, folded_at BIGINT, PRIMARY KEY (view_name, seq))"

// Rekey is a declared re-key of the rows a staged sink writes (a Combine's
// migrations: rekey): the rows written before under earlier keys are
// served under their new keys.
type Rekey struct {
	// From are the key columns of the rows written before (the earlier
	// version's key fields), in the order Map reads them.
	From []string
	// Map returns a key's new values (in the order of the sink's Key) from
	// its earlier values (in From's order; int64, float64, string, bool as
	// the database returns them).
	Map func(old []any) ([]any, error)
	// Merge says how the values of a column merge when earlier keys meet at
	// one new key: "sum", "min" or "max" (a count is a sum). A value column
	// of the rows written before that Merge does not name, and that the
	// sink still writes, refuses the re-key.
	Merge map[string]string
	// Step names the declaring step in messages.
	Step string
}

// rekeyName names the relation kind ("p": the earlier principal, "old",
// "map", "agg") of the re-key at staging sequence seq of view.
func rekeyName(view, kind string, seq int64) string {
	return view + "__rk" + kind + "_" + strconv.FormatInt(seq, 10)
}

// stagedRekey is one re-key recorded behind a staged view.
type stagedRekey struct {
	seq int64
	// before are the members moved aside.
	before []stagedMember
	// keys are the key columns of the new members.
	keys   []string
	folded bool
}

func (r *stagedRekey) oldView(view string) string { return rekeyName(view, "old", r.seq) }
func (r *stagedRekey) aggView(view string) string { return rekeyName(view, "agg", r.seq) }
func (r *stagedRekey) mapTable(view string) string {
	return rekeyName(view, "map", r.seq)
}

// fxLastRekey returns the newest re-key of the staged view, or nil. The
// registry need not exist.
func fxLastRekey(ctx context.Context, fx facadeExec, view string) (*stagedRekey, error) {
	if k, err := fxKind(ctx, fx, StagedRekeysTable); err != nil || k == "" {
		return nil, err
	}
	rows, err := fx.query(ctx, `SELECT seq, before_members, before_key_columns, key_columns, folded_at FROM `+StagedRekeysTable+
		` WHERE view_name = `+ph(fx, 1)+` ORDER BY seq DESC LIMIT 1`, view)
	if err != nil {
		return nil, fmt.Errorf("reading the re-keys of %s: %w", view, err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	r := &stagedRekey{}
	r.seq, _ = rows[0][0].(int64)
	before, _ := rows[0][1].(string)
	bk, _ := rows[0][2].(string)
	for _, b := range strings.Split(before, ",") {
		parts := strings.SplitN(b, ":", 3)
		if len(parts) != 3 {
			continue
		}
		seq, _ := strconv.ParseInt(parts[0], 10, 64)
		gen, _ := strconv.ParseInt(parts[1], 10, 64)
		r.before = append(r.before, stagedMember{seq: seq, generation: gen, table: parts[2], mode: ModeUpsert, keys: strings.Split(bk, ",")})
	}
	k, _ := rows[0][3].(string)
	r.keys = strings.Split(k, ",")
	r.folded = rows[0][4] != nil
	return r, nil
}

// pending returns the newest re-key of the view that no merge has folded
// yet, or nil.
func fxPendingRekey(ctx context.Context, fx facadeExec, view string) (*stagedRekey, error) {
	r, err := fxLastRekey(ctx, fx, view)
	if err != nil || r == nil || r.folded {
		return nil, err
	}
	return r, nil
}

// rekeyPlan is what a re-key reads of the sink and the earlier members.
type rekeyPlan struct {
	newKeys []string // the sink's key columns that the re-key computes
	rest    []string // the other key columns (the window), kept
}

// planRekey checks that the members ms (written under the earlier keys)
// key their rows by Rekey.From and the sink's other key columns.
func (s *Sink) planRekey(ms []stagedMember) (rekeyPlan, error) {
	rk := s.cfg.Rekey
	var p rekeyPlan
	for _, k := range s.l.keyColumnNames() {
		if k == colWindowStart || k == colWindowEnd {
			p.rest = append(p.rest, k)
		} else {
			p.newKeys = append(p.newKeys, k)
		}
	}
	if s.l.mode() != ModeUpsert {
		return p, fmt.Errorf("%w: %w: table %s: a re-key (declared on %s) needs mode: upsert; the sink appends rows: write to a new table",
			ErrStaged, ErrSchemaChange, s.cfg.Table, rk.Step)
	}
	want := append(slices.Clone(rk.From), p.rest...)
	slices.Sort(want)
	for _, m := range ms {
		got := slices.Clone(m.keys)
		slices.Sort(got)
		if m.mode != ModeUpsert || !slices.Equal(got, want) {
			return p, fmt.Errorf("%w: %w: table %s: the re-key declared on %s reads rows keyed by (%s); %s holds %s rows keyed by (%s): write to a new table",
				ErrStaged, ErrSchemaChange, s.cfg.Table, rk.Step, strings.Join(append(slices.Clone(rk.From), p.rest...), ", "),
				m.table, m.mode, strings.Join(m.keys, ", "))
		}
		if len(s.cfg.RenamedColumns) > 0 {
			return p, fmt.Errorf("%w: %w: table %s: a re-key (declared on %s) and a column rename in one update: do them in two updates, with a merge (weir tables merge %s) between",
				ErrStaged, ErrSchemaChange, s.cfg.Table, rk.Step, s.cfg.Table)
		}
	}
	return p, nil
}

// checkRekeyLocked is the part of a re-key that changes nothing: the
// earlier members key their rows as declared, no earlier re-key waits
// for its merge, every value column merges, and (with mapKeys) every
// earlier key maps.
func (s *Sink) checkRekeyLocked(ctx context.Context, fx facadeExec, ms []stagedMember, mapKeys bool) error {
	view := s.cfg.Table
	if r, err := fxPendingRekey(ctx, fx, view); err != nil {
		return err
	} else if r != nil {
		return fmt.Errorf("%w: %w: table %s: its re-key at staging table %d is not merged yet, and %s declares another: merge it first (weir tables merge %s)",
			ErrStaged, ErrSchemaChange, view, r.seq, s.cfg.Rekey.Step, view)
	}
	p, err := s.planRekey(ms)
	if err != nil {
		return err
	}
	if _, _, err := s.rekeyColumns(ctx, fx, view, p); err != nil || !mapKeys {
		return err
	}
	_, err = s.rekeyMap(ctx, fx, view, p)
	return err
}

// rekeyColumns returns the select list of the re-keyed view over src (a
// relation serving the earlier rows) joined to the map m: the new key
// columns from the map, the window kept, the declared merges, and the
// bookkeeping columns merged so that the re-keyed row has the newest
// revision of its parts.
func (s *Sink) rekeyColumns(ctx context.Context, fx facadeExec, src string, p rekeyPlan) (sel, group []string, err error) {
	cols, err := fxColumns(ctx, fx, src)
	if err != nil {
		return nil, nil, err
	}
	rk := s.cfg.Rekey
	pg := fx.pg()
	for i, k := range p.newKeys {
		sel = append(sel, "m."+quoteIdent("n"+strconv.Itoa(i))+" AS "+quoteIdent(k))
		group = append(group, "m."+quoteIdent("n"+strconv.Itoa(i)))
	}
	var unmerged []string
	for _, c := range cols {
		q := "b." + quoteIdent(c.name)
		as := " AS " + quoteIdent(c.name)
		switch {
		case slices.Contains(p.rest, c.name):
			sel = append(sel, q)
			group = append(group, q)
		case slices.Contains(rk.From, c.name):
			// Read through the map.
		case c.name == colPaneFirst:
			sel = append(sel, boolAgg(pg, false, q)+as)
		case c.name == colPaneLast || c.name == colPaneCut:
			sel = append(sel, boolAgg(pg, true, q)+as)
		case slices.Contains(BookkeepingColumns(), c.name):
			sel = append(sel, "MAX("+q+")"+as)
		default:
			fn := strings.ToLower(rk.Merge[c.name])
			switch fn {
			case "sum":
				sel = append(sel, "CAST(SUM("+q+") AS "+c.typ+")"+as)
			case "min", "max":
				sel = append(sel, strings.ToUpper(fn)+"("+q+")"+as)
			default:
				if _, written := s.l.byName[strings.ToLower(c.name)]; written {
					unmerged = append(unmerged, c.name)
				}
			}
		}
	}
	if len(unmerged) > 0 {
		return nil, nil, fmt.Errorf("%w: %w: table %s: the re-key declared on %s merges the rows of earlier keys that meet at one new key, but column(s) %s have no merge "+
			"(a Combine output whose fn is sum, count, min or max merges): write to a new table, or drop the column(s) from the output",
			ErrStaged, ErrSchemaChange, s.cfg.Table, rk.Step, strings.Join(unmerged, ", "))
	}
	return sel, group, nil
}

// boolAgg is the aggregate of a boolean column: any (or) or all (and).
func boolAgg(pg, anyOf bool, q string) string {
	switch {
	case pg && anyOf:
		return "bool_or(" + q + ")"
	case pg:
		return "bool_and(" + q + ")"
	case anyOf:
		return "MAX(" + q + ")"
	}
	return "MIN(" + q + ")"
}

// rekeyedKey is one entry of a re-key's map.
type rekeyedKey struct{ old, new []any }

// rekeyMap reads the distinct earlier keys (columns Rekey.From) that src
// serves and maps each with Rekey.Map to p's new key columns. A key that
// does not map refuses the re-key, naming it: its rows would have nowhere
// to go.
func (s *Sink) rekeyMap(ctx context.Context, fx facadeExec, src string, p rekeyPlan) ([]rekeyedKey, error) {
	from := s.cfg.Rekey.From
	if k, err := fxKind(ctx, fx, src); err != nil || k == "" {
		return nil, err
	}
	qs := make([]string, len(from))
	for i, f := range from {
		qs[i] = quoteIdent(f)
	}
	rows, err := fx.query(ctx, "SELECT DISTINCT "+strings.Join(qs, ", ")+" FROM "+quoteTable(src))
	if err != nil {
		return nil, fmt.Errorf("reading the keys of %s: %w", src, err)
	}
	rk := s.cfg.Rekey
	out := make([]rekeyedKey, 0, len(rows))
	for _, r := range rows {
		nv, err := rk.Map(r)
		if err == nil && len(nv) != len(p.newKeys) {
			err = fmt.Errorf("the re-key gives %d values for %d key columns", len(nv), len(p.newKeys))
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w: table %s: the rows of key (%s) = %v cannot be re-keyed by the declaration on %s: %w; "+
				"fix the expression so that every key the table holds maps, or write to a new table",
				ErrStaged, ErrSchemaChange, s.cfg.Table, strings.Join(from, ", "), r, rk.Step, err)
		}
		out = append(out, rekeyedKey{old: r, new: nv})
	}
	return out, nil
}

// fxBeginRekey moves the members written under the earlier keys aside and
// builds the views and the map that serve their rows under the new keys
// (see the top of this file), in the setup's transaction. me is the new
// staging table; the caller then creates the new principal and registers
// it and me.
func (s *Sink) fxBeginRekey(ctx context.Context, fx facadeExec, me stagedMember) error {
	view := s.cfg.Table
	ms, err := fxStagedMembers(ctx, fx, view)
	if err != nil {
		return err
	}
	var before []stagedMember
	for _, m := range ms {
		if m.seq != me.seq {
			before = append(before, m)
		}
	}
	if len(before) == 0 {
		return nil // nothing written before: nothing to re-key
	}
	// resolveStagedLocked checked the rest (checkRekeyLocked); the map is
	// computed below.
	if r, err := fxPendingRekey(ctx, fx, view); err != nil || r != nil {
		if err == nil {
			err = fmt.Errorf("%w: %w: table %s: its re-key at staging table %d is not merged yet: merge it first (weir tables merge %s)", ErrStaged, ErrSchemaChange, view, r.seq, view)
		}
		return err
	}
	p, err := s.planRekey(before)
	if err != nil {
		return err
	}
	if err := fx.exec(ctx, "DROP VIEW IF EXISTS "+quoteTable(view)); err != nil {
		return fmt.Errorf("replacing the view %s: %w", view, err)
	}
	r := &stagedRekey{seq: me.seq, keys: me.keys}
	// The earlier principal: out of the principal's name, without its key
	// index (the new principal's takes the name).
	if before[0].seq == 0 {
		prin := before[0].table
		if err := dropKeyIndexes(ctx, fx, prin, prin); err != nil {
			return err
		}
		moved := rekeyName(view, "p", me.seq)
		_, bare := splitTable(moved)
		if err := fx.exec(ctx, "ALTER TABLE "+quoteTable(prin)+" RENAME TO "+quoteIdent(bare)); err != nil {
			return fmt.Errorf("moving the principal %s to %s: %w", prin, moved, err)
		}
		before[0].table = moved
	}
	vm := make([]viewMember, 0, len(before))
	for i := len(before) - 1; i >= 0; i-- {
		m := before[i]
		vm = append(vm, viewMember{table: m.table, mode: m.mode, keys: m.keys, label: m.seq, renames: m.renames})
	}
	if err := fxBuildView(ctx, fx, r.oldView(view), vm, true); err != nil {
		return err
	}
	keys, err := s.rekeyMap(ctx, fx, r.oldView(view), p)
	if err != nil {
		return err
	}
	if err := s.fxWriteRekeyMap(ctx, fx, r.oldView(view), r.mapTable(view), p, keys); err != nil {
		return err
	}
	sel, group, err := s.rekeyColumns(ctx, fx, r.oldView(view), p)
	if err != nil {
		return err
	}
	on := make([]string, len(s.cfg.Rekey.From))
	for i, f := range s.cfg.Rekey.From {
		on[i] = "b." + quoteIdent(f) + " = m." + quoteIdent("o"+strconv.Itoa(i))
	}
	q := "CREATE VIEW " + quoteTable(r.aggView(view)) + " AS SELECT " + strings.Join(sel, ", ") + " FROM " + quoteTable(r.oldView(view)) +
		" AS b JOIN " + quoteTable(r.mapTable(view)) + " AS m ON " + strings.Join(on, " AND ") + " GROUP BY " + strings.Join(group, ", ")
	if err := fx.exec(ctx, q); err != nil {
		return fmt.Errorf("creating the re-keyed view %s: %w", r.aggView(view), err)
	}
	if err := fx.exec(ctx, `DELETE FROM `+StagedMembersTable+` WHERE view_name = `+ph(fx, 1)+` AND seq <> `+ph(fx, 2), view, me.seq); err != nil {
		return fmt.Errorf("moving the members of %s aside: %w", view, err)
	}
	list := make([]string, len(before))
	for i, m := range before {
		list[i] = strconv.FormatInt(m.seq, 10) + ":" + strconv.FormatInt(m.generation, 10) + ":" + m.table
	}
	if err := fx.exec(ctx, stagedRekeysDDL); err != nil {
		return fmt.Errorf("creating the staged registry: %w", err)
	}
	ins := `INSERT INTO ` + StagedRekeysTable + ` (view_name, seq, before_members, before_key_columns, key_columns) VALUES (` +
		ph(fx, 1) + `, ` + ph(fx, 2) + `, ` + ph(fx, 3) + `, ` + ph(fx, 4) + `, ` + ph(fx, 5) + `)`
	if err := fx.exec(ctx, ins, view, me.seq, strings.Join(list, ","), strings.Join(before[0].keys, ","), strings.Join(me.keys, ",")); err != nil {
		return fmt.Errorf("recording the re-key of %s: %w", view, err)
	}
	return nil
}

// fxWriteRekeyMap creates the map table of a re-key (columns o0.. of the
// earlier key, n0.. of the new one) and fills it with keys.
func (s *Sink) fxWriteRekeyMap(ctx context.Context, fx facadeExec, src, table string, p rekeyPlan, keys []rekeyedKey) error {
	cols, err := fxColumns(ctx, fx, src)
	if err != nil {
		return err
	}
	var defs, names []string
	for i, f := range s.cfg.Rekey.From {
		typ := ""
		for _, c := range cols {
			if sameColumn(c.name, f, fx.pg()) {
				typ = c.typ
			}
		}
		if typ == "" {
			return fmt.Errorf("%w: %w: table %s: the rows written before have no column %s, which the re-key declared on %s reads",
				ErrStaged, ErrSchemaChange, s.cfg.Table, f, s.cfg.Rekey.Step)
		}
		n := "o" + strconv.Itoa(i)
		defs, names = append(defs, quoteIdent(n)+" "+typ+" NOT NULL"), append(names, n)
	}
	be := s.db.be
	for i, k := range p.newKeys {
		c := s.l.cols[s.l.byName[strings.ToLower(k)]]
		n := "n" + strconv.Itoa(i)
		defs, names = append(defs, quoteIdent(n)+" "+be.sqlType(c.kind)+" NOT NULL"), append(names, n)
	}
	if err := fx.exec(ctx, "CREATE TABLE "+quoteTable(table)+" ("+strings.Join(defs, ", ")+")"); err != nil {
		return fmt.Errorf("creating the re-key map %s: %w", table, err)
	}
	if err := fxFillRekeyMap(ctx, fx, table, names, keys); err != nil {
		return fmt.Errorf("filling the re-key map %s: %w", table, err)
	}
	quoted := make([]string, len(s.cfg.Rekey.From))
	for i := range quoted {
		quoted[i] = quoteIdent(names[i])
	}
	_, bare := splitTable(table)
	if err := fx.exec(ctx, "CREATE UNIQUE INDEX "+quoteIdent(bare+"_old")+" ON "+quoteTable(table)+" ("+strings.Join(quoted, ", ")+")"); err != nil {
		return fmt.Errorf("indexing the re-key map %s: %w", table, err)
	}
	return nil
}

// fxFillRekeyMap writes keys into the map table (its columns named
// names: the earlier key's, then the new one's). PostgreSQL copies them in
// one stream (at 100,000 keys the setup took 267–282 ms against 467–498
// with batched inserts, docs/BENCHMARKS.md); SQLite inserts 200 rows a
// statement.
func fxFillRekeyMap(ctx context.Context, fx facadeExec, table string, names []string, keys []rekeyedKey) error {
	row := func(k rekeyedKey) []any { return append(slices.Clone(k.old), k.new...) }
	if pfx, ok := fx.(pgFx); ok {
		schema, bare := splitTable(table)
		ident := pgx.Identifier{bare}
		if schema != "" {
			ident = pgx.Identifier{schema, bare}
		}
		_, err := pfx.tx.CopyFrom(ctx, ident, names, pgx.CopyFromSlice(len(keys), func(i int) ([]any, error) { return row(keys[i]), nil }))
		return err
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = quoteIdent(n)
	}
	const batch = 200
	for start := 0; start < len(keys); start += batch {
		part := keys[start:min(start+batch, len(keys))]
		var b strings.Builder
		b.WriteString("INSERT INTO " + quoteTable(table) + " (" + strings.Join(quoted, ", ") + ") VALUES ")
		args := make([]any, 0, len(part)*len(names))
		for i, k := range part {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(")
			for j, v := range row(k) {
				if j > 0 {
					b.WriteString(", ")
				}
				args = append(args, v)
				b.WriteString(ph(fx, len(args)))
			}
			b.WriteString(")")
		}
		if err := fx.exec(ctx, b.String(), args...); err != nil {
			return err
		}
	}
	return nil
}

// dropKeyIndexes drops the unique key indexes of table that a sink made
// for table owner (keyIndexPrefix).
func dropKeyIndexes(ctx context.Context, fx facadeExec, table, owner string) error {
	idx, err := fxIndexes(ctx, fx, table)
	if err != nil {
		return err
	}
	schema, _ := splitTable(table)
	prefix := strings.ToLower(keyIndexPrefix(owner))
	for _, name := range idx {
		if !strings.HasPrefix(strings.ToLower(name), prefix) {
			continue
		}
		qn := quoteIdent(name)
		if schema != "" {
			qn = quoteIdent(schema) + "." + qn
		}
		if err := fx.exec(ctx, "DROP INDEX "+qn); err != nil {
			return fmt.Errorf("dropping the key index %s of %s: %w", name, table, err)
		}
	}
	return nil
}

// fxDropRekeyRelations drops the views and the map of re-key r.
func fxDropRekeyRelations(ctx context.Context, fx facadeExec, view string, r *stagedRekey) error {
	for _, q := range []string{
		"DROP VIEW IF EXISTS " + quoteTable(r.aggView(view)),
		"DROP VIEW IF EXISTS " + quoteTable(r.oldView(view)),
		"DROP TABLE IF EXISTS " + quoteTable(r.mapTable(view)),
	} {
		if err := fx.exec(ctx, q); err != nil {
			return fmt.Errorf("removing the re-key of %s: %w", view, err)
		}
	}
	return nil
}

// fxFoldRekey folds the pending re-key r into the principal (a merge's
// first step, in its transaction): the re-keyed rows are inserted into the
// principal (a row the principal holds already is newer), and the earlier
// members, the views and the map are dropped. The caller rebuilds the
// view.
func fxFoldRekey(ctx context.Context, fx facadeExec, view, principal string, r *stagedRekey, at int64) (int64, error) {
	if err := fxLockView(ctx, fx, view, "view"); err != nil {
		return 0, err
	}
	if err := fx.exec(ctx, "DROP VIEW IF EXISTS "+quoteTable(view)); err != nil {
		return 0, fmt.Errorf("replacing the view %s: %w", view, err)
	}
	cols, err := fxColumns(ctx, fx, r.aggView(view))
	if err != nil {
		return 0, err
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = quoteIdent(c.name)
	}
	conflict := make([]string, len(r.keys))
	for i, k := range r.keys {
		conflict[i] = keyTerm("", k, fx.pg())
	}
	n, err := countRows(ctx, fx, r.aggView(view))
	if err != nil {
		return 0, err
	}
	q := "INSERT INTO " + quoteTable(principal) + " (" + strings.Join(names, ", ") + ") SELECT " + strings.Join(names, ", ") +
		" FROM " + quoteTable(r.aggView(view)) + " WHERE true ON CONFLICT (" + strings.Join(conflict, ", ") + ") DO NOTHING"
	if err := fx.exec(ctx, q); err != nil {
		return 0, fmt.Errorf("merging the re-keyed rows of %s into %s: %w", view, principal, err)
	}
	if err := fxDropRekeyRelations(ctx, fx, view, r); err != nil {
		return 0, err
	}
	for _, m := range r.before {
		if err := fx.exec(ctx, "DROP TABLE IF EXISTS "+quoteTable(m.table)); err != nil {
			return 0, fmt.Errorf("dropping %s: %w", m.table, err)
		}
	}
	if err := fx.exec(ctx, `UPDATE `+StagedRekeysTable+` SET folded_at = `+ph(fx, 1)+` WHERE view_name = `+ph(fx, 2)+` AND seq = `+ph(fx, 3), at, view, r.seq); err != nil {
		return 0, fmt.Errorf("recording the merge of the re-key of %s: %w", view, err)
	}
	return n, nil
}

// fxUndoRekey puts the members of the pending re-key r back behind the
// view (a rollback to the version that wrote them), in the setup's
// transaction: the members written under the new keys are dropped (the
// rolled back version writes their rows again from its snapshot), the
// earlier principal gets its name back and the record goes. The caller
// registers its own staging table and rebuilds the view.
func fxUndoRekey(ctx context.Context, fx facadeExec, view string, r *stagedRekey, keep int64) error {
	ms, err := fxStagedMembers(ctx, fx, view)
	if err != nil {
		return err
	}
	if err := fx.exec(ctx, "DROP VIEW IF EXISTS "+quoteTable(view)); err != nil {
		return fmt.Errorf("replacing the view %s: %w", view, err)
	}
	if err := fxDropRekeyRelations(ctx, fx, view, r); err != nil {
		return err
	}
	for _, m := range ms {
		if m.seq == keep {
			continue
		}
		if err := fx.exec(ctx, "DROP TABLE IF EXISTS "+quoteTable(m.table)); err != nil {
			return fmt.Errorf("dropping %s, written under the re-keyed key: %w", m.table, err)
		}
	}
	if err := fx.exec(ctx, `DELETE FROM `+StagedMembersTable+` WHERE view_name = `+ph(fx, 1)+` AND seq <> `+ph(fx, 2), view, keep); err != nil {
		return fmt.Errorf("forgetting the re-keyed members of %s: %w", view, err)
	}
	for _, m := range r.before {
		table := m.table
		if m.seq == 0 {
			table = PrincipalTableName(view)
			_, bare := splitTable(table)
			if err := fx.exec(ctx, "ALTER TABLE "+quoteTable(m.table)+" RENAME TO "+quoteIdent(bare)); err != nil {
				return fmt.Errorf("moving %s back to %s: %w", m.table, table, err)
			}
		}
		m.table = table
		if err := fxRegisterMember(ctx, fx, view, m); err != nil {
			return err
		}
	}
	if err := fx.exec(ctx, `DELETE FROM `+StagedRekeysTable+` WHERE view_name = `+ph(fx, 1)+` AND seq = `+ph(fx, 2), view, r.seq); err != nil {
		return fmt.Errorf("forgetting the re-key of %s: %w", view, err)
	}
	return nil
}

// tableRowsLocked returns how many rows the table (or view) of the
// sink's name serves; 0 when it does not exist.
func (s *Sink) tableRowsLocked(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.be.facadeTx(ctx, func(fx facadeExec) error {
		if k, err := fxKind(ctx, fx, s.cfg.Table); err != nil || k == "" {
			return err
		}
		var err error
		n, err = countRows(ctx, fx, s.cfg.Table)
		return err
	})
	return n, err
}

// refuseIndirectRekeyLocked refuses a sink whose rows come from a
// re-keyed Combine through other steps (Config.RekeyedUpstream) when its
// table holds rows: they are keyed the earlier way, and the steps between
// may compute the table's key from the Combine's in any way.
func (s *Sink) refuseIndirectRekeyLocked(ctx context.Context) error {
	n, err := s.tableRowsLocked(ctx)
	if err != nil || n == 0 {
		return err
	}
	return fmt.Errorf("%w: %s re-keys its rows (migrations: rekey), and they reach table %s, which holds %d rows written before, through other steps, which a table's re-key cannot follow: "+
		"write them to a new table, or write the Combine's output to this table directly with layout: staged",
		ErrSchemaChange, s.cfg.RekeyedUpstream, s.cfg.Table, n)
}

// refuseTableRekeyLocked refuses a re-key (Config.Rekey) of a table that
// is not staged: a façade (the running job writes the earlier keys beside
// the new ones), or a plain table that holds rows (they would stay under
// their earlier keys, and new rows would overwrite some of them).
func (s *Sink) refuseTableRekeyLocked(ctx context.Context) error {
	rk := s.cfg.Rekey
	if s.db.facade || s.cfg.Facade {
		return fmt.Errorf("%w: %s re-keys the rows of %s (migrations: rekey) in a parallel replacement, whose running job goes on writing the earlier keys: "+
			"re-key it by an update in place, with the table in layout: staged, or write the new version to a new table",
			ErrSchemaChange, rk.Step, s.cfg.Table)
	}
	n, err := s.tableRowsLocked(ctx)
	if err != nil || n == 0 {
		return err
	}
	return fmt.Errorf("%w: %s re-keys its rows (migrations: rekey), and table %s holds %d rows under the earlier keys, which a plain table would keep beside the new ones "+
		"(and new rows would overwrite some of them): give the sink layout: staged (its view serves the earlier rows under their new keys, merged by the Combine's fns), "+
		"or write the new version to a new table", ErrSchemaChange, rk.Step, s.cfg.Table, n)
}
