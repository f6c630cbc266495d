package sqlsink

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/weir-dev/weir/runner/contract"
)

// StagedTarget names a staged table for the functions the service calls:
// MergeStaged and DescribeStaged.
type StagedTarget struct {
	// Driver, DSN and Table are as in Config (Table is the view's name).
	Driver, DSN, Table string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// BusyTimeout is as in Config.
	BusyTimeout time.Duration
	// Hook, when set, is called before each step of a merge with the
	// step's name ("insert <staging table>", "delete <staging table>",
	// "drop <staging table>", "log", "view"); an error it returns aborts the
	// merge, whose transaction then changes nothing. Tests use it to stop
	// a merge between its statements.
	Hook func(step string) error
}

// MemberMove is what a merge did with one staging table
// (contract.MemberMove).
type MemberMove = contract.MemberMove

// MergeReport says what a merge did (contract.MergeReport).
type MergeReport = contract.MergeReport

func (t StagedTarget) facade() FacadeTarget {
	return FacadeTarget{Driver: t.Driver, DSN: t.DSN, Table: t.Table, Now: t.Now, BusyTimeout: t.BusyTimeout}
}

// MergeStaged merges, in one transaction, every staging table of the staged
// view into its principal table; see fxMerge.
func MergeStaged(ctx context.Context, t StagedTarget) (MergeReport, error) {
	var rep MergeReport
	err := withFacade(ctx, t.facade(), func(fx facadeExec, now time.Time) error {
		clock := t.Now
		if clock == nil {
			clock = time.Now
		}
		var err error
		rep, err = fxMerge(ctx, fx, t.Table, now, clock, t.Hook)
		return err
	})
	if err != nil {
		return MergeReport{Table: t.Table}, err
	}
	return rep, nil
}

// fxMerge moves the rows of every staging table into the principal: each
// row is upserted into the principal under the revision rule (a row the
// principal holds at a newer revision is left as it is), then every
// staging row the principal now holds at the same or a newer revision is
// deleted. Rows the sink wrote to the current staging table after the
// insert (a newer pane) stay in staging. An ended staging table (not the
// newest) left empty is dropped. Both steps run in the caller's
// transaction, so a merge interrupted at any point changes nothing, and a
// merge run twice moves each row once: readers of the view see the rows
// before or after it, never a mix.
func fxMerge(ctx context.Context, fx facadeExec, view string, at time.Time, clock func() time.Time, hook func(string) error) (MergeReport, error) {
	rep := MergeReport{Table: view, At: at}
	step := func(name string) error {
		if hook == nil {
			return nil
		}
		if err := hook(name); err != nil {
			return fmt.Errorf("merging %s: at step %q: %w", view, name, err)
		}
		return nil
	}
	ms, err := fxStagedMembers(ctx, fx, view)
	if err != nil {
		return rep, err
	}
	if len(ms) == 0 || ms[0].seq != 0 {
		return rep, fmt.Errorf("%w: %s is not a staged table (no principal table is recorded for it)", ErrStaged, view)
	}
	principal := ms[0]
	// A re-key's rows go into the principal first, under their new keys
	// (the staging tables' rows, newer, then replace theirs).
	r, err := fxPendingRekey(ctx, fx, view)
	if err != nil {
		return rep, err
	}
	if r != nil {
		if err := step("fold " + r.aggView(view)); err != nil {
			return rep, err
		}
		n, err := fxFoldRekey(ctx, fx, view, principal.table, r, at.UnixMilli())
		if err != nil {
			return rep, err
		}
		rep.Rows += n
		rep.Members = append(rep.Members, MemberMove{Table: r.aggView(view), Rows: n, Dropped: true})
	}
	rep.Principal = principal.table
	upsert := principal.mode == ModeUpsert
	conflict := make([]string, len(principal.keys))
	for k, key := range principal.keys {
		conflict[k] = keyTerm("", key, fx.pg())
	}
	// Columns to add or an ended staging table to drop change the view:
	// lock it first (fxLockView). A merge of the current staging table
	// alone only moves rows.
	ddl := len(ms) > 2 || r != nil
	mcols := make([][]colDecl, len(ms))
	for i, m := range ms[1:] {
		cols, err := fxExposedColumns(ctx, fx, m)
		if err != nil {
			return rep, err
		}
		mcols[i+1] = cols
		missing, err := fxLacksColumns(ctx, fx, principal.table, cols)
		if err != nil {
			return rep, err
		}
		ddl = ddl || missing
	}
	if ddl && r == nil { // a fold locked the view already, and dropped it
		if err := fxLockView(ctx, fx, view, "view"); err != nil {
			return rep, err
		}
	}
	dropped := r != nil // a fold dropped the view
	for i, m := range ms[1:] {
		cols := mcols[i+1]
		if err := fxAddColumns(ctx, fx, principal.table, cols, true); err != nil {
			return rep, err
		}
		pcols, err := fxColumns(ctx, fx, principal.table)
		if err != nil {
			return rep, err
		}
		mv := MemberMove{Table: m.table}
		if len(cols) > 0 {
			names := make([]string, len(cols))
			src := make([]string, len(cols))
			for j, c := range cols {
				names[j] = quoteIdent(c.name)
				src[j] = quoteIdent(c.physical())
				if k := columnIndex(pcols, c.name, fx.pg()); k >= 0 {
					src[j] = movedAs(src[j], c.typ, pcols[k].typ, fx.pg())
				}
			}
			list := strings.Join(names, ", ")
			mCut, pCut := hasColumn(cols, colPaneCut, fx.pg()), hasColumn(pcols, colPaneCut, fx.pg())
			onConflict := "DO NOTHING"
			if upsert {
				set := make([]string, len(names))
				for j, n := range names {
					set[j] = n + " = excluded." + n
				}
				onConflict = "DO UPDATE SET " + strings.Join(set, ", ") + " WHERE " + newerRevision("excluded.", "cur.", mCut, pCut)
			}
			if err := step("insert " + m.table); err != nil {
				return rep, err
			}
			q := "INSERT INTO " + quoteTable(principal.table) + " AS cur (" + list + ") SELECT " + strings.Join(src, ", ") + " FROM " +
				quoteTable(m.table) + " WHERE true ON CONFLICT (" + strings.Join(conflict, ", ") + ") " + onConflict
			if err := fx.exec(ctx, q); err != nil {
				return rep, fmt.Errorf("merging %s into %s: %w", m.table, principal.table, err)
			}
			if err := step("delete " + m.table); err != nil {
				return rep, err
			}
			before, err := countRows(ctx, fx, m.table)
			if err != nil {
				return rep, err
			}
			var cond []string
			for _, key := range principal.keys {
				cond = append(cond, keyTerm("n.", key, fx.pg())+" = "+keyTerm("o.", key, fx.pg()))
			}
			if upsert {
				cond = append(cond, "NOT "+newerRevision("o.", "n.", mCut, pCut))
			}
			del := "DELETE FROM " + quoteTable(m.table) + " AS o WHERE EXISTS (SELECT 1 FROM " + quoteTable(principal.table) +
				" AS n WHERE " + strings.Join(cond, " AND ") + ")"
			if err := fx.exec(ctx, del); err != nil {
				return rep, fmt.Errorf("removing the merged rows from %s: %w", m.table, err)
			}
			after, err := countRows(ctx, fx, m.table)
			if err != nil {
				return rep, err
			}
			mv.Rows = before - after
			rep.Rows += mv.Rows
			if after == 0 && i < len(ms)-2 {
				// An ended staging table, now empty: out of the view first
				// (PostgreSQL refuses to drop a table a view reads).
				if err := step("drop " + m.table); err != nil {
					return rep, err
				}
				if !dropped {
					if err := fx.exec(ctx, "DROP VIEW IF EXISTS "+quoteTable(view)); err != nil {
						return rep, fmt.Errorf("replacing the view %s: %w", view, err)
					}
					dropped = true
				}
				if err := fx.exec(ctx, "DROP TABLE "+quoteTable(m.table)); err != nil {
					return rep, fmt.Errorf("dropping %s: %w", m.table, err)
				}
				if err := fx.exec(ctx, `DELETE FROM `+StagedMembersTable+` WHERE view_name = `+ph(fx, 1)+` AND seq = `+ph(fx, 2), view, m.seq); err != nil {
					return rep, fmt.Errorf("forgetting %s: %w", m.table, err)
				}
				mv.Dropped = true
			}
		}
		rep.Members = append(rep.Members, mv)
	}
	if err := step("view"); err != nil {
		return rep, err
	}
	// The principal may have gained columns: the view serves them.
	if ddl {
		if err := fxRebuildStagedView(ctx, fx, view); err != nil {
			return rep, err
		}
	}
	if err := step("log"); err != nil {
		return rep, err
	}
	rep.Duration = max(clock().Sub(at), 0)
	moved := make([]string, len(rep.Members))
	for i, m := range rep.Members {
		moved[i] = fmt.Sprintf("%s:%d", m.Table, m.Rows)
	}
	q := `INSERT INTO ` + StagedMergesTable + ` (view_name, merged_at, rows_moved, duration_ms, members) VALUES (` +
		ph(fx, 1) + `, ` + ph(fx, 2) + `, ` + ph(fx, 3) + `, ` + ph(fx, 4) + `, ` + ph(fx, 5) + `)`
	if err := fx.exec(ctx, q, view, at.UnixMilli(), rep.Rows, rep.Duration.Milliseconds(), strings.Join(moved, ",")); err != nil {
		return rep, fmt.Errorf("recording the merge of %s: %w", view, err)
	}
	return rep, nil
}

// StagedMember is one member of a staged table (contract.StagedMember).
type StagedMember = contract.StagedMember

// MergeRecord is one past merge of a staged table (contract.MergeRecord).
type MergeRecord = contract.MergeRecord

// StagedInfo describes a staged table (contract.StagedInfo).
type StagedInfo = contract.StagedInfo

// DescribeStaged returns the members, row counts, columns and recent
// merges of a staged table; ErrStaged when the table is not staged.
func DescribeStaged(ctx context.Context, t StagedTarget) (StagedInfo, error) {
	info := StagedInfo{Table: t.Table}
	err := withFacade(ctx, t.facade(), func(fx facadeExec, _ time.Time) error {
		ms, err := fxStagedMembers(ctx, fx, t.Table)
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			return fmt.Errorf("%w: %s is not a staged table", ErrStaged, t.Table)
		}
		info.Mode, info.Key = ms[0].mode, ms[0].keys
		// The view serves each column in its newest member's type: an
		// older member's converted column says so (servedAs).
		newest, err := fxExposedColumns(ctx, fx, ms[len(ms)-1])
		if err != nil {
			return err
		}
		var names []string
		for _, m := range ms {
			sm := StagedMember{Table: m.table, Role: "staging", Generation: m.generation}
			if m.seq == 0 {
				sm.Role = "principal"
			}
			cols, err := fxExposedColumns(ctx, fx, m)
			if err != nil {
				return err
			}
			for _, c := range cols {
				served := ""
				if i := columnIndex(newest, c.name, fx.pg()); i >= 0 && converts(c.typ, newest[i].typ, fx.pg()) {
					served = newest[i].typ
				}
				switch {
				case c.phys != "" && served != "":
					sm.Columns = append(sm.Columns, c.phys+" "+c.typ+" (served as "+c.name+" "+served+")")
				case c.phys != "":
					sm.Columns = append(sm.Columns, c.phys+" "+c.typ+" (served as "+c.name+")")
				case served != "":
					sm.Columns = append(sm.Columns, c.name+" "+c.typ+" (served as "+served+")")
				default:
					sm.Columns = append(sm.Columns, c.name+" "+c.typ)
				}
			}
			if len(cols) > 0 {
				if sm.Rows, err = countRows(ctx, fx, m.table); err != nil {
					return err
				}
			}
			info.Members = append(info.Members, sm)
			names = append([]string{m.table}, names...)
		}
		rule := "per key and window, the newest revision wins"
		if info.Mode == ModeAppend {
			rule = "per element_id, the newest member's row"
		}
		info.View = fmt.Sprintf("%s over %s: %s", t.Table, strings.Join(names, ", "), rule)
		r, err := fxPendingRekey(ctx, fx, t.Table)
		if err != nil {
			return err
		}
		if r != nil {
			before := make([]string, len(r.before))
			for i, m := range r.before {
				before[i] = m.table
			}
			info.View += fmt.Sprintf("; then the rows of %s, written under the earlier key (%s), re-keyed by (%s) in %s where no member above has the key and window, until the next merge moves them into the principal",
				strings.Join(before, ", "), strings.Join(r.before[0].keys, ", "), strings.Join(r.keys, ", "), r.aggView(t.Table))
		}
		rows, err := fx.query(ctx, `SELECT merged_at, duration_ms, rows_moved, members FROM `+StagedMergesTable+
			` WHERE view_name = `+ph(fx, 1)+` ORDER BY merged_at DESC LIMIT 20`, t.Table)
		if err != nil {
			return fmt.Errorf("reading the merges of %s: %w", t.Table, err)
		}
		for _, r := range rows {
			at, _ := r[0].(int64)
			d, _ := r[1].(int64)
			n, _ := r[2].(int64)
			s, _ := r[3].(string)
			info.Merges = append(info.Merges, MergeRecord{At: time.UnixMilli(at).UTC(), Duration: time.Duration(d) * time.Millisecond, Rows: n, Members: s})
		}
		return nil
	})
	return info, err
}

// mergeDue reports whether the staged sink's merge interval has passed
// since its last merge (or since it started), and notes now as the last
// check when it has.
func (s *Sink) mergeDue() bool {
	if s.cfg.Layout != LayoutStaged || s.cfg.MergeInterval < 0 {
		return false
	}
	iv := s.cfg.MergeInterval
	if iv == 0 {
		iv = DefaultMergeInterval
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.lastMerge.IsZero() {
		s.mu.lastMerge = now
		return false
	}
	if now.Sub(s.mu.lastMerge) < iv {
		return false
	}
	s.mu.lastMerge = now
	return true
}

// mergeIfDue runs the staged sink's periodic merge after a commit. A merge
// that fails changes nothing and is retried at the next interval; it never
// fails the commit. Config.OnMerge hears of it either way.
func (s *Sink) mergeIfDue(ctx context.Context) {
	if !s.mergeDue() {
		return
	}
	rep, err := s.Merge(ctx)
	if s.cfg.OnMerge != nil {
		s.cfg.OnMerge(rep, err)
	}
}

// Merge merges the staged sink's staging tables into its principal table
// now (see MergeStaged), on the sink's connection.
func (s *Sink) Merge(ctx context.Context) (MergeReport, error) {
	if s.cfg.Layout != LayoutStaged {
		return MergeReport{Table: s.cfg.Table}, fmt.Errorf("%w: %s does not use layout: staged", ErrStaged, s.cfg.Table)
	}
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if err := s.prepareLocked(ctx, true); err != nil {
		return MergeReport{Table: s.cfg.Table}, err
	}
	var rep MergeReport
	now := s.cfg.Now()
	err := s.db.be.facadeTx(ctx, func(fx facadeExec) error {
		var err error
		rep, err = fxMerge(ctx, fx, s.cfg.Table, now, s.cfg.Now, s.cfg.MergeHook)
		return err
	})
	if err != nil {
		return MergeReport{Table: s.cfg.Table}, err
	}
	return rep, nil
}

// TableRows returns how many rows the table (or view) t.Table serves, and
// false when it does not exist yet.
func TableRows(ctx context.Context, t StagedTarget) (int64, bool, error) {
	var n int64
	var exists bool
	err := withFacade(ctx, t.facade(), func(fx facadeExec, _ time.Time) error {
		kind, err := fxKind(ctx, fx, t.Table)
		if err != nil || kind == "" {
			return err
		}
		exists = true
		n, err = countRows(ctx, fx, t.Table)
		return err
	})
	return n, exists, err
}
