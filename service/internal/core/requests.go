package core

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/service/record"
)

// UpdateRequest replaces the running job of a name with a new version of
// its pipeline that inherits its state (Dataflow's in-place update).
type UpdateRequest struct {
	SubmitRequest
	// Mapping renames (or, mapped to "", deletes on purpose) steps of the
	// running job: JSON {"Old": "New"} with prefixes matched on '/' boundaries.
	Mapping string
	// AllowSourceChange accepts a source that reads something else; the old
	// source's positions are then dropped.
	AllowSourceChange bool
	// ValidateOnly runs the compatibility check and changes nothing.
	ValidateOnly bool
	// JinjaVariables, when not nil, make the service render Pipeline as a
	// Jinja template first (without includes: see jinja.go).
	JinjaVariables map[string]any
}

// UpdateResult is the outcome of an update: the compatibility report, and
// the new job when the update happened.
type UpdateResult struct {
	Report compat.Report `json:"report"`
	// Job is the replacement job (nil when validate-only or refused).
	Job *record.Job `json:"job,omitempty"`
	// Replaced is the job that was replaced (or would be).
	Replaced *record.Summary `json:"replaced,omitempty"`
	// PauseMillis is how long the job read nothing: from the pause of the
	// old execution to the start of the new one (the handover's durable
	// write follows while the new execution runs).
	PauseMillis int64 `json:"pause_ms,omitempty"`
	// InStore says the update was made in the store: the running job had
	// no execution (it waits for its connector, CONNECTOR_UNAVAILABLE), so
	// nothing paused; the new job starts at the next retry.
	InStore bool `json:"in_store,omitempty"`
	// Options are the new job's options: those the request gave, the
	// running job's for the rest (JobOptions.Inherit).
	Options *record.JobOptions `json:"options,omitempty"`
	// OptionsChanged lists the options that differ from the running job's.
	OptionsChanged []record.OptionChange `json:"options_changed,omitempty"`
	// Notes say what the request's service options made of it, and what
	// they ignored ("the in-place update ignores ...").
	Notes []string `json:"notes,omitempty"`
	// Graph is the new pipeline's canonical graph, as the check read it
	// (set by the in-place check, also when it refuses): what the console's
	// update preview draws.
	Graph json.RawMessage `json:"graph,omitempty"`
	// RenderedPipeline is the pipeline as the Jinja rendering left it,
	// when the request asked for one (UpdateRequest.JinjaVariables).
	RenderedPipeline string `json:"rendered_pipeline,omitempty"`
	// SourcePositions says, for a job created from a snapshot, where each
	// Pub/Sub source starts and how its position was placed.
	SourcePositions []SourcePlacement `json:"source_positions,omitempty"`
	// Rehearsal is the verdict of the pre-flight rehearsal
	// (weir_rehearse=required), passed or refusing the update.
	Rehearsal *record.RehearsalVerdict `json:"rehearsal,omitempty"`
}

// SourcePlacement is where a Pub/Sub source of a job created from a
// snapshot starts.
type SourcePlacement struct {
	Step         string `json:"step"`
	Subscription string `json:"subscription"`
	Topic        string `json:"topic,omitempty"`
	// Translation is "exact" (the snapshot's position, on the broker it
	// was taken on) or how another broker's position was translated:
	// "from-publish-time", "earliest" or "latest".
	Translation string `json:"translation"`
	// StartSeq is the first stream sequence the source reads.
	StartSeq uint64 `json:"start_seq"`
	// Note says it in words.
	Note string `json:"note"`
}

// Attempt is a recorded update attempt that the check refused (a refused
// attempt creates no job) or that was only validated.
type Attempt struct {
	Time         time.Time     `json:"time"`
	Name         string        `json:"name"`
	RunningJobID string        `json:"running_job_id"`
	ValidateOnly bool          `json:"validate_only"`
	Report       compat.Report `json:"report"`
	Pipeline     string        `json:"pipeline"`
	// Rehearsal is the verdict of the pre-flight rehearsal that refused
	// the update (weir_rehearse=required).
	Rehearsal *record.RehearsalVerdict `json:"rehearsal,omitempty"`
}

func AttemptKey(name string, t time.Time) string {
	return fmt.Sprintf("attempt/%s/%020d", name, t.UnixNano())
}
