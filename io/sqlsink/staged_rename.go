package sqlsink

import (
	"context"
	"fmt"
	"sort"
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

const stagedRenamesDDL = "CREATE TABLE IF NOT EXISTS " + StagedRenamesTable + " (view_name TEXT NOT NULL, seq BIGINT NOT NULL, " +
	"old_name TEXT NOT NULL, new_name TEXT NOT NULL, PRIMARY KEY (view_name, seq, new_name))"

// stagedRename is a rename declared by the sink of staging table seq: the
// staging tables numbered below seq serve their column from under to.
type stagedRename struct {
	seq      int64
	from, to string
}

// fxStagedRenames returns the renames recorded for the staged view, in
// the order they were declared. The registry need not exist.
func fxStagedRenames(ctx context.Context, fx facadeExec, view string) ([]stagedRename, error) {
	if k, err := fxKind(ctx, fx, StagedRenamesTable); err != nil || k == "" {
		return nil, err
	}
	rows, err := fx.query(ctx, `SELECT seq, old_name, new_name FROM `+StagedRenamesTable+
		` WHERE view_name = `+ph(fx, 1)+` ORDER BY seq, new_name`, view)
	if err != nil {
		return nil, fmt.Errorf("reading the renamed columns of %s: %w", view, err)
	}
	out := make([]stagedRename, 0, len(rows))
	for _, r := range rows {
		var rn stagedRename
		rn.seq, _ = r[0].(int64)
		rn.from, _ = r[1].(string)
		rn.to, _ = r[2].(string)
		out = append(out, rn)
	}
	return out, nil
}

// renamesAfter returns the renames a staging table of sequence seq serves
// its columns under: those declared by later staging tables. The
// principal (seq 0) is renamed in place and serves its columns as they are.
func renamesAfter(all []stagedRename, seq int64) []stagedRename {
	if seq == 0 {
		return nil
	}
	var out []stagedRename
	for _, r := range all {
		if r.seq > seq {
			out = append(out, r)
		}
	}
	return out
}

// exposeName returns the name under which a column physically named name
// is served after renames (in declaration order).
func exposeName(name string, renames []stagedRename, pg bool) string {
	for _, r := range renames {
		if r.from == name || (!pg && strings.EqualFold(r.from, name)) {
			name = r.to
		}
	}
	return name
}

// exposeColumns returns cols under the names the view serves them by
// (colDecl.phys keeps a renamed column's own name), refusing two columns
// that would be served under one name.
func exposeColumns(table string, cols []colDecl, renames []stagedRename, pg bool) ([]colDecl, error) {
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
	if len(renames) == 0 {
		return nil
	}
	if err := fx.exec(ctx, stagedRenamesDDL); err != nil {
		return fmt.Errorf("creating the staged registry: %w", err)
	}
	news := make([]string, 0, len(renames))
	for nw := range renames {
		news = append(news, nw)
	}
	sort.Strings(news)
	pcols, err := fxColumns(ctx, fx, principal)
	if err != nil {
		return err
	}
	renamed := false
	for _, nw := range news {
		old := renames[nw]
		q := `INSERT INTO ` + StagedRenamesTable + ` (view_name, seq, old_name, new_name) VALUES (` +
			ph(fx, 1) + `, ` + ph(fx, 2) + `, ` + ph(fx, 3) + `, ` + ph(fx, 4) + `) ON CONFLICT (view_name, seq, new_name) DO NOTHING`
		if err := fx.exec(ctx, q, view, seq, old, nw); err != nil {
			return fmt.Errorf("recording the rename of %s to %s behind %s: %w", old, nw, view, err)
		}
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
		for i := range pcols {
			if pcols[i].name == old || (!fx.pg() && strings.EqualFold(pcols[i].name, old)) {
				pcols[i].name = nw
			}
		}
	}
	return nil
}

// fxAddExposedColumns adds to table dst the columns of want it lacks
// (nullable, so its rows read null) and, on PostgreSQL, widens a bigint
// column to double precision where want holds floats (an int output
// widened to float: compat's COMBINE_OUTPUT_WIDENED).
func fxAddExposedColumns(ctx context.Context, fx facadeExec, dst string, want []colDecl) error {
	have, err := fxColumns(ctx, fx, dst)
	if err != nil {
		return err
	}
	for _, c := range want {
		if i := columnIndex(have, c.name, fx.pg()); i >= 0 {
			if fx.pg() && strings.EqualFold(have[i].typ, "bigint") && strings.EqualFold(c.typ, "double precision") {
				if err := fx.exec(ctx, "ALTER TABLE "+quoteTable(dst)+" ALTER COLUMN "+quoteIdent(have[i].name)+" TYPE double precision"); err != nil {
					return fmt.Errorf("widening column %s of %s to double precision: %w", c.name, dst, err)
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

// fxLacksExposed reports whether table dst lacks a column of want, or
// (PostgreSQL) holds as bigint one that want holds as double precision.
func fxLacksExposed(ctx context.Context, fx facadeExec, dst string, want []colDecl) (bool, error) {
	have, err := fxColumns(ctx, fx, dst)
	if err != nil {
		return false, err
	}
	for _, c := range want {
		i := columnIndex(have, c.name, fx.pg())
		if i < 0 || fx.pg() && strings.EqualFold(have[i].typ, "bigint") && strings.EqualFold(c.typ, "double precision") {
			return true, nil
		}
	}
	return false, nil
}

// columnIndex returns the index of the column name in cols, or -1.
func columnIndex(cols []colDecl, name string, pg bool) int {
	for i, c := range cols {
		if c.name == name || (!pg && strings.EqualFold(c.name, name)) {
			return i
		}
	}
	return -1
}
