package service

import "github.com/weir-dev/weir/service/internal/core"

// Temporary aliases while the service's core moves to package core.
type Attempt = core.Attempt
type CheckpointHistograms = core.CheckpointHistograms
type DeadLetterPublisher = core.DeadLetterPublisher
type HistogramSnapshot = core.HistogramSnapshot
type History = core.History
type HistoryQuery = core.HistoryQuery
type HistorySeries = core.HistorySeries
type JobSource = core.JobSource
type ProgramLoader = core.ProgramLoader
type Progress = core.Progress
type PubSubUse = core.PubSubUse
type Run = core.Run
type Status = core.Status
type SubmitRequest = core.SubmitRequest
type Tx = core.Tx
type UpdateRequest = core.UpdateRequest
type UpdateResult = core.UpdateResult
type SourcePlacement = core.SourcePlacement
type Hooks = core.Hooks

const (
	DefaultCheckpointInterval   = core.DefaultCheckpointInterval
	DefaultDataDir              = core.DefaultDataDir
	DefaultMinReplaceInterval   = core.DefaultMinReplaceInterval
	DefaultRollbackRetention    = core.DefaultRollbackRetention
	DefaultStorageRetryInterval = core.DefaultStorageRetryInterval
	HistBacklogElements         = core.HistBacklogElements
	HistCheckpointDuration      = core.HistCheckpointDuration
	HistCheckpointSizeBytes     = core.HistCheckpointSizeBytes
	HistDeadLetters             = core.HistDeadLetters
	HistElementsIn              = core.HistElementsIn
	HistElementsOut             = core.HistElementsOut
	HistElementsPerSecond       = core.HistElementsPerSecond
	HistSourceElementsIn        = core.HistSourceElementsIn
	HistSystemLag               = core.HistSystemLag
	HistThroughput              = core.HistThroughput
	HistWatermarkAge            = core.HistWatermarkAge
	HistoryBytesPerJob          = core.HistoryBytesPerJob
	HistoryCoarsePoints         = core.HistoryCoarsePoints
	HistoryCoarseResolution     = core.HistoryCoarseResolution
	HistoryFinePoints           = core.HistoryFinePoints
	HistoryFineResolution       = core.HistoryFineResolution
	HistorySeriesBytes          = core.HistorySeriesBytes
	MaxHistorySeries            = core.MaxHistorySeries
	StatusActive                = core.StatusActive
	StatusAll                   = core.StatusAll
	StatusTerminated            = core.StatusTerminated
)

// ParseStatus is core.ParseStatus.
func ParseStatus(v string) (Status, error) { return core.ParseStatus(v) }
