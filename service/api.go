package service

import (
	"context"
	"io"
	"time"

	"github.com/weir-dev/weir/service/internal/replace"
	"github.com/weir-dev/weir/service/record"
)

// This file is the service's public API that the core and the flows
// answer; Submit, Update and Rollback (top.go, rollback_request.go) and
// LineageHistory (lineage_history.go) are the service's own.

// Recovered returns a channel closed once every job that was active when
// the service opened has resumed (or failed to, which its record says).
func (s *Service) Recovered() <-chan struct{} { return s.core.Recovered() }

// DataDir returns the absolute data directory.
func (s *Service) DataDir() string { return s.core.DataDir() }

// Close checkpoints every running job (write and commit), stops its
// execution and closes the store. The jobs stay RUNNING (or DRAINING) in
// the registry and resume on the next Open. ctx bounds the wait.
func (s *Service) Close(ctx context.Context) error { return s.core.Close(ctx) }

// Get returns the job with ID or name ref (a name means its active job,
// or its latest job when none is active). It takes no lock: it never
// waits for a handover, a rescale or a checkpoint.
func (s *Service) Get(ref string) (*record.Job, error) { return s.core.Get(ref) }

// List returns the jobs matching status, newest first. It takes no lock.
func (s *Service) List(status Status) ([]*record.Job, error) { return s.core.List(status) }

// Drain asks the job ref to drain: its sources stop reading, every open
// window fires and the job becomes DRAINED. Draining a DRAINING job is
// harmless; draining a batch job or a terminal job is an error.
func (s *Service) Drain(ctx context.Context, ref string) (*record.Job, error) {
	return s.core.Drain(ctx, ref)
}

// Cancel asks the job ref to stop as fast as possible: work not covered by
// a committed checkpoint is discarded (its messages stay unacknowledged in
// their subscription) and the job becomes CANCELLED.
func (s *Service) Cancel(ctx context.Context, ref string) (*record.Job, error) {
	return s.core.Cancel(ctx, ref)
}

// UpdateOptions changes the options of a running (or draining) job in
// flight; a new worker count rescales it (same job ID, no state lost).
func (s *Service) UpdateOptions(ctx context.Context, ref string, opts record.JobOptions) (*record.Job, error) {
	return s.core.UpdateOptions(ctx, ref, opts)
}

// Metrics returns the metrics of job ref: live for a running job, final
// for a terminal one (nil when it never ran).
func (s *Service) Metrics(ref string) (*record.JobMetrics, error) { return s.core.Metrics(ref) }

// DescribeMetrics is Metrics with, for a running job, the size of each
// keyed step's stored state, read from the store: for a job's
// description.
func (s *Service) DescribeMetrics(ref string) (*record.JobMetrics, error) {
	return s.core.DescribeMetrics(ref)
}

// ElementsRead returns how far the live execution of job name has read,
// without waiting for any lock; ok is false when no execution of the name
// is live.
func (s *Service) ElementsRead(name string) (Progress, bool) { return s.core.ElementsRead(name) }

// RunningMetrics returns the live metrics of every running job, keyed by
// job; for the Prometheus endpoint.
func (s *Service) RunningMetrics() map[record.Summary]*record.JobMetrics {
	return s.core.RunningMetrics()
}

// History lists every job of a name, oldest first, and every recorded
// update attempt that the check refused or only validated.
func (s *Service) History(name string) ([]*record.Job, []Attempt, error) { return s.core.History(name) }

// WaitJob waits until job id is terminal (or ctx ends) and returns it.
func (s *Service) WaitJob(ctx context.Context, id string) (*record.Job, error) {
	return s.core.WaitJob(ctx, id)
}

// Events returns the events of job ref with a sequence number above
// after, oldest first, at most limit of them (0: all the job keeps).
func (s *Service) Events(ref string, after uint64, limit int) (*record.Job, []record.Event, error) {
	return s.core.Events(ref, after, limit)
}

// FollowEvents calls fn with the events of job ref after seq after, in
// order, as they are recorded, until the job is terminal and every event
// is delivered, ctx ends, or fn fails.
func (s *Service) FollowEvents(ctx context.Context, ref string, after uint64, fn func([]record.Event) error) error {
	return s.core.FollowEvents(ctx, ref, after, fn)
}

// MetricsHistory returns the metrics history of job ref (its name's
// lineage) that q asks for.
func (s *Service) MetricsHistory(ref string, q HistoryQuery) (*History, error) {
	return s.core.MetricsHistory(ref, q)
}

// CheckpointHistograms returns the checkpoint duration and size
// histograms of every job with a live execution; for Prometheus.
func (s *Service) CheckpointHistograms() map[string]CheckpointHistograms {
	return s.core.CheckpointHistograms()
}

// PubSubUsers returns the active jobs that read topic (or subscription
// sub), for the broker's refusals (TOPIC_IN_USE, SUBSCRIPTION_IN_USE).
func (s *Service) PubSubUsers(topic, sub string) ([]PubSubUse, error) {
	return s.core.PubSubUsers(topic, sub)
}

// SubscriptionUse is replace.SubscriptionUse.
type SubscriptionUse = replace.SubscriptionUse

// SubscriptionUses says, for every subscription the service made for a
// job, who made it, who reads it and why it is kept (replace.SubscriptionUse).
func (s *Service) SubscriptionUses() (map[string]SubscriptionUse, error) {
	return s.replace.SubscriptionUses()
}

// ActiveSources returns the Pub/Sub sources of every active job.
func (s *Service) ActiveSources() ([]JobSource, error) { return s.core.ActiveSources() }

// CreateSnapshot takes a snapshot of a RUNNING streaming job (see package
// snapshots): it returns once the cut is taken.
func (s *Service) CreateSnapshot(ctx context.Context, req SnapshotRequest) (*record.Snapshot, error) {
	return s.snaps.CreateSnapshot(ctx, req)
}

// GetSnapshot returns snapshot id (a deleted one reads DELETED).
func (s *Service) GetSnapshot(id string) (*record.Snapshot, error) { return s.snaps.GetSnapshot(id) }

// ListSnapshots returns the snapshots of job ref (an ID: that job's; a
// name: those of every job of the name; "": all), newest first; DELETED
// ones only with all.
func (s *Service) ListSnapshots(ref string, all bool) ([]*record.Snapshot, error) {
	return s.snaps.ListSnapshots(ref, all)
}

// DeleteSnapshot deletes snapshot id: its data goes at once, its record
// stays as a DELETED tombstone.
func (s *Service) DeleteSnapshot(id string) (*record.Snapshot, error) {
	return s.snaps.DeleteSnapshot(id)
}

// WaitSnapshot waits until snapshot id is READY, FAILED or DELETED and
// returns it.
func (s *Service) WaitSnapshot(ctx context.Context, id string) (*record.Snapshot, error) {
	return s.snaps.WaitSnapshot(ctx, id)
}

// ExportSnapshot writes snapshot id as a portable snapshot file to w.
func (s *Service) ExportSnapshot(ctx context.Context, id string, w io.Writer) (SnapshotFileInfo, error) {
	return s.snaps.ExportSnapshot(ctx, id, w)
}

// ImportSnapshot reads a portable snapshot file from r and makes it a
// READY snapshot living ttl.
func (s *Service) ImportSnapshot(ctx context.Context, r io.Reader, ttl time.Duration) (*record.Snapshot, error) {
	return s.snaps.ImportSnapshot(ctx, r, ttl)
}

// UploadSnapshotChunk takes one chunk of a snapshot file uploaded in parts;
// the last one imports it.
func (s *Service) UploadSnapshotChunk(ctx context.Context, c UploadChunk) (UploadProgress, *record.Snapshot, error) {
	return s.snaps.UploadSnapshotChunk(ctx, c)
}

// CreateFromSnapshot creates a job that starts from a snapshot
// (Dataflow's --create_from_snapshot), after the compatibility check of
// an update.
func (s *Service) CreateFromSnapshot(ctx context.Context, req FromSnapshotRequest) (*UpdateResult, error) {
	return s.snaps.CreateFromSnapshot(ctx, req)
}

// StartProgram starts, resumes or updates the job of a Go program (package
// weirx) as its request says.
func (s *Service) StartProgram(ctx context.Context, req ProgramRequest) (*ProgramStart, error) {
	return s.inplace.StartProgram(ctx, req)
}

// CheckRelease checks a Go program's new build against its running job
// and, unless validate-only, releases the job for the build to take over.
func (s *Service) CheckRelease(req ReleaseRequest) (*UpdateResult, error) {
	return s.inplace.CheckRelease(req)
}
