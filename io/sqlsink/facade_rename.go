package sqlsink

import (
	"context"
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

// fxGenColumns returns generation g's columns as the view serves them.
func fxGenColumns(ctx context.Context, fx facadeExec, g facadeGen) ([]colDecl, error) {
	cols, err := fxColumns(ctx, fx, g.physical)
	if err != nil {
		return nil, err
	}
	return exposeColumns(g.physical, cols, g.renames, fx.pg())
}
