package sqlsink

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ErrSchemaChange marks a change of a sink's row schema that weir does not
// apply to an existing staged table in place: a field renamed (one column
// no longer written while a new one of the same type appears), a column's
// type changed (ErrColumnType), or the key changed. The change is refused
// before anything is altered. The service reports it as
// SQL_SCHEMA_CHANGE_REFUSED (errcode.SQLSchemaChangeRefused).
var ErrSchemaChange = errors.New("schema change refused")

// bookkeeping lists the columns the sink adds to the rows' own fields.
var bookkeeping = map[string]bool{
	colWindowStart: true, colWindowEnd: true, colPaneIndex: true, colPaneTiming: true, colPaneFirst: true,
	colPaneLast: true, colPaneCut: true, colGeneration: true, colJobID: true, colUpdatedAt: true, colElementID: true,
}

// checkRenames refuses an update that stops writing a value column of the
// existing table (plain or staged) while it adds a new column of the same
// storage type: that is a rename, which would leave the old rows' values
// under the old name and null under the new one — silently, for a reader
// of the table. existing maps the table's normalised column names to their
// declared types; added are the columns the sink would add.
func (s *Sink) checkRenames(existing map[string]string, added []column) error {
	if len(added) == 0 {
		return nil
	}
	kind := "table"
	if s.db.staged {
		kind = "staged table"
	}
	be, l := s.db.be, s.db.l
	var gone []string
	for name, decl := range existing {
		if bookkeeping[name] {
			continue
		}
		if _, ok := l.byName[strings.ToLower(name)]; ok {
			continue
		}
		gone = append(gone, name+"\x00"+decl)
	}
	for _, c := range added {
		for _, g := range gone {
			name, decl, _ := strings.Cut(g, "\x00")
			if slices.ContainsFunc(s.cfg.NotRenamedFrom[c.name], func(o string) bool { return strings.EqualFold(o, name) }) {
				continue
			}
			if be.compatible(c.kind, decl) && strings.EqualFold(strings.TrimSpace(decl), be.sqlType(c.kind)) {
				return fmt.Errorf("%w: table %s: the field %s is new and the column %s (%s) is no longer written, which looks like a rename; "+
					"weir does not rename a column of a %s in place (old rows would keep their values under %s and read null under %s). "+
					"Keep the field %s and add %s beside it, or write to a new table; for a Combine output renamed in place, "+
					"declare it on the Combine (migrations: {accumulators: {%s: {renamed_from: %s}}}) and the column is renamed with it",
					ErrSchemaChange, s.cfg.Table, c.name, name, decl, kind, name, c.name, name, c.name, c.name, name)
			}
		}
	}
	return nil
}

// renameColumns returns the DDL that renames, in the sink's existing
// table (a plain table, or the staging table a staged sink writes again
// after an in-place update), the columns the rows renamed in place
// (Config.RenamedColumns), and updates existing (normalised column names
// to declared types) to match. A rename whose new column the table has
// already, without the old one, was done before (a restart): nothing to
// do. One whose old column the table lacks has nothing to rename: the new
// column is added as any new one. A table with both columns is refused.
// The other tables behind a staged or façade view keep their columns,
// served under the new names (fxRecordRenames; facadeRenames for a façade).
//
// The lock order is the caller's: it runs under prepareLocked.
func (s *Sink) renameColumns(existing map[string]string) ([]string, error) {
	if len(s.cfg.RenamedColumns) == 0 {
		return nil, nil
	}
	be := s.db.be
	news := make([]string, 0, len(s.cfg.RenamedColumns))
	for nw := range s.cfg.RenamedColumns {
		news = append(news, nw)
	}
	sort.Strings(news)
	var ddl []string
	for _, nw := range news {
		old := s.cfg.RenamedColumns[nw]
		oldDecl, hasOld := existing[be.norm(old)]
		_, hasNew := existing[be.norm(nw)]
		switch {
		case !hasOld:
			continue
		case hasNew:
			return nil, fmt.Errorf("%w: table %s has both the column %s and the column %s that it is renamed to: drop one of them, or write to a new table",
				ErrSchemaChange, s.cfg.Table, old, nw)
		}
		ddl = append(ddl, "ALTER TABLE "+quoteTable(s.db.l.table)+" RENAME COLUMN "+quoteIdent(old)+" TO "+quoteIdent(nw))
		delete(existing, be.norm(old))
		existing[be.norm(nw)] = oldDecl
	}
	return ddl, nil
}
