package record

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/graph"
)

// JobType says whether a job's sources are all bounded.
type JobType string

// Job types, as Dataflow names them.
const (
	// TypeBatch: every source is bounded; the job ends by itself (DONE).
	TypeBatch JobType = "Batch"
	// TypeStreaming: at least one source is unbounded; the job runs until
	// drained or cancelled.
	TypeStreaming JobType = "Streaming"
)

// Delivery guarantees a job runs with.
const (
	// DeliveryExactlyOnce: every source resumes from checkpointed positions
	// and every sink commits per checkpoint epoch.
	DeliveryExactlyOnce = "exactly_once"
	// DeliveryAtLeastOnce: some source restarts from its beginning after a
	// restart, or some sink writes outside checkpoints (file sinks); after
	// a crash, elements may be written again.
	DeliveryAtLeastOnce = "at_least_once"
)

// JobOptions are the options of a job, named after Dataflow's.
type JobOptions struct {
	// NumWorkers is the number of workers (goroutines) of the job. Default 1.
	NumWorkers int `json:"num_workers"`
	// MinNumWorkers and MaxNumWorkers bound the worker count the
	// autoscaler chooses for a streaming job (min 1 when unset); 0: unset,
	// and without a maximum the job is not autoscaled.
	MinNumWorkers int `json:"min_num_workers,omitempty"`
	MaxNumWorkers int `json:"max_num_workers,omitempty"`
	// WorkerUtilizationHint is Dataflow's target utilisation of the
	// workers for autoscaling, 0.1..0.9; 0: the default, 0.8.
	WorkerUtilizationHint float64 `json:"worker_utilization_hint,omitempty"`
	// AutoscalingAlgorithm is Dataflow's: THROUGHPUT_BASED (the default,
	// "") or NONE, which turns the autoscaler off for the job.
	AutoscalingAlgorithm string `json:"autoscaling_algorithm,omitempty"`
}

// Autoscaling algorithms (JobOptions.AutoscalingAlgorithm), Dataflow's
// names.
const (
	AutoscalingThroughputBased = "THROUGHPUT_BASED"
	AutoscalingNone            = "NONE"
)

// MaxNumWorkers is the largest accepted NumWorkers.
const MaxNumWorkers = 1024

// EnsureDefaults fills unset options with their defaults: a job given an
// autoscaling minimum and no worker count starts at that minimum, as
// Dataflow's does; otherwise at 1.
func (o *JobOptions) EnsureDefaults() {
	if o.NumWorkers == 0 {
		o.NumWorkers = max(1, o.MinNumWorkers)
	}
}

// Inherit returns o with every unset (zero) field taken from running: the
// options an update or rescale does not give keep the running job's
// values, so that `--update` without `--num-workers` never resets a job
// rescaled to 3 workers back to 1.
func (o JobOptions) Inherit(running JobOptions) JobOptions {
	if o.NumWorkers == 0 {
		o.NumWorkers = running.NumWorkers
	}
	if o.MinNumWorkers == 0 {
		o.MinNumWorkers = running.MinNumWorkers
	}
	if o.MaxNumWorkers == 0 {
		o.MaxNumWorkers = running.MaxNumWorkers
	}
	if o.WorkerUtilizationHint == 0 {
		o.WorkerUtilizationHint = running.WorkerUtilizationHint
	}
	if o.AutoscalingAlgorithm == "" {
		o.AutoscalingAlgorithm = running.AutoscalingAlgorithm
	}
	return o
}

// OptionChange is one job option an update or rescale changed, for the
// report: its JSON name and its values before and after.
type OptionChange struct {
	Option string `json:"option"`
	From   string `json:"from"`
	To     string `json:"to"`
}

// ChangesTo lists the options that differ between o (the running job's)
// and to, in a fixed order; nil when none does.
func (o JobOptions) ChangesTo(to JobOptions) []OptionChange {
	var out []OptionChange
	add := func(name string, from, into any) {
		f, t := fmt.Sprint(from), fmt.Sprint(into)
		if f != t {
			out = append(out, OptionChange{Option: name, From: f, To: t})
		}
	}
	add("num_workers", o.NumWorkers, to.NumWorkers)
	add("min_num_workers", o.MinNumWorkers, to.MinNumWorkers)
	add("max_num_workers", o.MaxNumWorkers, to.MaxNumWorkers)
	add("worker_utilization_hint", o.WorkerUtilizationHint, to.WorkerUtilizationHint)
	add("autoscaling_algorithm", o.AutoscalingAlgorithm, to.AutoscalingAlgorithm)
	return out
}

// Validate reports options out of range as INVALID_OPTIONS.
func (o JobOptions) Validate() error {
	// The range first: a minimum out of bounds is also the count it
	// started (EnsureDefaults), and its message names the minimum.
	if err := o.validateRanges(); err != nil {
		return err
	}
	if o.NumWorkers < 1 || o.NumWorkers > MaxNumWorkers {
		return errcode.Errorf(errcode.InvalidOptions, "options.num_workers must be between 1 and %d, got %d", MaxNumWorkers, o.NumWorkers)
	}
	if o.MinNumWorkers > 0 && o.MaxNumWorkers > 0 && o.MinNumWorkers > o.MaxNumWorkers {
		return errcode.Errorf(errcode.InvalidOptions, "options.min_num_workers %d is larger than max_num_workers %d", o.MinNumWorkers, o.MaxNumWorkers)
	}
	if o.MinNumWorkers > 0 && o.NumWorkers < o.MinNumWorkers {
		return errcode.Errorf(errcode.InvalidOptions, "options.num_workers %d is less than min_num_workers %d", o.NumWorkers, o.MinNumWorkers)
	}
	if o.MaxNumWorkers > 0 && o.NumWorkers > o.MaxNumWorkers {
		return errcode.Errorf(errcode.InvalidOptions, "options.num_workers %d is more than max_num_workers %d", o.NumWorkers, o.MaxNumWorkers)
	}
	return nil
}

// ValidateGiven reports the set fields of a partial options value (an
// update's or rescale's, before JobOptions.Inherit) that are out of range
// on their own; Validate checks the whole once it is filled.
func (o JobOptions) ValidateGiven() error {
	if o.NumWorkers < 0 || o.NumWorkers > MaxNumWorkers {
		return errcode.Errorf(errcode.InvalidOptions, "options.num_workers must be between 1 and %d, got %d", MaxNumWorkers, o.NumWorkers)
	}
	return o.validateRanges()
}

// validateRanges checks the fields that have a range of their own.
func (o JobOptions) validateRanges() error {
	if o.MinNumWorkers < 0 || o.MaxNumWorkers < 0 || o.MinNumWorkers > MaxNumWorkers || o.MaxNumWorkers > MaxNumWorkers {
		return errcode.Errorf(errcode.InvalidOptions, "options.min_num_workers and max_num_workers must be between 0 and %d", MaxNumWorkers)
	}
	if h := o.WorkerUtilizationHint; h != 0 && (h < 0.1 || h > 0.9) {
		return errcode.Errorf(errcode.InvalidOptions, "options.worker_utilization_hint must be between 0.1 and 0.9, got %g", h)
	}
	switch o.AutoscalingAlgorithm {
	case "", AutoscalingThroughputBased, AutoscalingNone:
	default:
		return errcode.Errorf(errcode.InvalidOptions, "options.autoscaling_algorithm %q is not an algorithm: use %s (the default) or %s", o.AutoscalingAlgorithm, AutoscalingThroughputBased, AutoscalingNone)
	}
	return nil
}

// CheckpointInfo describes a job's latest durable checkpoint.
type CheckpointInfo struct {
	Epoch uint64    `json:"epoch"`
	Time  time.Time `json:"time"`
}

// StateChange is one persisted transition of a job.
type StateChange struct {
	State  JobState  `json:"state"`
	Time   time.Time `json:"time"`
	Reason string    `json:"reason,omitempty"`
}

// Job is the registry record of one job (one run of a pipeline). It is
// stored as JSON under job/<id> and served as is by the API.
type Job struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	Type       JobType   `json:"type"`
	State      JobState  `json:"state"`
	CreateTime time.Time `json:"create_time"`
	StateTime  time.Time `json:"state_time"`
	// Generation is the name's generation counter for this job.
	Generation int64 `json:"generation"`
	// SDK is SDKGo for a Go program's job (its pipeline is built by the
	// program's code, and Pipeline is empty); empty for a YAML pipeline.
	SDK string `json:"sdk,omitempty"`
	// Program is the executable of a Go program's job, as it was started.
	Program string `json:"program,omitempty"`
	// Pipeline is the YAML text of the pipeline.
	Pipeline string `json:"pipeline"`
	// PipelineFile names the pipeline in error messages and source
	// positions (the path the client gave).
	PipelineFile string `json:"pipeline_file,omitempty"`
	// BaseDir resolves relative paths in the pipeline (the client's
	// working directory).
	BaseDir string `json:"base_dir"`
	// Graph is the pipeline's canonical graph JSON.
	Graph           json.RawMessage `json:"graph"`
	Options         JobOptions      `json:"options"`
	ReplacesJobID   string          `json:"replaces_job_id,omitempty"`
	ReplacedByJobID string          `json:"replaced_by_job_id,omitempty"`
	// Replacement is set on both jobs of a stop-and-replace or parallel
	// replacement: the strategy, the flow's phase and its times
	// (replace_flow.go).
	Replacement *Replacement `json:"replacement,omitempty"`
	// CatchUp is set on the in-place update of a re-reading replacement
	// job that was still catching up: the re-read it carries on
	// (rewind_catchup.go).
	CatchUp *CatchUp `json:"catch_up,omitempty"`
	// StateLineage is the key the job's keyed state and checkpoints are
	// kept under in the store; empty means the job name. The new job of a
	// parallel replacement under the same name runs beside the old one,
	// so it gets a key of its own (replace_parallel.go), which its
	// successors (updates, replacements) keep.
	StateLineage string `json:"state_lineage,omitempty"`
	// Subscriptions maps a ReadFromPubSub step reading a topic to the
	// subscription the job reads instead of the one named after the job
	// and step (the same-name parallel replacement gives its new job its
	// own); successors keep it.
	Subscriptions map[string]string `json:"subscriptions,omitempty"`
	// CreatedFromSnapshotID names the snapshot the job started from.
	CreatedFromSnapshotID string `json:"created_from_snapshot_id,omitempty"`
	// TransformNameMapping is the --transform-name-mapping the job was
	// created with (a step of the job whose state it reads, to its name
	// here; "" for a step whose state is dropped), when one was given.
	TransformNameMapping map[string]string `json:"transform_name_mapping,omitempty"`
	// Partition is the partition a bounded job runs (weir run
	// --partition): the partition of the input manifests it reads.
	Partition string `json:"partition,omitempty"`
	// Manifest is the input manifest every file source of the job reads
	// (weir run --manifest), and ManifestDigest its digest when the job
	// was submitted.
	Manifest       string `json:"manifest,omitempty"`
	ManifestDigest string `json:"manifest_digest,omitempty"`
	// Shadow says the partition run stages its outputs without publishing
	// them (weir run --shadow); its staging tables are kept.
	Shadow bool `json:"shadow,omitempty"`
	// Error is why a FAILED job failed.
	Error          string          `json:"error,omitempty"`
	LastCheckpoint *CheckpointInfo `json:"last_checkpoint,omitempty"`
	// Checkpointing says whether the job takes checkpoints; a pipeline
	// whose code cannot be checkpointed runs without (CheckpointNote says why).
	Checkpointing  bool   `json:"checkpointing"`
	CheckpointNote string `json:"checkpoint_note,omitempty"`
	// InputStart is where the job's input started, in event time (RFC 3339
	// UTC with milliseconds), when the job began with no state from a
	// position past input it never reads (a subscription sought forward, or
	// left acknowledged by an earlier job of the name): every pane of a
	// window that began before it is marked cut short, and an upserting
	// sink keeps a complete revision over it. Empty when the job skipped
	// nothing. InputStartNote says what its sources found.
	InputStart     string `json:"input_start,omitempty"`
	InputStartNote string `json:"input_start_note,omitempty"`
	// Delivery is DeliveryExactlyOnce or DeliveryAtLeastOnce; DeliveryNote
	// names the steps that make it at-least-once.
	Delivery     string `json:"delivery"`
	DeliveryNote string `json:"delivery_note,omitempty"`
	// DeadLetters counts the rejects of steps without an error output
	// (sent to the dead-letter topic, or only counted and logged when the
	// service has no broker); LastDeadLetter describes the latest.
	DeadLetters    int64  `json:"dead_letters"`
	LastDeadLetter string `json:"last_dead_letter,omitempty"`
	// History lists every transition, oldest first.
	History []StateChange `json:"history"`
	// Counters are the job's per-step counters as of its latest
	// checkpoint, carried into its next execution (a restart, a rescale),
	// so that its metrics never go back.
	Counters map[string]StepCounters `json:"counters,omitempty"`
	// Metrics are the job's final metrics once it is terminal.
	Metrics *JobMetrics `json:"metrics,omitempty"`
	// PendingCommit is set while a terminal job's final checkpoint is
	// durable but its sinks have not confirmed the commit; a restarted
	// service re-commits (sinks skip committed epochs).
	PendingCommit bool `json:"pending_commit,omitempty"`
	// Condition, when set, says why an active job is not processing
	// although its state says it runs (the state store failed). It is
	// never stored: reads add it.
	Condition *Condition `json:"condition,omitempty"`
}

// Condition is a cause that keeps an active job from processing: a code
// from the registry, what happened, and since when.
type Condition struct {
	Code    errcode.Code `json:"code"`
	Message string       `json:"message"`
	Since   time.Time    `json:"since"`
}

// Summary is the short form of a job that lists show.
type Summary struct {
	ID              string    `json:"id"`
	Name            string    `json:"name"`
	Type            JobType   `json:"type"`
	State           JobState  `json:"state"`
	CreateTime      time.Time `json:"create_time"`
	StateTime       time.Time `json:"state_time"`
	Generation      int64     `json:"generation"`
	ReplacesJobID   string    `json:"replaces_job_id,omitempty"`
	ReplacedByJobID string    `json:"replaced_by_job_id,omitempty"`
	Error           string    `json:"error,omitempty"`
}

// Summary returns the short form of j.
func (j *Job) Summary() Summary {
	return Summary{ID: j.ID, Name: j.Name, Type: j.Type, State: j.State, CreateTime: j.CreateTime,
		StateTime: j.StateTime, Generation: j.Generation, ReplacesJobID: j.ReplacesJobID,
		ReplacedByJobID: j.ReplacedByJobID, Error: j.Error}
}

// Active reports whether the job is not terminal.
func (j *Job) Active() bool { return !j.State.Terminal() }

// Lineage is the registry record of a job name (name/<name>): the
// generation counter and which job, if any, is the name's active job.
// "Active" is a property of the Lineage, not of job rows, so that a
// replacement can run two jobs of one name while the name points at one.
type Lineage struct {
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
	// ActiveJobID is the name's active job ("" when none).
	ActiveJobID string `json:"active_job_id,omitempty"`
	// LatestJobID is the name's newest job.
	LatestJobID string `json:"latest_job_id"`
}

// Registry keys (under the store's registry prefix).
func JobKey(id string) string { return "job/" + id }

func LineageKey(name string) string { return "name/" + name }

// jobNameRE is Dataflow's rule for job names.
var jobNameRE = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// MaxJobNameLength is the longest accepted job name.
const MaxJobNameLength = 63

// ValidateJobName reports a name that breaks the rule
// [a-z]([-a-z0-9]*[a-z0-9])? as INVALID_JOB_NAME.
func ValidateJobName(name string) error {
	switch {
	case name == "":
		return errcode.Errorf(errcode.InvalidJobName, "a job needs a name (lower-case letters, digits and '-', starting with a letter)")
	case len(name) > MaxJobNameLength:
		return errcode.Errorf(errcode.InvalidJobName, "job name %q is longer than %d characters", name, MaxJobNameLength)
	case !IsJobName(name):
		return errcode.Errorf(errcode.InvalidJobName, "job name %q is invalid: it must match [a-z]([-a-z0-9]*[a-z0-9])? (lower-case letters, digits and '-', starting with a letter and not ending with '-')", name)
	}
	return nil
}

// newJobID returns a Dataflow-style job ID: the creation time in UTC and
// 8 random hex digits, e.g. 2026-11-30_01_51_02-3f9a0c1d.
func NewJobID(now time.Time) (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating a job ID: %w", err)
	}
	return now.UTC().Format("2006-01-02_15_04_05") + "-" + hex.EncodeToString(b[:]), nil
}

// jobType returns TypeBatch when every source of g is bounded.
func TypeOf(g *graph.Pipeline) JobType {
	if len(g.UnboundedSources()) > 0 {
		return TypeStreaming
	}
	return TypeBatch
}

// stateLineage returns the key j's keyed state and checkpoints are kept
// under: StateLineage, else the job name.
func (j *Job) StateKey() string {
	if j.StateLineage != "" {
		return j.StateLineage
	}
	return j.Name
}

// inheritFrom gives j, a successor of old under the same name, the state
// key and subscriptions old reads.
func (j *Job) InheritFrom(old *Job) {
	j.StateLineage = old.StateLineage
	j.Subscriptions = old.Subscriptions
}

// IsJobName reports whether s follows Dataflow's job name rule
// [a-z]([-a-z0-9]*[a-z0-9])? (job IDs never do).
func IsJobName(s string) bool { return jobNameRE.MatchString(s) }

// SDKGo is the Job.SDK of a job whose pipeline is built by the Go code of
// its program (a program using package weirx) rather than loaded from YAML.
const SDKGo = "go"
