package sqlsink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weir-dev/weir/runner/contract"
)

// Staged layout: see the package documentation, "Staged layout".

// Layouts of a sink's table (Config.Layout).
const (
	// LayoutTable writes the table itself (the default).
	LayoutTable = "table"
	// LayoutStaged writes a staging table, merged into a principal table,
	// both behind a view of the table's name.
	LayoutStaged = contract.SQLLayoutStaged
)

// DefaultMergeInterval is how often a staged sink merges when
// Config.MergeInterval is zero.
const DefaultMergeInterval = time.Hour

// PrincipalSuffix names a staged table's principal table:
// orders + "__principal".
const PrincipalSuffix = "__principal"

// StagingSeparator joins a staged table's name and a sequence number into
// the name of a staging table: orders + "__staging_v" + 2.
const StagingSeparator = "__staging_v"

// StagedMembersTable records, per staged view, its principal (sequence 0)
// and staging tables (1, 2, ...), with the generation of the job that
// created each staging table.
const StagedMembersTable = "weir_staged_members"

// StagedMergesTable records every merge of a staged table: when, how many
// rows moved and how long it took.
const StagedMergesTable = "weir_staged_merges"

// ErrStaged marks a staged-layout operation that cannot be done
// (contract.ErrStaged).
var ErrStaged = contract.ErrStaged

const stagedMembersDDL = "CREATE TABLE IF NOT EXISTS " + StagedMembersTable + " (view_name TEXT NOT NULL, seq BIGINT NOT NULL, " +
	"member TEXT NOT NULL, mode TEXT NOT NULL, key_columns TEXT NOT NULL, generation BIGINT NOT NULL, PRIMARY KEY (view_name, seq))"

const stagedMergesDDL = "CREATE TABLE IF NOT EXISTS " + StagedMergesTable + " (view_name TEXT NOT NULL, merged_at BIGINT NOT NULL, " +
	"rows_moved BIGINT NOT NULL, duration_ms BIGINT NOT NULL, members TEXT NOT NULL)"

// PrincipalTableName returns the principal table of the staged view table.
func PrincipalTableName(table string) string { return table + PrincipalSuffix }

// StagingTableName returns staging table seq of the staged view table.
func StagingTableName(table string, seq int64) string {
	return table + StagingSeparator + strconv.FormatInt(seq, 10)
}

// stagedMember is one registered member of a staged view.
type stagedMember struct {
	seq        int64 // 0: the principal
	table      string
	mode       string
	keys       []string
	generation int64
	// renames are those its columns are served under (stagedRenamesAfter).
	renames []columnRename
}

// fxStagedMembers returns the members of the staged view, principal
// first, then the staging tables oldest first. The registry need not
// exist.
func fxStagedMembers(ctx context.Context, fx facadeExec, view string) ([]stagedMember, error) {
	if k, err := fxKind(ctx, fx, StagedMembersTable); err != nil || k == "" {
		return nil, err
	}
	rows, err := fx.query(ctx, `SELECT seq, member, mode, key_columns, generation FROM `+StagedMembersTable+
		` WHERE view_name = `+ph(fx, 1)+` ORDER BY seq`, view)
	if err != nil {
		return nil, fmt.Errorf("reading the members of %s: %w", view, err)
	}
	renames, err := stagedRenames().read(ctx, fx, view)
	if err != nil {
		return nil, err
	}
	out := make([]stagedMember, 0, len(rows))
	for _, r := range rows {
		var m stagedMember
		m.seq, _ = r[0].(int64)
		m.table, _ = r[1].(string)
		m.mode, _ = r[2].(string)
		k, _ := r[3].(string)
		m.keys = strings.Split(k, ",")
		m.generation, _ = r[4].(int64)
		m.renames = stagedRenamesAfter(renames, m.seq)
		out = append(out, m)
	}
	return out, nil
}

// fxRegisterMember records m behind the staged view.
func fxRegisterMember(ctx context.Context, fx facadeExec, view string, m stagedMember) error {
	q := `INSERT INTO ` + StagedMembersTable + ` (view_name, seq, member, mode, key_columns, generation) VALUES (` +
		ph(fx, 1) + `, ` + ph(fx, 2) + `, ` + ph(fx, 3) + `, ` + ph(fx, 4) + `, ` + ph(fx, 5) + `, ` + ph(fx, 6) +
		`) ON CONFLICT (view_name, seq) DO NOTHING`
	if err := fx.exec(ctx, q, view, m.seq, m.table, m.mode, strings.Join(m.keys, ","), m.generation); err != nil {
		return fmt.Errorf("recording %s behind %s: %w", m.table, view, err)
	}
	return nil
}

// fxRebuildStagedView replaces the staged view by one over its members:
// the staging tables newest first, then the principal; of two rows of
// equal revision the newer member's is served.
func fxRebuildStagedView(ctx context.Context, fx facadeExec, view string) error {
	ms, err := fxStagedMembers(ctx, fx, view)
	if err != nil {
		return err
	}
	vm := make([]viewMember, 0, len(ms)+1)
	for i := len(ms) - 1; i >= 0; i-- {
		m := ms[i]
		vm = append(vm, viewMember{table: m.table, mode: m.mode, keys: m.keys, label: m.seq, renames: m.renames})
	}
	r, err := fxPendingRekey(ctx, fx, view)
	if err != nil {
		return err
	}
	if r != nil {
		// The rows written under the earlier keys, re-keyed: served
		// where no member of the new keys has the key and window.
		vm = append(vm, viewMember{table: r.aggView(view), mode: ModeUpsert, keys: r.keys, label: -r.seq})
	}
	return fxBuildView(ctx, fx, view, vm, true)
}

// stagedKindOK refuses a relation of the view's name that is neither
// absent, a plain table (to become the principal) nor a staged view.
func stagedKindOK(ctx context.Context, fx facadeExec, view string) (kind string, ms []stagedMember, err error) {
	kind, err = fxKind(ctx, fx, view)
	if err != nil {
		return "", nil, err
	}
	ms, err = fxStagedMembers(ctx, fx, view)
	if err != nil {
		return "", nil, err
	}
	switch kind {
	case "view":
		if len(ms) == 0 {
			return "", nil, fmt.Errorf("%w: %s is a view weir did not create as a staged table (a façade view, or someone else's); "+
				"write the staged layout to another table", ErrStaged, view)
		}
	case "other":
		return "", nil, fmt.Errorf("%w: %s exists and is neither a table nor a view", ErrStaged, view)
	}
	return kind, ms, nil
}

// stagingFor returns the staging table a sink of generation gen writes:
// the newest staging table if gen created it, else a new one.
func stagingFor(view string, ms []stagedMember, gen int64) stagedMember {
	var newest *stagedMember
	for i := range ms {
		if ms[i].seq > 0 {
			newest = &ms[i]
		}
	}
	if newest != nil && newest.generation == gen {
		return *newest
	}
	seq := int64(1)
	if newest != nil {
		seq = newest.seq + 1
	}
	return stagedMember{seq: seq, table: StagingTableName(view, seq), generation: gen}
}

// resolveStagedLocked points the backend at the staging table the sink
// writes, changing nothing. Before a setup (create) a re-key's keys are
// mapped by the setup itself, not twice.
func (s *Sink) resolveStagedLocked(ctx context.Context, create bool) error {
	var st stagedMember
	var registered bool
	err := s.db.be.facadeTx(ctx, func(fx facadeExec) error {
		_, ms, err := stagedKindOK(ctx, fx, s.cfg.Table)
		if err != nil {
			return err
		}
		st = stagingFor(s.cfg.Table, ms, s.cfg.Generation)
		// stagingFor gives the newest member or a table after it.
		registered = len(ms) > 0 && ms[len(ms)-1].seq == st.seq
		fresh := len(ms) > 0 && !registered
		s.db.rekey, s.db.undoRekey = false, nil
		switch {
		case fresh && s.cfg.Rekey != nil:
			// A new generation writes new keys: the members hold the
			// earlier ones (fxBeginRekey).
			if err := s.checkRekeyLocked(ctx, fx, ms, !create); err != nil {
				return err
			}
			s.db.rekey = true
			return nil
		case s.cfg.Rekey != nil && len(ms) == 0 && kindTable(ctx, fx, s.cfg.Table):
			// A plain table of the earlier keys' rows: the setup makes it
			// the principal and re-keys it in the same transaction
			// (setupStagedLocked), so a table moves to layout: staged
			// and is re-keyed by one update.
			plain, err := s.plainEarlierMember(ctx, fx)
			if err != nil {
				return err
			}
			if err := s.checkRekeyLocked(ctx, fx, []stagedMember{plain}, !create); err != nil {
				return err
			}
			s.db.rekey = true
			return nil
		case len(ms) == 0 && s.cfg.Rekey == nil && !s.cfg.UndoRekey && kindTable(ctx, fx, s.cfg.Table):
			// A plain table of the view's name becomes the principal at
			// the setup: its columns join the view as a member's do (a
			// widening, a declared conversion or rename; nothing else).
			return s.checkAgainstMember(ctx, fx, stagedMember{table: s.cfg.Table})
		case fresh && s.cfg.UndoRekey:
			r, err := fxLastRekey(ctx, fx, s.cfg.Table)
			if err != nil {
				return err
			}
			if r != nil && r.folded {
				return fmt.Errorf("%w: %w: table %s: its re-key at staging table %d was merged, so its rows under the earlier keys are gone, and this job writes those keys again (a rollback): "+
					"write the rolled back version to a new table", ErrStaged, ErrSchemaChange, s.cfg.Table, r.seq)
			}
			if r != nil {
				// The earlier members come back (fxUndoRekey): check
				// against them.
				s.db.undoRekey = r
				ms = r.before
			}
		}
		me := s.l.mode()
		keys := s.l.keyColumnNames()
		for _, m := range ms {
			if m.mode != me || strings.Join(m.keys, ",") != strings.Join(keys, ",") {
				return fmt.Errorf("%w: %w: %s: %s writes %s rows keyed by (%s), this sink writes %s rows keyed by (%s); "+
					"every member of a staged table keys its rows alike: write to a new table",
					ErrStaged, ErrSchemaChange, s.cfg.Table, m.table, m.mode, strings.Join(m.keys, ", "), me, strings.Join(keys, ", "))
			}
		}
		if s.db.undoRekey != nil {
			return nil
		}
		if len(ms) > 0 && (ms[len(ms)-1].seq != st.seq) {
			// A new staging table: check the sink's columns against the
			// newest member's, which the view and the merges join it to.
			return s.checkAgainstMember(ctx, fx, ms[len(ms)-1])
		}
		return nil
	})
	if err != nil {
		return err
	}
	l := *s.l
	l.table = st.table
	s.db.l = &l
	s.db.be.setLayout(s.db.l)
	s.db.staging = st.seq
	s.db.unregistered = !registered
	return nil
}

// setupStagedLocked puts the sink's staging table (created already) behind
// the view, in one transaction: a plain table of the view's name becomes
// the principal (renamed, its rows kept); the principal is created, or
// gains the value columns it lacks; the staging table is recorded and the
// view rebuilt.
func (s *Sink) setupStagedLocked(ctx context.Context) error {
	view, l := s.cfg.Table, s.db.l
	me := stagedMember{seq: s.db.staging, table: l.table, mode: l.mode(), keys: l.keyColumnNames(), generation: s.cfg.Generation}
	pl := *s.l
	pl.table = PrincipalTableName(view)
	return s.db.be.facadeTx(ctx, func(fx facadeExec) error {
		for _, ddl := range []string{stagedMembersDDL, stagedMergesDDL, stagedRekeysDDL} {
			if err := fx.exec(ctx, ddl); err != nil {
				return fmt.Errorf("creating the staged registry: %w", err)
			}
		}
		kind, _, err := stagedKindOK(ctx, fx, view)
		if err != nil {
			return err
		}
		if err := fxLockView(ctx, fx, view, kind); err != nil {
			return err
		}
		if kind == "table" {
			keys := s.l.keyColumnNames()
			var earlier stagedMember
			if s.db.rekey {
				// The rows are the earlier keys' (resolveStagedLocked):
				// adopted as the principal under them, for the re-key
				// below to move aside and serve under the new keys.
				if earlier, err = s.plainEarlierMember(ctx, fx); err != nil {
					return err
				}
				keys = earlier.keys
			}
			if err := s.adoptPlainTable(ctx, fx, &pl, keys); err != nil {
				return err
			}
			if s.db.rekey {
				earlier.table = pl.table
				if err := fxRegisterMember(ctx, fx, view, earlier); err != nil {
					return err
				}
			}
		}
		if r := s.db.undoRekey; r != nil {
			if err := fxUndoRekey(ctx, fx, view, r, me.seq); err != nil {
				return err
			}
		}
		if s.db.rekey {
			if err := s.fxBeginRekey(ctx, fx, me); err != nil {
				return err
			}
		}
		if err := fx.exec(ctx, createTableSQL(&pl, s.db.be)); err != nil {
			return fmt.Errorf("creating the principal table %s: %w", pl.table, err)
		}
		if err := fx.exec(ctx, createIndexSQL(&pl, s.db.be)); err != nil {
			return fmt.Errorf("creating the key index of %s: %w", pl.table, err)
		}
		if err := fxRecordRenames(ctx, fx, view, pl.table, me.seq, s.cfg.RenamedColumns); err != nil {
			return err
		}
		cols, err := fxColumns(ctx, fx, l.table)
		if err != nil {
			return err
		}
		// An int widened to float is widened in the principal by the
		// next merge, not here: the update's pause stays as it is.
		if err := fxAddColumns(ctx, fx, pl.table, cols, false); err != nil {
			return err
		}
		if err := fxRegisterMember(ctx, fx, view, stagedMember{table: pl.table, mode: me.mode, keys: me.keys, generation: me.generation}); err != nil {
			return err
		}
		if err := fxRegisterMember(ctx, fx, view, me); err != nil {
			return err
		}
		return fxRebuildStagedView(ctx, fx, view)
	})
}

// adoptPlainTable renames the plain table of the view's name to the
// principal table (layout pl), with its unique key index rebuilt under the
// principal's name. keys are the columns its rows are keyed by: the
// sink's, or the earlier keys' of a re-key (plainEarlierMember).
func (s *Sink) adoptPlainTable(ctx context.Context, fx facadeExec, pl *layout, keys []string) error {
	view := s.cfg.Table
	cols, err := fxColumns(ctx, fx, view)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if !hasColumn(cols, k, fx.pg()) {
			return fmt.Errorf("%w: table %s has no column %s, so its rows cannot be keyed by (%s) as a staged table's principal; "+
				"write to a new table", ErrTableShape, view, k, strings.Join(keys, ", "))
		}
	}
	if k, err := fxKind(ctx, fx, pl.table); err != nil {
		return err
	} else if k != "" {
		return fmt.Errorf("%w: both %s and %s exist; the sink cannot tell which is the principal table", ErrStaged, view, pl.table)
	}
	_, bare := splitTable(pl.table)
	if err := fx.exec(ctx, "ALTER TABLE "+quoteTable(view)+" RENAME TO "+quoteIdent(bare)); err != nil {
		return fmt.Errorf("moving table %s to %s: %w", view, pl.table, err)
	}
	// Its key index has the plain table's name: the principal's gets its own.
	return dropKeyIndexes(ctx, fx, pl.table, view)
}

// plainEarlierMember describes the plain table of the view's name, which a
// re-keying sink adopts as its principal, as a member written under the
// earlier keys: keyed by the re-key's From and the sink's window columns,
// in upsert mode unless its rows carry an element_id (an append sink's,
// which planRekey refuses).
func (s *Sink) plainEarlierMember(ctx context.Context, fx facadeExec) (stagedMember, error) {
	cols, err := fxColumns(ctx, fx, s.cfg.Table)
	if err != nil {
		return stagedMember{}, err
	}
	m := stagedMember{table: s.cfg.Table, mode: ModeUpsert, keys: slices.Clone(s.cfg.Rekey.From)}
	for _, k := range s.l.keyColumnNames() {
		if k == colWindowStart || k == colWindowEnd {
			m.keys = append(m.keys, k)
		}
	}
	if hasColumn(cols, colElementID, fx.pg()) {
		m.mode = ModeAppend
	}
	for _, k := range m.keys {
		if !hasColumn(cols, k, fx.pg()) {
			return m, fmt.Errorf("%w: %w: table %s has no column %s, so its rows are not keyed by (%s), the key %s re-keys from: write to a new table",
				ErrStaged, ErrSchemaChange, s.cfg.Table, k, strings.Join(m.keys, ", "), s.cfg.Rekey.Step)
		}
	}
	return m, nil
}

// fxLockView takes, on PostgreSQL, the exclusive lock of the view (and
// with it of the tables it reads) before a transaction changes the tables'
// columns or the view: readers lock the view first, then its tables, so
// taking the locks in the same order cannot deadlock with them. kind is
// the relation's kind (fxKind). SQLite's write lock needs nothing more.
func fxLockView(ctx context.Context, fx facadeExec, view, kind string) error {
	if !fx.pg() || kind != "view" {
		return nil
	}
	if err := fx.exec(ctx, "LOCK TABLE "+quoteTable(view)+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		return fmt.Errorf("locking the view %s: %w", view, err)
	}
	return nil
}

// checkAgainstMember refuses, before a new staging table is made, a sink
// whose columns cannot join member's behind the view: a column whose type
// changed other than by a widening or a declared conversion
// (checkConversion: the view and the merges read both), or an undeclared
// rename (checkRenames). member's
// columns are taken as the view serves them, with the renames the sink
// declares (Config.RenamedColumns) applied.
func (s *Sink) checkAgainstMember(ctx context.Context, fx facadeExec, member stagedMember) error {
	cols, err := fxExposedColumns(ctx, fx, member)
	if err != nil || len(cols) == 0 {
		return err
	}
	declared := declaredRenames(s.cfg.RenamedColumns, member.seq+1)
	if cols, err = exposeColumns(member.table, cols, declared, fx.pg()); err != nil {
		return err
	}
	be := s.db.be
	existing := make(map[string]string, len(cols))
	for _, c := range cols {
		existing[be.norm(c.name)] = c.typ
	}
	var added []column
	var errs []error
	for _, c := range s.l.cols {
		decl, ok := existing[be.norm(c.name)]
		switch {
		case !ok && c.role == roleField:
			added = append(added, c)
		case ok:
			// A widening, or a conversion the sink declares (convert: the
			// view and the merges serve the older members' values
			// converted, servedAs); a float output narrowed to int needs
			// no declaration here (allow_lossy on its Combine).
			if err := s.checkConversion(c, decl, member.table, fx.pg()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return s.checkRenames(existing, added)
}

// widensToFloat reports whether column c of the sink is a float value
// field that a column declared decl (an integer column) widens to.
func widensToFloat(be backend, c column, decl string) bool {
	return c.kind == kFloat && c.role == roleField && !c.key && be.compatible(kInt, decl)
}

// checkStagedIdentifiers refuses, on PostgreSQL, a staged table whose
// principal or staging table names would pass PostgresIdentifierLimit
// (room is left for staging tables numbered up to 9999).
func checkStagedIdentifiers(c *Config) error {
	if c.Driver != DriverPostgres || c.Layout != LayoutStaged {
		return nil
	}
	_, name := splitTable(c.Table)
	longest := max(len(PrincipalSuffix), len(StagingSeparator)+4)
	if len(name)+longest <= PostgresIdentifierLimit {
		return nil
	}
	return fmt.Errorf("%w: table %s: with layout: staged the sink writes tables named %s and %s, and PostgreSQL keeps at most %d bytes of a name; "+
		"the table name may have at most %d bytes", ErrIdentifierTooLong, c.Table, PrincipalTableName(name), StagingTableName(name, 9999),
		PostgresIdentifierLimit, PostgresIdentifierLimit-longest)
}

// kindTable reports whether table is a plain table (an error reads as
// not).
func kindTable(ctx context.Context, fx facadeExec, table string) bool {
	k, err := fxKind(ctx, fx, table)
	return err == nil && k == "table"
}
