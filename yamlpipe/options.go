package yamlpipe

// This file holds what a caller tells the loader: the options of a load
// and, for a job service, the job a pipeline runs as.

import (
	"github.com/weir-dev/weir/graph"
	"io"

	"github.com/weir-dev/weir/io/sqlsink"
)

// Options for loading. BaseDir resolves relative paths in the pipeline
// (default: the current directory).
type Options struct {
	// BaseDir resolves relative paths in the pipeline (default: the current directory).
	BaseDir string
	// Job describes the job the pipeline runs as, for connectors that need
	// it (Pub/Sub subscriptions named after the job, SQL sink revisions).
	// Nil for in-process runs of bounded pipelines.
	Job *JobEnv
	// PriorCombineSlots holds, by Combine step name, the outputs whose
	// accumulators the step stored, in slot order ("" for a retired
	// slot), as the job whose state the pipeline reads recorded them (a
	// job's own graph at a restart, the replaced job's at an update, the
	// snapshot's when created from one: compat.CombineSlotsByStep); nil
	// when that is unknown. A Combine found in it keeps those slots where
	// they are, so that its outputs may be reordered, inserted anywhere or
	// removed from the middle while the stored accumulators carry on.
	PriorCombineSlots map[string][]string
	// PriorCombineStored holds, by Combine step name, what each of those
	// slots stores (its fn and value type: compat.CombineSlotsByStep too),
	// so that an output declared where another one was is taken for it
	// (an undeclared rename in place) only when it stores the same, and
	// a WriteToSql below does not take a new output for the rename of a
	// removed one that stored something else.
	PriorCombineStored map[string][]graph.Field
	// Access confines the files and database hosts the pipeline may touch
	// (a server's --file-roots and --allowed-sql-hosts); nil: every one
	// its user may (an in-process run).
	Access *Access
	// CheckOutputs, set by a job service, refuses file sink paths the job
	// may not write (files.CheckOutput: a file weir did not create,
	// another job name's output, an earlier job's batch file) with
	// ErrOutputExists. Offline loads (weir check) leave it unset.
	CheckOutputs bool
	// LogOutput receives LogForTesting's lines, one JSON object per line
	// (default: standard output for in-process runs; dropped in a job).
	LogOutput io.Writer
	// GraphOnly builds the pipeline for its graph only (the compatibility
	// check): SQL sinks do not connect to their database to check that
	// their table can hold the rows. Such a pipeline must not be run.
	GraphOnly bool
	// JinjaVariables are Beam's --jinja_variables (see RenderJinja).
	JinjaVariables map[string]any
	// JinjaSandbox, when set, renders the template in a child process
	// within the render budgets' memory and time (see JinjaSandbox); nil:
	// in this process.
	JinjaSandbox *JinjaSandbox
	// RenderJinja renders the pipeline as a Jinja template before parsing
	// it, as Beam does, when it uses Jinja syntax or JinjaVariables are
	// given. LoadFile sets it: its includes read files beside the local
	// file. Load leaves text as it is unless asked, so a job service never
	// reads files a submitted template names.
	RenderJinja bool
	// TestTaps, for one test case of the file's tests: section (weir
	// test), mocks inputs of transforms, captures outputs of any
	// transform and leaves out what the test does not need; nil: the
	// pipeline as written.
	TestTaps *TestTaps
}

// JobEnv is what a job service tells the loader about the job a pipeline
// becomes: its identity, the shared services its connectors use, and what
// decides how its connectors are built (the tables its SQL sinks write,
// the subscriptions its sources read). What a job service configures once
// the pipeline is built — a re-read, the windows its sinks own — it sets
// through the step code's capabilities (runner/contract).
type JobEnv struct {
	// Name is the job name (the lineage that survives updates).
	Name string
	// ID is the job ID of this run.
	ID string
	// Generation is the name's generation counter for this job; it is part
	// of every sink revision, so a newer job's writes win.
	Generation int64
	// DataDir is the service's data directory (default home of SQLite sinks).
	DataDir string
	// Broker is the Pub/Sub broker (a *pubsub.Broker); nil when the
	// service has none.
	Broker Broker
	// SQLFacade makes every WriteToSql sink of the job write its
	// generation's own table, <table>__g<Generation>, behind a façade view
	// named <table> (io/sqlsink, "Façade views"): the service sets it for
	// the jobs of a parallel replacement.
	SQLFacade bool
	// SQLFacadeHeld (with SQLFacade) holds the job's generation back from
	// the views until the service reveals it: the new job of a parallel
	// replacement gated on parity, whose rows no reader may see before the
	// gate passes.
	SQLFacadeHeld bool
	// OnSQLMerge, when set, hears of every periodic merge a WriteToSql
	// sink with layout: staged runs (step is the sink step's name): what
	// moved, or the merge's error. The service records them as job events.
	OnSQLMerge func(step string, rep sqlsink.MergeReport, err error)
	// PriorRenamedColumns holds, by WriteToSql step name, the fields the
	// job this one replaces declared renamed in place (new name to old:
	// a Combine's renamed_from) for that sink's rows. A sink whose rows
	// have the old name and not the new one — a rollback, or an update
	// back to the names before — renames the table's column back, so its
	// rows keep their values. The service sets it from the replaced job's
	// graph.
	PriorRenamedColumns map[string]map[string]string
	// PriorConverted holds, by WriteToSql step name, the columns the job
	// this one replaces declared converted (its sink's convert). A staged
	// sink of a job started from a snapshot (a rollback) converts them
	// back where its rows have another type again, lossy or not: the
	// values the replaced job wrote are what it converted.
	PriorConverted map[string][]string
	// PriorKeyLayouts holds, by Combine step name, the key layout
	// (KeyLayout per group_by field) of the replaced job's step when it
	// declared a re-key, "" when it declared none; nil when the job
	// replaces none. A WriteToSql fed by a Combine whose declared re-key
	// differs from the replaced step's re-keys its table
	// (sqlsink.Config.Rekey); one fed by a Combine that no longer
	// declares the replaced step's re-key, in a job created from a
	// snapshot (a rollback), undoes a table re-key no merge has folded
	// (sqlsink.Config.UndoRekey).
	PriorKeyLayouts map[string]string
	// FromSnapshot says the job starts from a snapshot's state.
	FromSnapshot bool
	// Subscriptions maps the name of a ReadFromPubSub step to the
	// subscription it reads instead of its default: for a step that reads
	// a topic, the one named after the job and step
	// (pubsub.SubscriptionName); for a step that reads a named
	// subscription, that subscription. The service gives the new job of a
	// parallel replacement a subscription of its own this way. Steps not
	// in it keep the default.
	Subscriptions map[string]string
	// Manifests gives the service's input manifests to file sources that
	// read one (`manifest: NAME`); nil: such a source is refused (it needs
	// a weir server).
	Manifests ManifestStore
	// Partition is the partition a job runs (`weir run --partition P`):
	// the partition of the manifests its file sources read.
	Partition string
	// Manifest, when set (`weir run --manifest M`), makes every file
	// source read manifest M at Partition instead of its path.
	Manifest string
	// ManifestDigest is Manifest's digest, which a partition run's
	// publication log records (its file sources' first manifest's when
	// empty).
	ManifestDigest string
	// Shadow makes a partition run stage its SQL outputs without
	// publishing them (`weir run --shadow`): the staging tables are kept
	// for weir diff.
	Shadow bool
}
