package sqlsink

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Renames behind a staged view: see the package documentation, "Staged
// layout". A sink whose rows rename a field (Config.RenamedColumns)
// records the rename at its staging table's sequence; every staging
// table before it keeps its column as it is (an older generation may
// still write it, during a parallel replacement) and the view and the
// merges read it under the new name; the principal table, which only
// merges write, is renamed in place. No row is copied.

// StagedRenamesTable records the renames declared behind staged views:
// per view, the staging table's sequence that introduced the new name,
// the old and the new column name.
const StagedRenamesTable = "weir_staged_renames"

// columnRename is a rename declared at position seq (a staging table's
// sequence, or a façade generation): the tables behind the view from
// earlier positions serve their column from under to.
type columnRename struct {
	seq      int64
	from, to string
}

// renameRegistry is a table recording the renames declared behind one
// kind of view: per view (column viewCol), the position (column seqCol)
// that introduced each new name, with the old and the new name.
type renameRegistry struct{ table, viewCol, seqCol string }

// stagedRenames is the registry of staged views' renames.
func stagedRenames() renameRegistry {
	return renameRegistry{table: StagedRenamesTable, viewCol: "view_name", seqCol: "seq"}
}

// facadeRenames is the registry of façade views' renames (by generation).
func facadeRenames() renameRegistry {
	return renameRegistry{table: FacadeRenamesTable, viewCol: "facade", seqCol: "generation"}
}

// read returns the renames recorded for view, in the order they were
// declared. The registry need not exist.
func (reg renameRegistry) read(ctx context.Context, fx facadeExec, view string) ([]columnRename, error) {
	if k, err := fxKind(ctx, fx, reg.table); err != nil || k == "" {
		return nil, err
	}
	rows, err := fx.query(ctx, `SELECT `+reg.seqCol+`, old_name, new_name FROM `+reg.table+
		` WHERE `+reg.viewCol+` = `+ph(fx, 1)+` ORDER BY `+reg.seqCol+`, new_name`, view)
	if err != nil {
		return nil, fmt.Errorf("reading the renamed columns of %s: %w", view, err)
	}
	out := make([]columnRename, 0, len(rows))
	for _, r := range rows {
		var rn columnRename
		rn.seq, _ = r[0].(int64)
		rn.from, _ = r[1].(string)
		rn.to, _ = r[2].(string)
		out = append(out, rn)
	}
	return out, nil
}

// record records renames (declaredRenames) behind view. One recorded
// before (a restart) is kept.
func (reg renameRegistry) record(ctx context.Context, fx facadeExec, view string, renames []columnRename) error {
	if len(renames) == 0 {
		return nil
	}
	keys := reg.viewCol + ", " + reg.seqCol
	ddl := "CREATE TABLE IF NOT EXISTS " + reg.table + " (" + reg.viewCol + " TEXT NOT NULL, " + reg.seqCol + " BIGINT NOT NULL, " +
		"old_name TEXT NOT NULL, new_name TEXT NOT NULL, PRIMARY KEY (" + keys + ", new_name))"
	if err := fx.exec(ctx, ddl); err != nil {
		return fmt.Errorf("creating %s: %w", reg.table, err)
	}
	q := `INSERT INTO ` + reg.table + ` (` + keys + `, old_name, new_name) VALUES (` +
		ph(fx, 1) + `, ` + ph(fx, 2) + `, ` + ph(fx, 3) + `, ` + ph(fx, 4) + `) ON CONFLICT (` + keys + `, new_name) DO NOTHING`
	for _, r := range renames {
		if err := fx.exec(ctx, q, view, r.seq, r.from, r.to); err != nil {
			return fmt.Errorf("recording the rename of %s to %s behind %s: %w", r.from, r.to, view, err)
		}
	}
	return nil
}

// forget forgets the renames declared at position seq behind view.
func (reg renameRegistry) forget(ctx context.Context, fx facadeExec, view string, seq int64) error {
	if k, err := fxKind(ctx, fx, reg.table); err != nil || k == "" {
		return err
	}
	if err := fx.exec(ctx, `DELETE FROM `+reg.table+` WHERE `+reg.viewCol+` = `+ph(fx, 1)+` AND `+reg.seqCol+` = `+ph(fx, 2), view, seq); err != nil {
		return fmt.Errorf("forgetting the renames declared at %d behind %s: %w", seq, view, err)
	}
	return nil
}

// declaredRenames returns renames (Config.RenamedColumns: new name to
// old) as declared at position seq, ordered by new name.
func declaredRenames(renames map[string]string, seq int64) []columnRename {
	out := make([]columnRename, 0, len(renames))
	for nw, old := range renames {
		out = append(out, columnRename{seq: seq, from: old, to: nw})
	}
	slices.SortFunc(out, func(a, b columnRename) int { return strings.Compare(a.to, b.to) })
	return out
}

// renamesAfter returns the renames a table at position seq serves its
// columns under: those declared at later positions.
func renamesAfter(all []columnRename, seq int64) []columnRename {
	var out []columnRename
	for _, r := range all {
		if r.seq > seq {
			out = append(out, r)
		}
	}
	return out
}

// stagedRenamesAfter is renamesAfter for a staged member: the principal
// (seq 0) is renamed in place and serves its columns as they are.
func stagedRenamesAfter(all []columnRename, seq int64) []columnRename {
	if seq == 0 {
		return nil
	}
	return renamesAfter(all, seq)
}

// exposeName returns the name under which a column physically named name
// is served after renames (in declaration order).
func exposeName(name string, renames []columnRename, pg bool) string {
	for _, r := range renames {
		if sameColumn(r.from, name, pg) {
			name = r.to
		}
	}
	return name
}

// exposeColumns returns cols under the names the view serves them by
// (colDecl.phys keeps a renamed column's own name), refusing two columns
// that would be served under one name.
func exposeColumns(table string, cols []colDecl, renames []columnRename, pg bool) ([]colDecl, error) {
	if len(renames) == 0 {
		return cols, nil
	}
	out := make([]colDecl, 0, len(cols))
	for _, c := range cols {
		to := exposeName(c.name, renames, pg)
		if hasColumn(out, to, pg) {
			return nil, fmt.Errorf("%w: %s has a column %s and a column renamed to %s: the view cannot serve both; drop one of them, or write to a new table",
				ErrSchemaChange, table, to, to)
		}
		if to != c.name {
			c.phys, c.name = c.name, to
		}
		out = append(out, c)
	}
	return out, nil
}

// fxExposedColumns returns member m's columns as the view serves them.
func fxExposedColumns(ctx context.Context, fx facadeExec, m stagedMember) ([]colDecl, error) {
	cols, err := fxColumns(ctx, fx, m.table)
	if err != nil {
		return nil, err
	}
	return exposeColumns(m.table, cols, m.renames, fx.pg())
}

// fxRecordRenames records the renames (new name to old) that the sink of
// staging table seq declares, and renames the principal's columns in
// place. A rename recorded before (a restart) is not recorded again; the
// principal holding the new column and not the old one was renamed
// before. The caller holds the view's lock and rebuilds the view.
func fxRecordRenames(ctx context.Context, fx facadeExec, view, principal string, seq int64, renames map[string]string) error {
	declared := declaredRenames(renames, seq)
	if err := stagedRenames().record(ctx, fx, view, declared); err != nil || len(declared) == 0 {
		return err
	}
	pcols, err := fxColumns(ctx, fx, principal)
	if err != nil {
		return err
	}
	renamed := false
	for _, r := range declared {
		old, nw := r.from, r.to
		hasOld, hasNew := hasColumn(pcols, old, fx.pg()), hasColumn(pcols, nw, fx.pg())
		switch {
		case !hasOld:
			continue
		case hasNew:
			return fmt.Errorf("%w: the principal table %s has both the column %s and the column %s that it is renamed to: drop one of them, or write to a new table",
				ErrSchemaChange, principal, old, nw)
		}
		if !renamed {
			// SQLite rewrites the views that name a renamed column, and
			// the view is rebuilt after: take it out first.
			if err := fx.exec(ctx, "DROP VIEW IF EXISTS "+quoteTable(view)); err != nil {
				return fmt.Errorf("replacing the view %s: %w", view, err)
			}
			renamed = true
		}
		if err := fx.exec(ctx, "ALTER TABLE "+quoteTable(principal)+" RENAME COLUMN "+quoteIdent(old)+" TO "+quoteIdent(nw)); err != nil {
			return fmt.Errorf("renaming column %s of %s to %s: %w", old, principal, nw, err)
		}
		if i := columnIndex(pcols, old, fx.pg()); i >= 0 {
			pcols[i].name = nw
		}
	}
	return nil
}

// fxAddColumns adds to table dst the columns of want it lacks (nullable,
// so its rows read null) and, with widen, changes each column whose type
// want widens or converts without loss (alterPrincipal).
func fxAddColumns(ctx context.Context, fx facadeExec, dst string, want []colDecl, widen bool) error {
	have, err := fxColumns(ctx, fx, dst)
	if err != nil {
		return err
	}
	for _, c := range want {
		if i := columnIndex(have, c.name, fx.pg()); i >= 0 {
			if stmt := alterPrincipal(dst, have[i], c, fx.pg()); widen && stmt != "" {
				if err := fx.exec(ctx, stmt); err != nil {
					return fmt.Errorf("changing column %s of %s to %s: %w", c.name, dst, c.typ, err)
				}
				have[i].typ = c.typ
			}
			continue
		}
		if err := fx.exec(ctx, "ALTER TABLE "+quoteTable(dst)+" ADD COLUMN "+quoteIdent(c.name)+" "+c.typ); err != nil {
			return fmt.Errorf("adding column %s to %s: %w", c.name, dst, err)
		}
		have = append(have, colDecl{name: c.name, typ: c.typ})
	}
	return nil
}

// fxLacksColumns reports whether fxAddColumns with widen would change
// table dst.
func fxLacksColumns(ctx context.Context, fx facadeExec, dst string, want []colDecl) (bool, error) {
	have, err := fxColumns(ctx, fx, dst)
	if err != nil {
		return false, err
	}
	for _, c := range want {
		if i := columnIndex(have, c.name, fx.pg()); i < 0 || alterPrincipal(dst, have[i], c, fx.pg()) != "" {
			return true, nil
		}
	}
	return false, nil
}

// widens reports whether column want is wider than have: on PostgreSQL a
// double precision column for a bigint one (an int output widened to
// float: compat's COMBINE_OUTPUT_WIDENED). SQLite stores either in its
// column as given.
func widens(have, want colDecl, pg bool) bool {
	return pg && strings.EqualFold(have.typ, "bigint") && strings.EqualFold(want.typ, "double precision")
}

// columnIndex returns the index of the column name in cols, or -1.
func columnIndex(cols []colDecl, name string, pg bool) int {
	for i, c := range cols {
		if sameColumn(c.name, name, pg) {
			return i
		}
	}
	return -1
}
