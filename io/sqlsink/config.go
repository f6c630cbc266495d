package sqlsink

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// Drivers.
const (
	// DriverSQLite is the embedded default: modernc.org/sqlite, pure Go.
	DriverSQLite = "sqlite"
	// DriverPostgres is PostgreSQL through github.com/jackc/pgx/v5.
	DriverPostgres = "postgres"
)

// Modes.
const (
	// ModeUpsert keeps one row per key and window, at its newest revision.
	ModeUpsert = "upsert"
	// ModeAppend inserts every row once, identified by its element ID.
	ModeAppend = "append"
)

// DefaultSQLiteFile is the SQLite file used, inside Config.DataDir, when a
// SQLite sink has no DSN.
const DefaultSQLiteFile = "weir-sql.sqlite"

// DefaultBusyTimeout is how long a SQLite write waits for another writer of
// the same file before failing.
const DefaultBusyTimeout = 10 * time.Second

// ProgressTable is the table holding the last committed epoch of each sink.
const ProgressTable = "weir_sink_progress"

// Errors callers match with errors.Is.
var (
	// ErrConfig marks a configuration that cannot work; fix the pipeline.
	ErrConfig = errors.New("invalid WriteToSql configuration")
	// ErrColumnType marks an existing table whose column cannot hold a field
	// (returned by Prepare and Validate, before any data flows). Change the
	// field's type, or write to another table.
	ErrColumnType = errors.New("column type conflict")
	// ErrTableShape marks an existing table that lacks a key or bookkeeping
	// column, or is keyed differently. Write to another table.
	ErrTableShape = errors.New("table does not fit the sink")
	// ErrDiscardingPanes marks an upsert sink fed by discarding panes that can
	// fire more than once per window (CheckAccumulation).
	ErrDiscardingPanes = errors.New("upsert sink fed by discarding panes")
	// ErrClosed is returned by calls after Close.
	ErrClosed = errors.New("sql sink is closed")
)

// Config configures one WriteToSql sink. The zero values of the optional
// fields are their documented defaults.
type Config struct {
	// Driver is "sqlite" (default) or "postgres".
	Driver string
	// DSN is, for SQLite, a file path (or a "file:" URI); when empty it is
	// DefaultSQLiteFile inside DataDir. For PostgreSQL it is a URL or
	// keyword/value connection string (required).
	DSN string
	// DataDir is the data directory the default SQLite file lives in.
	DataDir string
	// Table is the table name; for PostgreSQL it may be schema-qualified
	// (schema.table). Letters, digits and underscores.
	Table string
	// Key lists the row fields that, with the window, identify an upsert row.
	// Key fields must be scalars (int, float, bool, string, timestamp) and are
	// never null.
	Key []string
	// Mode is "upsert" or "append". Default: upsert when Key is set, append
	// otherwise.
	Mode string
	// SinkID identifies the sink in weir_sink_progress: the job name and the
	// step name (for example "orders/WriteTotals"). Required. Two jobs that
	// commit concurrently, or whose epochs restart from 1, need distinct IDs.
	SinkID string
	// JobID is stored in the job_id column of upsert rows.
	JobID string
	// Generation is the job's generation: the first half of every upsert
	// revision, so a newer job's writes always win. Must be >= 0.
	Generation int64
	// ElementID gives an append-mode row its identity; it must be
	// deterministic across replays. Default DefaultElementID (plus an
	// occurrence suffix, see there).
	ElementID func(e *contract.Element, r *row.Row) (string, error)
	// FlushEvery, when > 0, makes Write apply a worker's buffer directly once
	// it holds that many rows (its own transaction, no progress record). Use it
	// only for runs that take no checkpoints (bounded in-process runs), to
	// bound memory; rows stay idempotent. Default 0: rows wait for PreCommit or
	// Close.
	FlushEvery int
	// BusyTimeout is how long a SQLite writer waits for the file's lock.
	// Default DefaultBusyTimeout.
	BusyTimeout time.Duration
	// Now gives updated_at. Default time.Now.
	Now func() time.Time
	// Facade makes the sink write its generation's own physical table,
	// Table + "__g" + Generation, behind a view named Table that serves,
	// per key and window (append: per element), the row of the newest
	// generation that has it (see the package documentation, "Façade
	// views"). Its progress record is then per generation. Default false:
	// the sink writes Table itself (and joins the façade as its generation
	// if Table has become a façade view).
	Facade bool
	// FacadeHeld (with Facade) registers the sink's generation behind the
	// view held back: the view serves the older generations alone until
	// RevealFacadeGeneration (a parallel replacement gated on parity). A
	// generation revealed already stays served.
	FacadeHeld bool
	// Owns, when set, says which windows the sink writes: an element whose
	// window it returns false for is left out. The job service sets it
	// during a parallel replacement, so that each (key, window) is written
	// by the job that owns it under the cut-over rule and a view reader
	// never sees a newer generation's partial total replace an older
	// generation's complete one. Nil writes every element.
	Owns func(w window.Window) bool
	// RenamedColumns maps a field of the rows renamed in place to its old
	// name (a Combine output declared renamed_from): a plain table that
	// has the old column and not the new one has it renamed, so its rows
	// keep their values under the new name. A façade or staged table
	// refuses it (ErrSchemaChange).
	RenamedColumns map[string]string
	// NotRenamedFrom maps a field of the rows that is new to the columns
	// it is known not to be a rename of (a Combine's new output and the
	// outputs the same update removed that aggregated something else): a
	// new column beside such a removed one of the same type is added, not
	// refused as an undeclared rename.
	NotRenamedFrom map[string][]string
	// Convert declares the value columns whose type the rows change from
	// the type a staged table's newest member has, each with whether the
	// conversion may lose information (allow_lossy): an int, a float or a
	// timestamp to a string is lossless; a string to an int or a float
	// (null where the string is not a number) and a float to an int
	// (truncated) are lossy. The new staging table holds the new type and
	// the view serves the older members' values converted (see
	// "Converting a column" in the package documentation); an undeclared
	// conversion, or a lossy one without leave, is refused
	// (ErrSchemaChange). A plain table converts nothing.
	Convert map[string]bool
	// Rekey, when set, says the rows' key changed by a declared re-key
	// since the rows the table holds were written: a staged table serves
	// the earlier rows under their new keys (see "Re-keying a staged
	// table" in the package documentation); a plain table that holds rows,
	// or a façade, refuses it (ErrSchemaChange). Set it only for the
	// generation whose update changes the key (YAML's WriteToSql does so
	// when the replaced job's Combine declared another key): any new
	// generation's sink with it set re-keys the rows written before.
	Rekey *Rekey
	// UndoRekey says the sink writes the rows' earlier keys again (a
	// rollback to before a re-key): a staged table's re-key that no merge
	// has folded is undone; one that a merge has folded refuses the sink
	// (ErrSchemaChange).
	UndoRekey bool
	// RekeyedUpstream names a Combine whose declared re-key the rows come
	// from through other steps: a table that holds rows refuses the sink
	// (ErrSchemaChange), since a table re-key follows only a Combine's own
	// output (Rekey).
	RekeyedUpstream string
	// Layout is "table" (default: the sink writes Table) or "staged": the
	// sink writes a staging table, merged into a principal table, both
	// behind a view named Table (see the package documentation, "Staged
	// layout").
	Layout string
	// MergeInterval is how often a staged sink merges its staging tables
	// into the principal, checked after each commit. Zero means
	// DefaultMergeInterval; a negative value merges only on demand
	// (MergeStaged, Sink.Merge).
	MergeInterval time.Duration
	// MergeHook is StagedTarget.Hook for the sink's own merges (tests).
	MergeHook func(step string) error
	// OnMerge, when set, is called after each periodic merge the sink runs
	// with what moved, or the merge's error (the commit still succeeds).
	OnMerge func(MergeReport, error)
	// Stage, when set, makes the sink a partition run's staged writer:
	// Table is its staging table (StageTable), and Close, after the run's
	// final commit, publishes the staged rows to Stage.Target in one
	// transaction with a publication log entry (publish.go).
	Stage *Stage
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// EnsureDefaults fills unset optional fields with their defaults.
func (c *Config) EnsureDefaults() {
	if c.Driver == "" {
		c.Driver = DriverSQLite
	}
	c.Driver = strings.ToLower(c.Driver)
	if c.Driver == "postgresql" || c.Driver == "pgx" {
		c.Driver = DriverPostgres
	}
	c.Mode = strings.ToLower(c.Mode)
	if c.Mode == "" {
		c.Mode = ModeAppend
		if len(c.Key) > 0 {
			c.Mode = ModeUpsert
		}
	}
	if c.Driver == DriverSQLite && c.DSN == "" && c.DataDir != "" {
		c.DSN = filepath.Join(c.DataDir, DefaultSQLiteFile)
	}
	c.Layout = strings.ToLower(c.Layout)
	if c.Layout == "" {
		c.Layout = LayoutTable
	}
	if c.BusyTimeout <= 0 {
		c.BusyTimeout = DefaultBusyTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports a configuration that cannot work, without looking at the
// schema or the database. Call EnsureDefaults first.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	switch c.Driver {
	case DriverSQLite, DriverPostgres:
	default:
		return bad("driver %q is not supported (want sqlite or postgres)", c.Driver)
	}
	if c.DSN == "" {
		if c.Driver == DriverSQLite {
			return bad("sqlite needs a dsn (a file path) or a data directory")
		}
		return bad("postgres needs a dsn (postgres://user@host:5432/db)")
	}
	if c.Table == "" {
		return bad("table is required")
	}
	parts := strings.Split(c.Table, ".")
	if len(parts) > 2 || (len(parts) == 2 && c.Driver == DriverSQLite) {
		return bad("table %q: want a plain name (or schema.table for postgres)", c.Table)
	}
	for _, p := range parts {
		if !identRE.MatchString(p) {
			return bad("table %q: use letters, digits and underscores, not starting with a digit", c.Table)
		}
	}
	if strings.HasPrefix(strings.ToLower(parts[len(parts)-1]), "weir_") {
		return bad("table %q: names starting with weir_ are reserved", c.Table)
	}
	if c.Generation < 0 {
		return bad("generation %d is negative", c.Generation)
	}
	if err := checkIdentifiers(c); err != nil {
		return err
	}
	switch c.Mode {
	case ModeUpsert, ModeAppend:
	default:
		return bad("mode %q is not supported (want upsert or append)", c.Mode)
	}
	if c.Mode == ModeAppend && len(c.Key) > 0 {
		return bad("table %s: key is only meaningful in upsert mode (append rows are identified by element_id)", c.Table)
	}
	seen := map[string]bool{}
	for _, k := range c.Key {
		if seen[k] {
			return bad("table %s: key field %q is listed twice", c.Table, k)
		}
		seen[k] = true
	}
	if c.SinkID == "" {
		return bad("table %s: a sink ID (job name and step name) is required", c.Table)
	}
	switch c.Layout {
	case LayoutTable, LayoutStaged:
	default:
		return bad("layout %q is not supported (want table or staged)", c.Layout)
	}
	if err := checkStagedIdentifiers(c); err != nil {
		return err
	}
	if c.Layout == LayoutStaged && c.Facade {
		return bad("table %s: layout staged cannot be written by a parallel replacement (its façade view); "+
			"update the job in place or by stop-and-replace", c.Table)
	}
	if c.FlushEvery < 0 {
		return bad("flush_every %d is negative", c.FlushEvery)
	}
	return nil
}

// CheckAccumulation refuses, at submit time, an upsert sink fed by a
// windowing strategy whose panes are deltas (discarding) while a window can
// fire more than one pane: each pane would overwrite a total with a delta.
// Discarding panes are fine when every window fires exactly once (the
// default trigger without allowed lateness, or a one-shot trigger), and
// append mode accepts any strategy. mode is the sink's mode; empty counts as
// upsert.
func CheckAccumulation(mode string, s window.Strategy) error {
	if strings.ToLower(mode) == ModeAppend {
		return nil
	}
	s.EnsureDefaults()
	if s.Accumulation != window.Discarding || !MayFireRepeatedly(s) {
		return nil
	}
	return fmt.Errorf("%w: trigger %s can fire several panes per window and, with discarding panes, "+
		"each pane would overwrite a total with a delta; use accumulation_mode: accumulating, or mode: append",
		ErrDiscardingPanes, triggerName(s.Trigger))
}

// MayFireRepeatedly reports whether a strategy can emit more than one pane for
// the same key and window.
func MayFireRepeatedly(s window.Strategy) bool {
	s.EnsureDefaults()
	return repeats(s.Trigger, s.AllowedLateness > 0)
}

func repeats(t window.Trigger, lateness bool) bool {
	switch t.Kind {
	case window.TriggerDefault, "":
		// The on-time pane, then one per late element while the window lives.
		return lateness
	case window.TriggerAfterWatermark:
		return t.Early != nil || (t.Late != nil && lateness)
	case window.TriggerRepeatedly:
		return true
	}
	// One-shot triggers (after_count, after_processing_time, after_any,
	// after_all, never) finish on their first firing, which closes the window.
	return false
}

func triggerName(t window.Trigger) string {
	if t.Kind == "" {
		return string(window.TriggerDefault)
	}
	return string(t.Kind)
}
