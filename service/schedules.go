package service

import (
	"context"
	"time"

	"github.com/weir-dev/weir/service/internal/schedules"
	"github.com/weir-dev/weir/service/record"
)

// ScheduleRequest is a new schedule of partition runs (weir schedules
// create).
type ScheduleRequest = schedules.CreateRequest

// ScheduleSwitchRequest is a new pipeline version of a schedule, run from
// a partition on (weir schedules switch).
type ScheduleSwitchRequest = schedules.SwitchRequest

// CreateSchedule records a schedule of partition runs: as each partition
// of time becomes due, the service pins its input files as a manifest of
// the schedule's name and runs the pipeline on it as a partition run
// (staged, then published once), retrying failures with backoff against
// the same manifest.
func (s *Service) CreateSchedule(ctx context.Context, req ScheduleRequest) (*record.Schedule, error) {
	return s.schedules.Create(ctx, req)
}

// GetSchedule returns a schedule with its versions and runs
// (SCHEDULE_NOT_FOUND).
func (s *Service) GetSchedule(name string) (*record.Schedule, error) { return s.schedules.Get(name) }

// ListSchedules returns every schedule by name, with its runs.
func (s *Service) ListSchedules() ([]*record.Schedule, error) { return s.schedules.List() }

// SwitchSchedule makes a new pipeline run a schedule's partitions from
// req.FromPartition on (default: the first not published or running);
// a published or running partition cannot be switched (SCHEDULE_CONFLICT).
func (s *Service) SwitchSchedule(ctx context.Context, req ScheduleSwitchRequest) (*record.Schedule, error) {
	return s.schedules.Switch(ctx, req)
}

// RollbackSchedule retires a schedule's newest version: the version before
// it runs every partition it had not published, from the first missing
// output; what it published stays, nothing is published twice.
func (s *Service) RollbackSchedule(ctx context.Context, name string) (*record.Schedule, error) {
	return s.schedules.Rollback(ctx, name)
}

// PauseSchedule stops a schedule's new runs (paused true) or lets them
// start again (false); a run in progress ends as it would.
func (s *Service) PauseSchedule(name string, paused bool) (*record.Schedule, error) {
	return s.schedules.SetPaused(name, paused)
}

// RetrySchedulePartition starts a failed partition of a schedule again,
// with its attempts counted afresh, against the same manifest.
func (s *Service) RetrySchedulePartition(name, partition string) (*record.Schedule, error) {
	return s.schedules.Retry(name, partition)
}

// DeleteSchedule removes a schedule and its run records; published rows,
// manifests and jobs stay.
func (s *Service) DeleteSchedule(name string) (*record.Schedule, error) {
	return s.schedules.Delete(name)
}

// TickSchedules makes the scheduler look at every schedule now (tests; the
// server's loop does every second).
func (s *Service) TickSchedules(ctx context.Context) { s.schedules.Tick(ctx) }

// ScheduleNext returns the ID of sch's next partition not yet made a run
// of, and when it becomes due.
func ScheduleNext(sch *record.Schedule) (partition string, due time.Time) {
	c, err := schedules.CadenceOf(sch)
	if err != nil {
		return "", time.Time{}
	}
	end := c.End(sch.Next)
	if end.IsZero() {
		return "", time.Time{}
	}
	d, _ := time.ParseDuration(sch.Delay)
	return schedules.PartitionID(sch.PartitionTemplate, sch.Next), end.Add(d)
}
