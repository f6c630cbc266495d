package sqlsink

import (
	"context"
	"fmt"
	"strings"
)

// viewMember is a table behind a view (a façade generation's physical
// table, or a staged layout's principal or staging table).
type viewMember struct {
	table, mode string
	keys        []string
	// label numbers the member in messages (its generation or sequence).
	label int64
	// renames are those the member's columns are served under (a staged
	// layout's older staging tables).
	renames []columnRename
}

// fxBuildView replaces the view over members, listed newest first, of
// which those whose tables exist serve rows: per conflict key, the row no
// other member supersedes (see the package documentation, "Façade
// views"). With tieBreak, of two upsert rows of equal revision the one of
// the member listed first is served, so a row copied between members (a
// staged merge) is never served twice.
func fxBuildView(ctx context.Context, fx facadeExec, table string, members []viewMember, tieBreak bool) error {
	type genCols struct {
		g    viewMember
		cols []colDecl
	}
	var have []genCols
	var all []colDecl
	for _, g := range members {
		cols, err := fxColumns(ctx, fx, g.table)
		if err != nil {
			return err
		}
		if cols, err = exposeColumns(g.table, cols, g.renames, fx.pg()); err != nil {
			return err
		}
		if len(cols) == 0 {
			continue // dropped by hand: nothing to serve
		}
		have = append(have, genCols{g, cols})
		for _, c := range cols {
			if !hasColumn(all, c.name, fx.pg()) {
				all = append(all, c)
			}
		}
	}
	if err := fx.exec(ctx, "DROP VIEW IF EXISTS "+quoteTable(table)); err != nil {
		return fmt.Errorf("replacing the view %s: %w", table, err)
	}
	if len(have) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("CREATE VIEW " + quoteTable(table) + " AS ")
	for i, gc := range have {
		if i > 0 {
			b.WriteString(" UNION ALL ")
		}
		b.WriteString("SELECT ")
		for j, c := range all {
			if j > 0 {
				b.WriteString(", ")
			}
			if i := columnIndex(gc.cols, c.name, fx.pg()); i >= 0 {
				b.WriteString(servedAs("o."+quoteIdent(gc.cols[i].physical()), gc.cols[i].typ, c.typ, fx.pg()) + " AS " + quoteIdent(c.name))
			} else {
				b.WriteString("CAST(NULL AS " + c.typ + ") AS " + quoteIdent(c.name))
			}
		}
		b.WriteString(" FROM " + quoteTable(gc.g.table) + " AS o")
		// Append rows: the newest generation holding an element ID serves
		// it. Upsert rows: the row no other generation supersedes
		// (newerRevision: a complete revision over a cut-short one, then the
		// newer generation), so a view never serves a cut-short pane while
		// a complete one of the window exists in any generation.
		others := have[:i]
		upsert := gc.g.mode == ModeUpsert
		if upsert {
			others = make([]genCols, 0, len(have)-1)
			others = append(append(others, have[:i]...), have[i+1:]...)
		}
		oCut := hasColumn(gc.cols, colPaneCut, fx.pg())
		for j, other := range others {
			if j == 0 {
				b.WriteString(" WHERE ")
			} else {
				b.WriteString(" AND ")
			}
			b.WriteString("NOT EXISTS (SELECT 1 FROM " + quoteTable(other.g.table) + " AS n WHERE ")
			for k, key := range gc.g.keys {
				if k > 0 {
					b.WriteString(" AND ")
				}
				b.WriteString(keyTerm("n.", key, fx.pg()) + " = " + keyTerm("o.", key, fx.pg()))
			}
			nCut := hasColumn(other.cols, colPaneCut, fx.pg())
			switch {
			case upsert && tieBreak && j < i:
				// A member listed before this one wins ties.
				b.WriteString(" AND NOT " + newerRevision("o.", "n.", oCut, nCut))
			case upsert:
				b.WriteString(" AND " + newerRevision("n.", "o.", nCut, oCut))
			}
			b.WriteString(")")
		}
	}
	if err := fx.exec(ctx, b.String()); err != nil {
		return fmt.Errorf("creating the view %s over %s: %w", table, genList(have, func(gc genCols) int64 { return gc.g.label }), err)
	}
	return nil
}
