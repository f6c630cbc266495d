// Package errcode is weir's one registry of error codes: the stable codes
// of the job service and the HTTP API (JOB_NOT_FOUND, INVALID_PIPELINE, ...),
// of the Pub/Sub routes (TOPIC_NOT_FOUND, ...) and of the compatibility
// check's findings (STEP_MISSING, ...). Each code is registered with its
// kind (what sort of failure it is) and the HTTP status the API answers it
// with, so the API, the CLI and the tests derive everything from one table.
//
// Codes are part of weir's contract: clients and tests match on them, never
// on messages, so a code, once published, is never renamed or reused.
// Every package spells a code one way, errcode.X; none re-declares them.
//
// It may import only the standard library; every other package may import it.
package errcode

import (
	"fmt"
	"net/http"
)

// Code is a stable error code.
type Code string

// Kind says what sort of failure a code is. The zero Kind is not a kind;
// an unregistered code is KindInternal.
type Kind int

// Error kinds.
const (
	// KindInvalid: the request is wrong (bad JSON, an invalid name, options,
	// pipeline or mapping); fix it and retry.
	KindInvalid Kind = iota + 1
	// KindNotFound: the job, topic, subscription, step or route does not exist.
	KindNotFound
	// KindConflict: the request is valid but clashes with the current
	// state (an illegal transition, a second active job of a name, an update
	// the compatibility check refuses).
	KindConflict
	// KindUnavailable: the service or the broker cannot answer now (shutting
	// down, no broker); retry later.
	KindUnavailable
	// KindInternal: the service failed (a storage error); see the server log.
	KindInternal
	// KindWarning: the code names a finding that is reported but fails
	// nothing (a compatibility warning); it is never an API error.
	KindWarning
	// KindDenied: the request was refused before it reached the service: no
	// or a wrong token, a foreign Origin or Host header (see docs/SECURITY.md).
	KindDenied
)

// String returns the kind's name in lower case ("invalid", "not found", ...).
func (k Kind) String() string {
	switch k {
	case KindInvalid:
		return "invalid"
	case KindNotFound:
		return "not found"
	case KindConflict:
		return "conflict"
	case KindUnavailable:
		return "unavailable"
	case KindInternal:
		return "internal"
	case KindWarning:
		return "warning"
	case KindDenied:
		return "denied"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Area is the family a code belongs to: who returns it.
type Area int

// Areas.
const (
	// AreaService: the job service and the API's generic codes (request
	// decoding, routes, INTERNAL).
	AreaService Area = iota + 1
	// AreaPubSub: the topic and subscription routes.
	AreaPubSub
	// AreaCompat: the findings of the compatibility check (package compat).
	AreaCompat
)

// Codes of the job service and the API (AreaService).
const (
	// InvalidRequest: the request body is not valid JSON, has unknown
	// fields, or misses a required field.
	InvalidRequest Code = "INVALID_REQUEST"
	// InvalidJobName: a job name breaks the rule [a-z]([-a-z0-9]*[a-z0-9])?.
	InvalidJobName Code = "INVALID_JOB_NAME"
	// InvalidOptions: a job option is out of range.
	InvalidOptions Code = "INVALID_OPTIONS"
	// InvalidPipeline: the pipeline YAML could not be loaded or validated;
	// the message names file:line:column.
	InvalidPipeline Code = "INVALID_PIPELINE"
	// PipelineBudgetExceeded: loading the pipeline would pass one of the
	// loader's budgets (Jinja rendering time, memory or output, YAML alias
	// expansion); the message names the budget and its value.
	PipelineBudgetExceeded Code = "PIPELINE_BUDGET_EXCEEDED"
	// InvalidFilter: a list filter (status) is unknown.
	InvalidFilter Code = "INVALID_FILTER"
	// JobNotFound: no job has this ID or name.
	JobNotFound Code = "JOB_NOT_FOUND"
	// NotFound: no such API route.
	NotFound Code = "NOT_FOUND"
	// MethodNotAllowed: the route exists but not with this HTTP method.
	MethodNotAllowed Code = "METHOD_NOT_ALLOWED"
	// JobNameActive: the name already has an active job.
	JobNameActive Code = "JOB_NAME_ACTIVE"
	// IllegalTransition: the job's current state does not allow the
	// requested change.
	IllegalTransition Code = "ILLEGAL_TRANSITION"
	// JobTerminated: the job is in a terminal state, which never changes.
	JobTerminated Code = "JOB_TERMINATED"
	// BatchJobNotDrainable: drain applies to streaming jobs only; a batch
	// job finishes by itself (cancel it to stop it early).
	BatchJobNotDrainable Code = "BATCH_JOB_NOT_DRAINABLE"
	// NoRunningJob: an update names a job name with no running (or
	// draining) job.
	NoRunningJob Code = "NO_RUNNING_JOB"
	// JobAlreadyUpdated: an update names a job that was already replaced.
	JobAlreadyUpdated Code = "JOB_ALREADY_UPDATED"
	// IncompatibleUpdate: the compatibility check refused an update; the
	// running job was left untouched. The report lists every reason.
	IncompatibleUpdate Code = "INCOMPATIBLE_UPDATE"
	// UpdateInProgress: another update or rescale of the job is under way;
	// retry once it has finished (weir jobs describe shows the outcome).
	UpdateInProgress Code = "UPDATE_IN_PROGRESS"
	// InvalidMapping: a transform name mapping is not valid JSON of step
	// names.
	InvalidMapping Code = "INVALID_MAPPING"
	// ShuttingDown: the service is stopping.
	ShuttingDown Code = "SHUTTING_DOWN"
	// NoClusterLeader: a cluster member was asked something only the
	// leader answers, and no member leads yet (the lease is being taken
	// over after a member's loss); retry in a few seconds.
	NoClusterLeader Code = "NO_CLUSTER_LEADER"
	// ReadOnlyInspection: a change asked of a data directory opened only
	// to read its records (`weir jobs ... --data-dir`): start a server or
	// the program on it to change anything.
	ReadOnlyInspection Code = "READ_ONLY_INSPECTION"
	// ProgramChanged: a Go program started without --update finds its job
	// running a different pipeline graph; start it with --update.
	ProgramChanged Code = "PROGRAM_CHANGED"
	// NotReleasable: the process asked to hand its data directory over does
	// not do that (a weir server, or a job that is not a Go program's).
	NotReleasable Code = "NOT_RELEASABLE"
	// StorageUnavailable: the state store failed (a full disk, a write
	// error): every job stopped before committing anything downstream and
	// keeps its last durable checkpoint; the message names the cause.
	StorageUnavailable Code = "STORAGE_UNAVAILABLE"
	// Resuming: the job was active when the server stopped and has not
	// resumed yet after the restart; it does shortly (a job condition).
	Resuming Code = "RESUMING"
	// SinkUnavailable: a sink's commit failed for a reason that may pass
	// (its database is down, busy or out of disk); the job keeps running,
	// acknowledges nothing past the sink's last committed checkpoint and
	// retries the commit (a job condition).
	SinkUnavailable Code = "SINK_UNAVAILABLE"
	// ConnectorUnavailable: a service a job reads or writes through (the
	// Pub/Sub broker) cannot be reached now, is reloading or is out of
	// storage; the job stopped at its last committed checkpoint, stays
	// RUNNING and starts again from it on every retry until it works (a
	// job condition).
	ConnectorUnavailable Code = "CONNECTOR_UNAVAILABLE"
	// SnapshotNotFound: no job snapshot has this ID.
	SnapshotNotFound Code = "SNAPSHOT_NOT_FOUND"
	// JobNotSnapshottable: only a RUNNING streaming job that takes
	// checkpoints can be snapshotted; the message says which rule failed.
	JobNotSnapshottable Code = "JOB_NOT_SNAPSHOTTABLE"
	// InvalidTTL: a snapshot TTL is not a duration or lies outside 1h..30d.
	InvalidTTL Code = "INVALID_TTL"
	// SnapshotExists: a snapshot with this ID already exists.
	SnapshotExists Code = "SNAPSHOT_EXISTS"
	// SnapshotCorrupt: a snapshot's data is damaged or incomplete, or the
	// snapshot is not READY (FAILED, DELETED, still being written), so no
	// job can start from it.
	SnapshotCorrupt Code = "SNAPSHOT_CORRUPT"
	// SnapshotSDKMismatch: a job from a snapshot must be built like the
	// snapshot's job: a YAML pipeline cannot start from a Go program's
	// snapshot, nor the reverse.
	SnapshotSDKMismatch Code = "SNAPSHOT_SDK_MISMATCH"
	// SnapshotForeignPositions: the snapshot's Pub/Sub positions are
	// another broker's (a snapshot file imported here), or lie beyond what
	// the topic holds (the topic was created again): a job from it must
	// say how they translate (source_positions: from-publish-time,
	// earliest or latest).
	SnapshotForeignPositions Code = "SNAPSHOT_FOREIGN_POSITIONS"
	// SnapshotSourceUnavailable: a Pub/Sub source of a job from a snapshot
	// cannot start where the snapshot says: its topic or subscription is
	// missing, or the new job's subscription belongs to another topic.
	SnapshotSourceUnavailable Code = "SNAPSHOT_SOURCE_UNAVAILABLE"
	// Internal: the service failed; the message says what it was doing.
	Internal Code = "INTERNAL"
	// Unauthenticated: the request has no bearer token, or not a valid one
	// (the reply carries WWW-Authenticate: Bearer).
	Unauthenticated Code = "UNAUTHENTICATED"
	// RateLimited: the client sent too many requests, or too many failed
	// authentications; retry after the reply's Retry-After seconds.
	RateLimited Code = "RATE_LIMITED"
	// UnsupportedMediaType: a state-changing request (POST, PUT, PATCH,
	// DELETE) without Content-Type: application/json.
	UnsupportedMediaType Code = "UNSUPPORTED_MEDIA_TYPE"
	// ForbiddenOrigin: the request's Origin header is not the served host
	// (a web page of another site).
	ForbiddenOrigin Code = "FORBIDDEN_ORIGIN"
	// InvalidHost: the request's Host header is neither the listen address,
	// a loopback name nor one of --allowed-hosts (DNS rebinding).
	InvalidHost Code = "INVALID_HOST"
	// RequestTooLarge: the request body is larger than the API accepts.
	RequestTooLarge Code = "REQUEST_TOO_LARGE"
	// LimitExceeded: creating the job, topic or subscription would pass the
	// server's --max-jobs, --max-topics or --max-subscriptions.
	LimitExceeded Code = "LIMIT_EXCEEDED"
	// SQLIdentifierTooLong: a WriteToSql table name, or the name of a
	// generation's table behind a façade view (<table>__g<generation>), is
	// longer than the database keeps (63 bytes in PostgreSQL); the message
	// gives the limit and the longest name that fits.
	SQLIdentifierTooLong Code = "SQL_IDENTIFIER_TOO_LONG"
	// PathNotAllowed: a file path of a submitted pipeline (a source, a
	// sink, a SQLite DSN) leads outside the server's --file-roots, or into
	// the server's own files; the message names the path and the roots.
	PathNotAllowed Code = "PATH_NOT_ALLOWED"
	// SQLHostNotAllowed: a PostgreSQL DSN of a submitted pipeline names a
	// host outside the server's --allowed-sql-hosts; nothing connected to it.
	SQLHostNotAllowed Code = "SQL_HOST_NOT_ALLOWED"
	// SQLSchemaChangeRefused: a WriteToSql sink would change its table in
	// a way weir does not apply in place (an undeclared rename; with
	// layout: staged also a type change other than int to float, or a key
	// change); nothing was altered and the
	// running job is untouched. The message names the column, the change
	// and the fix.
	SQLSchemaChangeRefused Code = "SQL_SCHEMA_CHANGE_REFUSED"
	// StepNotFound: the job's pipeline has no step of that name (a metrics
	// history's step=); the message lists its steps.
	StepNotFound Code = "STEP_NOT_FOUND"
	// TableNotFound: no job of the server writes a SQL table of that name
	// (weir tables describe, weir tables merge).
	TableNotFound Code = "TABLE_NOT_FOUND"
	// TableNotStaged: the SQL table is not written with layout: staged, so
	// there is nothing to merge; the message names its layout.
	TableNotStaged Code = "TABLE_NOT_STAGED"
	// OutputExists: a file sink's path holds a file weir did not create,
	// another job's output, or what an earlier job of the name wrote.
	OutputExists Code = "OUTPUT_EXISTS"
	// ManifestNotFound: no input manifest has this name (and partition).
	ManifestNotFound Code = "MANIFEST_NOT_FOUND"
	// ManifestExists: an input manifest of this name and partition exists
	// with other content; a manifest is immutable: use a new partition or
	// a new name.
	ManifestExists Code = "MANIFEST_EXISTS"
	// ManifestChanged: a file of a job's input manifest no longer has the
	// size or content digest the manifest recorded; the message names the
	// file. Nothing was read or written.
	ManifestChanged Code = "MANIFEST_CHANGED"
	// ScheduleNotFound: no schedule of partition runs has this name.
	ScheduleNotFound Code = "SCHEDULE_NOT_FOUND"
	// ScheduleExists: a schedule of this name exists; delete it first or
	// switch its pipeline (weir schedules switch).
	ScheduleExists Code = "SCHEDULE_EXISTS"
	// ScheduleConflict: a schedule's switch or rollback cannot apply as
	// asked: the partition is published or running already, or there is
	// no earlier version to return to. The message says which.
	ScheduleConflict Code = "SCHEDULE_CONFLICT"
	// PartitionBusy: a partition run of this job name and partition is
	// active; one writer per partition: wait for it or cancel it.
	PartitionBusy Code = "PARTITION_BUSY"
	// UnknownServiceOption: a service option's key is not one weir knows;
	// the message lists the known keys.
	UnknownServiceOption Code = "UNKNOWN_SERVICE_OPTION"
	// InvalidServiceOption: a service option misses its value, has one it
	// does not take, or a value of the wrong form (a boolean, a duration
	// within 0s..744h, a job name or ID).
	InvalidServiceOption Code = "INVALID_SERVICE_OPTION"
	// ConflictingServiceOptions: the service options, --update and
	// --job-name do not make one request (two strategies, a replacement
	// without a duration, a replacement option without a replacement).
	ConflictingServiceOptions Code = "CONFLICTING_SERVICE_OPTIONS"
	// RequestIDReused: a request ID seen within 24 hours came with a
	// different request; a retry must repeat the request exactly.
	RequestIDReused Code = "REQUEST_ID_REUSED"
	// ReplaceTooSoon: a same-name replacement started less than the
	// server's --min-replace-interval after the previous job of the name
	// started; the message says how long to wait.
	ReplaceTooSoon Code = "REPLACE_TOO_SOON"
	// RewindBeyondRetention: a replacement job would have to re-read input
	// its source no longer retains (or cannot re-read); nothing changed.
	RewindBeyondRetention Code = "REWIND_BEYOND_RETENTION"
	// SourceNotRereadable: a replacement job would have to re-read input
	// from a position, but the old job's source cannot be read again at all
	// (a generator, a file, Create; or no Pub/Sub broker on the server):
	// nothing was lost to retention. Nothing changed; the message says what
	// to do instead (an in-place update, a snapshot, or no re-read).
	SourceNotRereadable Code = "SOURCE_NOT_REREADABLE"
	// ReplacementUnavailable: the server cannot perform this replacement
	// flow for this job (a source, window or sink it cannot hand over; see
	// the message for what to do instead); nothing changed.
	ReplacementUnavailable Code = "REPLACEMENT_UNAVAILABLE"
	// ParityFailed: a pre-flight rehearsal (weir_rehearse=required) found
	// the new pipeline's outputs differing from the running job's beyond
	// the budget on the job's retained input; nothing changed.
	ParityFailed Code = "PARITY_FAILED"

	// Rollback (weir jobs rollback).

	// NoRollbackSnapshot: the job name has no rollback snapshot to go back
	// to (none of the asked generation, or its replacement kept none).
	NoRollbackSnapshot Code = "NO_ROLLBACK_SNAPSHOT"
	// RollbackSnapshotExpired: the rollback snapshot of the asked
	// generation was deleted once the rollback retention had passed.
	RollbackSnapshotExpired Code = "ROLLBACK_SNAPSHOT_EXPIRED"
	// RollbackUnavailable: a rollback cannot run now (a replacement flow
	// of the name is under way); the message says what to do.
	RollbackUnavailable Code = "ROLLBACK_UNAVAILABLE"
)

// Codes of the topic and subscription routes (AreaPubSub).
const (
	// TopicNotFound: no topic has this name. Create it first.
	TopicNotFound Code = "TOPIC_NOT_FOUND"
	// TopicExists: a topic of this name exists already.
	TopicExists Code = "TOPIC_EXISTS"
	// SubscriptionNotFound: no subscription has this name.
	SubscriptionNotFound Code = "SUBSCRIPTION_NOT_FOUND"
	// SubscriptionExists: a subscription of this name exists already,
	// possibly on another topic (names are unique across topics).
	SubscriptionExists Code = "SUBSCRIPTION_EXISTS"
	// InvalidName: a topic, subscription or attribute name breaks the
	// naming rule (1 to 200 characters from [A-Za-z0-9_-], starting with a
	// letter or digit; attribute names may not start with Nats-).
	InvalidName Code = "INVALID_NAME"
	// InvalidConfig: a topic or subscription setting cannot work (a
	// negative retention, a duplicate window longer than the retention).
	InvalidConfig Code = "INVALID_CONFIG"
	// PubSubUnavailable: the server has no broker, or the broker does not
	// answer (shut down, unreachable); retry later.
	PubSubUnavailable Code = "PUBSUB_UNAVAILABLE"
	// MessageTooLarge: a published message (data, attributes and ID) is
	// larger than the broker accepts; the message says the limit.
	MessageTooLarge Code = "MESSAGE_TOO_LARGE"
	// BrokerStorageFull: the broker refused a publish for lack of storage
	// (its limit is reached or the disk is full); retry once space is
	// freed: a limit that follows the disk rises on its own.
	BrokerStorageFull Code = "BROKER_STORAGE_FULL"
	// TopicInUse: deleting a topic that an active job writes or reads
	// (directly or through one of its subscriptions) needs force.
	TopicInUse Code = "TOPIC_IN_USE"
	// SubscriptionSnapshotNotFound: no subscription snapshot has this name
	// (or it expired).
	SubscriptionSnapshotNotFound Code = "SUBSCRIPTION_SNAPSHOT_NOT_FOUND"
	// SubscriptionSnapshotExists: a subscription snapshot of this name exists.
	SubscriptionSnapshotExists Code = "SUBSCRIPTION_SNAPSHOT_EXISTS"
	// SnapshotExpiresTooSoon: a subscription snapshot would live less than
	// an hour (7 days, bounded by the topic's retention, less the age of
	// the oldest unacknowledged message); the message gives the lifetime.
	SnapshotExpiresTooSoon Code = "SNAPSHOT_EXPIRES_TOO_SOON"
	// SnapshotTopicMismatch: a seek to a snapshot of another topic's
	// subscription.
	SnapshotTopicMismatch Code = "SNAPSHOT_TOPIC_MISMATCH"
	// SnapshotTooLarge: a subscription acknowledged more runs of messages
	// out of order above its acknowledgement floor than a snapshot holds
	// (10,000); acknowledge the oldest unacknowledged messages first.
	SnapshotTooLarge Code = "SNAPSHOT_TOO_LARGE"
	// SubscriptionInUse: deleting, seeking, or pulling with acknowledgement
	// from a subscription that an active job reads needs force (it would
	// break the job's watermark and exactly-once); the message names the job.
	SubscriptionInUse Code = "SUBSCRIPTION_IN_USE"
)

// Codes of the compatibility check's errors (AreaCompat, KindConflict
// unless noted): a finding with one of these refuses the update. The
// package doc of compat says when each is reported.
const (
	// StepMissing: a keyed step of OLD has no step of its name in NEW.
	StepMissing Code = "STEP_MISSING"
	// StepKindChanged: a matched keyed or source step changed kind.
	StepKindChanged Code = "STEP_KIND_CHANGED"
	// KeyCoderChanged: a keyed step's key coder changed.
	KeyCoderChanged Code = "KEY_CODER_CHANGED"
	// StateCoderChanged: an accumulator or state cell coder changed.
	StateCoderChanged Code = "STATE_CODER_CHANGED"
	// BufferedElementChanged: what a step buffers raw changed.
	BufferedElementChanged Code = "BUFFERED_ELEMENT_CHANGED"
	// StateSpecChanged: a state cell or timer family was removed or changed kind.
	StateSpecChanged Code = "STATE_SPEC_CHANGED"
	// WindowFnChanged: the window function type of a keyed step's input changed.
	WindowFnChanged Code = "WINDOW_FN_CHANGED"
	// TriggerChanged: the trigger of a keyed step's input changed shape.
	TriggerChanged Code = "TRIGGER_CHANGED"
	// AccumulationChanged: the accumulation mode of a keyed step's input changed.
	AccumulationChanged Code = "ACCUMULATION_CHANGED"
	// SideInputsChanged: a matched step gained or lost side inputs.
	SideInputsChanged Code = "SIDE_INPUTS_CHANGED"
	// SourceChanged: a source of OLD reads something else in NEW, or has no match.
	SourceChanged Code = "SOURCE_CHANGED"
	// CombineOutputsReordered: a YAML Combine's output moved to another
	// accumulator slot (the new version was loaded without the running
	// one's slots): it would carry another output's values.
	CombineOutputsReordered Code = "COMBINE_OUTPUTS_REORDERED"
	// CombineRenameUnknown: a Combine output declares renamed_from a name
	// the running Combine has no output of.
	CombineRenameUnknown Code = "COMBINE_RENAME_UNKNOWN"
	// RekeyFromMismatch: a Combine declares a re-key from other key
	// fields than the running step's key fields.
	RekeyFromMismatch Code = "REKEY_FROM_MISMATCH"
	// MappingUnknownStep (KindInvalid): a mapping names a step that does not exist.
	MappingUnknownStep Code = "MAPPING_UNKNOWN_STEP"
	// MappingConflict (KindInvalid): two steps of OLD map to one step name of NEW.
	MappingConflict Code = "MAPPING_CONFLICT"
)

// Codes of the compatibility check's warnings (AreaCompat, KindWarning):
// reported, the update goes ahead.
const (
	// WindowParamsChanged: only numbers of a keyed step's input windowing changed.
	WindowParamsChanged Code = "WINDOW_PARAMS_CHANGED"
	// CombineFnChanged: a combine's function changed, its accumulator coder did not.
	CombineFnChanged Code = "COMBINE_FN_CHANGED"
	// CombineOutputsChanged: a YAML Combine gained or lost outputs: the
	// kept outputs' accumulators carry on, new ones start empty in open
	// windows.
	CombineOutputsChanged Code = "COMBINE_OUTPUTS_CHANGED"
	// CombineOutputRenamed: a YAML Combine output has another name at the
	// same position without a declared renamed_from: its accumulator
	// carries on under the new name.
	CombineOutputRenamed Code = "COMBINE_OUTPUT_RENAMED"
	// CombineOutputWidened: a YAML Combine output's value field widened
	// from int to float under sum, min, max or mean: its stored
	// accumulators carry on, read as floats.
	CombineOutputWidened Code = "COMBINE_OUTPUT_WIDENED"
	// AccumulatorMigrated: a Go SDK combine's accumulator type changed and
	// the step declares the migration from the stored one
	// (weir.MigrateAccumulator): a warning.
	AccumulatorMigrated Code = "ACCUMULATOR_MIGRATED"
	// StateMigrated: the type of a Go SDK StatefulParDo's state cell
	// changed and the step declares the migration from the stored one
	// (weir.MigrateState): a warning.
	StateMigrated Code = "STATE_MIGRATED"
	// CombineOutputNarrowed: a YAML Combine output's value field narrowed
	// from float to int under sum, min, max or latest, declared with
	// allow_lossy: its stored accumulators carry on, truncated to ints.
	CombineOutputNarrowed Code = "COMBINE_OUTPUT_NARROWED"
	// CombineOutputConverted: a YAML Combine latest output's value field
	// became a string (from an int, a float, a bool or a timestamp): its
	// stored values carry on, read as their text.
	CombineOutputConverted Code = "COMBINE_OUTPUT_CONVERTED"
	// StateRekeyed: a YAML Combine declares a re-key from the running
	// step's key fields (migrations: rekey): every stored key moves to
	// its new key, colliding accumulators merge.
	StateRekeyed Code = "STATE_REKEYED"
	// SourcePositionsDropped: a source's read positions are dropped on purpose.
	SourcePositionsDropped Code = "SOURCE_POSITIONS_DROPPED"
	// StateDropped: a keyed step was mapped to "": its state is dropped.
	StateDropped Code = "STATE_DROPPED"
	// StoredWindowFieldsDropped: the rows a keyed step stores lose only
	// their window_start, window_end and pane fields (now element
	// metadata); stored rows are read without them.
	StoredWindowFieldsDropped Code = "STORED_WINDOW_FIELDS_DROPPED"
)

// Info is what the registry records of a code.
type Info struct {
	Code Code
	Area Area
	Kind Kind
	// Status is the HTTP status the API answers the code with (200 for a
	// warning, which is never an API error).
	Status int
}

// registry returns every registered code. It is a function, not a
// package variable, so nothing can change the registry at run time; the
// slice is small and only error paths read it.
func registry() []Info {
	const (
		svc    = AreaService
		ps     = AreaPubSub
		compat = AreaCompat
	)
	return []Info{
		{InvalidRequest, svc, KindInvalid, http.StatusBadRequest},
		{InvalidJobName, svc, KindInvalid, http.StatusBadRequest},
		{InvalidOptions, svc, KindInvalid, http.StatusBadRequest},
		{InvalidPipeline, svc, KindInvalid, http.StatusBadRequest},
		{PipelineBudgetExceeded, svc, KindInvalid, http.StatusBadRequest},
		{InvalidFilter, svc, KindInvalid, http.StatusBadRequest},
		{JobNotFound, svc, KindNotFound, http.StatusNotFound},
		{NotFound, svc, KindNotFound, http.StatusNotFound},
		{MethodNotAllowed, svc, KindInvalid, http.StatusMethodNotAllowed},
		{JobNameActive, svc, KindConflict, http.StatusConflict},
		{IllegalTransition, svc, KindConflict, http.StatusConflict},
		{JobTerminated, svc, KindConflict, http.StatusConflict},
		{BatchJobNotDrainable, svc, KindConflict, http.StatusConflict},
		{NoRunningJob, svc, KindNotFound, http.StatusNotFound},
		{JobAlreadyUpdated, svc, KindConflict, http.StatusConflict},
		{IncompatibleUpdate, svc, KindConflict, http.StatusConflict},
		{UpdateInProgress, svc, KindConflict, http.StatusConflict},
		{InvalidMapping, svc, KindInvalid, http.StatusBadRequest},
		{ShuttingDown, svc, KindUnavailable, http.StatusServiceUnavailable},
		{NoClusterLeader, svc, KindUnavailable, http.StatusServiceUnavailable},
		{ReadOnlyInspection, svc, KindConflict, http.StatusConflict},
		{ProgramChanged, svc, KindConflict, http.StatusConflict},
		{NotReleasable, svc, KindConflict, http.StatusConflict},
		{StorageUnavailable, svc, KindUnavailable, http.StatusServiceUnavailable},
		{Resuming, svc, KindUnavailable, http.StatusServiceUnavailable},
		{SinkUnavailable, svc, KindUnavailable, http.StatusServiceUnavailable},
		{ConnectorUnavailable, svc, KindUnavailable, http.StatusServiceUnavailable},
		{SnapshotNotFound, svc, KindNotFound, http.StatusNotFound},
		{JobNotSnapshottable, svc, KindConflict, http.StatusConflict},
		{InvalidTTL, svc, KindInvalid, http.StatusBadRequest},
		{SnapshotExists, svc, KindConflict, http.StatusConflict},
		{SnapshotCorrupt, svc, KindInvalid, http.StatusBadRequest},
		{SnapshotSDKMismatch, svc, KindConflict, http.StatusConflict},
		{SnapshotForeignPositions, svc, KindConflict, http.StatusConflict},
		{SnapshotSourceUnavailable, svc, KindConflict, http.StatusConflict},
		{Internal, svc, KindInternal, http.StatusInternalServerError},
		{Unauthenticated, svc, KindDenied, http.StatusUnauthorized},
		{RateLimited, svc, KindUnavailable, http.StatusTooManyRequests},
		{UnsupportedMediaType, svc, KindInvalid, http.StatusUnsupportedMediaType},
		{ForbiddenOrigin, svc, KindDenied, http.StatusForbidden},
		{InvalidHost, svc, KindDenied, http.StatusForbidden},
		{RequestTooLarge, svc, KindInvalid, http.StatusRequestEntityTooLarge},
		{LimitExceeded, svc, KindConflict, http.StatusConflict},
		{SQLIdentifierTooLong, svc, KindInvalid, http.StatusBadRequest},
		{PathNotAllowed, svc, KindInvalid, http.StatusBadRequest},
		{SQLHostNotAllowed, svc, KindInvalid, http.StatusBadRequest},
		{SQLSchemaChangeRefused, svc, KindConflict, http.StatusConflict},
		{TableNotFound, svc, KindNotFound, http.StatusNotFound},
		{StepNotFound, svc, KindNotFound, http.StatusNotFound},
		{TableNotStaged, svc, KindConflict, http.StatusConflict},
		{OutputExists, svc, KindConflict, http.StatusConflict},
		{ManifestNotFound, svc, KindNotFound, http.StatusNotFound},
		{ManifestExists, svc, KindConflict, http.StatusConflict},
		{ManifestChanged, svc, KindConflict, http.StatusConflict},
		{ScheduleNotFound, svc, KindNotFound, http.StatusNotFound},
		{ScheduleExists, svc, KindConflict, http.StatusConflict},
		{ScheduleConflict, svc, KindConflict, http.StatusConflict},
		{PartitionBusy, svc, KindConflict, http.StatusConflict},
		{UnknownServiceOption, svc, KindInvalid, http.StatusBadRequest},
		{InvalidServiceOption, svc, KindInvalid, http.StatusBadRequest},
		{ConflictingServiceOptions, svc, KindInvalid, http.StatusBadRequest},
		{RequestIDReused, svc, KindConflict, http.StatusConflict},
		{ReplaceTooSoon, svc, KindConflict, http.StatusConflict},
		{RewindBeyondRetention, svc, KindConflict, http.StatusConflict},
		{SourceNotRereadable, svc, KindConflict, http.StatusConflict},
		{ReplacementUnavailable, svc, KindConflict, http.StatusConflict},
		{ParityFailed, svc, KindConflict, http.StatusConflict},
		{NoRollbackSnapshot, svc, KindNotFound, http.StatusNotFound},
		{RollbackSnapshotExpired, svc, KindConflict, http.StatusConflict},
		{RollbackUnavailable, svc, KindConflict, http.StatusConflict},

		{TopicNotFound, ps, KindNotFound, http.StatusNotFound},
		{TopicExists, ps, KindConflict, http.StatusConflict},
		{SubscriptionNotFound, ps, KindNotFound, http.StatusNotFound},
		{SubscriptionExists, ps, KindConflict, http.StatusConflict},
		{InvalidName, ps, KindInvalid, http.StatusBadRequest},
		{InvalidConfig, ps, KindInvalid, http.StatusBadRequest},
		{PubSubUnavailable, ps, KindUnavailable, http.StatusServiceUnavailable},
		{MessageTooLarge, ps, KindInvalid, http.StatusRequestEntityTooLarge},
		{BrokerStorageFull, ps, KindUnavailable, http.StatusServiceUnavailable},
		{TopicInUse, ps, KindConflict, http.StatusConflict},
		{SubscriptionSnapshotNotFound, ps, KindNotFound, http.StatusNotFound},
		{SubscriptionSnapshotExists, ps, KindConflict, http.StatusConflict},
		{SnapshotExpiresTooSoon, ps, KindConflict, http.StatusConflict},
		{SnapshotTopicMismatch, ps, KindInvalid, http.StatusBadRequest},
		{SnapshotTooLarge, ps, KindConflict, http.StatusConflict},
		{SubscriptionInUse, ps, KindConflict, http.StatusConflict},

		{StepMissing, compat, KindConflict, http.StatusConflict},
		{StepKindChanged, compat, KindConflict, http.StatusConflict},
		{KeyCoderChanged, compat, KindConflict, http.StatusConflict},
		{StateCoderChanged, compat, KindConflict, http.StatusConflict},
		{BufferedElementChanged, compat, KindConflict, http.StatusConflict},
		{StateSpecChanged, compat, KindConflict, http.StatusConflict},
		{WindowFnChanged, compat, KindConflict, http.StatusConflict},
		{TriggerChanged, compat, KindConflict, http.StatusConflict},
		{AccumulationChanged, compat, KindConflict, http.StatusConflict},
		{SideInputsChanged, compat, KindConflict, http.StatusConflict},
		{SourceChanged, compat, KindConflict, http.StatusConflict},
		{CombineOutputsReordered, compat, KindConflict, http.StatusConflict},
		{CombineRenameUnknown, compat, KindConflict, http.StatusConflict},
		{RekeyFromMismatch, compat, KindConflict, http.StatusConflict},
		{MappingUnknownStep, compat, KindInvalid, http.StatusBadRequest},
		{MappingConflict, compat, KindInvalid, http.StatusBadRequest},
		{WindowParamsChanged, compat, KindWarning, http.StatusOK},
		{CombineFnChanged, compat, KindWarning, http.StatusOK},
		{CombineOutputsChanged, compat, KindWarning, http.StatusOK},
		{CombineOutputRenamed, compat, KindWarning, http.StatusOK},
		{CombineOutputWidened, compat, KindWarning, http.StatusOK},
		{AccumulatorMigrated, compat, KindWarning, http.StatusOK},
		{StateMigrated, compat, KindWarning, http.StatusOK},
		{CombineOutputNarrowed, compat, KindWarning, http.StatusOK},
		{CombineOutputConverted, compat, KindWarning, http.StatusOK},
		{StateRekeyed, compat, KindWarning, http.StatusOK},
		{SourcePositionsDropped, compat, KindWarning, http.StatusOK},
		{StateDropped, compat, KindWarning, http.StatusOK},
		{StoredWindowFieldsDropped, compat, KindWarning, http.StatusOK},
	}
}

// All returns every registered code, in registry order.
func All() []Info { return registry() }

// CodesOf returns the codes of area a, in registry order.
func CodesOf(a Area) []Code {
	var out []Code
	for _, in := range registry() {
		if in.Area == a {
			out = append(out, in.Code)
		}
	}
	return out
}

// Lookup returns what the registry records of c; ok is false for an
// unregistered code.
func Lookup(c Code) (info Info, ok bool) {
	for _, in := range registry() {
		if in.Code == c {
			return in, true
		}
	}
	return Info{}, false
}

// Kind returns the kind of c (KindInternal for an unregistered code).
func (c Code) Kind() Kind {
	if in, ok := Lookup(c); ok {
		return in.Kind
	}
	return KindInternal
}

// Status returns the HTTP status of c (500 for an unregistered code).
func (c Code) Status() int {
	if in, ok := Lookup(c); ok {
		return in.Status
	}
	return http.StatusInternalServerError
}
