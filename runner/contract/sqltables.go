package contract

import (
	"context"
	"errors"
	"time"
)

// This file declares the vocabulary of the SQL tables the job service's
// flows administer beside the jobs that write them: the generations
// behind a façade view (a parallel replacement ends, reveals, drops and
// compacts them, and its parity gate reads their rows), the staging and
// principal tables of a staged table (weir tables describes and merges
// them) and the publication log of partitioned batch runs. The SQL sink
// (io/sqlsink) implements SQLTableAdmin and SQLTableSink, so that no
// flow imports the connector.

// ErrFacade marks a façade operation that cannot be done: an unknown
// façade or generation, generations keyed differently, or a view of the
// table's name that weir did not create.
var ErrFacade = errors.New("façade view")

// ErrStaged marks a staged-layout operation that cannot be done: a table
// that is not staged, a view weir did not create, or members keyed
// differently.
var ErrStaged = errors.New("staged table")

// SQLLayoutStaged is the layout of a table written as a staging table
// behind a view, merged into a principal table (WriteToSql layout:
// staged).
const SQLLayoutStaged = "staged"

// SQLSinkTable describes the table a SQL sink writes.
type SQLSinkTable struct {
	FacadeTable
	// Layout is the sink's layout: "table" or SQLLayoutStaged.
	Layout string
	// StageTarget, when not empty, is the target table of a partitioned
	// batch run that stages its output before publishing it.
	StageTarget string
}

// SQLTableSink is a SQL sink that tells which table it writes.
type SQLTableSink interface {
	Sink
	// SQLSinkTable describes the sink's table.
	SQLSinkTable() SQLSinkTable
}

// SQLTableAdmin administers SQL tables behind façade and staged views, in
// the database a FacadeTable names. Each call connects, works in one
// transaction and disconnects; it blocks until then or ctx is done.
type SQLTableAdmin interface {
	// FacadeGenerations returns the generations behind the façade view,
	// newest first (none when the table is not a façade).
	FacadeGenerations(ctx context.Context, t FacadeTable) ([]FacadeGeneration, error)
	// FacadeGenerationRows reads every row of generation gen's table; ok
	// is false when the view has no such generation or its table does not
	// exist yet.
	FacadeGenerationRows(ctx context.Context, t FacadeTable, gen int64) (rows []GenerationRow, ok bool, err error)
	// EndFacadeGeneration records that the jobs of generation gen and of
	// every older generation have ended, at time at (zero: now); ErrFacade
	// when none is behind the view.
	EndFacadeGeneration(ctx context.Context, t FacadeTable, gen int64, at time.Time) error
	// RevealFacadeGeneration makes the view serve generation gen's rows.
	RevealFacadeGeneration(ctx context.Context, t FacadeTable, gen int64) error
	// DropFacadeGeneration removes generation gen from behind the view and
	// drops its table.
	DropFacadeGeneration(ctx context.Context, t FacadeTable, gen int64) error
	// CompactFacade merges the older generations whose job ended at least
	// retention ago into generation keep's table.
	CompactFacade(ctx context.Context, t FacadeTable, keep int64, retention time.Duration) (FacadeCompaction, error)
	// TableRows returns how many rows the table or view serves, and false
	// when it does not exist yet.
	TableRows(ctx context.Context, t FacadeTable) (int64, bool, error)
	// DescribeStaged describes a staged table (ErrStaged when it is not
	// one).
	DescribeStaged(ctx context.Context, t FacadeTable) (StagedInfo, error)
	// MergeStaged merges every staging table of a staged table into its
	// principal table.
	MergeStaged(ctx context.Context, t FacadeTable) (MergeReport, error)
	// PartitionLog reads the publication log's entries of job jobName for
	// target table t, and the names of t's staging tables that exist.
	PartitionLog(ctx context.Context, t FacadeTable, jobName string) (pubs []Publication, stages map[string]bool, err error)
	// StageTable returns the staging table of one run of a partition.
	StageTable(target, partition, run string) string
}

// FacadeGeneration describes one generation behind a façade view.
type FacadeGeneration struct {
	// Generation is the job generation.
	Generation int64
	// Table is its physical table.
	Table string
	// Ended is when its job ended (EndFacadeGeneration); zero while it runs.
	Ended time.Time
}

// FacadeCompaction says what a compaction of a façade view did.
type FacadeCompaction struct {
	// Merged are the generations whose served rows moved into Kept's table
	// and whose tables were dropped, newest first.
	Merged []int64
	// Rows is how many rows moved.
	Rows int64
	// Waiting are older generations left as they are, newest first: still
	// running, or ended less than the retention ago (or behind one that is).
	Waiting []int64
	// Kept is the generation merged into.
	Kept int64
}

// GenerationRow is one row of a generation's physical table as a consumer
// of the view would see it: its key (the conflict key's columns but the
// window), its window and its other columns, weir's bookkeeping columns
// (pane, generation, job, update time) left out.
type GenerationRow struct {
	// Key maps the key columns to their values.
	Key map[string]any
	// WindowStart and WindowEnd are the window's bounds; zero for the
	// global window (or a table without window columns).
	WindowStart, WindowEnd time.Time
	// Values maps the other columns to their values.
	Values map[string]any
}

// MemberMove is what a merge did with one staging table.
type MemberMove struct {
	// Table is the staging table.
	Table string
	// Rows is how many of its rows moved into the principal table.
	Rows int64
	// Dropped says the table was dropped (an ended staging table, now
	// empty).
	Dropped bool
}

// MergeReport says what a merge did.
type MergeReport struct {
	// Table is the staged view.
	Table string
	// Principal is the principal table merged into.
	Principal string
	// Members lists the staging tables merged, oldest first.
	Members []MemberMove
	// Rows is how many rows moved in all.
	Rows int64
	// At is when the merge ran; Duration how long it took.
	At       time.Time
	Duration time.Duration
}

// StagedMember describes one table behind a staged view.
type StagedMember struct {
	// Table is the member's table; Role is "principal" or "staging".
	Table, Role string
	// Generation is the job generation that created a staging table.
	Generation int64
	// Rows is how many rows the table holds.
	Rows int64
	// Columns are the table's columns, "name type", in order.
	Columns []string
}

// MergeRecord is one past merge of a staged table.
type MergeRecord struct {
	// At is when it ran, Duration how long it took.
	At       time.Time
	Duration time.Duration
	// Rows is how many rows moved; Members says from which tables
	// ("table:rows", comma-separated).
	Rows    int64
	Members string
}

// StagedInfo describes a staged table.
type StagedInfo struct {
	// Table is the view; Mode and Key are its members' mode and key
	// columns.
	Table, Mode string
	Key         []string
	// Members are the principal, then the staging tables oldest first.
	Members []StagedMember
	// View summarises the view's rule.
	View string
	// Merges are the most recent merges, newest first (at most 20).
	Merges []MergeRecord
}

// Publication is one entry of the publication log (weir_publications) of
// a partition run's target.
type Publication struct {
	// JobName, Partition, ManifestDigest and Target identify the entry;
	// JobID is the run that published it.
	JobName, Partition, ManifestDigest, Target, JobID string
	// OutputDigest is the published rows' digest (see OutputDigest).
	OutputDigest string
	// Rows were published; Replaced were the partition's rows before.
	Rows, Replaced int64
	// PublishedAt is the commit's time (RFC 3339).
	PublishedAt string
}
