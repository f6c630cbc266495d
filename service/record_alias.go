package service

import "github.com/weir-dev/weir/service/record"

// Temporary aliases while the records move to package record.
type CatchUp = record.CatchUp
type CheckpointInfo = record.CheckpointInfo
type Condition = record.Condition
type Event = record.Event
type EventType = record.EventType
type EventTypeInfo = record.EventTypeInfo
type FacadeTable = record.FacadeTable
type FlowProgress = record.FlowProgress
type Job = record.Job
type JobMetrics = record.JobMetrics
type JobOptions = record.JobOptions
type JobState = record.JobState
type JobType = record.JobType
type Lineage = record.Lineage
type OptionChange = record.OptionChange
type ParallelFlow = record.ParallelFlow
type ParallelSubscription = record.ParallelSubscription
type PubsubSnapshotMetadata = record.PubsubSnapshotMetadata
type Replacement = record.Replacement
type ReplacementPhase = record.ReplacementPhase
type RewindPoint = record.RewindPoint
type RewindSource = record.RewindSource
type Severity = record.Severity
type Snapshot = record.Snapshot
type SnapshotState = record.SnapshotState
type SourceCatchUp = record.SourceCatchUp
type StateChange = record.StateChange
type StepCounters = record.StepCounters
type StepMetrics = record.StepMetrics
type SubscriptionHandover = record.SubscriptionHandover
type Summary = record.Summary

const (
	DeliveryAtLeastOnce    = record.DeliveryAtLeastOnce
	DeliveryExactlyOnce    = record.DeliveryExactlyOnce
	EventCatchUpExpired    = record.EventCatchUpExpired
	EventCheckpointFailed  = record.EventCheckpointFailed
	EventConditionChanged  = record.EventConditionChanged
	EventDeadLetter        = record.EventDeadLetter
	EventLog               = record.EventLog
	EventRecovered         = record.EventRecovered
	EventReplacementPhase  = record.EventReplacementPhase
	EventRescaleFailed     = record.EventRescaleFailed
	EventRescaleSucceeded  = record.EventRescaleSucceeded
	EventSnapshotCreated   = record.EventSnapshotCreated
	EventSnapshotFailed    = record.EventSnapshotFailed
	EventStateChanged      = record.EventStateChanged
	EventUpdateFailed      = record.EventUpdateFailed
	EventUpdateRefused     = record.EventUpdateRefused
	EventUpdateSucceeded   = record.EventUpdateSucceeded
	EventUpdateValidated   = record.EventUpdateValidated
	MaxEventMessageBytes   = record.MaxEventMessageBytes
	MaxEventsPerJob        = record.MaxEventsPerJob
	MaxJobNameLength       = record.MaxJobNameLength
	MaxNumWorkers          = record.MaxNumWorkers
	PhaseCutOver           = record.PhaseCutOver
	PhaseDrainingOld       = record.PhaseDrainingOld
	PhaseFailed            = record.PhaseFailed
	PhaseOverlap           = record.PhaseOverlap
	PhasePreparing         = record.PhasePreparing
	PhaseRolledBack        = record.PhaseRolledBack
	SDKGo                  = record.SDKGo
	SeverityError          = record.SeverityError
	SeverityInfo           = record.SeverityInfo
	SeverityWarning        = record.SeverityWarning
	SnapshotDeleted        = record.SnapshotDeleted
	SnapshotFailed         = record.SnapshotFailed
	SnapshotKindRollback   = record.SnapshotKindRollback
	SnapshotPending        = record.SnapshotPending
	SnapshotReady          = record.SnapshotReady
	SnapshotRunning        = record.SnapshotRunning
	StateCancelled         = record.StateCancelled
	StateCancelling        = record.StateCancelling
	StateDone              = record.StateDone
	StateDrained           = record.StateDrained
	StateDraining          = record.StateDraining
	StateFailed            = record.StateFailed
	StatePending           = record.StatePending
	StateRunning           = record.StateRunning
	StateUpdated           = record.StateUpdated
	StrategyParallel       = record.StrategyParallel
	StrategyRollback       = record.StrategyRollback
	StrategyStopAndReplace = record.StrategyStopAndReplace
	TypeBatch              = record.TypeBatch
	TypeStreaming          = record.TypeStreaming
)

// ValidateJobName is record.ValidateJobName.
func ValidateJobName(name string) error { return record.ValidateJobName(name) }

// EventTypes is record.EventTypes.
func EventTypes() []record.EventTypeInfo { return record.EventTypes() }
