package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Schedule is a schedule of partition runs (weir schedules): a bounded
// pipeline run once per partition of time, each partition's files pinned
// as an input manifest of the schedule's name before its run.
type Schedule struct {
	Name string `json:"name"`
	// JobName is the job name of every partition run.
	JobName string `json:"job_name"`
	// Every is the partition length, or Cron the expression whose times
	// bound the partitions (UTC).
	Every string `json:"every,omitempty"`
	Cron  string `json:"cron,omitempty"`
	// FileSets, instead, makes each value of the files' {partition} found
	// on disk a partition, due once its ReadyFile exists (or its files are
	// unchanged for Delay).
	FileSets  bool   `json:"file_sets,omitempty"`
	ReadyFile string `json:"ready_file,omitempty"`
	// Start is the start of the first partition.
	Start time.Time `json:"start"`
	// Delay is how long after its end a partition becomes due.
	Delay string `json:"delay"`
	// PartitionTemplate makes a partition's ID from its start's UTC
	// fields ({YYYY} {MM} {DD} {HH} {mm} {ss}).
	PartitionTemplate string `json:"partition_template"`
	// Files and SideInputs are the templates of a partition's inputs.
	Files        []string          `json:"files"`
	SideInputs   map[string]string `json:"side_inputs,omitempty"`
	MaxAttempts  int               `json:"max_attempts"`
	RetryBackoff string            `json:"retry_backoff"`
	Paused       bool              `json:"paused,omitempty"`
	CreateTime   time.Time         `json:"create_time"`
	UpdateTime   time.Time         `json:"update_time"`
	// Versions are the pipelines the schedule has run, oldest first.
	Versions []ScheduleVersion `json:"versions"`
	// Next is the start of the first partition no run was made for yet,
	// NextPartition its ID and NextDue when it becomes due.
	Next          time.Time `json:"next"`
	NextPartition string    `json:"next_partition"`
	NextDue       time.Time `json:"next_due"`
	// Runs are what the schedule did per partition, by partition start.
	Runs []ScheduleRun `json:"runs"`
}

// ScheduleVersion is one pipeline of a schedule, run from partition
// FromPartition on unless rolled back.
type ScheduleVersion struct {
	Version        int        `json:"version"`
	Pipeline       string     `json:"pipeline"`
	PipelineFile   string     `json:"pipeline_file"`
	BaseDir        string     `json:"base_dir"`
	Options        JobOptions `json:"options"`
	From           time.Time  `json:"from"`
	FromPartition  string     `json:"from_partition"`
	CreateTime     time.Time  `json:"create_time"`
	RolledBack     bool       `json:"rolled_back,omitempty"`
	RolledBackTime *time.Time `json:"rolled_back_time,omitempty"`
}

// ScheduleRun is what a schedule did for one partition. Status is
// waiting (its input is not there yet), running, retrying, published or
// failed.
type ScheduleRun struct {
	Partition      string     `json:"partition"`
	Start          time.Time  `json:"start"`
	End            time.Time  `json:"end"`
	Due            time.Time  `json:"due"`
	Version        int        `json:"version"`
	Status         string     `json:"status"`
	Attempts       int        `json:"attempts"`
	JobID          string     `json:"job_id,omitempty"`
	JobIDs         []string   `json:"job_ids,omitempty"`
	ManifestDigest string     `json:"manifest_digest,omitempty"`
	Error          string     `json:"error,omitempty"`
	NextAttempt    *time.Time `json:"next_attempt,omitempty"`
	UpdateTime     time.Time  `json:"update_time"`
}

// CreateScheduleRequest is the body of POST /v1/schedules.
type CreateScheduleRequest struct {
	Name string `json:"name"`
	// JobName is the partition runs' job name (default Name).
	JobName      string     `json:"job_name,omitempty"`
	Pipeline     string     `json:"pipeline"`
	PipelineFile string     `json:"pipeline_file,omitempty"`
	BaseDir      string     `json:"base_dir"`
	Options      JobOptions `json:"options"`
	// Every, Cron or FileSets (exactly one); ReadyFile with FileSets.
	Every     string `json:"every,omitempty"`
	Cron      string `json:"cron,omitempty"`
	FileSets  bool   `json:"file_sets,omitempty"`
	ReadyFile string `json:"ready_file,omitempty"`
	// Start is the start of the first partition (default: the partition
	// holding now).
	Start             *time.Time        `json:"start,omitempty"`
	Delay             string            `json:"delay,omitempty"`
	PartitionTemplate string            `json:"partition_template,omitempty"`
	Files             []string          `json:"files"`
	SideInputs        map[string]string `json:"side_inputs,omitempty"`
	MaxAttempts       int               `json:"max_attempts,omitempty"`
	RetryBackoff      string            `json:"retry_backoff,omitempty"`
}

// SwitchScheduleRequest is the body of POST /v1/schedules/{name}:switch.
type SwitchScheduleRequest struct {
	Pipeline     string     `json:"pipeline"`
	PipelineFile string     `json:"pipeline_file,omitempty"`
	BaseDir      string     `json:"base_dir"`
	Options      JobOptions `json:"options"`
	// FromPartition is the first partition the new pipeline runs
	// (default: the first neither published nor running).
	FromPartition string `json:"from_partition,omitempty"`
}

// RetryScheduleRequest is the body of POST /v1/schedules/{name}:retry.
type RetryScheduleRequest struct {
	Partition string `json:"partition"`
}

// ScheduleList is the reply to GET /v1/schedules.
type ScheduleList struct {
	Schedules []*Schedule `json:"schedules"`
}

// CreateSchedule creates a schedule of partition runs.
func (c *Client) CreateSchedule(ctx context.Context, req CreateScheduleRequest) (*Schedule, error) {
	var out Schedule
	if err := c.do(ctx, http.MethodPost, "/v1/schedules", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListSchedules returns every schedule by name.
func (c *Client) ListSchedules(ctx context.Context) ([]*Schedule, error) {
	var out ScheduleList
	if err := c.do(ctx, http.MethodGet, "/v1/schedules", nil, &out); err != nil {
		return nil, err
	}
	return out.Schedules, nil
}

// GetSchedule returns schedule name with its versions and runs.
func (c *Client) GetSchedule(ctx context.Context, name string) (*Schedule, error) {
	var out Schedule
	if err := c.do(ctx, http.MethodGet, "/v1/schedules/"+url.PathEscape(name), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SwitchSchedule makes a new pipeline run schedule name's partitions from
// req.FromPartition on.
func (c *Client) SwitchSchedule(ctx context.Context, name string, req SwitchScheduleRequest) (*Schedule, error) {
	return c.scheduleAction(ctx, name, "switch", req)
}

// RollbackSchedule returns schedule name to its previous version at the
// first partition the current one had not published.
func (c *Client) RollbackSchedule(ctx context.Context, name string) (*Schedule, error) {
	return c.scheduleAction(ctx, name, "rollback", struct{}{})
}

// PauseSchedule stops schedule name's new runs.
func (c *Client) PauseSchedule(ctx context.Context, name string) (*Schedule, error) {
	return c.scheduleAction(ctx, name, "pause", struct{}{})
}

// ResumeSchedule lets schedule name's runs start again.
func (c *Client) ResumeSchedule(ctx context.Context, name string) (*Schedule, error) {
	return c.scheduleAction(ctx, name, "resume", struct{}{})
}

// RetrySchedulePartition starts a failed partition of schedule name
// again.
func (c *Client) RetrySchedulePartition(ctx context.Context, name, partition string) (*Schedule, error) {
	return c.scheduleAction(ctx, name, "retry", RetryScheduleRequest{Partition: partition})
}

// DeleteSchedule deletes schedule name (published rows, manifests and
// jobs stay) and returns it as it was.
func (c *Client) DeleteSchedule(ctx context.Context, name string) (*Schedule, error) {
	var out Schedule
	if err := c.do(ctx, http.MethodDelete, "/v1/schedules/"+url.PathEscape(name), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) scheduleAction(ctx context.Context, name, action string, body any) (*Schedule, error) {
	var out Schedule
	if err := c.do(ctx, http.MethodPost, "/v1/schedules/"+url.PathEscape(name)+":"+action, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
