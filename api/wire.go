package api

import (
	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service"
	"github.com/weir-dev/weir/service/record"
)

// The API's edge: the service's records (and the compatibility report,
// the broker's subscription snapshots) become package client's wire types
// here, field for field, so that the JSON a client reads is the JSON the
// records would marshal to (wire_test.go pins it byte for byte) while a
// client links none of the server. A field added to a record needs its
// twin in package client and a line here; TestWireJSONIdentical fails
// until both exist.

// serviceOptions is the service's form of a request's job options.
func serviceOptions(o client.JobOptions) record.JobOptions {
	return record.JobOptions{NumWorkers: o.NumWorkers, MinNumWorkers: o.MinNumWorkers,
		MaxNumWorkers: o.MaxNumWorkers, WorkerUtilizationHint: o.WorkerUtilizationHint, AutoscalingAlgorithm: o.AutoscalingAlgorithm}
}

// serviceSubmit is the service's form of a submission.
func serviceSubmit(r client.SubmitRequest) service.SubmitRequest {
	return service.SubmitRequest{Name: r.Name, Pipeline: r.Pipeline, PipelineFile: r.PipelineFile,
		BaseDir: r.BaseDir, Options: serviceOptions(r.Options), ServiceOptions: r.ServiceOptions, RequestID: r.RequestID,
		Partition: r.Partition, Manifest: r.Manifest, Shadow: r.Shadow}
}

// wireState is a job state's name.
func wireState(s record.JobState) client.JobState { return client.JobState(s.String()) }

// wirePtr converts *in with f; nil stays nil.
func wirePtr[A, B any](in *A, f func(A) B) *B {
	if in == nil {
		return nil
	}
	out := f(*in)
	return &out
}

// wireSlice converts every element with f; nil stays nil and empty stays
// empty (null and [] differ on the wire).
func wireSlice[A, B any](in []A, f func(A) B) []B {
	if in == nil {
		return nil
	}
	out := make([]B, len(in))
	for i := range in {
		out[i] = f(in[i])
	}
	return out
}

// wireMap converts every value with f; nil stays nil.
func wireMap[K comparable, A, B any](in map[K]A, f func(A) B) map[K]B {
	if in == nil {
		return nil
	}
	out := make(map[K]B, len(in))
	for k, v := range in {
		out[k] = f(v)
	}
	return out
}

// wireJobPtr converts a job record; nil stays nil.
func wireJobPtr(j *record.Job) *client.Job { return wirePtr(j, wireJob) }

// wireSnapshotPtr converts a snapshot record; nil stays nil.
func wireSnapshotPtr(s *record.Snapshot) *client.Snapshot { return wirePtr(s, wireSnapshot) }

func wireJob(in record.Job) client.Job {
	return client.Job{
		ID:                    in.ID,
		Name:                  in.Name,
		Type:                  client.JobType(in.Type),
		State:                 wireState(in.State),
		CreateTime:            in.CreateTime,
		StateTime:             in.StateTime,
		Generation:            in.Generation,
		SDK:                   in.SDK,
		Program:               in.Program,
		Pipeline:              in.Pipeline,
		PipelineFile:          in.PipelineFile,
		BaseDir:               in.BaseDir,
		Graph:                 in.Graph,
		Options:               wireJobOptions(in.Options),
		ReplacesJobID:         in.ReplacesJobID,
		ReplacedByJobID:       in.ReplacedByJobID,
		Replacement:           wirePtr(in.Replacement, wireReplacement),
		CatchUp:               wirePtr(in.CatchUp, wireCatchUp),
		StateLineage:          in.StateLineage,
		Subscriptions:         in.Subscriptions,
		CreatedFromSnapshotID: in.CreatedFromSnapshotID,
		TransformNameMapping:  in.TransformNameMapping,
		Partition:             in.Partition,
		Manifest:              in.Manifest,
		ManifestDigest:        in.ManifestDigest,
		Shadow:                in.Shadow,
		Error:                 in.Error,
		LastCheckpoint:        wirePtr(in.LastCheckpoint, wireCheckpointInfo),
		Checkpointing:         in.Checkpointing,
		CheckpointNote:        in.CheckpointNote,
		InputStart:            in.InputStart,
		InputStartNote:        in.InputStartNote,
		Delivery:              in.Delivery,
		DeliveryNote:          in.DeliveryNote,
		DeadLetters:           in.DeadLetters,
		LastDeadLetter:        in.LastDeadLetter,
		History:               wireSlice(in.History, wireStateChange),
		Counters:              wireMap(in.Counters, wireStepCounters),
		Metrics:               wirePtr(in.Metrics, wireJobMetrics),
		PendingCommit:         in.PendingCommit,
		Condition:             wirePtr(in.Condition, wireCondition),
	}
}

func wireSummary(in record.Summary) client.Summary {
	return client.Summary{
		ID:              in.ID,
		Name:            in.Name,
		Type:            client.JobType(in.Type),
		State:           wireState(in.State),
		CreateTime:      in.CreateTime,
		StateTime:       in.StateTime,
		Generation:      in.Generation,
		ReplacesJobID:   in.ReplacesJobID,
		ReplacedByJobID: in.ReplacedByJobID,
		Error:           in.Error,
	}
}

func wireEvent(in record.Event) client.Event {
	return client.Event{
		Seq:      in.Seq,
		Time:     in.Time,
		Type:     client.EventType(in.Type),
		Severity: client.Severity(in.Severity),
		Message:  in.Message,
		Details:  in.Details,
	}
}

func wireMetricsHistory(in service.History) client.MetricsHistory {
	return client.MetricsHistory{
		JobID:      in.JobID,
		Resolution: in.Resolution,
		From:       in.From,
		To:         in.To,
		Series:     wireSlice(in.Series, wireMetricsSeries),
	}
}

func wireSnapshot(in record.Snapshot) client.Snapshot {
	return client.Snapshot{
		ID:              in.ID,
		SourceJobID:     in.SourceJobID,
		JobName:         in.JobName,
		Generation:      in.Generation,
		CreationTime:    in.CreationTime,
		TTL:             in.TTL,
		ExpireTime:      in.ExpireTime,
		State:           client.SnapshotState(in.State),
		StateTime:       in.StateTime,
		Description:     in.Description,
		DiskSizeBytes:   in.DiskSizeBytes,
		FailureReason:   in.FailureReason,
		PubsubMetadata:  wireSlice(in.PubsubMetadata, wirePubsubSnapshotMetadata),
		SDK:             in.SDK,
		Graph:           in.Graph,
		Epoch:           in.Epoch,
		Positions:       in.Positions,
		SinkEpoch:       in.SinkEpoch,
		Kind:            in.Kind,
		ReplacedByJobID: in.ReplacedByJobID,
		Broker:          wirePtr(in.Broker, wireSnapshotBroker),
		Steps: wireSlice(in.Steps, func(st record.SnapshotStep) client.SnapshotStep {
			return client.SnapshotStep{Name: st.Name, Keys: st.Keys, OpenWindows: st.OpenWindows}
		}),
	}
}

func wireSnapshotBroker(in record.SnapshotBroker) client.SnapshotBroker {
	return client.SnapshotBroker{ID: in.ID, Sources: wireSlice(in.Sources, func(r record.SnapshotSourceRange) client.SnapshotSourceRange {
		return client.SnapshotSourceRange{Step: r.Step, Subscription: r.Subscription, Topic: r.Topic, Seq: r.Seq, FirstSeq: r.FirstSeq, LastSeq: r.LastSeq}
	})}
}

func wireSourcePlacement(in service.SourcePlacement) client.SourcePlacement {
	return client.SourcePlacement{Step: in.Step, Subscription: in.Subscription, Topic: in.Topic, Translation: in.Translation,
		StartSeq: in.StartSeq, Note: in.Note}
}

func wireAttempt(in service.Attempt) client.Attempt {
	return client.Attempt{
		Time:         in.Time,
		Name:         in.Name,
		RunningJobID: in.RunningJobID,
		ValidateOnly: in.ValidateOnly,
		Report:       wireCompatReport(in.Report),
		Pipeline:     in.Pipeline,
		Rehearsal:    wirePtr(in.Rehearsal, wireRehearsalVerdict),
	}
}

func wireRehearsalVerdict(in record.RehearsalVerdict) client.RehearsalVerdict {
	return client.RehearsalVerdict{Passed: in.Passed, Since: in.Since, Elements: in.Elements, RowsCompared: in.RowsCompared,
		Differences: in.Differences, Noise: in.Noise, Budget: in.Budget, Examples: in.Examples,
		TraceBytes: in.TraceBytes, TraceSpilledBytes: in.TraceSpilledBytes}
}

func wireGenerationHistory(in service.GenerationHistory) client.GenerationHistory {
	return client.GenerationHistory{
		Generation:             in.Generation,
		JobID:                  in.JobID,
		State:                  wireState(in.State),
		CreateTime:             in.CreateTime,
		StateTime:              in.StateTime,
		How:                    in.How,
		ReplacesJobID:          in.ReplacesJobID,
		ReplacedByJobID:        in.ReplacedByJobID,
		FromSnapshotID:         in.FromSnapshotID,
		RolledBackToGeneration: in.RolledBackToGeneration,
		Phases:                 wireSlice(in.Phases, wirePhaseTime),
		StopWindowMillis:       in.StopWindowMillis,
		ParityGate:             wirePtr(in.ParityGate, wireParityGate),
		Rescales:               wireSlice(in.Rescales, wireStateChange),
		RollbackPoints:         wireSlice(in.RollbackPoints, wireRollbackPoint),
		Notes:                  in.Notes,
		Error:                  in.Error,
		JobName:                in.JobName,
	}
}

func wireRollbackResult(in service.RollbackResult) client.RollbackResult {
	return client.RollbackResult{
		Job:           wirePtr(in.Job, wireJob),
		Current:       wirePtr(in.Current, wireSummary),
		Snapshot:      wirePtr(in.Snapshot, wireSnapshot),
		ToGeneration:  in.ToGeneration,
		NewGeneration: in.NewGeneration,
		Sources:       wireSlice(in.Sources, wireRollbackSource),
		Windows:       wireSlice(in.Windows, wireRollbackWindows),
		ValidateOnly:  in.ValidateOnly,
		Notes:         in.Notes,
	}
}

func wireJobOptions(in record.JobOptions) client.JobOptions {
	return client.JobOptions{
		NumWorkers:            in.NumWorkers,
		MinNumWorkers:         in.MinNumWorkers,
		MaxNumWorkers:         in.MaxNumWorkers,
		WorkerUtilizationHint: in.WorkerUtilizationHint,
		AutoscalingAlgorithm:  in.AutoscalingAlgorithm,
	}
}

func wireOptionChange(in record.OptionChange) client.OptionChange {
	return client.OptionChange{
		Option: in.Option,
		From:   in.From,
		To:     in.To,
	}
}

func wireCompatReport(in compat.Report) client.CompatReport {
	return client.CompatReport{
		Compatible:   in.Compatible,
		Errors:       wireSlice(in.Errors, wireFinding),
		Warnings:     wireSlice(in.Warnings, wireFinding),
		DroppedState: wireSlice(in.DroppedState, wireDroppedState),
		Matches:      wireSlice(in.Matches, wireMatch),
	}
}

func wireSubscriptionSnapshot(in pubsub.SubscriptionSnapshot) client.SubscriptionSnapshot {
	return client.SubscriptionSnapshot{
		Name:         in.Name,
		Topic:        in.Topic,
		Subscription: in.Subscription,
		AckFloor:     in.AckFloor,
		Acked:        wireSlice(in.Acked, wireSeqRange),
		CreateTime:   in.CreateTime,
		ExpireTime:   in.ExpireTime,
		Labels:       in.Labels,
	}
}

func wireSeekResult(in pubsub.SeekResult) client.SeekResult {
	return client.SeekResult{
		Subscription: in.Subscription,
		Topic:        in.Topic,
		AckFloor:     in.AckFloor,
		Backlog:      in.Backlog,
	}
}

func wireCoder(in graph.Coder) client.Coder {
	return client.Coder{
		URN:        in.URN,
		Version:    in.Version,
		Params:     in.Params,
		Components: wireSlice(in.Components, wireCoder),
		Fields:     wireSlice(in.Fields, wireCoderField),
	}
}

func wireReplacement(in record.Replacement) client.Replacement {
	return client.Replacement{
		Strategy:             in.Strategy,
		Phase:                client.ReplacementPhase(in.Phase),
		PhaseTime:            in.PhaseTime,
		StopWindowMillis:     in.StopWindowMillis,
		OldJobID:             in.OldJobID,
		NewJobID:             in.NewJobID,
		MaxStopMillis:        in.MaxStopMillis,
		HasMaxStop:           in.HasMaxStop,
		CancelOnDrainTimeout: in.CancelOnDrainTimeout,
		Preallocate:          in.Preallocate,
		Rewind:               in.Rewind,
		DrainStart:           in.DrainStart,
		DrainTimedOut:        in.DrainTimedOut,
		Notes:                in.Notes,
		Parallel:             wirePtr(in.Parallel, wireParallelFlow),
		RewindPoint:          wirePtr(in.RewindPoint, wireRewindPoint),
		Handover:             wireSlice(in.Handover, wireSubscriptionHandover),
	}
}

func wireCatchUp(in record.CatchUp) client.CatchUp {
	return client.CatchUp{
		FromJobID:   in.FromJobID,
		RewindPoint: wirePtr(in.RewindPoint, wireRewindPoint),
		Starts:      wireMap(in.Starts, wireRewindStart),
	}
}

func wireCheckpointInfo(in record.CheckpointInfo) client.CheckpointInfo {
	return client.CheckpointInfo{
		Epoch: in.Epoch,
		Time:  in.Time,
	}
}

func wireStateChange(in record.StateChange) client.StateChange {
	return client.StateChange{
		State:  wireState(in.State),
		Time:   in.Time,
		Reason: in.Reason,
	}
}

func wireStepCounters(in record.StepCounters) client.StepCounters {
	return client.StepCounters{
		ElementsIn:          in.ElementsIn,
		ElementsOut:         in.ElementsOut,
		Rejects:             in.Rejects,
		RejectsByReason:     in.RejectsByReason,
		DroppedLateElements: in.DroppedLateElements,
	}
}

func wireJobMetrics(in record.JobMetrics) client.JobMetrics {
	return client.JobMetrics{
		Time:                                  in.Time,
		DataWatermark:                         in.DataWatermark,
		DataWatermarkAgeSeconds:               in.DataWatermarkAgeSeconds,
		SystemLagSeconds:                      in.SystemLagSeconds,
		BacklogElements:                       in.BacklogElements,
		BacklogBytes:                          in.BacklogBytes,
		EstimatedBacklogProcessingTimeSeconds: in.EstimatedBacklogProcessingTimeSeconds,
		DeadLetters:                           in.DeadLetters,
		SinkWaitSeconds:                       in.SinkWaitSeconds,
		SinkBufferedBytes:                     in.SinkBufferedBytes,
		Steps:                                 wireSlice(in.Steps, wireStepMetrics),
	}
}

func wireCondition(in record.Condition) client.Condition {
	return client.Condition{
		Code:    in.Code,
		Message: in.Message,
		Since:   in.Since,
	}
}

func wireMetricsSeries(in service.HistorySeries) client.MetricsSeries {
	return client.MetricsSeries{
		Step:   in.Step,
		Metric: in.Metric,
		Points: in.Points,
	}
}

func wirePubsubSnapshotMetadata(in record.PubsubSnapshotMetadata) client.PubsubSnapshotMetadata {
	return client.PubsubSnapshotMetadata{
		Subscription: in.Subscription,
		Topic:        in.Topic,
		SnapshotName: in.SnapshotName,
		ExpireTime:   in.ExpireTime,
	}
}

func wirePhaseTime(in service.PhaseTime) client.PhaseTime {
	return client.PhaseTime{
		Phase: client.ReplacementPhase(in.Phase),
		Time:  in.Time,
	}
}

func wireRollbackPoint(in service.RollbackPoint) client.RollbackPoint {
	return client.RollbackPoint{
		SnapshotID:      in.SnapshotID,
		State:           client.SnapshotState(in.State),
		CreateTime:      in.CreateTime,
		ExpireTime:      in.ExpireTime,
		ReplacedByJobID: in.ReplacedByJobID,
	}
}

func wireRollbackSource(in service.RollbackSource) client.RollbackSource {
	return client.RollbackSource{
		Step:             in.Step,
		Subscription:     in.Subscription,
		Topic:            in.Topic,
		FromSeq:          in.FromSeq,
		LastSeq:          in.LastSeq,
		Messages:         in.Messages,
		Retained:         in.Retained,
		FirstRetainedSeq: in.FirstRetainedSeq,
	}
}

func wireRollbackWindows(in service.RollbackWindows) client.RollbackWindows {
	return client.RollbackWindows{
		Step:          in.Step,
		Windowing:     in.Windowing,
		KeysWithState: in.KeysWithState,
		Recomputed:    in.Recomputed,
	}
}

func wireFinding(in compat.Finding) client.Finding {
	return client.Finding{
		Step:   in.Step,
		Code:   in.Code,
		Reason: in.Reason,
		Fix:    in.Fix,
	}
}

func wireDroppedState(in compat.DroppedState) client.DroppedState {
	return client.DroppedState{
		Step:        in.Step,
		Kind:        client.StepKind(in.Kind),
		What:        in.What,
		KeyCoder:    wirePtr(in.KeyCoder, wireCoder),
		StoredCoder: wirePtr(in.StoredCoder, wireCoder),
		State:       wireSlice(in.State, wireStateSpec),
		Timers:      wireSlice(in.Timers, wireTimerSpec),
		Source:      wirePtr(in.Source, wireIOIdentity),
	}
}

func wireMatch(in compat.Match) client.Match {
	return client.Match{
		Old:  in.Old,
		New:  in.New,
		Kind: client.StepKind(in.Kind),
	}
}

func wireSeqRange(in pubsub.SeqRange) client.SeqRange {
	return client.SeqRange{First: in.First, Last: in.Last}
}

func wireCoderField(in graph.Field) client.CoderField {
	return client.CoderField{
		Name: in.Name,
		Type: in.Type,
	}
}

func wireParallelFlow(in record.ParallelFlow) client.ParallelFlow {
	return client.ParallelFlow{
		MinParallelMillis: in.MinParallelMillis,
		OverlapStart:      in.OverlapStart,
		CutTime:           in.CutTime,
		CutSpanMillis:     in.CutSpanMillis,
		WaitWatermark:     in.WaitWatermark,
		Subscriptions:     wireSlice(in.Subscriptions, wireParallelSubscription),
		Tables:            wireSlice(in.Tables, wireFacadeTable),
		OldEnded:          in.OldEnded,
		Compacted:         in.Compacted,
		RollbackReason:    in.RollbackReason,
		Gate:              wirePtr(in.Gate, wireParityGate),
		Progress:          wirePtr(in.Progress, wireFlowProgress),
	}
}

func wireParityGate(in record.ParityGate) client.ParityGate {
	return client.ParityGate{
		Budget:         in.Budget,
		Windows:        in.Windows,
		DeadlineMillis: in.DeadlineMillis,
		Outcome:        client.GateOutcome(in.Outcome),
		DecisionTime:   in.DecisionTime,
		Revealed:       in.Revealed,
		Last:           wireParityFigures(in.Last),
		Report:         in.Report,
	}
}

func wireParityFigures(in record.ParityFigures) client.ParityFigures {
	return client.ParityFigures{
		WindowsCompared: in.WindowsCompared,
		RowsCompared:    in.RowsCompared,
		Differing:       in.Differing,
		Agreed:          in.Agreed,
		NewestWindowEnd: in.NewestWindowEnd,
		OldWatermark:    in.OldWatermark,
		NewWatermark:    in.NewWatermark,
		Examples:        in.Examples,
	}
}

func wireRewindPoint(in record.RewindPoint) client.RewindPoint {
	return client.RewindPoint{
		Watermark:  in.Watermark,
		FromTime:   in.FromTime,
		SkipBefore: in.SkipBefore,
		Sources:    wireSlice(in.Sources, wireRewindSource),
	}
}

func wireSubscriptionHandover(in record.SubscriptionHandover) client.SubscriptionHandover {
	return client.SubscriptionHandover{
		Step:       in.Step,
		Topic:      in.Topic,
		Old:        in.Old,
		New:        in.New,
		InsteadOf:  in.InsteadOf,
		Positioned: in.Positioned,
		OldDeleted: in.OldDeleted,
	}
}

func wireRewindStart(in contract.RewindStart) client.RewindStart {
	return client.RewindStart{
		SkipBefore: int64(in.SkipBefore),
		Watermark:  int64(in.Watermark),
		HoldUntil:  in.HoldUntil,
		FromSeq:    in.FromSeq,
	}
}

func wireStepMetrics(in record.StepMetrics) client.StepMetrics {
	return client.StepMetrics{
		Name:                    in.Name,
		ElementsIn:              in.ElementsIn,
		ElementsOut:             in.ElementsOut,
		Rejects:                 in.Rejects,
		RejectsByReason:         in.RejectsByReason,
		DroppedLateElements:     in.DroppedLateElements,
		Watermark:               in.Watermark,
		WatermarkMillis:         in.WatermarkMillis,
		DataWatermarkAgeSeconds: in.DataWatermarkAgeSeconds,
		ThroughputPerSecond:     in.ThroughputPerSecond,
		SystemLagSeconds:        in.SystemLagSeconds,
		BacklogElements:         in.BacklogElements,
		RewindSkippedElements:   in.RewindSkippedElements,
		DuplicateIDConflicts:    in.DuplicateIDConflicts,
		CatchUp:                 wirePtr(in.CatchUp, wireSourceCatchUp),
		PendingTimers:           in.PendingTimers,
		Keys:                    in.Keys,
		StateBytes:              in.StateBytes,
		StateBytesEstimated:     in.StateBytesEstimated,
		OpenWindows:             in.OpenWindows,
		OpenWindowsEstimated:    in.OpenWindowsEstimated,
		UserMetrics:             wireSlice(in.UserMetrics, wireUserMetric),
	}
}

func wireUserMetric(in record.UserMetric) client.UserMetric {
	return client.UserMetric{Namespace: in.Namespace, Name: in.Name, Kind: in.Kind, Value: in.Value,
		Count: in.Count, Sum: in.Sum, Min: in.Min, Max: in.Max}
}

func wireStateSpec(in graph.StateSpec) client.StateSpec {
	return client.StateSpec{
		ID:    in.ID,
		Kind:  client.StateKind(in.Kind),
		Coder: wireCoder(in.Coder),
	}
}

func wireTimerSpec(in graph.TimerSpec) client.TimerSpec {
	return client.TimerSpec{
		ID:     in.ID,
		Domain: client.TimeDomain(in.Domain),
	}
}

func wireIOIdentity(in graph.IOIdentity) client.IOIdentity {
	return client.IOIdentity{
		Kind:     in.Kind,
		Identity: in.Identity,
		Bounded:  in.Bounded,
	}
}

func wireParallelSubscription(in record.ParallelSubscription) client.ParallelSubscription {
	return client.ParallelSubscription{
		Step:       in.Step,
		Topic:      in.Topic,
		Old:        in.Old,
		New:        in.New,
		Positioned: in.Positioned,
		OldDeleted: in.OldDeleted,
		OldNamed:   in.OldNamed,
		InsteadOf:  in.InsteadOf,
	}
}

func wireFacadeTable(in record.FacadeTable) client.FacadeTable {
	return client.FacadeTable{
		Driver:   in.Driver,
		DSN:      in.DSN,
		Table:    in.Table,
		OldEnded: in.OldEnded,
	}
}

func wireFlowProgress(in record.FlowProgress) client.FlowProgress {
	return client.FlowProgress{
		ElapsedMillis:        in.ElapsedMillis,
		MinParallelMillis:    in.MinParallelMillis,
		OldWatermark:         in.OldWatermark,
		CutOverWatermark:     in.CutOverWatermark,
		WaitingForOldMessage: in.WaitingForOldMessage,
	}
}

func wireRewindSource(in record.RewindSource) client.RewindSource {
	return client.RewindSource{
		Step:          in.Step,
		Topic:         in.Topic,
		Subscription:  in.Subscription,
		FirstSequence: in.FirstSequence,
		LastSequence:  in.LastSequence,
		FromTime:      in.FromTime,
	}
}

func wireSourceCatchUp(in record.SourceCatchUp) client.SourceCatchUp {
	return client.SourceCatchUp{
		ReadSequence:    in.ReadSequence,
		HoldUntil:       in.HoldUntil,
		CaughtUp:        in.CaughtUp,
		ExpiredMessages: in.ExpiredMessages,
	}
}
