package schedules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/manifest"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/state"
)

// Defaults of a schedule's settings.
const (
	DefaultMaxAttempts  = 3
	DefaultRetryBackoff = time.Minute
	// DefaultInterval is how often the scheduler looks at its schedules.
	DefaultInterval = time.Second
)

// Schedules is the job service's scheduler of partition runs.
type Schedules struct {
	*core.Core
	core.BaseFlow
	// Interval is how often the loop ticks (New sets DefaultInterval;
	// tests call Tick themselves).
	Interval time.Duration
	// mu serialises the ticks and every change of a schedule's records:
	// taken before any lock of the core (SubmitNew and Cancel take a job
	// name's guard under it), never while holding one.
	mu sync.Mutex
}

// New returns the scheduler built on c; the caller registers it with c.
func New(c *core.Core) *Schedules {
	return &Schedules{Core: c, Interval: DefaultInterval}
}

// Open starts the scheduler's loop (core.Flow). A run that was running
// when the service stopped is found again by its job's record.
func (s *Schedules) Open(context.Context) error {
	s.Spawn(s.loop)
	return nil
}

func (s *Schedules) loop() {
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		select {
		case <-s.Ctx.Done():
			return
		case <-t.C:
			if s.StoreFailed() == nil {
				s.Tick(s.Ctx)
			}
		}
	}
}

// CreateRequest is a new schedule.
type CreateRequest struct {
	Name              string
	JobName           string
	Pipeline          string
	PipelineFile      string
	BaseDir           string
	Options           record.JobOptions
	Every             string
	Cron              string
	FileSets          bool
	ReadyFile         string
	Start             time.Time
	Delay             string
	PartitionTemplate string
	Files             []string
	SideInputs        map[string]string
	MaxAttempts       int
	RetryBackoff      string
}

// SwitchRequest is a new pipeline version of schedule Name, run from
// partition FromPartition ("" the first partition not published or
// running).
type SwitchRequest struct {
	Name          string
	Pipeline      string
	PipelineFile  string
	BaseDir       string
	Options       record.JobOptions
	FromPartition string
}

// Create checks req and records the schedule; its first partition runs
// once due. The pipeline must load and be bounded (a batch pipeline: a
// partition run ends by itself).
func (s *Schedules) Create(ctx context.Context, req CreateRequest) (*record.Schedule, error) {
	if err := s.RefuseIfStoreFailed(); err != nil {
		return nil, err
	}
	if err := manifest.ValidateName("schedule name", req.Name); err != nil {
		return nil, errcode.Errorf(errcode.InvalidRequest, "%w", err)
	}
	if req.JobName == "" {
		req.JobName = req.Name
	}
	if err := record.ValidateJobName(req.JobName); err != nil {
		return nil, err
	}
	now := s.Now().UTC()
	if req.FileSets {
		return s.createFileSets(req, now)
	}
	if req.ReadyFile != "" {
		return nil, errcode.Errorf(errcode.InvalidRequest, "schedule %s: a ready file makes a file set due: give --file-sets with it", req.Name)
	}
	if req.Start.IsZero() {
		// No start given: the partition that holds now (due at its end).
		st, err := StartHolding(req.Every, req.Cron, now)
		if err != nil {
			return nil, errcode.Errorf(errcode.InvalidRequest, "schedule %s: %w", req.Name, err)
		}
		req.Start = st
	}
	c, start, err := ParseCadence(req.Every, req.Cron, req.Start)
	if err != nil {
		return nil, errcode.Errorf(errcode.InvalidRequest, "schedule %s: %w", req.Name, err)
	}
	if n := c.DueBy(start, now, MaxCatchUpPartitions+1); n > MaxCatchUpPartitions {
		return nil, errcode.Errorf(errcode.InvalidRequest, "schedule %s: --start %s makes more than %d partitions due already: give a later --start (each partition is a job run, oldest first)",
			req.Name, start.Format(time.RFC3339), MaxCatchUpPartitions)
	}
	sch := &record.Schedule{Name: req.Name, JobName: req.JobName, Every: req.Every, Cron: req.Cron, Start: start,
		Delay: "0s", PartitionTemplate: req.PartitionTemplate, Files: req.Files, SideInputs: req.SideInputs,
		MaxAttempts: req.MaxAttempts, RetryBackoff: DefaultRetryBackoff.String(), CreateTime: now, UpdateTime: now, Next: start}
	if req.Every != "" {
		d, _ := time.ParseDuration(req.Every)
		sch.Every = d.String()
	}
	if err := runOptions(sch, req); err != nil {
		return nil, err
	}
	if sch.PartitionTemplate == "" {
		sch.PartitionTemplate = DefaultTemplate(c)
	}
	if err := CheckTemplate(sch.PartitionTemplate, c); err != nil {
		return nil, errcode.Errorf(errcode.InvalidRequest, "schedule %s: %w", req.Name, err)
	}
	if len(sch.Files) == 0 {
		return nil, errcode.Errorf(errcode.InvalidRequest, "schedule %s: give the partition's input files, --files PATTERN (with {partition} or {YYYY} {MM} {DD} {HH} {mm})", req.Name)
	}
	if err := s.checkFiles(sch); err != nil {
		return nil, err
	}
	v := record.ScheduleVersion{Version: 1, Pipeline: req.Pipeline, PipelineFile: req.PipelineFile, BaseDir: req.BaseDir,
		Options: req.Options, From: start, FromPartition: PartitionID(sch.PartitionTemplate, start), CreateTime: now}
	if err := s.checkPipeline(sch, v); err != nil {
		return nil, err
	}
	sch.Versions = []record.ScheduleVersion{v}
	if err := s.writeNew(sch); err != nil {
		return nil, err
	}
	s.Opts.Logger.Info("schedule created", "schedule", sch.Name, "job_name", sch.JobName, "every", sch.Every, "cron", sch.Cron,
		"first_partition", v.FromPartition, "start", start)
	return sch, nil
}

// runOptions sets sch's delay, retry backoff and attempts from req,
// checked.
func runOptions(sch *record.Schedule, req CreateRequest) error {
	if req.Delay != "" {
		d, err := time.ParseDuration(req.Delay)
		if err != nil || d < 0 {
			return errcode.Errorf(errcode.InvalidRequest, "schedule %s: --delay %q is not a duration of 0 or more (as 30m)", req.Name, req.Delay)
		}
		sch.Delay = d.String()
	}
	if req.RetryBackoff != "" {
		d, err := time.ParseDuration(req.RetryBackoff)
		if err != nil || d < time.Second {
			return errcode.Errorf(errcode.InvalidRequest, "schedule %s: --retry-backoff %q is not a duration of a second or more", req.Name, req.RetryBackoff)
		}
		sch.RetryBackoff = d.String()
	}
	if sch.MaxAttempts == 0 {
		sch.MaxAttempts = DefaultMaxAttempts
	}
	if sch.MaxAttempts < 1 || sch.MaxAttempts > 100 {
		return errcode.Errorf(errcode.InvalidRequest, "schedule %s: --max-attempts %d is not between 1 and 100", req.Name, req.MaxAttempts)
	}
	return nil
}

// writeNew records new schedule sch, refused when one of its name exists.
// It takes s.mu (before the core's locks).
func (s *Schedules) writeNew(sch *record.Schedule) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.read(sch.Name); err == nil {
		return errcode.Errorf(errcode.ScheduleExists, "schedule %s exists: delete it first (weir schedules delete %s), or give it a new pipeline (weir schedules switch %s --pipeline P.yaml)", sch.Name, sch.Name, sch.Name)
	} else if !isNotFound(err) {
		return err
	}
	return s.write(sch, nil)
}

// checkFiles checks that sch's file and side-input templates are patterns
// the server may read (--file-roots), for its first partition.
func (s *Schedules) checkFiles(sch *record.Schedule) error {
	if s.Opts.Access == nil || s.Opts.Access.Files == nil {
		return nil
	}
	id := PartitionID(sch.PartitionTemplate, sch.Start)
	if sch.FileSets {
		id = "*"
	}
	var pats []string
	for _, f := range sch.Files {
		pats = append(pats, Expand(f, sch.Start, id))
	}
	for _, f := range sch.SideInputs {
		pats = append(pats, Expand(f, sch.Start, id))
	}
	for _, p := range pats {
		if err := s.Opts.Access.Files.CheckPattern(p); err != nil {
			return errcode.Errorf(core.AccessCode(err), "schedule %s: %w", sch.Name, err)
		}
	}
	return nil
}

// checkPipeline loads v's pipeline as a partition run of sch would be
// (without its manifest) and refuses a streaming one.
func (s *Schedules) checkPipeline(sch *record.Schedule, v record.ScheduleVersion) error {
	if strings.TrimSpace(v.Pipeline) == "" {
		return errcode.Errorf(errcode.InvalidPipeline, "the pipeline is empty: send the YAML text of the pipeline")
	}
	p, err := s.LoadGraph(&record.Job{Name: sch.JobName, Pipeline: v.Pipeline, PipelineFile: v.PipelineFile, BaseDir: v.BaseDir,
		Options: v.Options, Partition: v.FromPartition})
	if err != nil {
		return err
	}
	if record.TypeOf(p.Graph()) != record.TypeBatch {
		return errcode.Errorf(errcode.InvalidPipeline, "schedule %s: %s reads an unbounded source: a scheduled partition run must be a batch pipeline (read files, as ReadFromJson; its manifest is the partition's files)", sch.Name, v.PipelineFile)
	}
	return nil
}

// locked takes s.mu (before the core's locks) for a change of schedule
// name and returns the schedule with its runs; unlock releases s.mu. It
// refuses while the store is failed.
func (s *Schedules) locked(name string) (*record.Schedule, func(), error) {
	if err := s.RefuseIfStoreFailed(); err != nil {
		return nil, nil, err
	}
	s.mu.Lock() // before the core's locks
	sch, err := s.Get(name)
	if err != nil {
		s.mu.Unlock()
		return nil, nil, err
	}
	return sch, s.mu.Unlock, nil
}

// Get returns schedule name with its runs.
func (s *Schedules) Get(name string) (*record.Schedule, error) {
	sch, err := s.read(name)
	if err != nil {
		return nil, err
	}
	if sch.Runs, err = s.runs(name); err != nil {
		return nil, err
	}
	return sch, nil
}

// List returns every schedule, by name, each with its runs.
func (s *Schedules) List() ([]*record.Schedule, error) {
	var out []*record.Schedule
	err := s.Store.Scan("schedule/", func(_ string, v []byte) error {
		sch := &record.Schedule{}
		if err := json.Unmarshal(v, sch); err != nil {
			return errcode.Internalf("decoding a schedule: %w", err)
		}
		out = append(out, sch)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, sch := range out {
		if sch.Runs, err = s.runs(sch.Name); err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Switch adds req's pipeline as schedule req.Name's next version, run
// from partition req.FromPartition on: partitions before it stay with the
// versions that ran or will run them. The partition must be neither
// published nor running (SCHEDULE_CONFLICT).
func (s *Schedules) Switch(ctx context.Context, req SwitchRequest) (*record.Schedule, error) {
	sch, unlock, err := s.locked(req.Name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	now := s.Now().UTC()
	var from time.Time
	fromPartition := ""
	switch {
	case sch.FileSets:
		from, fromPartition = fileSetFrom(sch, req.FromPartition, now)
	case req.FromPartition == "":
		from = firstOpen(sch)
	default:
		c, err := CadenceOf(sch)
		if err != nil {
			return nil, errcode.Internalf("schedule %s: %w", sch.Name, err)
		}
		limit := now
		if sch.Next.After(limit) {
			limit = sch.Next
		}
		f, ok := FindPartition(sch.PartitionTemplate, c, req.FromPartition, c.End(c.End(limit)))
		if !ok {
			return nil, errcode.Errorf(errcode.InvalidRequest, "schedule %s has no partition %q (its partitions are named %s, from %s)", sch.Name, req.FromPartition, sch.PartitionTemplate, PartitionID(sch.PartitionTemplate, sch.Start))
		}
		from = f
	}
	if !sch.FileSets {
		fromPartition = PartitionID(sch.PartitionTemplate, from)
	}
	for _, r := range sch.Runs {
		if r.Start.Before(from) {
			continue
		}
		switch r.Status {
		case record.RunPublished:
			return nil, errcode.Errorf(errcode.ScheduleConflict, "schedule %s: partition %s is published (by version %d, job %s): switch from a partition after the last published one", sch.Name, r.Partition, r.Version, r.JobID)
		case record.RunRunning:
			return nil, errcode.Errorf(errcode.ScheduleConflict, "schedule %s: partition %s is running (job %s): switch from the partition after it, or wait for its end", sch.Name, r.Partition, r.JobID)
		}
	}
	last := sch.Versions[len(sch.Versions)-1]
	v := record.ScheduleVersion{Version: last.Version + 1, Pipeline: req.Pipeline, PipelineFile: req.PipelineFile, BaseDir: req.BaseDir,
		Options: req.Options, From: from, FromPartition: fromPartition, CreateTime: now}
	if err := s.checkPipeline(sch, v); err != nil {
		return nil, err
	}
	sch.Versions = append(sch.Versions, v)
	sch.UpdateTime = now
	if err := s.write(sch, nil); err != nil {
		return nil, err
	}
	s.Opts.Logger.Info("schedule switched", "schedule", sch.Name, "version", v.Version, "from_partition", v.FromPartition)
	return s.Get(sch.Name)
}

// firstOpenRun returns sch's first run that is neither published nor
// running, after its last published or running one; nil when there is
// none (the next partition has no run yet).
func firstOpenRun(sch *record.Schedule) *record.ScheduleRun {
	var open *record.ScheduleRun
	for i := len(sch.Runs) - 1; i >= 0; i-- {
		r := &sch.Runs[i]
		if r.Status == record.RunPublished || r.Status == record.RunRunning {
			break
		}
		open = r
	}
	return open
}

// firstOpen returns the start of sch's first partition that is neither
// published nor running, after its last published or running one.
func firstOpen(sch *record.Schedule) time.Time {
	if r := firstOpenRun(sch); r != nil {
		return r.Start
	}
	return sch.Next
}

// Rollback retires schedule name's newest version that is not rolled
// back: every partition it had not published runs the version before it,
// from the first partition missing an output; what it published stays.
// A run of it in progress is cancelled (its rows stay staged, never
// published) and its partition runs again with the earlier version.
func (s *Schedules) Rollback(ctx context.Context, name string) (*record.Schedule, error) {
	sch, unlock, err := s.locked(name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	cur := -1
	for i := len(sch.Versions) - 1; i >= 0; i-- {
		if !sch.Versions[i].RolledBack {
			cur = i
			break
		}
	}
	prev := -1
	for i := cur - 1; i >= 0; i-- {
		if !sch.Versions[i].RolledBack {
			prev = i
			break
		}
	}
	if cur < 0 || prev < 0 {
		return nil, errcode.Errorf(errcode.ScheduleConflict, "schedule %s has no earlier version to return to (weir schedules describe %s lists its versions)", name, name)
	}
	now := s.Now().UTC()
	retired := sch.Versions[cur].Version
	for _, r := range sch.Runs {
		if r.Status == record.RunRunning && r.Version == retired {
			if _, err := s.Cancel(ctx, r.JobID); err != nil {
				var ce *errcode.Error
				if !errors.As(err, &ce) || ce.Code != errcode.JobTerminated {
					return nil, fmt.Errorf("schedule %s: cancelling the run of partition %s (job %s) of version %d: %w", name, r.Partition, r.JobID, retired, err)
				}
			}
		}
	}
	sch.Versions[cur].RolledBack = true
	sch.Versions[cur].RolledBackTime = &now
	sch.UpdateTime = now
	if err := s.write(sch, nil); err != nil {
		return nil, err
	}
	from := PartitionID(sch.PartitionTemplate, firstOpen(sch))
	if sch.FileSets {
		_, from = fileSetFrom(sch, "", now)
	}
	s.Opts.Logger.Info("schedule rolled back", "schedule", name, "retired_version", retired, "version", sch.Versions[prev].Version,
		"from_partition", from)
	return s.Get(name)
}

// SetPaused pauses (no new run starts; one in progress ends as it would)
// or resumes schedule name.
func (s *Schedules) SetPaused(name string, paused bool) (*record.Schedule, error) {
	sch, unlock, err := s.locked(name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if sch.Paused != paused {
		sch.Paused, sch.UpdateTime = paused, s.Now().UTC()
		if err := s.write(sch, nil); err != nil {
			return nil, err
		}
	}
	return s.Get(name)
}

// Retry makes partition's failed (or retrying, or waiting) run of
// schedule name start again at the next tick, with its attempts counted
// afresh, against the same manifest.
func (s *Schedules) Retry(name, partition string) (*record.Schedule, error) {
	sch, unlock, err := s.locked(name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	for _, r := range sch.Runs {
		if r.Partition != partition {
			continue
		}
		switch r.Status {
		case record.RunPublished, record.RunRunning:
			return nil, errcode.Errorf(errcode.ScheduleConflict, "schedule %s: partition %s is %s (job %s): nothing to retry", name, partition, r.Status, r.JobID)
		}
		now := s.Now().UTC()
		r.Status, r.Attempts, r.NextAttempt, r.UpdateTime = record.RunRetrying, 0, &now, now
		if err := s.write(nil, &writeRun{sch.Name, r}); err != nil {
			return nil, err
		}
		return s.Get(name)
	}
	return nil, errcode.Errorf(errcode.InvalidRequest, "schedule %s has no run of partition %q (weir schedules describe %s)", name, partition, name)
}

// Delete removes schedule name and its runs' records; a run in progress
// goes on as a job of its own, and what was published stays.
func (s *Schedules) Delete(name string) (*record.Schedule, error) {
	sch, unlock, err := s.locked(name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	w := &state.Write{}
	w.Delete(record.ScheduleKey(name))
	for _, r := range sch.Runs {
		w.Delete(record.ScheduleRunKey(name, r.Start))
	}
	if err := s.Update(func(tx *core.Tx) error { return tx.Apply(w) }); err != nil {
		return nil, errcode.Internalf("deleting schedule %s: %w", name, err)
	}
	s.Opts.Logger.Info("schedule deleted", "schedule", name)
	return sch, nil
}

// Tick looks at every schedule once: a run whose job ended is recorded
// (published, retrying, failed), then each schedule's next step is taken
// (a partition's manifest pinned and its run submitted). The loop calls
// it every Interval; tests call it directly.
func (s *Schedules) Tick(ctx context.Context) {
	s.mu.Lock() // before the core's locks
	defer s.mu.Unlock()
	all, err := s.List()
	if err != nil {
		s.Opts.Logger.Error("reading the schedules", "error", err)
		return
	}
	for _, sch := range all {
		if ctx.Err() != nil {
			return
		}
		if err := s.tickOne(ctx, sch); err != nil {
			s.Opts.Logger.Error("running a schedule", "schedule", sch.Name, "error", err)
		}
	}
}

// tickOne observes and steps schedule sch.
func (s *Schedules) tickOne(ctx context.Context, sch *record.Schedule) error {
	now := s.Now().UTC()
	for i, r := range sch.Runs {
		if r.Status != record.RunRunning {
			continue
		}
		j, err := s.ReadJob(r.JobID)
		var after record.ScheduleRun
		switch {
		case isNotFound(err):
			r.Error = fmt.Sprintf("job %s is gone from the registry", r.JobID)
			after = failedAttempt(sch, r, now)
		case err != nil:
			return err
		case j.Active() || j.PendingCommit:
			continue
		default:
			after = Ended(sch, r, j.State, j.Error, now)
		}
		if err := s.write(nil, &writeRun{sch.Name, after}); err != nil {
			return err
		}
		sch.Runs[i] = after
		s.Opts.Logger.Info("scheduled partition run ended", "schedule", sch.Name, "partition", r.Partition, "job_id", r.JobID,
			"status", after.Status, "attempts", after.Attempts, "error", after.Error)
	}
	var st Step
	if sch.FileSets {
		sets, err := DiscoverFileSets(sch)
		if err != nil {
			return fmt.Errorf("schedule %s: %w", sch.Name, err)
		}
		st = DecideFileSets(sch, sch.Runs, sets, now)
	} else {
		c, err := CadenceOf(sch)
		if err != nil {
			return errcode.Internalf("schedule %s: %w", sch.Name, err)
		}
		st = Decide(sch, c, sch.Runs, now)
	}
	if !st.Start {
		return nil
	}
	return s.start(ctx, sch, st, now)
}

// start pins st's partition's manifest (or finds it pinned by an earlier
// attempt) and submits its partition run.
func (s *Schedules) start(ctx context.Context, sch *record.Schedule, st Step, now time.Time) error {
	r := st.Run
	r.UpdateTime = now
	// changed is the schedule record to write with the run: a new
	// partition moves Next.
	var changed *record.Schedule
	if st.New && !sch.FileSets {
		sch.Next, sch.UpdateTime = r.End, now
		changed = sch
	}
	save := func(r record.ScheduleRun) error { return s.write(changed, &writeRun{sch.Name, r}) }
	m, err := s.GetManifest(sch.Name, r.Partition)
	if isCode(err, errcode.ManifestNotFound) {
		req := manifest.Request{Name: sch.Name, Partition: r.Partition, SideInputs: map[string]string{}}
		for _, f := range sch.Files {
			req.Files = append(req.Files, Expand(f, r.Start, r.Partition))
		}
		for k, f := range sch.SideInputs {
			req.SideInputs[k] = Expand(f, r.Start, r.Partition)
		}
		m, _, err = s.CreateManifest(req)
		if err != nil && errors.Is(err, manifest.ErrNoFiles) {
			return save(Waiting(r, fmt.Sprintf("waiting for the partition's input: %v", err), now))
		}
	}
	if err != nil {
		r.Attempts++
		r.Error = "pinning the partition's input: " + errText(err)
		return save(failedAttempt(sch, r, now))
	}
	r.ManifestDigest = m.Digest
	var j *record.Job
	if j, err = s.orphan(sch, st, r, m); err == nil && j != nil {
		// Submitted before a crash that came before its run record: the
		// run is that job, never a second one.
		s.Opts.Logger.Info("scheduled partition run found again after a restart", "schedule", sch.Name, "partition", r.Partition, "job_id", j.ID)
	} else if err == nil {
		j, err = s.SubmitNew(ctx, core.SubmitRequest{Name: sch.JobName, Pipeline: st.Version.Pipeline, PipelineFile: st.Version.PipelineFile,
			BaseDir: st.Version.BaseDir, Options: st.Version.Options, Manifest: m.Name, Partition: r.Partition})
		if err == nil {
			crashAt("after-submit")
		}
	}
	if err != nil {
		if isCode(err, errcode.JobNameActive) || isCode(err, errcode.PartitionBusy) {
			// Another run of the job name (started by hand) holds the
			// lease: the partition waits for it.
			return save(Waiting(r, fmt.Sprintf("job %s has an active run: %v", sch.JobName, err), now))
		}
		r.Attempts++
		r.Error = "submitting the partition run: " + errText(err)
		return save(failedAttempt(sch, r, now))
	}
	r.Attempts++
	r.JobID, r.JobIDs = j.ID, append(r.JobIDs, j.ID)
	r.Status, r.Error, r.NextAttempt = record.RunRunning, "", nil
	if cur, err := s.ReadJob(j.ID); err == nil && !cur.Active() && !cur.PendingCommit {
		r = Ended(sch, r, cur.State, cur.Error, now) // it ended already (or failed to start)
	}
	s.Opts.Logger.Info("scheduled partition run started", "schedule", sch.Name, "partition", r.Partition, "version", r.Version,
		"job_id", j.ID, "attempt", r.Attempts)
	return save(r)
}

// orphan returns the partition run of st that a crash left unrecorded:
// the newest job of the schedule's job name for r's partition, read from
// manifest m, running st's version's pipeline, not a shadow run, and not
// among r's jobs already. Nil when there is none.
func (s *Schedules) orphan(sch *record.Schedule, st Step, r record.ScheduleRun, m *manifest.Manifest) (*record.Job, error) {
	jobs, err := s.Core.List(core.StatusAll)
	if err != nil {
		return nil, err
	}
	var found *record.Job
	for _, j := range jobs {
		if j.Name != sch.JobName || j.Partition != r.Partition || j.Shadow || j.Manifest != m.Name || j.ManifestDigest != m.Digest ||
			j.Pipeline != st.Version.Pipeline || slices.Contains(r.JobIDs, j.ID) {
			continue
		}
		if found == nil || j.CreateTime.After(found.CreateTime) {
			found = j
		}
	}
	return found, nil
}

// crashEnv, set to "after-submit" in a test's server, kills the process
// (SIGKILL) right after a partition run's submission, before its run
// record is written: the crash test's seeded point.
const crashEnv = "WEIR_TEST_SCHEDULE_CRASH"

// crashAt kills the process when the crash test asks for point.
func crashAt(point string) {
	if os.Getenv(crashEnv) == point {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}

// writeRun is a run record to write, of schedule name.
type writeRun struct {
	name string
	run  record.ScheduleRun
}

// write records sch (when not nil) and run (when not nil) in one atomic
// write. s.mu is held.
func (s *Schedules) write(sch *record.Schedule, run *writeRun) error {
	w := &state.Write{}
	if sch != nil {
		stored := *sch
		stored.Runs = nil // stored apart
		if err := core.PutJSON(w, record.ScheduleKey(sch.Name), &stored); err != nil {
			return err
		}
	}
	if run != nil {
		if err := core.PutJSON(w, record.ScheduleRunKey(run.name, run.run.Start), &run.run); err != nil {
			return err
		}
	}
	if err := s.Update(func(tx *core.Tx) error { return tx.Apply(w) }); err != nil {
		return errcode.Internalf("recording a schedule: %w", err)
	}
	return nil
}

// read returns schedule name without its runs.
func (s *Schedules) read(name string) (*record.Schedule, error) {
	return core.GetJSON[record.Schedule](s.Core, record.ScheduleKey(name), "schedule "+name,
		errcode.Errorf(errcode.ScheduleNotFound, "no schedule is named %q (weir schedules list)", name))
}

// runs returns schedule name's runs by partition start.
func (s *Schedules) runs(name string) ([]record.ScheduleRun, error) {
	var out []record.ScheduleRun
	err := s.Store.Scan(record.ScheduleRunPrefix(name), func(_ string, v []byte) error {
		var r record.ScheduleRun
		if err := json.Unmarshal(v, &r); err != nil {
			return errcode.Internalf("decoding a run of schedule %s: %w", name, err)
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out, nil
}

// isNotFound reports whether err is a registry miss or a *_NOT_FOUND
// code.
func isNotFound(err error) bool {
	if errors.Is(err, state.ErrNotFound) {
		return true
	}
	return isCode(err, errcode.ScheduleNotFound) || isCode(err, errcode.JobNotFound)
}

// errText is err's message with its code, as the CLI prints it.
func errText(err error) string {
	var ce *errcode.Error
	if errors.As(err, &ce) {
		return fmt.Sprintf("%v (%s)", err, ce.Code)
	}
	return err.Error()
}

// isCode reports whether err carries code.
func isCode(err error, code errcode.Code) bool {
	var ce *errcode.Error
	return errors.As(err, &ce) && ce.Code == code
}
