package core

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/state"
)

// Core is the job service. Its methods are safe for concurrent use.
// Its locks and their order are described in the package doc.
type Core struct {
	Opts  Options
	Store *state.Store
	// ctx ends when Close starts: supervisors then checkpoint their job
	// and stop its execution, leaving it to resume on the next Open.
	Ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // supervisors; Add only under mu while !closing

	// names holds the per-name operation guards (lock order 1).
	names NameGuards
	// updating marks names with an update or rescale under way (no lock).
	Updating updates

	// live holds the live execution of each job name (the one reading
	// data), readable without mu: see ElementsRead.
	Live sync.Map // job name -> *jobRun

	// changes is notified after every registry write, metrics sample and
	// forgotten execution.
	Changes changes

	// hooks are called by the service at points tests hold open; set them
	// before the first call that reaches them.
	Hooks Hooks

	// mu is lock order 3: never held across waits for an execution.
	mu sync.Mutex
	// running holds the live executions by job ID (job ID -> *jobRun).
	// It is written under mu, so that a check of it under mu stays true
	// until mu is released, and read with or without mu.
	running sync.Map
	// closing is set under mu by Close; read with or without mu.
	Closing atomic.Bool
	// fault is set once, by the first store write that finds the store
	// failed (see fault.go); read without a lock.
	fault atomic.Pointer[storeFault]
	// resuming holds the jobs found active at Open that have not resumed
	// yet (job ID -> time.Time the service opened); no lock.
	resuming sync.Map
	// connFaults holds the jobs whose execution stopped because a
	// connector was unavailable, waiting to be started again (job ID ->
	// *connectorFault; fault_connector.go); no lock.
	connFaults sync.Map
	// recovered is closed when recovery has finished.
	recovered chan struct{}
	// eventSeq is the last event sequence number of each job that recorded
	// one since Open (events.go); guarded by mu.
	eventSeq map[string]uint64
	// eventCap is MaxEventsPerJob (tests lower it before the first event).
	eventCap uint64
	// histories holds the metrics history of each job with a live
	// execution (job ID -> *jobHistory; history.go); no lock.
	histories sync.Map
	// flows are the registered flows (flow.go), called in order; set
	// before Start, then only read.
	flows []Flow
}

// Hooks are calls into tests at points of the service's work; the zero
// value calls nothing (production).
type Hooks struct {
	// paused, when set, is called by Update and UpdateOptions while the
	// job's old execution is paused (with the name guard and the
	// execution's cpMu held, the registry lock not held), with the job's ID.
	Paused func(jobID string)
	// Checked, when set, is called by an in-place update once it has
	// loaded and checked the new pipeline, before it takes the old
	// execution's cpMu (the name guard held, the registry lock not), with
	// the old job's ID.
	Checked func(jobID string)
	// updatePhase, when set, is called by an in-place update after each of
	// its phases once the next has not begun ("handed-over", "persisted",
	// "cut", "finished"), with the old job's ID and the locks the update
	// holds then (the name guard, both executions' cpMu).
	UpdatePhase func(jobID, phase string)
	// resuming, when set, is called before a job found active at Open
	// resumes (no lock held), with the job's ID.
	Resuming func(jobID string)
	// finishing, when set, is called by a supervisor whose execution ended
	// by itself or was cancelled, before it records the job's end (no
	// lock held), with the job's ID.
	Finishing func(jobID string)
	// started, when set, is called by launch once a job's execution has
	// started and before the job is recorded as started (no lock held).
	Started func(jr *Run)
	// snapshotWrite, when set, is called before a snapshot's data is
	// committed (no lock held), with its ID and size; an error fails the
	// snapshot as a storage error would.
	SnapshotWrite func(id string, size int64) error
	// importBatchBytes, when positive, replaces the import's batch size.
	ImportBatchBytes int64
	// importBatch, when set, is called after batch n (from 1) of an
	// import of snapshot id is written, before the next (no lock held);
	// an error stops the import as a failed read would.
	ImportBatch func(id string, n int) error
}

// runningJob returns the live execution of job id, or nil.
func (s *Core) RunningJob(id string) *Run {
	if v, ok := s.running.Load(id); ok {
		return v.(*Run)
	}
	return nil
}

// lockName takes the guard of job name (lock order 1; see the package
// doc) and returns its release.
func (s *Core) LockName(ctx context.Context, name string) (unlock func(), err error) {
	return s.names.Lock(ctx, name)
}

// Open opens (creating if needed) the data directory and its state store,
// with hooks (the zero Hooks outside tests). The flows built on the core
// then Register, and Start resumes the jobs.
func Open(ctx context.Context, opts Options, hooks Hooks) (*Core, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if !opts.Inspect {
		if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("creating the data directory: %w", err)
		}
	}
	dir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("resolving the data directory: %w", err)
	}
	opts.DataDir = dir
	var st *state.Store
	if opts.Inspect {
		if _, err := os.Stat(filepath.Join(dir, "state")); err != nil {
			return nil, fmt.Errorf("%s is not a weir data directory (it has no state store): %w", dir, err)
		}
		st, err = state.OpenReadOnly(filepath.Join(dir, "state"), opts.Logger)
	} else {
		st, err = state.OpenFS(filepath.Join(dir, "state"), opts.Logger, opts.StoreFS)
	}
	if err != nil {
		return nil, err
	}
	if opts.Replicator != nil {
		st.SetReplicator(opts.Replicator)
	}
	s := &Core{Opts: opts, Store: st, Hooks: hooks, recovered: make(chan struct{}), eventCap: record.MaxEventsPerJob}
	s.Ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return s, nil
}

// Start calls every registered flow's Open, then resumes every job that
// was RUNNING or DRAINING when the service last stopped, from its last
// checkpoint. On an error the store is closed again.
//
// Start returns once the registry is read: the jobs resume in the
// background, a few at a time (recoveryConcurrency), while the service
// already answers; a job not yet resumed reads with condition RESUMING.
// Recovered tells when every one has resumed.
func (s *Core) Start() error {
	if s.Opts.Inspect {
		// Records only: nothing resumes, nothing is repaired.
		close(s.recovered)
		return nil
	}
	for _, f := range s.flows {
		if err := f.Open(s.Ctx); err != nil {
			s.cancel()
			s.wg.Wait()
			return errors.Join(err, s.Store.Close())
		}
	}
	s.Spawn(s.storageRetryLoop)
	if err := s.recover(); err != nil {
		s.cancel()
		s.wg.Wait()
		return errors.Join(err, s.Store.Close())
	}
	return nil
}

// Recovered returns a channel closed once every job that was active when
// the service opened has resumed (or failed to, which its record says).
func (s *Core) Recovered() <-chan struct{} { return s.recovered }

// DataDir returns the absolute data directory.
func (s *Core) DataDir() string { return s.Opts.DataDir }

// Close checkpoints every running job (write and commit), stops its
// execution and closes the store. The jobs stay RUNNING (or DRAINING) in
// the registry and resume on the next Open. ctx bounds the wait.
func (s *Core) Close(ctx context.Context) error {
	// Under the registry lock: no supervisor starts (spawn) after this.
	already := false
	_ = s.Update(func(tx *Tx) error {
		already = s.Closing.Swap(true)
		return nil
	})
	if already {
		return nil
	}
	s.cancel()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("stopping jobs: %w (the store stays open; jobs resume from their last checkpoint)", ctx.Err())
	}
	return s.Store.Close()
}

func (s *Core) Now() time.Time { return s.Opts.Clock.Now().ToTime() }

// SubmitRequest is a new job.
type SubmitRequest struct {
	Name string
	// Pipeline is the YAML text.
	Pipeline string
	// PipelineFile names the pipeline in error messages (default "pipeline.yaml").
	PipelineFile string
	// BaseDir resolves relative paths in the pipeline; it must be absolute.
	BaseDir string
	Options record.JobOptions
	// ServiceOptions are the request's service options ("KEY" or
	// "KEY=VALUE", package serviceopt), checked before anything changes.
	ServiceOptions []string
	// RequestID, when set, makes the request idempotent for 24 hours: a
	// retry with the same ID gets the first answer (REQUEST_ID_REUSED when
	// the request differs).
	RequestID string
	// Partition is the partition a bounded job runs: the partition of the
	// input manifests its file sources read.
	Partition string
	// Manifest makes every file source read this input manifest (at
	// Partition) instead of its path; its files are checked at
	// submission (MANIFEST_CHANGED, MANIFEST_NOT_FOUND).
	Manifest string
	// Shadow makes a partition run stage without publishing (weir run
	// --shadow).
	Shadow bool
}

// submitNew creates and starts a new job of req (Submit without service
// options).
func (s *Core) SubmitNew(ctx context.Context, req SubmitRequest) (*record.Job, error) {
	if _, err := s.AdmitChange(req.Name, "", &req.Options); err != nil {
		return nil, err
	}
	if req.Pipeline == "" {
		return nil, errcode.Errorf(errcode.InvalidPipeline, "the pipeline is empty: send the YAML text of the pipeline")
	}
	if req.Shadow && req.Partition == "" {
		return nil, errcode.Errorf(errcode.InvalidRequest, "a shadow run is a partition run: give --partition P (and --manifest M) with --shadow")
	}
	if req.BaseDir == "" || !filepath.IsAbs(req.BaseDir) {
		return nil, errcode.Errorf(errcode.InvalidRequest, "base_dir must be an absolute directory (the client's working directory), got %q", req.BaseDir)
	}
	if req.PipelineFile == "" {
		req.PipelineFile = "pipeline.yaml"
	}
	var digest string
	if req.Manifest != "" || req.Partition != "" {
		d, err := s.checkBinding(req.Manifest, req.Partition)
		if err != nil {
			return nil, err
		}
		digest = d
	}
	unlock, err := s.LockName(ctx, req.Name) // lock order 1: the name's guard
	if err != nil {
		return nil, err
	}
	defer unlock()
	l, err := s.LineageForNewJob(req.Name)
	if err != nil {
		return nil, s.partitionBusy(req, err)
	}
	now := s.Now()
	id, err := record.NewJobID(now)
	if err != nil {
		return nil, errcode.Internalf("%w", err)
	}
	j := &record.Job{ID: id, Name: req.Name, State: record.StatePending, CreateTime: now, StateTime: now,
		Generation: l.Generation + 1, Pipeline: req.Pipeline, PipelineFile: req.PipelineFile,
		BaseDir: req.BaseDir, Options: req.Options, Partition: req.Partition, Manifest: req.Manifest, ManifestDigest: digest, Shadow: req.Shadow,
		History: []record.StateChange{{State: record.StatePending, Time: now}}}
	if err := s.Create(ctx, l, j); err != nil {
		return nil, err
	}
	return j, nil
}

// create loads j, a new PENDING job (YAML or Go program) of lineage l,
// records it with its graph as the name's active job in one write, and
// starts it. The caller holds the name's guard, not the registry lock.
func (s *Core) Create(ctx context.Context, l *record.Lineage, j *record.Job) error {
	p, err := s.Load(j)
	if err != nil {
		return err
	}
	g := p.Graph()
	canon, err := g.Canonical()
	if err != nil {
		where := ""
		if j.PipelineFile != "" {
			where = j.PipelineFile + ": "
		}
		return errcode.Errorf(errcode.InvalidPipeline, "%sserialising the pipeline graph: %w", where, err)
	}
	j.Graph, j.Type = canon, record.TypeOf(g)
	l.Generation, l.ActiveJobID, l.LatestJobID = j.Generation, j.ID, j.ID
	w := &state.Write{}
	if err := PutJSON(w, record.JobKey(j.ID), j); err != nil {
		return err
	}
	if err := PutJSON(w, record.LineageKey(j.Name), l); err != nil {
		return err
	}
	err = s.Update(func(tx *Tx) error {
		if err := tx.Admit(j.Name); err != nil {
			return err
		}
		tx.StateEvent(w, j, 0)
		if err := tx.Apply(w); err != nil {
			return errcode.Internalf("recording job %s: %w", j.ID, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	log := s.Opts.Logger.With("job_id", j.ID, "job_name", j.Name, "generation", j.Generation, "type", j.Type)
	if j.SDK != "" {
		log = log.With("sdk", j.SDK)
	}
	log.Info("job created")
	return s.Launch(ctx, j, p.Program(), nil)
}

// Get returns the job with ID or name ref (a name means its active job,
// or its latest job when none is active). It takes no lock: it never
// waits for a handover, a rescale or a checkpoint.
func (s *Core) Get(ref string) (*record.Job, error) {
	j, err := s.Resolve(ref)
	return s.decorate(s.WithCondition(j)), err
}

// Status filters List.
type Status string

// List filters.
const (
	StatusActive     Status = "active"
	StatusTerminated Status = "terminated"
	StatusAll        Status = "all"
)

// ParseStatus parses a list filter; "" means all.
func ParseStatus(v string) (Status, error) {
	switch Status(v) {
	case "", StatusAll:
		return StatusAll, nil
	case StatusActive, StatusTerminated:
		return Status(v), nil
	}
	return "", errcode.Errorf(errcode.InvalidFilter, "status %q is not a job filter: use active, terminated or all", v)
}

// List returns the jobs matching status, newest first. It takes no lock.
func (s *Core) List(status Status) ([]*record.Job, error) {
	var jobs []*record.Job
	err := s.Store.Scan("job/", func(_ string, v []byte) error {
		j := &record.Job{}
		if err := UnmarshalJob(v, j); err != nil {
			return err
		}
		switch {
		case status == StatusActive && !j.Active(), status == StatusTerminated && j.Active():
			return nil
		}
		jobs = append(jobs, s.WithCondition(j))
		return nil
	})
	if err != nil {
		return nil, errcode.Internalf("listing jobs: %w", err)
	}
	sort.SliceStable(jobs, func(a, b int) bool {
		if !jobs[a].CreateTime.Equal(jobs[b].CreateTime) {
			return jobs[a].CreateTime.After(jobs[b].CreateTime)
		}
		return jobs[a].ID > jobs[b].ID
	})
	return jobs, nil
}

// Drain asks the job ref to drain: its sources stop reading, every open
// window fires and the job becomes DRAINED. Draining a DRAINING job is
// harmless; draining a batch job or a terminal job is an error.
func (s *Core) Drain(ctx context.Context, ref string) (*record.Job, error) {
	if err := s.RefuseIfStoreFailed(); err != nil {
		return nil, err
	}
	unlock, err := s.LockJob(ctx, ref) // lock order 1
	if err != nil {
		return nil, err
	}
	defer unlock()
	var j *record.Job
	err = s.Update(func(tx *Tx) error {
		// Resolved again under the guard: an update may have replaced the job.
		if j, err = s.Resolve(ref); err != nil {
			return err
		}
		return s.drain(tx, j)
	})
	if err != nil {
		return nil, err
	}
	return j, nil
}

// drain moves j to DRAINING (or leaves a draining job so) and drains its
// execution.
func (s *Core) drain(tx *Tx, j *record.Job) error {
	switch {
	case j.State.Terminal():
		return errcode.Errorf(errcode.JobTerminated, "job %s (%s) is %s, a final state: there is nothing to drain", j.ID, j.Name, j.State)
	case j.Type == record.TypeBatch:
		return errcode.Errorf(errcode.BatchJobNotDrainable, "job %s (%s) is a batch job: it finishes by itself; drain applies to streaming jobs (cancel stops a batch job early)", j.ID, j.Name)
	case j.State == record.StateDraining:
		return nil
	case j.State == record.StatePending:
		// As in Dataflow, a drain request applies to a running job only;
		// PENDING → DRAINING is the service's own edge (the successor of a
		// draining job).
		return errcode.Errorf(errcode.IllegalTransition, "job %s (%s) is %s: only a running job can be drained (cancel stops it)", j.ID, j.Name, j.State)
	}
	if err := tx.Transition(j, record.StateDraining, "drain requested"); err != nil {
		return err
	}
	if jr := s.RunningJob(j.ID); jr != nil {
		jr.X.Drain()
	}
	return nil
}

// lockJob takes the guard of the name of job ref (an ID or a name) and
// returns its release; an unknown ref is JOB_NOT_FOUND.
func (s *Core) LockJob(ctx context.Context, ref string) (unlock func(), err error) {
	name := ref
	if !record.IsJobName(ref) {
		// Job IDs never match the name rule.
		j, err := s.Resolve(ref)
		if err != nil {
			return nil, err
		}
		name = j.Name
	}
	return s.LockName(ctx, name) // lock order 1
}

// Cancel asks the job ref to stop as fast as possible: work not covered by
// a committed checkpoint is discarded (its messages stay unacknowledged in
// their subscription) and the job becomes CANCELLED.
func (s *Core) Cancel(ctx context.Context, ref string) (*record.Job, error) {
	if err := s.RefuseIfStoreFailed(); err != nil {
		return nil, err
	}
	unlock, err := s.LockJob(ctx, ref) // lock order 1
	if err != nil {
		return nil, err
	}
	defer unlock()
	var j *record.Job
	err = s.Update(func(tx *Tx) error {
		// Resolved again under the guard: an update may have replaced the job.
		if j, err = s.Resolve(ref); err != nil {
			return err
		}
		if j.State == record.StateCancelling {
			return nil
		}
		if err := tx.Transition(j, record.StateCancelling, "cancel requested"); err != nil {
			return err
		}
		if jr := s.RunningJob(j.ID); jr != nil {
			jr.X.Cancel()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return j, nil
}

// Metrics returns the metrics of job ref: live for a running job, final
// for a terminal one (nil when it never ran). It takes no lock but the
// execution's sampler's.
func (s *Core) Metrics(ref string) (*record.JobMetrics, error) {
	j, err := s.Resolve(ref)
	if err != nil {
		return nil, err
	}
	if jr := s.RunningJob(j.ID); jr != nil {
		return jr.MetricsAt(s.Now()), nil
	}
	return j.Metrics, nil
}

// DescribeMetrics is Metrics with, for a running job, the size of each
// keyed step's stored state (StepMetrics.StateBytes). It reads the store,
// so it serves a job's description (GET /v1/jobs/{id}), not every reader
// of metrics (the plan, Prometheus).
func (s *Core) DescribeMetrics(ref string) (*record.JobMetrics, error) {
	j, err := s.Resolve(ref)
	if err != nil {
		return nil, err
	}
	jr := s.RunningJob(j.ID)
	if jr == nil {
		return j.Metrics, nil
	}
	m := jr.MetricsAt(s.Now())
	s.addStateSizes(j, m)
	return m, nil
}

// addStateSizes sets the state size of every keyed step of running job
// j's metrics m, read from the store (state.Store.StateSize). A step
// whose size cannot be read is left without one (logged).
func (s *Core) addStateSizes(j *record.Job, m *record.JobMetrics) {
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stateSizeTimeout)
	defer cancel()
	g, _ := graph.Parse(j.Graph) // nil: no open windows are counted
	for i := range m.Steps {
		st := &m.Steps[i]
		if st.Keys == nil {
			continue
		}
		var gs *graph.Step
		if g != nil {
			gs = g.Step(st.Name)
		}
		agg := gs != nil && (gs.Kind == graph.KindCombinePerKey || gs.Kind == graph.KindGroupByKey)
		// An aggregation's open windows are counted in the size's scan,
		// when it scans (small state); else by a bounded scan of their own.
		var windows int64
		var each func([]byte)
		if agg {
			each = func(v []byte) {
				if n, ok := runner.AggregationWindows(v); ok {
					windows += int64(n)
				}
			}
		}
		n, exact, err := s.Store.StateSize(ctx, j.StateKey(), st.Name, each)
		if err != nil {
			s.Opts.Logger.Warn("measuring a step's state", "job_id", j.ID, "step", st.Name, "error", err)
			continue
		}
		st.StateBytes, st.StateBytesEstimated = &n, !exact
		switch {
		case agg && exact:
			st.OpenWindows = &windows
		case agg:
			s.addOpenWindows(ctx, j, st)
		}
	}
}

// openWindowsScan bounds how many stored keys one describe reads to count
// a step's open windows; beyond it the count is estimated from those.
const openWindowsScan = 100_000

// addOpenWindows sets the open windows of aggregation step st of job j,
// whose state is too large for StateSize to have scanned: counted over its
// stored keys, or estimated from the first openWindowsScan for more,
// scaled by the step's key count.
func (s *Core) addOpenWindows(ctx context.Context, j *record.Job, st *record.StepMetrics) {
	var windows int64
	scanned, complete, err := s.Store.ScanStateValues(ctx, j.StateKey(), st.Name, openWindowsScan, func(v []byte) {
		if n, ok := runner.AggregationWindows(v); ok {
			windows += int64(n)
		}
	})
	if err != nil {
		s.Opts.Logger.Warn("counting a step's open windows", "job_id", j.ID, "step", st.Name, "error", err)
		return
	}
	if !complete && scanned > 0 && st.Keys != nil {
		windows = windows * *st.Keys / int64(scanned)
	}
	st.OpenWindows, st.OpenWindowsEstimated = &windows, !complete
}

// stateSizeTimeout bounds the store reads of one describe's state sizes.
const stateSizeTimeout = 2 * time.Second

// Progress is how far the live execution of a job has read.
type Progress struct {
	JobID string
	// Started tells executions of one job apart (a restart, a rescale).
	Started time.Time
	// Read counts the elements the execution's sources have read.
	Read int64
}

// ElementsRead returns how far the live execution of job name has read,
// without waiting for the service lock: progress monitors keep sampling
// during an update. ok is false when no execution of the name is live.
func (s *Core) ElementsRead(name string) (p Progress, ok bool) {
	v, ok := s.Live.Load(name)
	if !ok {
		return Progress{}, false
	}
	jr := v.(*Run)
	res := jr.X.Metrics()
	p = Progress{JobID: jr.ID, Started: jr.started}
	for _, st := range jr.Prog.Graph.Steps {
		if st.Kind == graph.KindSource {
			p.Read += res.Step(st.Name).ElementsIn
		}
	}
	return p, true
}

// RunningMetrics returns the live metrics of every running job, keyed by
// job; for the Prometheus endpoint. It takes no lock but the executions'
// samplers'.
func (s *Core) RunningMetrics() map[record.Summary]*record.JobMetrics {
	out := map[record.Summary]*record.JobMetrics{}
	now := s.Now()
	s.running.Range(func(k, v any) bool {
		j, err := s.ReadJob(k.(string))
		if err == nil {
			out[j.Summary()] = v.(*Run).MetricsAt(now)
		}
		return true
	})
	return out
}

// Transition moves j to state to and persists it, with its event.
func (tx *Tx) Transition(j *record.Job, to record.JobState, reason string) error {
	s := tx.s
	if s == nil {
		return errTxDone
	}
	from := j.State
	if err := record.Transition(j, to, s.Now(), reason); err != nil {
		return err
	}
	w := &state.Write{}
	if err := tx.TerminalWrite(w, j); err != nil {
		return err
	}
	tx.StateEvent(w, j, from)
	if err := tx.Apply(w); err != nil {
		return errcode.Internalf("recording the %s state of job %s: %w", to, j.ID, err)
	}
	s.Opts.Logger.Info("job state changed", "job_id", j.ID, "job_name", j.Name, "state", to, "reason", reason)
	return nil
}

// TerminalWrite adds j's record to w and, when j is terminal, releases its
// name: the lineage no longer has an active job (the lineage is read to be
// written).
func (tx *Tx) TerminalWrite(w *state.Write, j *record.Job) error {
	s := tx.s
	if s == nil {
		return errTxDone
	}
	if err := PutJSON(w, record.JobKey(j.ID), j); err != nil {
		return err
	}
	if !j.State.Terminal() {
		return nil
	}
	l, err := s.ReadLineage(j.Name)
	if err != nil {
		return err
	}
	if l.ActiveJobID == j.ID {
		l.ActiveJobID = ""
		return PutJSON(w, record.LineageKey(j.Name), l)
	}
	return nil
}

// apply writes registry changes w durably in a Tx of its own (w modifies
// no record read without the lock, see the callers).
func (s *Core) Apply(w *state.Write) error {
	return s.Update(func(tx *Tx) error { return tx.Apply(w) })
}

// stored returns the result of a store write, noting a failed store (which
// stops every job, see fault.go) and then answering STORAGE_UNAVAILABLE.
func (s *Core) stored(err error) error {
	if err != nil && s.noteStoreError(err) {
		return errcode.Errorf(errcode.StorageUnavailable, "%w", err)
	}
	return err
}

// admitChange is the first check of every request that creates or changes
// a job: the store works, name follows the job-name rule, the transform
// name mapping parses (its result is returned; "" is no mapping) and opts,
// when given, are valid once defaulted.
func (s *Core) AdmitChange(name, mappingJSON string, opts *record.JobOptions) (compat.Mapping, error) {
	if err := s.RefuseIfStoreFailed(); err != nil {
		return nil, err
	}
	if err := record.ValidateJobName(name); err != nil {
		return nil, err
	}
	mapping, err := compat.ParseMapping(mappingJSON)
	if err != nil {
		return nil, errcode.Errorf(errcode.InvalidMapping, "--transform-name-mapping: %w", err)
	}
	if opts != nil {
		opts.EnsureDefaults()
		if err := opts.Validate(); err != nil {
			return nil, err
		}
	}
	return mapping, nil
}

// compatibleReport is the report of a request that ran no compatibility
// check (a new job).
func CompatibleReport() compat.Report { return compat.Report{Compatible: true} }

// recoveryDone reports whether the service has finished resuming the jobs
// of its store.
func (s *Core) RecoveryDone() bool {
	select {
	case <-s.recovered:
		return true
	default:
		return false
	}
}

// HasRunningJob reports whether name's active job is RUNNING or DRAINING.
func (s *Core) HasRunningJob(name string) bool {
	l, err := s.ReadLineage(name)
	if err != nil || l.ActiveJobID == "" {
		return false
	}
	j, err := s.ReadJob(l.ActiveJobID)
	return err == nil && (j.State == record.StateRunning || j.State == record.StateDraining)
}

// PubSubSourceKind is the source identity kind of ReadFromPubSub steps.
const PubSubSourceKind = "pubsub"

// BrokerCallTimeout bounds the broker calls of snapshot bookkeeping
// (deleting subscription snapshots) made without a caller's context.
const BrokerCallTimeout = 10 * time.Second
