package sqlsink

import (
	"context"
	"fmt"
	"sort"
)

// Renames behind a façade view: a parallel replacement whose rows rename
// a field (Config.RenamedColumns) records the rename at its generation;
// every older generation's table keeps its column (its job may still be
// writing it during the overlap) and the view, the parity reads and the
// compaction read it under the new name. Dropping the generation (a
// rollback) forgets its renames, so the view serves the old names again.

// FacadeRenamesTable records the renames declared behind façade views: per
// view, the generation that introduced the new name, the old and the new
// column name.
const FacadeRenamesTable = "weir_facade_renames"

const facadeRenamesDDL = "CREATE TABLE IF NOT EXISTS " + FacadeRenamesTable + " (facade TEXT NOT NULL, generation BIGINT NOT NULL, " +
	"old_name TEXT NOT NULL, new_name TEXT NOT NULL, PRIMARY KEY (facade, generation, new_name))"

// fxFacadeRenames returns the renames recorded for the façade view, in the
// order they were declared (the generation in stagedRename.seq). The
// registry need not exist.
func fxFacadeRenames(ctx context.Context, fx facadeExec, view string) ([]stagedRename, error) {
	if k, err := fxKind(ctx, fx, FacadeRenamesTable); err != nil || k == "" {
		return nil, err
	}
	rows, err := fx.query(ctx, `SELECT generation, old_name, new_name FROM `+FacadeRenamesTable+
		` WHERE facade = `+ph(fx, 1)+` ORDER BY generation, new_name`, view)
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

// renamesAbove returns the renames declared by generations newer than gen:
// those generation gen's table is served under.
func renamesAbove(all []stagedRename, gen int64) []stagedRename {
	var out []stagedRename
	for _, r := range all {
		if r.seq > gen {
			out = append(out, r)
		}
	}
	return out
}

// fxRecordFacadeRenames records the renames (new name to old) that
// generation gen declares. One recorded before (a restart) is kept.
func fxRecordFacadeRenames(ctx context.Context, fx facadeExec, view string, gen int64, renames map[string]string) error {
	if len(renames) == 0 {
		return nil
	}
	if err := fx.exec(ctx, facadeRenamesDDL); err != nil {
		return fmt.Errorf("creating %s: %w", FacadeRenamesTable, err)
	}
	news := make([]string, 0, len(renames))
	for nw := range renames {
		news = append(news, nw)
	}
	sort.Strings(news)
	for _, nw := range news {
		q := `INSERT INTO ` + FacadeRenamesTable + ` (facade, generation, old_name, new_name) VALUES (` +
			ph(fx, 1) + `, ` + ph(fx, 2) + `, ` + ph(fx, 3) + `, ` + ph(fx, 4) + `) ON CONFLICT (facade, generation, new_name) DO NOTHING`
		if err := fx.exec(ctx, q, view, gen, renames[nw], nw); err != nil {
			return fmt.Errorf("recording the rename of %s to %s behind %s: %w", renames[nw], nw, view, err)
		}
	}
	return nil
}

// fxForgetFacadeRenames forgets the renames generation gen declared.
func fxForgetFacadeRenames(ctx context.Context, fx facadeExec, view string, gen int64) error {
	if k, err := fxKind(ctx, fx, FacadeRenamesTable); err != nil || k == "" {
		return err
	}
	if err := fx.exec(ctx, `DELETE FROM `+FacadeRenamesTable+` WHERE facade = `+ph(fx, 1)+` AND generation = `+ph(fx, 2), view, gen); err != nil {
		return fmt.Errorf("forgetting the renames of generation %d of %s: %w", gen, view, err)
	}
	return nil
}

// fxGenColumns returns generation g's columns as the view serves them.
func fxGenColumns(ctx context.Context, fx facadeExec, g facadeGen) ([]colDecl, error) {
	cols, err := fxColumns(ctx, fx, g.physical)
	if err != nil {
		return nil, err
	}
	return exposeColumns(g.physical, cols, g.renames, fx.pg())
}
