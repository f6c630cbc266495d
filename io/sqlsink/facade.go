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

// Façade views: see the package documentation, "Façade views".

// FacadeSeparator joins a façade's name and a generation into the name of
// that generation's physical table: orders + "__g" + 2 = orders__g2.
const FacadeSeparator = "__g"

// FacadeTable is the table recording, per façade view, its generations:
// their physical tables, mode, key columns and when their job ended.
const FacadeTable = "weir_facade_generations"

// PostgresIdentifierLimit is the longest identifier PostgreSQL keeps, in
// bytes (NAMEDATALEN - 1); a longer one is silently truncated, so the sink
// refuses it.
const PostgresIdentifierLimit = 63

// Errors of façade views, matched with errors.Is.
var (
	// ErrIdentifierTooLong marks a table name (or the name of a
	// generation's physical table) longer than the database keeps. Choose a
	// shorter table name. The service reports it as SQL_IDENTIFIER_TOO_LONG
	// (errcode.SQLIdentifierTooLong).
	ErrIdentifierTooLong = errors.New("table name too long")
	// ErrFacade marks a façade operation that cannot be done
	// (contract.ErrFacade).
	ErrFacade = contract.ErrFacade
)

// FacadeTableName returns the physical table of generation gen behind the
// façade view table (schema-qualified names keep their schema).
func FacadeTableName(table string, gen int64) string {
	return table + FacadeSeparator + strconv.FormatInt(gen, 10)
}

// checkIdentifiers refuses, on PostgreSQL, a schema, table or physical
// table name longer than PostgresIdentifierLimit bytes.
func checkIdentifiers(c *Config) error {
	if c.Driver != DriverPostgres {
		return nil
	}
	schema, name := splitTable(c.Table)
	check := func(what, ident string) error {
		if len(ident) <= PostgresIdentifierLimit {
			return nil
		}
		return fmt.Errorf("%w: table %s: the %s %q is %d bytes, and PostgreSQL keeps at most %d bytes of a name "+
			"(it would silently cut it); choose a shorter table name", ErrIdentifierTooLong, c.Table, what, ident, len(ident), PostgresIdentifierLimit)
	}
	if err := check("schema name", schema); err != nil {
		return err
	}
	if err := check("table name", name); err != nil {
		return err
	}
	if c.Facade {
		_, phys := splitTable(FacadeTableName(c.Table, c.Generation))
		if len(phys) > PostgresIdentifierLimit {
			room := PostgresIdentifierLimit - len(FacadeSeparator) - len(strconv.FormatInt(c.Generation, 10))
			return fmt.Errorf("%w: table %s: in a parallel replacement, generation %d writes the table %q, which is %d bytes; "+
				"PostgreSQL keeps at most %d bytes of a name, so the table name may have at most %d bytes",
				ErrIdentifierTooLong, c.Table, c.Generation, phys, len(phys), PostgresIdentifierLimit, room)
		}
	}
	return nil
}

// physical returns the layout of generation gen's physical table.
func (l *layout) physical(gen int64) *layout {
	p := *l
	p.table = FacadeTableName(l.table, gen)
	return &p
}

// keyColumnNames returns the conflict-key column names.
func (l *layout) keyColumnNames() []string {
	out := make([]string, len(l.keys))
	for i, k := range l.keys {
		out[i] = l.cols[k].name
	}
	return out
}

func (l *layout) mode() string {
	if l.upsert {
		return ModeUpsert
	}
	return ModeAppend
}

// facadeExec runs statements inside a façade transaction.
type facadeExec interface {
	exec(ctx context.Context, q string, args ...any) error
	// query returns every row; values are int64, float64, string, bool or nil.
	query(ctx context.Context, q string, args ...any) ([][]any, error)
	// pg says the database is PostgreSQL (placeholders $n), else SQLite (?).
	pg() bool
}

// colDecl is a column of an existing table. A staged member's column
// renamed behind the view (exposedColumns) has the name the view serves
// in name and the table's own in phys.
type colDecl struct{ name, typ, phys string }

// physical returns the column's name in its table.
func (c colDecl) physical() string {
	if c.phys != "" {
		return c.phys
	}
	return c.name
}

// fxKind returns "table", "view", "other" or "" (no such relation).
func fxKind(ctx context.Context, fx facadeExec, table string) (string, error) {
	var rows [][]any
	var err error
	if fx.pg() {
		schema, name := splitTable(table)
		rows, err = fx.query(ctx, `SELECT c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = COALESCE(NULLIF($1, ''), current_schema()) AND c.relname = $2`, schema, name)
	} else {
		rows, err = fx.query(ctx, `SELECT type FROM sqlite_master WHERE type IN ('table', 'view') AND name = ? COLLATE NOCASE`, table)
	}
	if err != nil {
		return "", fmt.Errorf("looking up %s: %w", table, err)
	}
	if len(rows) == 0 {
		return "", nil
	}
	switch k, _ := rows[0][0].(string); k {
	case "table", "r", "p":
		return "table", nil
	case "view", "v":
		return "view", nil
	}
	return "other", nil
}

// fxColumns returns a table's columns in order (nil: no such table).
func fxColumns(ctx context.Context, fx facadeExec, table string) ([]colDecl, error) {
	var rows [][]any
	var err error
	if fx.pg() {
		schema, name := splitTable(table)
		rows, err = fx.query(ctx, `SELECT column_name::text, data_type::text FROM information_schema.columns
			WHERE table_schema = COALESCE(NULLIF($1, ''), current_schema()) AND table_name = $2 ORDER BY ordinal_position`, schema, name)
	} else {
		rows, err = fx.query(ctx, `SELECT name, type FROM pragma_table_info(?) ORDER BY cid`, table)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the columns of %s: %w", table, err)
	}
	out := make([]colDecl, 0, len(rows))
	for _, r := range rows {
		n, _ := r[0].(string)
		t, _ := r[1].(string)
		out = append(out, colDecl{name: n, typ: t})
	}
	return out, nil
}

func hasColumn(cols []colDecl, name string, pg bool) bool {
	return slices.ContainsFunc(cols, func(c colDecl) bool { return sameColumn(c.name, name, pg) })
}

// sameColumn reports whether two column names name one column
// (PostgreSQL's quoted names are case-sensitive, SQLite's are not).
func sameColumn(a, b string, pg bool) bool { return a == b || (!pg && strings.EqualFold(a, b)) }

// fxIndexes returns the names of a table's indexes.
func fxIndexes(ctx context.Context, fx facadeExec, table string) ([]string, error) {
	var rows [][]any
	var err error
	if fx.pg() {
		schema, name := splitTable(table)
		rows, err = fx.query(ctx, `SELECT indexname::text FROM pg_indexes
			WHERE schemaname = COALESCE(NULLIF($1, ''), current_schema()) AND tablename = $2`, schema, name)
	} else {
		rows, err = fx.query(ctx, `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? COLLATE NOCASE`, table)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the indexes of %s: %w", table, err)
	}
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		s, _ := r[0].(string)
		out = append(out, s)
	}
	return out, nil
}

// ph returns placeholder n of the dialect.
func ph(fx facadeExec, n int) string {
	if fx.pg() {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

const facadeDDL = "CREATE TABLE IF NOT EXISTS " + FacadeTable + " (facade TEXT NOT NULL, generation BIGINT NOT NULL, " +
	"physical TEXT NOT NULL, mode TEXT NOT NULL, key_columns TEXT NOT NULL, ended_at BIGINT, PRIMARY KEY (facade, generation))"

// facadeGen is one registered generation of a façade.
type facadeGen struct {
	generation int64
	physical   string
	mode       string
	keys       []string
	// endedAt is when the generation's job ended (Unix milliseconds), or
	// -1 while it runs.
	endedAt int64
	// renames are those its columns are served under (renamesAfter).
	renames []columnRename
}

// fxGenerations returns the registered generations of façade table, newest
// first. The registry table need not exist.
func fxGenerations(ctx context.Context, fx facadeExec, table string) ([]facadeGen, error) {
	if k, err := fxKind(ctx, fx, FacadeTable); err != nil || k == "" {
		return nil, err
	}
	rows, err := fx.query(ctx, `SELECT generation, physical, mode, key_columns, ended_at FROM `+FacadeTable+
		` WHERE facade = `+ph(fx, 1)+` ORDER BY generation DESC`, table)
	if err != nil {
		return nil, fmt.Errorf("reading the generations of %s: %w", table, err)
	}
	renames, err := facadeRenames().read(ctx, fx, table)
	if err != nil {
		return nil, err
	}
	out := make([]facadeGen, 0, len(rows))
	for _, r := range rows {
		g := facadeGen{endedAt: -1}
		g.generation, _ = r[0].(int64)
		g.physical, _ = r[1].(string)
		g.mode, _ = r[2].(string)
		k, _ := r[3].(string)
		g.keys = strings.Split(k, ",")
		if e, ok := r[4].(int64); ok {
			g.endedAt = e
		}
		g.renames = renamesAfter(renames, g.generation)
		out = append(out, g)
	}
	return out, nil
}

// fxSameKey refuses generation g when a generation recorded behind the
// view writes another mode or key.
func fxSameKey(ctx context.Context, fx facadeExec, table string, g facadeGen) error {
	gens, err := fxGenerations(ctx, fx, table)
	if err != nil {
		return err
	}
	for _, o := range gens {
		if o.generation != g.generation && (o.mode != g.mode || !slices.Equal(o.keys, g.keys)) {
			return fmt.Errorf("%w: table %s: generation %d writes %s rows keyed by (%s), but generation %d behind the same view "+
				"writes %s rows keyed by (%s); every generation of a façade keys its rows alike: write to a new table",
				ErrFacade, table, g.generation, g.mode, strings.Join(g.keys, ", "), o.generation, o.mode, strings.Join(o.keys, ", "))
		}
	}
	return nil
}

// checkFacadeLocked is Validate's façade check, changing nothing: the
// generations already behind the view key their rows like this sink.
func (s *Sink) checkFacadeLocked(ctx context.Context) error {
	l := s.db.l
	me := facadeGen{generation: s.cfg.Generation, physical: l.table, mode: l.mode(), keys: l.keyColumnNames()}
	return s.db.be.facadeTx(ctx, func(fx facadeExec) error {
		kind, err := fxKind(ctx, fx, s.cfg.Table)
		if err != nil {
			return err
		}
		if err := facadeKindOK(ctx, fx, s.cfg.Table, kind); err != nil {
			return err
		}
		if err := fxSameKey(ctx, fx, s.cfg.Table, me); err != nil {
			return err
		}
		return s.checkFacadeRenames(ctx, fx, kind)
	})
}

// checkFacadeRenames refuses, before anything is created, renames the
// sink declares (Config.RenamedColumns) that would make the view serve two
// columns of an older generation's table (or of the plain table about to
// become one) under one name.
func (s *Sink) checkFacadeRenames(ctx context.Context, fx facadeExec, kind string) error {
	if len(s.cfg.RenamedColumns) == 0 {
		return nil
	}
	declared := declaredRenames(s.cfg.RenamedColumns, s.cfg.Generation)
	var older []facadeGen
	if kind == "table" {
		older = []facadeGen{{physical: s.cfg.Table}}
	} else {
		gens, err := fxGenerations(ctx, fx, s.cfg.Table)
		if err != nil {
			return err
		}
		for _, g := range gens {
			if g.generation < s.cfg.Generation {
				older = append(older, g)
			}
		}
	}
	for _, g := range older {
		cols, err := fxGenColumns(ctx, fx, g)
		if err != nil {
			return err
		}
		if _, err := exposeColumns(g.physical, cols, declared, fx.pg()); err != nil {
			return err
		}
	}
	return nil
}

// facadeKindOK refuses a relation of the view's name that is neither a
// plain table (to migrate) nor a façade view weir made.
func facadeKindOK(ctx context.Context, fx facadeExec, view, kind string) error {
	switch kind {
	case "view":
		gens, err := fxGenerations(ctx, fx, view)
		if err != nil {
			return err
		}
		if len(gens) == 0 {
			return fmt.Errorf("%w: %s is a view weir did not create; the sink cannot put a façade view in its place: "+
				"drop it, or write to another table", ErrFacade, view)
		}
	case "other":
		return fmt.Errorf("%w: %s exists and is neither a table nor a view", ErrFacade, view)
	}
	return nil
}

// fxRegister records generation g of façade table, refusing one whose mode
// or key differs from the generations already recorded.
func fxRegister(ctx context.Context, fx facadeExec, table string, g facadeGen) error {
	if err := fxSameKey(ctx, fx, table, g); err != nil {
		return err
	}
	q := `INSERT INTO ` + FacadeTable + ` (facade, generation, physical, mode, key_columns) VALUES (` +
		ph(fx, 1) + `, ` + ph(fx, 2) + `, ` + ph(fx, 3) + `, ` + ph(fx, 4) + `, ` + ph(fx, 5) + `) ON CONFLICT (facade, generation) DO NOTHING`
	if err := fx.exec(ctx, q, table, g.generation, g.physical, g.mode, strings.Join(g.keys, ",")); err != nil {
		return fmt.Errorf("recording generation %d of %s: %w", g.generation, table, err)
	}
	return nil
}

// keyTerm is a conflict-key column as the unique index spells it: window
// bounds through COALESCE so that the global window's nulls compare equal.
func keyTerm(prefix, name string, pg bool) string {
	q := prefix + quoteIdent(name)
	switch name {
	case colWindowStart:
		if pg {
			return "COALESCE(" + q + ", '-infinity'::timestamptz)"
		}
		return "COALESCE(" + q + ", '')"
	case colWindowEnd:
		if pg {
			return "COALESCE(" + q + ", 'infinity'::timestamptz)"
		}
		return "COALESCE(" + q + ", '')"
	}
	return q
}

// fxRebuildView replaces the façade view of table by one over the
// generations recorded (newest first) whose tables exist.
func fxRebuildView(ctx context.Context, fx facadeExec, table string) error {
	gens, err := fxGenerations(ctx, fx, table)
	if err != nil {
		return err
	}
	held, err := fxHeld(ctx, fx, table)
	if err != nil {
		return err
	}
	members := make([]viewMember, 0, len(gens))
	for _, g := range gens {
		if held[g.generation] {
			continue // written, not served yet (RevealFacadeGeneration)
		}
		members = append(members, viewMember{table: g.physical, mode: g.mode, keys: g.keys, label: g.generation, renames: g.renames})
	}
	return fxBuildView(ctx, fx, table, members, false)
}

func genList[T any](xs []T, gen func(T) int64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatInt(gen(x), 10)
	}
	return strings.Join(s, ", ")
}

// setupFacadeLocked makes the sink's generation part of its façade, in one
// transaction: the first time, a plain table of the view's name is renamed
// to the physical table of the newest generation it holds (its rows are
// kept, not copied); the generation is recorded; the view is rebuilt. The
// physical table exists already.
func (s *Sink) setupFacadeLocked(ctx context.Context) error {
	view, gen, l := s.cfg.Table, s.cfg.Generation, s.db.l
	me := facadeGen{generation: gen, physical: l.table, mode: l.mode(), keys: l.keyColumnNames()}
	return s.db.be.facadeTx(ctx, func(fx facadeExec) error {
		if err := fx.exec(ctx, facadeDDL); err != nil {
			return fmt.Errorf("creating %s: %w", FacadeTable, err)
		}
		kind, err := fxKind(ctx, fx, view)
		if err != nil {
			return err
		}
		if err := facadeKindOK(ctx, fx, view, kind); err != nil {
			return err
		}
		if kind == "table" {
			if err := s.migrateLocked(ctx, fx, me); err != nil {
				return err
			}
		}
		if err := fxRegister(ctx, fx, view, me); err != nil {
			return err
		}
		if err := facadeRenames().record(ctx, fx, view, declaredRenames(s.cfg.RenamedColumns, gen)); err != nil {
			return err
		}
		if s.cfg.FacadeHeld {
			if err := fxHold(ctx, fx, view, gen); err != nil {
				return err
			}
		}
		return fxRebuildView(ctx, fx, view)
	})
}

// migrateLocked turns the plain table of the view's name into a
// generation's physical table: the newest generation stored in it (upsert),
// else the generation before the sink's.
func (s *Sink) migrateLocked(ctx context.Context, fx facadeExec, me facadeGen) error {
	view := s.cfg.Table
	cols, err := fxColumns(ctx, fx, view)
	if err != nil {
		return err
	}
	for _, k := range me.keys {
		if !hasColumn(cols, k, fx.pg()) {
			return fmt.Errorf("%w: table %s has no column %s, so its rows cannot be keyed like the sink's (%s) behind a façade view; "+
				"write to a new table", ErrTableShape, view, k, strings.Join(me.keys, ", "))
		}
	}
	old := me.generation - 1
	if me.mode == ModeUpsert && hasColumn(cols, colGeneration, fx.pg()) {
		rows, err := fx.query(ctx, "SELECT MAX("+quoteIdent(colGeneration)+") FROM "+quoteTable(view))
		if err != nil {
			return fmt.Errorf("reading the generations stored in %s: %w", view, err)
		}
		if g, ok := rows[0][0].(int64); ok {
			old = g
		}
	}
	if old < 0 || old >= me.generation {
		return fmt.Errorf("%w: table %s holds rows of generation %d, not older than the sink's generation %d, "+
			"so they cannot be put behind its façade view", ErrFacade, view, max(old, 0), me.generation)
	}
	phys := FacadeTableName(view, old)
	if k, err := fxKind(ctx, fx, phys); err != nil {
		return err
	} else if k != "" {
		return fmt.Errorf("%w: both %s and %s exist; the sink cannot tell which holds generation %d's rows", ErrFacade, view, phys, old)
	}
	_, bare := splitTable(phys)
	if err := fx.exec(ctx, "ALTER TABLE "+quoteTable(view)+" RENAME TO "+quoteIdent(bare)); err != nil {
		return fmt.Errorf("moving table %s to %s: %w", view, phys, err)
	}
	// The unique key index is renamed for the new table name: dropped and
	// built again (SQLite cannot rename an index).
	idx, err := fxIndexes(ctx, fx, phys)
	if err != nil {
		return err
	}
	schema, _ := splitTable(view)
	prefix := strings.ToLower(keyIndexPrefix(view))
	pl := s.db.l.physical(0)
	pl.table = phys
	for _, name := range idx {
		if !strings.HasPrefix(strings.ToLower(name), prefix) || strings.EqualFold(name, pl.indexName()) {
			continue
		}
		qn := quoteIdent(name)
		if schema != "" {
			qn = quoteIdent(schema) + "." + qn
		}
		if err := fx.exec(ctx, "DROP INDEX "+qn); err != nil {
			return fmt.Errorf("renaming the key index of %s: %w", phys, err)
		}
	}
	if err := fx.exec(ctx, createIndexSQL(pl, s.db.be)); err != nil {
		return fmt.Errorf("renaming the key index of %s: %w", phys, err)
	}
	return fxRegister(ctx, fx, view, facadeGen{generation: old, physical: phys, mode: me.mode, keys: me.keys})
}

// viewIsFacadeLocked reports whether the sink's table is now a façade view;
// a view weir did not create is an error.
func (s *Sink) viewIsFacadeLocked(ctx context.Context) (bool, error) {
	var is bool
	err := s.db.be.facadeTx(ctx, func(fx facadeExec) error {
		kind, err := fxKind(ctx, fx, s.cfg.Table)
		if err != nil || kind != "view" {
			return err
		}
		gens, err := fxGenerations(ctx, fx, s.cfg.Table)
		if err == nil && len(gens) == 0 {
			err = fmt.Errorf("%w: %s is a view weir did not create, and WriteToSql writes tables: write to another table", ErrTableShape, s.cfg.Table)
		}
		is = len(gens) > 0
		return err
	})
	return is, err
}

// joinFacadeLocked makes a sink configured for the plain table write its
// generation's physical table instead, because the table has become a
// façade view.
func (s *Sink) joinFacadeLocked() {
	s.db.facade = true
	s.db.l = s.l.physical(s.cfg.Generation)
	s.db.be.setLayout(s.db.l)
	s.db.prepared = false
}

// FacadeTarget names a façade view for the functions the service calls:
// EndFacadeGeneration, CompactFacade, DropFacadeGeneration and
// FacadeGenerations.
type FacadeTarget struct {
	// Driver, DSN and Table are as in Config (Table is the view's name).
	Driver, DSN, Table string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// BusyTimeout is as in Config.
	BusyTimeout time.Duration
}

// FacadeGeneration describes one generation behind a façade view
// (contract.FacadeGeneration).
type FacadeGeneration = contract.FacadeGeneration

func (t FacadeTarget) config() (Config, error) {
	cfg := Config{Driver: t.Driver, DSN: t.DSN, Table: t.Table, SinkID: "facade", BusyTimeout: t.BusyTimeout, Now: t.Now}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// withFacade connects to the target's database and runs fn in one façade
// transaction.
func withFacade(ctx context.Context, t FacadeTarget, fn func(fx facadeExec, now time.Time) error) error {
	cfg, err := t.config()
	if err != nil {
		return err
	}
	var be backend
	if cfg.Driver == DriverSQLite {
		be = newSQLite(&cfg, nil)
	} else {
		be = newPostgres(&cfg, nil)
	}
	if err := be.open(ctx); err != nil {
		return fmt.Errorf("façade %s: connecting to %s: %w", t.Table, cfg.Driver, err)
	}
	err = be.facadeTx(ctx, func(fx facadeExec) error { return fn(fx, cfg.Now()) })
	return errors.Join(err, be.close(ctx))
}

// FacadeGenerations returns the generations behind the façade view, newest
// first (none when the table is not a façade).
func FacadeGenerations(ctx context.Context, t FacadeTarget) ([]FacadeGeneration, error) {
	var out []FacadeGeneration
	err := withFacade(ctx, t, func(fx facadeExec, _ time.Time) error {
		gens, err := fxGenerations(ctx, fx, t.Table)
		for _, g := range gens {
			fg := FacadeGeneration{Generation: g.generation, Table: g.physical}
			if g.endedAt >= 0 {
				fg.Ended = time.UnixMilli(g.endedAt).UTC()
			}
			out = append(out, fg)
		}
		return err
	})
	return out, err
}

// EndFacadeGeneration records that the jobs of generation gen and of
// every older generation behind the view that were not yet recorded as
// ended have ended, at t.Now(): the start of their retention before
// CompactFacade merges them. gen itself need not be behind the view: a
// service ending every generation before the new job's passes the new
// generation - 1, which covers the generation a plain table was migrated
// to (append tables carry no generation, so the migration names it the
// sink's - 1) and the old job's own, whether or not it wrote after the
// migration. It answers ErrFacade when no generation up to gen is behind
// the view (the table is not a façade yet).
func EndFacadeGeneration(ctx context.Context, t FacadeTarget, gen int64) error {
	return withFacade(ctx, t, func(fx facadeExec, now time.Time) error {
		gens, err := fxGenerations(ctx, fx, t.Table)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(gens, func(g facadeGen) bool { return g.generation <= gen }) {
			return fmt.Errorf("%w: %s has no generation up to %d (generations: %s)", ErrFacade, t.Table, gen, genList(gens, func(g facadeGen) int64 { return g.generation }))
		}
		err = fx.exec(ctx, `UPDATE `+FacadeTable+` SET ended_at = `+ph(fx, 1)+` WHERE facade = `+ph(fx, 2)+
			` AND generation <= `+ph(fx, 3)+` AND ended_at IS NULL`, now.UnixMilli(), t.Table, gen)
		if err != nil {
			return fmt.Errorf("recording the end of generation %d of %s: %w", gen, t.Table, err)
		}
		return nil
	})
}

// CompactReport says what CompactFacade did (contract.FacadeCompaction).
type CompactReport = contract.FacadeCompaction

// CompactFacade merges, in one transaction, the older generations behind
// the façade view whose job ended (EndFacadeGeneration) at least retention
// ago into generation keep's table, and drops their tables: each row the
// view serves from such a generation is inserted into keep's table (as in
// the view: a complete revision wins over a cut-short one, then rows of newer
// generations win), columns keep's table lacks are
// added to it first, and the view is rebuilt over what remains. A
// generation is merged only if every generation between it and keep is
// merged too, so the view serves exactly the same rows afterwards.
// Generations newer than keep are left alone. Readers of the view see the
// rows before or after the transaction, never a mix.
func CompactFacade(ctx context.Context, t FacadeTarget, keep int64, retention time.Duration) (CompactReport, error) {
	rep := CompactReport{Kept: keep}
	err := withFacade(ctx, t, func(fx facadeExec, now time.Time) error {
		gens, err := fxGenerations(ctx, fx, t.Table)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(gens, func(g facadeGen) bool { return g.generation == keep })
		if i < 0 {
			return fmt.Errorf("%w: %s has no generation %d to compact into (generations: %s)", ErrFacade, t.Table, keep,
				genList(gens, func(g facadeGen) int64 { return g.generation }))
		}
		target := gens[i]
		var merge []facadeGen
		for j, g := range gens[i+1:] {
			if g.endedAt < 0 || now.Sub(time.UnixMilli(g.endedAt)) < retention {
				for _, w := range gens[i+1+j:] {
					rep.Waiting = append(rep.Waiting, w.generation)
				}
				break
			}
			merge = append(merge, g)
		}
		if len(merge) == 0 {
			return nil
		}
		keepCols, err := fxColumns(ctx, fx, target.physical)
		if err != nil {
			return err
		}
		if len(keepCols) == 0 {
			return fmt.Errorf("%w: the table %s of generation %d does not exist", ErrFacade, target.physical, keep)
		}
		if err := fx.exec(ctx, "DROP VIEW IF EXISTS "+quoteTable(t.Table)); err != nil {
			return fmt.Errorf("replacing the view %s: %w", t.Table, err)
		}
		conflict := make([]string, len(target.keys))
		for k, key := range target.keys {
			conflict[k] = keyTerm("", key, fx.pg())
		}
		for _, g := range merge {
			// Its columns as the kept generation's table names them.
			var kept []columnRename
			for _, r := range g.renames {
				if r.seq <= keep {
					kept = append(kept, r)
				}
			}
			g.renames = kept
			cols, err := fxGenColumns(ctx, fx, g)
			if err != nil {
				return err
			}
			var names, src []string
			for _, c := range cols {
				into := slices.IndexFunc(keepCols, func(k colDecl) bool { return sameColumn(k.name, c.name, fx.pg()) })
				if into < 0 {
					add := "ALTER TABLE " + quoteTable(target.physical) + " ADD COLUMN " + quoteIdent(c.name) + " " + c.typ
					if err := fx.exec(ctx, add); err != nil {
						return fmt.Errorf("adding column %s of generation %d to %s: %w", c.name, g.generation, target.physical, err)
					}
					keepCols = append(keepCols, c)
					into = len(keepCols) - 1
				}
				names = append(names, quoteIdent(c.name))
				// Moved as the view serves it: an older generation's
				// float under the kept one's int truncated toward zero.
				src = append(src, servedAs(quoteIdent(c.physical()), c.typ, keepCols[into].typ, fx.pg()))
			}
			if len(cols) > 0 {
				list := strings.Join(names, ", ")
				onConflict := "DO NOTHING"
				if target.mode == ModeUpsert && hasColumn(cols, colGeneration, fx.pg()) && hasColumn(cols, colPaneIndex, fx.pg()) {
					// As in the view: a complete revision of an older
					// generation replaces a cut-short one of a newer.
					var set []string
					for _, n := range names {
						set = append(set, n+" = excluded."+n)
					}
					onConflict = "DO UPDATE SET " + strings.Join(set, ", ") + " WHERE " +
						newerRevision("excluded.", "cur.", hasColumn(cols, colPaneCut, fx.pg()), hasColumn(keepCols, colPaneCut, fx.pg()))
				}
				q := "INSERT INTO " + quoteTable(target.physical) + " AS cur (" + list + ") SELECT " + strings.Join(src, ", ") + " FROM " +
					quoteTable(g.physical) + " WHERE true ON CONFLICT (" + strings.Join(conflict, ", ") + ") " + onConflict
				before, err := countRows(ctx, fx, target.physical)
				if err != nil {
					return err
				}
				if err := fx.exec(ctx, q); err != nil {
					return fmt.Errorf("merging generation %d of %s into generation %d: %w", g.generation, t.Table, keep, err)
				}
				after, err := countRows(ctx, fx, target.physical)
				if err != nil {
					return err
				}
				rep.Rows += after - before
				if err := fx.exec(ctx, "DROP TABLE "+quoteTable(g.physical)); err != nil {
					return fmt.Errorf("dropping %s: %w", g.physical, err)
				}
			}
			if err := fx.exec(ctx, `DELETE FROM `+FacadeTable+` WHERE facade = `+ph(fx, 1)+` AND generation = `+ph(fx, 2), t.Table, g.generation); err != nil {
				return fmt.Errorf("forgetting generation %d of %s: %w", g.generation, t.Table, err)
			}
			rep.Merged = append(rep.Merged, g.generation)
		}
		return fxRebuildView(ctx, fx, t.Table)
	})
	if err != nil {
		return CompactReport{Kept: keep}, err
	}
	return rep, nil
}

func countRows(ctx context.Context, fx facadeExec, table string) (int64, error) {
	rows, err := fx.query(ctx, "SELECT COUNT(*) FROM "+quoteTable(table))
	if err != nil {
		return 0, fmt.Errorf("counting the rows of %s: %w", table, err)
	}
	n, _ := rows[0][0].(int64)
	return n, nil
}
