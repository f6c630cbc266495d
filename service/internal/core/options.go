package core

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/state"
	"github.com/weir-dev/weir/yamlpipe"
)

// DeadLetterPublisher sends the rejects of a job's steps that declare no
// error output to the job's dead-letter topic (weir.deadletter.<job name>).
// The Pub/Sub package implements it on its broker. Publish is called from
// worker goroutines and must not block for long; an error fails the job.
type DeadLetterPublisher interface {
	PublishDeadLetter(ctx context.Context, jobName, jobID string, r contract.Reject) error
}

// Options configure a Core.
type Options struct {
	// DataDir holds the state store (DataDir/state) and the default files
	// of connectors (SQLite sinks). Default "./weir-data".
	DataDir string
	// CheckpointInterval is how often every running job takes a
	// checkpoint (and samples its metrics). Default 1s.
	CheckpointInterval time.Duration
	// IdleCheckpointInterval is how often a job that processed nothing
	// since its last checkpoint (no element read, emitted, rejected or
	// dropped) takes one: an idle job's checkpoint would persist nothing
	// new. Default 30 checkpoint intervals (30s at the default interval).
	IdleCheckpointInterval time.Duration
	// MaxSinkBuffer bounds what a job's buffering sinks (Pub/Sub, SQL,
	// JDBC and Iceberg tables: they hold their output until the checkpoint that
	// commits it) hold between two checkpoints, in bytes: above it the job
	// reads no source until the next checkpoint, and its user is told
	// (EventSinkBackpressure). Default runner.DefaultMaxSinkBuffer.
	MaxSinkBuffer int64
	// Clock gives the time of job records (create_time, state_time), job
	// IDs and metrics. Default the wall clock. It is not handed to
	// executions: their processing time is the wall clock.
	Clock mtime.Clock
	// Logger receives the service's logs. Default slog.Default().
	Logger *slog.Logger
	// Broker is the Pub/Sub broker handed to pipelines (yamlpipe.JobEnv.Broker,
	// weir.JobInfo.Broker), a *pubsub.Broker; nil when the service runs
	// without one.
	Broker yamlpipe.Broker
	// DeadLetter publishes rejects of steps without an error output; nil:
	// they are counted in the job (dead_letters) and logged, and the job
	// goes on.
	DeadLetter DeadLetterPublisher
	// Program builds the pipelines of Go program jobs (Job.SDK "go"), for a
	// service embedded in the program that defines them (package weirx).
	// nil: the service runs YAML jobs only and leaves Go program jobs it
	// finds in the data directory untouched for their program.
	Program ProgramLoader
	// Access confines the files and database hosts submitted YAML
	// pipelines may touch (the server's --file-roots and
	// --allowed-sql-hosts); nil: every one the service's user may.
	Access *yamlpipe.Access
	// StoreFS is the file system of the state store; nil: the operating
	// system's. Tests inject faults through it (Pebble's vfs/errorfs).
	StoreFS vfs.FS
	// Replicator, when set, is the cluster's replicated log every write of
	// the state store goes through first (a cluster's leader: see package
	// cluster); nil: the store writes locally only.
	Replicator state.Replicator
	// MinReplaceInterval is how long after the previous job of a name
	// started a same-name replacement (stop-and-replace or parallel) may
	// start; earlier ones are refused (REPLACE_TOO_SOON), which guards
	// against duplicate replacements from client retries. In-place updates
	// and rescales are exempt. Default 2m; negative: no minimum.
	MinReplaceInterval time.Duration
	// RollbackRetention is how long the rollback snapshot an update or a
	// replacement keeps of the old job lives (rollback.go), and how long an
	// old job's generation behind a façade view is kept after a parallel
	// replacement's cut-over before its rows are compacted into the new
	// generation's table; neither goes before the new job has run that
	// long. Default 24h.
	RollbackRetention time.Duration
	// StorageRetryInterval is how often, after the state store failed (a
	// full disk, an I/O error), the service probes the disk and tries to
	// reopen the store; once it writes again, the jobs the failure stopped
	// resume from their last durable checkpoint (fault_resume.go). The
	// same interval paces the retries of a sink whose commit failed
	// (SINK_UNAVAILABLE). Default 10s; at least 10ms.
	StorageRetryInterval time.Duration
	// AutoscaleInterval is how often the autoscaler measures the jobs it
	// scales (package autoscale). Default 5s.
	AutoscaleInterval time.Duration
	// ScheduleInterval is how often the scheduler of partition runs looks
	// at its schedules (package schedules). Default 1s.
	ScheduleInterval time.Duration
	// MaxJobs bounds the active jobs (the server's --max-jobs): every way a
	// job is created — a submission, a Go program's start, a job from a
	// snapshot, a replacement under a name without an active job — is
	// refused with LIMIT_EXCEEDED once that many are active (Tx.Admit). An
	// update or replacement of a name's active job is not counted. 0 (or
	// less): no limit.
	MaxJobs int
	// RehearseTraceMemory is the memory budget of a pre-flight rehearsal's
	// recorded stretch (weir_rehearse=required; the server's
	// --rehearse-trace-memory): beyond it, older parts of the stretch
	// spill to an unlinked file in RehearseTraceDir. 0: 256 MiB
	// (sandbox.DefaultTraceMemory).
	RehearseTraceMemory int64
	// RehearseTraceDir is where that file goes (--rehearse-trace-dir);
	// empty: the system's temporary directory. Only the server's operator
	// sets it: no request names a directory of the server.
	RehearseTraceDir string
	// Inspect opens an existing data directory only to read its records
	// (`weir jobs list|describe|history|logs --data-dir`, after a Go
	// program or a server has stopped): the state store is opened
	// read-only, no job resumes, no flow repairs anything, and every change
	// is refused with READ_ONLY_INSPECTION. Default false.
	Inspect bool
}

// Defaults of Options.
const (
	DefaultDataDir            = "./weir-data"
	DefaultCheckpointInterval = time.Second
	DefaultMinReplaceInterval = 2 * time.Minute
	DefaultRollbackRetention  = 24 * time.Hour
	DefaultAutoscaleInterval  = 5 * time.Second
)

// EnsureDefaults fills unset options with their defaults.
func (o *Options) EnsureDefaults() {
	if o.DataDir == "" {
		o.DataDir = DefaultDataDir
	}
	if o.CheckpointInterval == 0 {
		o.CheckpointInterval = DefaultCheckpointInterval
	}
	if o.IdleCheckpointInterval <= 0 {
		o.IdleCheckpointInterval = 30 * o.CheckpointInterval
	}
	o.IdleCheckpointInterval = max(o.IdleCheckpointInterval, o.CheckpointInterval)
	if o.MaxSinkBuffer <= 0 {
		o.MaxSinkBuffer = runner.DefaultMaxSinkBuffer
	}
	if o.Clock == nil {
		o.Clock = mtime.WallClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MinReplaceInterval == 0 {
		o.MinReplaceInterval = DefaultMinReplaceInterval
	}
	if o.RollbackRetention == 0 {
		o.RollbackRetention = DefaultRollbackRetention
	}
	if o.StorageRetryInterval == 0 {
		o.StorageRetryInterval = DefaultStorageRetryInterval
	}
	if o.AutoscaleInterval == 0 {
		o.AutoscaleInterval = DefaultAutoscaleInterval
	}
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	if o.CheckpointInterval < 10*time.Millisecond {
		return fmt.Errorf("checkpoint interval %s is shorter than the minimum of 10ms", o.CheckpointInterval)
	}
	if o.StorageRetryInterval < 10*time.Millisecond {
		return fmt.Errorf("storage retry interval %s is shorter than the minimum of 10ms", o.StorageRetryInterval)
	}
	if o.RehearseTraceMemory < 0 {
		return fmt.Errorf("the rehearsal trace's memory budget %d is negative", o.RehearseTraceMemory)
	}
	return nil
}
