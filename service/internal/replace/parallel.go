package replace

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/internal/flowstep"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/duration"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/serviceopt"
	"github.com/weir-dev/weir/state"
	"github.com/weir-dev/weir/window"
	"github.com/weir-dev/weir/yamlpipe"
)

// Automated parallel replacement (issue 10 item 3): the new job starts at
// once beside the old one, on its own subscription of each topic the old
// job reads, positioned where the old job's subscription stands; both
// write their SQL tables through a façade view (io/sqlsink), each (key,
// window) written by the job that owns it under the cut-over rule; after
// min_parallel_pipelines_duration (the service's clock) and once the old
// job's watermark has passed every window it owns, the old job is drained.
//
// The cut-over rule (weir_replace_rewind=false): the new job starts at the
// old subscription's position P (its acknowledged messages), so it sees
// the windows that began before its input only in part. When the new
// subscription is positioned, T0 is the newest event time the old job's
// sources have produced (they have read at least to P, so for input about
// in event-time order every message up to P is at or before T0, and no
// window starting after T0 has fired yet: the old watermark is behind
// T0). T0 is recorded with the positions, before the new job starts. The
// new job owns the windows that start after T0, which it sees whole; the
// old job those that start at or before it. A sink leaves out elements of
// windows its job does not own (sqlsink.Config.Owns,
// the Pub/Sub sink's Owns), except that the old job writes every window to
// SQL (a newer generation's row wins in the view, and the old rows keep
// the view whole should the new job be rolled back). The old job is
// drained only once its data watermark has passed T0 plus the longest
// window (and allowed lateness) of its pipeline, so every window it owns
// has fired complete before its drain fires partial panes, which are then
// of windows it does not own.
//
// Phases, recorded on both jobs (the new job's record is the flow's
// durable state): PREPARING (the new job is created PENDING and its
// subscriptions are positioned) → OVERLAP (the new job runs) →
// DRAINING_OLD (the old job drains) → CUT_OVER (the old job ended; its
// façade generation is marked ended, the subscriptions the service created
// for it are deleted). FAILED when the new job fails or is cancelled
// during the overlap (the old job is kept), ROLLED_BACK through
// abortParallel. After CUT_OVER the driver stays until the old
// generation's rows are compacted into the new table, once the old job
// ended and RollbackRetention has passed, and the new job has run that
// long.

// parallelBroker is what a parallel replacement needs of the broker
// (the server's Pub/Sub broker implements it; broker_test.go checks).
type parallelBroker interface {
	Subscription(ctx context.Context, name string) (contract.SubscriptionInfo, error)
	EnsureSubscription(ctx context.Context, name, topic string, cfg contract.SubscriptionConfig) (contract.SubscriptionInfo, error)
	CreateSubscriptionSnapshot(ctx context.Context, name, sub string) (contract.SubscriptionSnapshot, error)
	DeleteSubscriptionSnapshot(ctx context.Context, name string) error
	Seek(ctx context.Context, sub string, target contract.SeekTarget) (contract.SeekResult, error)
	DeleteSubscription(ctx context.Context, name string) error
}

// restrictWindows makes the sinks of prog, job j's program, write only the
// windows j owns: all of them, but for the jobs of a parallel replacement
// (the cut-over rule, looked up as each pane is written).
func (s *Replace) restrictWindows(j *record.Job, prog *contract.Program) {
	id := j.ID
	for _, st := range prog.Graph.Steps {
		code, ok := prog.Code[st.Name].(contract.WindowRestrictedSink)
		if !ok || st.Kind != graph.KindSink || st.Sink == nil {
			continue
		}
		kind := st.Sink.Kind
		code.RestrictWindows(func(w window.Window) bool { return s.owns(id, kind, w) })
	}
}

// jobEnv adds to env, the environment a YAML pipeline of job j is loaded
// in, for the new job of a parallel replacement, the façade views its SQL
// sinks write behind, and registers the flow's cut-over rule for both its
// jobs.
func (s *Replace) jobEnv(j *record.Job, env *yamlpipe.JobEnv) {
	rep := j.Replacement
	if rep == nil || rep.Strategy != record.StrategyParallel || rep.Parallel == nil || rep.Phase == record.PhaseRolledBack {
		return
	}
	if j.ID == rep.NewJobID {
		// The new job writes its own generation's tables behind the views
		// (the old job's plain sinks join as their generation by themselves).
		env.SQLFacade = true
		flow := rep.Parallel
		if nj, err := s.ReadJob(rep.NewJobID); err == nil && nj.Replacement != nil && nj.Replacement.Parallel != nil {
			flow = nj.Replacement.Parallel
		}
		// A parity gate that has not passed holds the new generation back
		// from the views (a gate revealed keeps it served).
		env.SQLFacadeHeld = flow.Gate != nil && !flow.Gate.Revealed
		s.cutRuleOf(rep.NewJobID, rep.OldJobID, rep.Rewind, flow.CutTime)
	} else if nj, err := s.ReadJob(rep.NewJobID); err == nil && nj.Replacement != nil && nj.Replacement.Parallel != nil {
		s.cutRuleOf(rep.NewJobID, rep.OldJobID, rep.Rewind, nj.Replacement.Parallel.CutTime)
	}
}

// parallelChecks returns the cut span of the old pipeline g (the longest
// fixed or sliding window plus allowed lateness), refusing pipelines
// whose windows never end or have no bound (global, sessions) feeding a
// sink, which a plain continuation cannot hand over by the cut-over rule.
func parallelChecks(g *graph.Pipeline, which string) (time.Duration, error) {
	var span mtime.Duration
	for _, st := range g.Steps {
		if st.Kind != graph.KindSink {
			continue
		}
		for _, cid := range st.Inputs {
			c := g.Collection(cid)
			if c == nil {
				continue
			}
			ws := c.Windowing
			switch ws.Fn.Kind {
			case window.KindFixed, window.KindSliding:
				span = max(span, ws.Fn.Size+ws.AllowedLateness)
			case window.KindGlobal, "":
				if st.Sink != nil && (st.Sink.Kind == "sql" || st.Sink.Kind == "pubsub") {
					// Totals of the global window would be replaced by the
					// new job's partial ones.
					return 0, fmt.Errorf("the %s pipeline's sink %s writes elements of the global window, which never closes, so no cut-over time can hand it from one job to the other (the new job, starting at the old subscription's position, would replace complete totals with partial ones): window the input (fixed or sliding), or stop-and-replace the job", which, st.Name)
				}
			case window.KindSessions:
				// Ownership by session start against T0 is not sound: a
				// session the old job started before T0 can grow past it
				// and, in the new job, merge with sessions that start after
				// T0, so one (key, session) would be split between the jobs
				// with neither total complete.
				return 0, fmt.Errorf("the %s pipeline's sink %s writes session windows: a session that starts before the cut-over time can grow past it and merge with sessions the new job starts after it, so no cut-over time gives each session to one job with a complete total: use fixed or sliding windows, or stop-and-replace the job with %s=false", which, st.Name, serviceopt.KeyRewind)
			default:
				return 0, fmt.Errorf("the %s pipeline's sink %s writes %s windows, whose end the cut-over rule cannot bound: use fixed or sliding windows, or stop-and-replace the job", which, st.Name, ws.Fn.Kind)
			}
		}
	}
	return time.Duration(span) * time.Millisecond, nil
}

// publishes reports whether g writes to Pub/Sub.
func publishes(g *graph.Pipeline) bool {
	for _, st := range g.Steps {
		if st.Kind == graph.KindSink && st.Sink != nil && st.Sink.Kind == "pubsub" {
			return true
		}
	}
	return false
}

// parallelReplace starts the parallel replacement of old by req's
// pipeline: every check, then the new job PENDING as the name's active job
// (phase PREPARING) in one write; then the flow goes on at once (its
// subscriptions positioned, the new job started: OVERLAP) and a driver
// takes it to its end. A restarted service resumes it from the new job's
// record.
func (s *Replace) parallelReplace(ctx context.Context, req core.UpdateRequest, plan serviceopt.Plan, old *record.Job) (*core.UpdateResult, error) {
	pb, ok := s.Opts.Broker.(parallelBroker)
	if !ok || s.Opts.Broker == nil {
		return nil, errcode.Errorf(errcode.ReplacementUnavailable, "a parallel replacement gives the new job its own subscriptions, which needs the server's Pub/Sub broker; job %s (%s) was not changed", old.Name, old.ID)
	}
	sameName := old.Name == req.Name
	unlock, err := s.LockName(ctx, req.Name) // lock order 1: the new job's name
	if err != nil {
		return nil, err
	}
	defer unlock()
	l, old, err := s.replacementLineage(req.Name, old)
	if err != nil {
		return nil, err
	}
	if old.Replacement != nil && !old.Replacement.Phase.Final() {
		return nil, errcode.Errorf(errcode.UpdateInProgress, "job %s (%s) is in a replacement (%s, %s) already: wait for it to end (weir jobs describe %s)", old.Name, old.ID, old.Replacement.Strategy, old.Replacement.Phase, old.ID)
	}
	now := s.Now()
	id, err := record.NewJobID(now)
	if err != nil {
		return nil, errcode.Internalf("%w", err)
	}
	gen := max(l.Generation, old.Generation) + 1
	maxStop := int64(0)
	if plan.HasMaxStop {
		maxStop = plan.MaxStop.Milliseconds()
	}
	rep := &record.Replacement{Strategy: record.StrategyParallel, Phase: record.PhasePreparing, PhaseTime: now, OldJobID: old.ID, NewJobID: id,
		MaxStopMillis: maxStop, HasMaxStop: plan.HasMaxStop, CancelOnDrainTimeout: plan.CancelOnDrainTimeout, Preallocate: plan.Preallocate, Rewind: plan.Rewind,
		Parallel: &record.ParallelFlow{MinParallelMillis: plan.MinParallel.Milliseconds()}}
	if plan.Gate == serviceopt.GateParity {
		rep.Parallel.Gate = &record.ParityGate{Budget: plan.ParityBudget, Windows: plan.ParityWindows,
			DeadlineMillis: plan.ParityDeadline.Milliseconds(), Outcome: record.GateHolding}
	}
	nj := &record.Job{ID: id, Name: req.Name, State: record.StatePending, CreateTime: now, StateTime: now, Generation: gen,
		Pipeline: req.Pipeline, PipelineFile: req.PipelineFile, BaseDir: req.BaseDir, Options: req.Options,
		ReplacesJobID: old.ID, Replacement: rep,
		History: []record.StateChange{{State: record.StatePending, Time: now, Reason: "parallel replacement of job " + old.ID}}}
	if sameName {
		// Both run under one name: the new job's state and subscriptions
		// are its own (and its successors').
		nj.StateLineage = fmt.Sprintf("%s~g%d", req.Name, gen)
	}
	oldProg, err := s.LoadGraph(old)
	if err != nil {
		return nil, errcode.Errorf(errcode.ReplacementUnavailable, "job %s (%s): its pipeline no longer loads, so its sources cannot be handed over: %w", old.Name, old.ID, err)
	}
	og := oldProg.Graph()
	span, err := parallelChecks(og, "old")
	if err != nil {
		return nil, errcode.Errorf(errcode.ReplacementUnavailable, "job %s (%s) was not changed: %w", old.Name, old.ID, err)
	}
	rep.Parallel.CutSpanMillis = span.Milliseconds()
	rep.Parallel.WaitWatermark = !plan.Rewind || publishes(og)
	// The subscriptions: a source of the old job reads the subscription
	// named after it (a topic source), the user's named subscription, or
	// the one its own replacement gave it; the new job gets one of its own
	// on the same topic (replace_parallel_position.go).
	oldSrcs, err := parallelOldSources(ctx, pb, old, og)
	if err != nil {
		return nil, err
	}
	// The new pipeline is loaded for its graph first: its topic sources
	// decide the subscriptions it is loaded with for real.
	gp, err := s.LoadGraph(nj)
	if err != nil {
		return nil, err
	}
	ng := gp.Graph()
	if _, err := parallelChecks(ng, "new"); err != nil {
		return nil, errcode.Errorf(errcode.ReplacementUnavailable, "job %s (%s) was not changed: %w", old.Name, old.ID, err)
	}
	rep.Parallel.WaitWatermark = rep.Parallel.WaitWatermark || publishes(ng)
	if plan.Rewind {
		// Checked now, before anything changes, from the old job's last
		// checkpoint; computed again when the subscriptions are positioned.
		if _, err := s.rewind.Point(ctx, old, ng); err != nil {
			return nil, err
		}
	}
	for _, st := range ng.Steps {
		if st.Kind != graph.KindSource || st.Source == nil || st.Source.Kind != core.PubSubSourceKind {
			continue
		}
		topic, named, err := parallelNewTopic(ctx, pb, old, oldSrcs, st)
		if err != nil {
			return nil, err
		}
		oldStep := ""
		for name, src := range oldSrcs {
			if src.topic == topic && (oldStep == "" || name == st.Name) {
				oldStep = name
			}
		}
		if oldStep == "" {
			return nil, errcode.Errorf(errcode.ReplacementUnavailable, "step %s of the new pipeline reads topic %s, which job %s (%s) does not read, so there is no position to start it at: add the source in an update after the replacement; job %s was not changed",
				st.Name, topic, old.Name, old.ID, old.ID)
		}
		oldSub := oldSrcs[oldStep].sub
		newSub := contract.SubscriptionName(req.Name, st.Name)
		if sameName {
			newSub = contract.SubscriptionName(fmt.Sprintf("%s--g%d", req.Name, gen), st.Name)
		}
		if sameName || named != "" {
			// A step that names a subscription reads the new one in its
			// place; under the same name a topic source's default name is
			// the old job's.
			if nj.Subscriptions == nil {
				nj.Subscriptions = map[string]string{}
			}
			nj.Subscriptions[st.Name] = newSub
		}
		if newSub == oldSub || newSub == named {
			return nil, errcode.Errorf(errcode.ReplacementUnavailable, "step %s of the new pipeline would read subscription %s, which job %s (%s) or the user reads: rename the step; job %s was not changed", st.Name, newSub, old.Name, old.ID, old.ID)
		}
		rep.Parallel.Subscriptions = append(rep.Parallel.Subscriptions, record.ParallelSubscription{Step: st.Name, Topic: topic, Old: oldSub, New: newSub,
			OldNamed: oldSrcs[oldStep].named, InsteadOf: named})
	}
	rep.Notes = append(rep.Notes, namedSubscriptionNotes(old, rep.Parallel.Subscriptions)...)
	if len(rep.Parallel.Subscriptions) == 0 {
		return nil, errcode.Errorf(errcode.ReplacementUnavailable, "the new pipeline reads no Pub/Sub topic, so it has no position to start at beside job %s (%s); job %s was not changed", old.Name, old.ID, old.ID)
	}
	// Loading the new job registers the flow's window ownership for both
	// jobs; until the new job is recorded it is taken back on any way out
	// (a refusal, a validate-only request), and only the rule registered
	// here: a rule the old job had from an earlier flow stays.
	rule := s.cutRuleOf(nj.ID, old.ID, plan.Rewind, nil)
	recorded := false
	defer func() {
		if !recorded {
			s.cuts.CompareAndDelete(nj.ID, rule)
			s.cuts.CompareAndDelete(old.ID, rule)
		}
	}()
	p, err := s.Load(nj)
	if err != nil {
		return nil, err
	}
	for _, code := range p.Program().Code {
		if sk, ok := code.(contract.FacadeSink); ok {
			c := sk.FacadeTable()
			if err := sk.CheckFacadeTable(ctx); err != nil {
				return nil, errcode.Errorf(errcode.ReplacementUnavailable, "the new pipeline's sink %s cannot write beside job %s (%s): %w; job %s was not changed", c.Table, old.Name, old.ID, err, old.ID)
			}
			rep.Parallel.Tables = append(rep.Parallel.Tables, record.FacadeTable{Driver: c.Driver, DSN: c.DSN, Table: c.Table})
		}
	}
	if g := rep.Parallel.Gate; g != nil {
		// The gate holds back SQL rows only, and compares SQL outputs.
		switch {
		case publishes(og) || publishes(ng):
			return nil, errcode.Errorf(errcode.ReplacementUnavailable, "%s=%s compares the jobs' SQL outputs and holds the new job's rows back from the views until they agree, but the pipelines publish to Pub/Sub, which it cannot hold back: drop the gate; job %s (%s) was not changed",
				serviceopt.KeyCutoverGate, serviceopt.GateParity, old.Name, old.ID)
		case len(rep.Parallel.Tables) == 0:
			return nil, errcode.Errorf(errcode.ReplacementUnavailable, "%s=%s compares the jobs' SQL outputs, and the new pipeline writes no SQL table: drop the gate; job %s (%s) was not changed",
				serviceopt.KeyCutoverGate, serviceopt.GateParity, old.Name, old.ID)
		}
	}
	if req.ValidateOnly {
		return validated(old, fmt.Sprintf("parallel replacement: a job %s (generation %d) would run beside job %s and take over from it%s (validate only: nothing changed)", req.Name, gen, old.ID, gateNote(rep.Parallel.Gate))), nil
	}
	if err := s.recordReplacementJob(nj, l, ng, gen, req.PipelineFile); err != nil {
		return nil, err
	}
	recorded = true
	// The flow goes on at once (the request returns with the new job
	// running); what fails here is the driver's to retry.
	if err := s.positionSubscriptions(ctx, pb, nj.ID); err != nil {
		if !errors.Is(err, errNotYet) {
			s.Opts.Logger.Error("parallel replacement: positioning the subscriptions (retried)", "job_id", nj.ID, "error", err)
		}
	} else if err := s.startParallel(ctx, nj.ID); err != nil {
		s.Opts.Logger.Error("parallel replacement: starting the new job (retried)", "job_id", nj.ID, "error", err)
	}
	s.StartDriver(nj.ID)
	if nj, err = s.ReadJob(nj.ID); err != nil {
		return nil, errcode.Internalf("reading job %s: %w", id, err)
	}
	sum := old.Summary()
	how := "the old subscription's position"
	if plan.Rewind {
		how = "the old job's rewind point (every window it emits is complete)"
	}
	return &core.UpdateResult{Report: core.CompatibleReport(), Job: nj, Replaced: &sum,
		Notes: []string{fmt.Sprintf("parallel replacement: job %s runs beside job %s, reading from %s; job %s is drained once %s have passed and its watermark has passed the cut-over window%s; read SQL tables through their view (the table's name)",
			nj.ID, old.ID, how, old.ID, duration.Format(plan.MinParallel), gateNote(rep.Parallel.Gate))}}, nil
}

// gateNote words a parity gate for an update's notes ("" without one).
func gateNote(g *record.ParityGate) string {
	if g == nil {
		return ""
	}
	return fmt.Sprintf(", once %d consecutive complete windows of both jobs' SQL outputs agree within %d differing rows (the views serve the old job's rows alone until then; after %s without parity the new job is stopped)",
		g.Windows, g.Budget, duration.Format(time.Duration(g.DeadlineMillis)*time.Millisecond))
}

// errNotYet is a step of a flow that waits for something to happen.
var errNotYet = errors.New("not yet")

// startParallel starts the new job of the flow (PREPARING →
// OVERLAP): RUNNING, then the phase on both jobs, the old one with
// replaced_by_job_id. The caller holds the new job's name guard.
func (s *Replace) startParallel(ctx context.Context, newID string) error {
	nj, err := s.ReadJob(newID)
	if err != nil {
		return err
	}
	rep := nj.Replacement
	if rep.Phase != record.PhasePreparing {
		return nil
	}
	if nj.State == record.StatePending {
		// A new job that fails here ends the flow FAILED through the
		// driver (which holds no guard; this caller holds one).
		p, err := s.Load(nj)
		if err != nil {
			return s.Fail(nj, fmt.Sprintf("building the replacement job: %v", err))
		}
		if err := s.Launch(s.Ctx, nj, p.Program(), nil); err != nil {
			return err
		}
		if nj.State == record.StateFailed {
			return nil
		}
	}
	return s.Update(func(tx *core.Tx) error {
		if nj, err = s.ReadJob(newID); err != nil {
			return err
		}
		old, err := s.ReadJob(nj.Replacement.OldJobID)
		if err != nil {
			return err
		}
		now := s.Now()
		rep = nj.Replacement
		rep.Phase, rep.PhaseTime, rep.Parallel.OverlapStart = record.PhaseOverlap, now, &now
		oldRep := *rep
		old.ReplacedByJobID, old.Replacement = nj.ID, &oldRep
		w := &state.Write{}
		addPhaseEvents(tx, w, nj, old)
		if err := core.PutJSON(w, record.JobKey(nj.ID), nj); err != nil {
			return err
		}
		if err := core.PutJSON(w, record.JobKey(old.ID), old); err != nil {
			return err
		}
		if err := tx.Apply(w); err != nil {
			return errcode.Internalf("recording the overlap of jobs %s and %s: %w", old.ID, nj.ID, err)
		}
		s.Opts.Logger.Info("parallel replacement: overlap", "job_id", nj.ID, "old_job_id", old.ID,
			"min_parallel", duration.Format(time.Duration(rep.Parallel.MinParallelMillis)*time.Millisecond))
		return nil
	})
}

// dataWatermark returns the data watermark of job id's live execution (the
// minimum of its sources' output watermarks); ok false when it has none.
func (s *Replace) dataWatermark(id string) (mtime.Time, bool) {
	jr := s.RunningJob(id)
	if jr == nil {
		return 0, false
	}
	res := jr.X.Metrics()
	wm, have := mtime.MaxTimestamp, false
	for _, st := range jr.Prog.Graph.Steps {
		if st.Kind == graph.KindSource {
			wm, have = mtime.Min(wm, res.Step(st.Name).Watermark), true
		}
	}
	return wm, have
}

// ParallelProgress computes the progress of the flow of the new job nj
// (flowstep.ProgressOf, with the old job's live watermark).
func (s *Replace) ParallelProgress(nj *record.Job) flowstep.Progress {
	return flowstep.ProgressOf(flowstep.Input{Now: s.Now(), New: nj, OldWatermark: s.oldWatermark(nj.Replacement.OldJobID)})
}

// oldWatermark returns the data watermark of job id's live execution when
// it is finite, the zero time otherwise.
func (s *Replace) oldWatermark(id string) time.Time {
	if wm, ok := s.dataWatermark(id); ok && wm > mtime.MinTimestamp && wm < mtime.MaxTimestamp {
		return wm.ToTime()
	}
	return time.Time{}
}

// drainOld moves the flow of job newID from OVERLAP to DRAINING_OLD:
// the old job DRAINING and both records in one write, then its execution
// drains. The caller holds the old job's name guard.
func (s *Replace) drainOld(newID string) error {
	// The rollback snapshot of the old job: cut now, recorded with the
	// drain's start (rollback.go).
	rb := s.snaps.DrainRollbackCut(newID, record.PhaseOverlap)
	defer s.snaps.FinishRollbackCut(rb)
	return s.Update(func(tx *core.Tx) error {
		nj, err := s.ReadJob(newID)
		if err != nil {
			return err
		}
		rep := nj.Replacement
		if rep.Phase != record.PhaseOverlap {
			return nil
		}
		old, err := s.ReadJob(rep.OldJobID)
		if err != nil {
			return err
		}
		jr := s.RunningJob(old.ID)
		if old.State != record.StateRunning || jr == nil {
			return nil // it ends by itself (the next step cuts over)
		}
		if err := s.drainOldJob(tx, nj, old, jr, rb, s.Now(), "drained after its parallel replacement by job "+nj.ID); err != nil {
			return err
		}
		s.Opts.Logger.Info("parallel replacement: draining the old job", "job_id", old.ID, "new_job_id", nj.ID)
		return nil
	})
}

// parallelDriven reports whether j is the new job of a parallel flow the
// driver has not finished with (recovery restarts its driver).
func parallelDriven(j *record.Job) bool {
	rep := j.Replacement
	if rep == nil || rep.Strategy != record.StrategyParallel || rep.Parallel == nil || j.ID != rep.NewJobID {
		return false
	}
	switch rep.Phase {
	case record.PhaseFailed, record.PhaseRolledBack:
		return false
	case record.PhaseCutOver:
		return !rep.Parallel.Compacted && len(rep.Parallel.Tables) > 0
	}
	return true
}

// RefuseDuringParallel refuses (UPDATE_IN_PROGRESS) to change name's
// active job in place while it is one of the jobs of a parallel
// replacement that has not cut over: the flow's records and views are
// about those two jobs.
func (s *Replace) RefuseDuringParallel(name string) error {
	l, err := s.ReadLineage(name)
	if err != nil || l.ActiveJobID == "" {
		return nil
	}
	j, err := s.ReadJob(l.ActiveJobID)
	if err != nil || j.Replacement == nil || j.Replacement.Strategy != record.StrategyParallel || j.Replacement.Phase.Final() {
		return nil
	}
	return errcode.Errorf(errcode.UpdateInProgress, "job %s (%s) is in a parallel replacement (phase %s, old job %s, new job %s): update it once the replacement has cut over (weir jobs describe %s), or roll the replacement back",
		j.Name, j.ID, j.Replacement.Phase, j.Replacement.OldJobID, j.Replacement.NewJobID, j.Replacement.NewJobID)
}

// withParallelProgress fills the progress of j's parallel flow, if one is
// under way, on j (a copy read for the caller).
func (s *Replace) withParallelProgress(j *record.Job) *record.Job {
	if j == nil || j.Replacement == nil || j.Replacement.Parallel == nil || j.Replacement.Phase.Final() {
		return j
	}
	nj := j
	if j.ID != j.Replacement.NewJobID {
		var err error
		if nj, err = s.ReadJob(j.Replacement.NewJobID); err != nil || nj.Replacement == nil || nj.Replacement.Parallel == nil {
			return j
		}
	}
	pp := s.ParallelProgress(nj)
	fp := &record.FlowProgress{ElapsedMillis: pp.Elapsed.Milliseconds(), MinParallelMillis: pp.MinParallel.Milliseconds()}
	if !pp.OldWatermark.IsZero() {
		fp.OldWatermark = &pp.OldWatermark
	}
	if !pp.CutOver.IsZero() {
		fp.CutOverWatermark = &pp.CutOver
	}
	if nj.Replacement.Phase == record.PhasePreparing && !parallelPositioned(nj.Replacement.Parallel) && !s.oldJobHasRead(nj) {
		fp.WaitingForOldMessage = true
	}
	j.Replacement.Parallel.Progress = fp
	return j
}

// parallelPositioned reports whether the flow's new subscriptions are
// positioned (positionSubscriptions is done).
func parallelPositioned(flow *record.ParallelFlow) bool {
	return len(flow.Subscriptions) > 0 && flow.Subscriptions[0].Positioned
}
