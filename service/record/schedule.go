package record

import "time"

// Schedule is a schedule of partition runs (weir schedules): a bounded
// pipeline run once per partition of time — a fixed period (Every) or the
// stretches between a cron expression's times (Cron) — each partition
// pinned as an input manifest of the schedule's name before its run, each
// run a partition run of job JobName that stages and publishes its rows.
// Stored under ScheduleKey(Name); its runs under ScheduleRunKey.
type Schedule struct {
	Name string `json:"name"`
	// JobName is the job name of every partition run (default Name).
	JobName string `json:"job_name"`
	// Every is the partition length ("24h", "1h"), partitions aligned to
	// Start; or Cron, a standard five-field cron expression (or
	// @daily, @hourly...) in UTC, a partition running from one of its
	// times to the next. Exactly one is set.
	Every string `json:"every,omitempty"`
	Cron  string `json:"cron,omitempty"`
	// FileSets, instead of Every or Cron, makes the partitions the file
	// sets Files match on disk: each value of their {partition} is one,
	// run once, in the order found. ReadyFile (a template with
	// {partition}), when set, is the file whose existence makes a file set
	// due; without it a file set is due once its files are unchanged for
	// Delay.
	FileSets  bool   `json:"file_sets,omitempty"`
	ReadyFile string `json:"ready_file,omitempty"`
	// Start is the start of the first partition (a file-set schedule:
	// its creation).
	Start time.Time `json:"start"`
	// Delay is how long after its end a partition becomes due (its input
	// complete): "0s" runs it at its end.
	Delay string `json:"delay"`
	// PartitionTemplate makes a partition's ID from its start:
	// {YYYY} {MM} {DD} {HH} {mm} {ss} are the start's UTC fields.
	PartitionTemplate string `json:"partition_template"`
	// Files are the patterns of a partition's input files, and SideInputs
	// its side inputs (NAME → path): templates with the same fields and
	// {partition}.
	Files      []string          `json:"files"`
	SideInputs map[string]string `json:"side_inputs,omitempty"`
	// MaxAttempts is how many times a partition runs before it is left
	// failed; RetryBackoff the pause before its second attempt, doubled
	// for each later one (at most an hour).
	MaxAttempts  int    `json:"max_attempts"`
	RetryBackoff string `json:"retry_backoff"`
	// Paused stops new runs (a run in progress ends as it would).
	Paused     bool      `json:"paused,omitempty"`
	CreateTime time.Time `json:"create_time"`
	UpdateTime time.Time `json:"update_time"`
	// Versions are the pipelines the schedule has run, oldest first: a
	// partition runs the newest version that is not rolled back and whose
	// From is at or before the partition's start.
	Versions []ScheduleVersion `json:"versions"`
	// Next is the start of the first partition no run was made for yet.
	Next time.Time `json:"next"`
	// Runs are the schedule's runs by partition start, filled in when the
	// schedule is read (stored under ScheduleRunKey).
	Runs []ScheduleRun `json:"runs,omitempty"`
}

// ScheduleVersion is one pipeline of a schedule.
type ScheduleVersion struct {
	Version      int        `json:"version"`
	Pipeline     string     `json:"pipeline"`
	PipelineFile string     `json:"pipeline_file"`
	BaseDir      string     `json:"base_dir"`
	Options      JobOptions `json:"options"`
	// From is the start of the first partition the version runs, and
	// FromPartition its ID.
	From          time.Time `json:"from"`
	FromPartition string    `json:"from_partition"`
	CreateTime    time.Time `json:"create_time"`
	// RolledBack is set when weir schedules rollback retired the version:
	// partitions it had not published run the version before it.
	RolledBack     bool       `json:"rolled_back,omitempty"`
	RolledBackTime *time.Time `json:"rolled_back_time,omitempty"`
}

// Statuses of a schedule's run.
const (
	// RunWaiting: the partition is due but its input is not there yet (a
	// file pattern matches nothing); checked again at NextAttempt.
	RunWaiting = "waiting"
	// RunRunning: its partition run (JobID) is active.
	RunRunning = "running"
	// RunRetrying: its last attempt failed; the next starts at
	// NextAttempt, against the same manifest.
	RunRetrying = "retrying"
	// RunPublished: a run ended DONE: its rows are published.
	RunPublished = "published"
	// RunFailed: MaxAttempts attempts failed (or the input cannot be
	// pinned); weir schedules retry starts it again.
	RunFailed = "failed"
)

// ScheduleRun is what a schedule did for one partition.
type ScheduleRun struct {
	Partition string    `json:"partition"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	// Due is when the partition became due (End + the schedule's delay).
	Due     time.Time `json:"due"`
	Version int       `json:"version"`
	Status  string    `json:"status"`
	// Attempts counts the runs started; JobID is the last one's job and
	// JobIDs every one's, oldest first.
	Attempts int      `json:"attempts"`
	JobID    string   `json:"job_id,omitempty"`
	JobIDs   []string `json:"job_ids,omitempty"`
	// ManifestDigest is the digest of the partition's manifest (every
	// attempt reads the same one).
	ManifestDigest string     `json:"manifest_digest,omitempty"`
	Error          string     `json:"error,omitempty"`
	NextAttempt    *time.Time `json:"next_attempt,omitempty"`
	UpdateTime     time.Time  `json:"update_time"`
}

// ScheduleKey is the registry key of schedule name.
func ScheduleKey(name string) string { return "schedule/" + name }

// ScheduleRunPrefix is the registry prefix of schedule name's runs.
func ScheduleRunPrefix(name string) string { return "schedule-run/" + name + "/" }

// ScheduleRunKey is the registry key of schedule name's run of the
// partition starting at start (keys sort by start).
func ScheduleRunKey(name string, start time.Time) string {
	return ScheduleRunPrefix(name) + start.UTC().Format("20060102T150405.000000000Z")
}

// ActiveVersion returns the version that runs the partition starting at
// start: the newest not rolled back whose From is at or before start;
// false when there is none.
func (s *Schedule) ActiveVersion(start time.Time) (ScheduleVersion, bool) {
	for i := len(s.Versions) - 1; i >= 0; i-- {
		v := s.Versions[i]
		if !v.RolledBack && !v.From.After(start) {
			return v, true
		}
	}
	return ScheduleVersion{}, false
}
