package replace

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/internal/snapshots"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/duration"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/serviceopt"
	"github.com/weir-dev/weir/state"
)

// stopAndReplace runs the stop-and-replace of old by req's pipeline: the
// new job is created PENDING and built (its pipeline loaded and checked,
// its graph stored) as the name's active job while old still runs (phase
// PREPARING); old is drained (DRAINING_OLD); once it ended the new job
// starts at once (CUT_OVER). With plan.Rewind (the default) it re-reads
// each topic from the rewind point (service/rewind.go), checked here from
// old's last checkpoint before anything changes and computed again from
// its final one at the cut; with weir_replace_rewind=false it reads on
// from where old's sources stopped. The request returns once the drain
// began; a driver (drive) takes the flow on, and a restarted service
// resumes it from the new job's record.
func (s *Replace) stopAndReplace(ctx context.Context, req core.UpdateRequest, plan serviceopt.Plan, old *record.Job) (*core.UpdateResult, error) {
	sameName := old.Name == req.Name
	unlock, err := s.LockName(ctx, req.Name) // lock order 1: the new job's name
	if err != nil {
		return nil, err
	}
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	l, old, err := s.replacementLineage(req.Name, old)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	id, err := record.NewJobID(now)
	if err != nil {
		return nil, errcode.Internalf("%w", err)
	}
	gen := max(l.Generation, old.Generation) + 1
	rep := &record.Replacement{Strategy: record.StrategyStopAndReplace, Phase: record.PhasePreparing, PhaseTime: now, OldJobID: old.ID, NewJobID: id,
		MaxStopMillis: plan.MaxStop.Milliseconds(), CancelOnDrainTimeout: plan.CancelOnDrainTimeout, Preallocate: plan.Preallocate, Rewind: plan.Rewind}
	nj := &record.Job{ID: id, Name: req.Name, State: record.StatePending, CreateTime: now, StateTime: now, Generation: gen,
		Pipeline: req.Pipeline, PipelineFile: req.PipelineFile, BaseDir: req.BaseDir, Options: req.Options,
		ReplacesJobID: old.ID, Replacement: rep,
		History: []record.StateChange{{State: record.StatePending, Time: now, Reason: "stop-and-replace of job " + old.ID}}}
	if sameName {
		nj.InheritFrom(old)
	}
	// Built now, with or without preallocation: every check runs before
	// anything changes. Without preallocation it is built again at the cut.
	p, err := s.Load(nj)
	if err != nil {
		return nil, err
	}
	g := p.Graph()
	if !sameName {
		// The new job's topic sources read subscriptions of its own, created
		// and positioned at the cut-over where the old job's stopped.
		hs, err := handoverSubscriptions(old, req.Name, g)
		if err != nil {
			return nil, err
		}
		if len(hs) > 0 {
			rep.Handover = hs
			rep.Notes = append(rep.Notes, handoverNote(hs))
		}
		for _, h := range hs {
			if h.InsteadOf != "" { // read in place of the named subscription
				if nj.Subscriptions == nil {
					nj.Subscriptions = map[string]string{}
				}
				nj.Subscriptions[h.Step] = h.New
			}
		}
	}
	if plan.Rewind {
		if sameName {
			if err := checkRewindSources(old, g); err != nil {
				return nil, err
			}
		}
		if _, err := s.rewind.Point(ctx, old, g); err != nil {
			return nil, err
		}
	}
	if req.ValidateOnly {
		return validated(old, fmt.Sprintf("stop-and-replace: job %s would drain (at most %s), then a job %s (generation %d) would start (validate only: nothing changed)", old.ID, duration.Format(plan.MaxStop), req.Name, gen)), nil
	}
	if err := s.recordReplacementJob(nj, l, g, gen, req.PipelineFile); err != nil {
		return nil, err
	}
	if !sameName {
		unlock()
		locked = false
		if unlock, err = s.LockName(ctx, old.Name); err != nil { // lock order 1: the old job's name, one guard at a time
			s.StartDriver(nj.ID) // the driver drains the old job instead
			return nil, err
		}
		locked = true
	}
	if err := s.BeginDrain(nj.ID); err != nil {
		return nil, err
	}
	s.StartDriver(nj.ID)
	nj, err = s.ReadJob(nj.ID)
	if err != nil {
		return nil, errcode.Internalf("reading job %s: %w", nj.ID, err)
	}
	sum := old.Summary()
	return &core.UpdateResult{Report: core.CompatibleReport(), Job: nj, Replaced: &sum,
		Notes: []string{fmt.Sprintf("stop-and-replace: job %s drains (at most %s), then job %s starts", old.ID, duration.Format(plan.MaxStop), nj.ID)}}, nil
}

// replacementLineage returns the lineage that a replacement job named name
// of job old joins, and old read again. The caller holds name's guard
// (lock order 1). A closing service is refused; under old's own name, old
// must still be the name's active, running job.
func (s *Replace) replacementLineage(name string, old *record.Job) (*record.Lineage, *record.Job, error) {
	if s.Closing.Load() {
		return nil, nil, errcode.Errorf(errcode.ShuttingDown, "the weir server is shutting down; submit again once it is back")
	}
	if old.Name != name {
		l, err := s.LineageForNewJob(name)
		return l, old, err
	}
	l, err := s.ReadLineage(name)
	if err != nil {
		return nil, nil, err
	}
	id := old.ID
	if old, err = s.ReadJob(id); err != nil {
		return nil, nil, errcode.Internalf("reading job %s: %w", id, err)
	}
	if l.ActiveJobID != old.ID || old.State != record.StateRunning || s.RunningJob(old.ID) == nil {
		return nil, nil, errcode.Errorf(errcode.NoRunningJob, "no running job named %s to replace: job %s is %s", name, old.ID, old.State)
	}
	return l, old, nil
}

// recordReplacementJob records new replacement job nj of a stop-and-replace
// or parallel flow (see ReplacementJobWrite) and logs its creation.
func (s *Replace) recordReplacementJob(nj *record.Job, l *record.Lineage, g *graph.Pipeline, gen int64, file string) error {
	w, err := ReplacementJobWrite(nj, l, g, gen, file)
	if err != nil {
		return err
	}
	err = s.Update(func(tx *core.Tx) error {
		if err := tx.Admit(nj.Name); err != nil { // a replacement under a new name adds an active job
			return err
		}
		if err := tx.Apply(w); err != nil {
			return errcode.Internalf("recording job %s: %w", nj.ID, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.Opts.Logger.Info("replacement job created", "job_id", nj.ID, "job_name", nj.Name, "generation", gen,
		"replaces_job_id", nj.ReplacesJobID, "strategy", nj.Replacement.Strategy, "phase", nj.Replacement.Phase)
	return nil
}

// ReplacementJobWrite records new replacement job nj, with its pipeline's
// graph g, as the active and latest job of its name's lineage l at
// generation gen: the write that creates it. file names the pipeline in
// an error.
func ReplacementJobWrite(nj *record.Job, l *record.Lineage, g *graph.Pipeline, gen int64, file string) (*state.Write, error) {
	canon, err := g.Canonical()
	if err != nil {
		return nil, errcode.Errorf(errcode.InvalidPipeline, "%s: serialising the pipeline graph: %w", file, err)
	}
	nj.Graph, nj.Type = canon, record.TypeOf(g)
	l.Generation, l.ActiveJobID, l.LatestJobID = gen, nj.ID, nj.ID
	w := &state.Write{}
	if err := core.PutJSON(w, record.JobKey(nj.ID), nj); err != nil {
		return nil, err
	}
	if err := core.PutJSON(w, record.LineageKey(nj.Name), l); err != nil {
		return nil, err
	}
	return w, nil
}

// BeginDrain moves the flow of the replacement job newID from PREPARING to
// DRAINING_OLD: the old job becomes DRAINING (replaced_by_job_id set, the
// replacement recorded on it) in the same write as the new job's phase,
// then its execution drains. An old job that is no longer running fails
// the flow. The caller holds the old job's name guard.
func (s *Replace) BeginDrain(newID string) error {
	// The rollback snapshot of the old job: cut now, recorded with the
	// drain's start (rollback.go).
	rb := s.snaps.DrainRollbackCut(newID, record.PhasePreparing)
	defer s.snaps.FinishRollbackCut(rb)
	return s.Update(func(tx *core.Tx) error {
		nj, err := s.ReadJob(newID)
		if err != nil {
			return errcode.Internalf("reading job %s: %w", newID, err)
		}
		rep := nj.Replacement
		if rep == nil || rep.Phase != record.PhasePreparing {
			return nil
		}
		old, err := s.ReadJob(rep.OldJobID)
		if err != nil {
			return errcode.Internalf("reading job %s: %w", rep.OldJobID, err)
		}
		jr := s.RunningJob(old.ID)
		if old.State == record.StateRunning && jr == nil && !s.RecoveryDone() {
			// A restarted service has not resumed the old job yet: the driver
			// tries again at the next change.
			return nil
		}
		now := s.Now()
		if old.State != record.StateRunning || jr == nil {
			w := &state.Write{}
			rep.Phase, rep.PhaseTime = record.PhaseFailed, now
			reason := fmt.Sprintf("job %s (%s), which this job was to replace, is %s and was not drained", old.ID, old.Name, old.State)
			rep.Notes = append(rep.Notes, reason)
			if err := record.Transition(nj, record.StateFailed, now, reason); err != nil {
				return err
			}
			addPhaseEvents(tx, w, nj)
			if err := tx.TerminalWrite(w, nj); err != nil {
				return err
			}
			if err := tx.Apply(w); err != nil {
				return errcode.Internalf("recording job %s: %w", nj.ID, err)
			}
			return errcode.Errorf(errcode.NoRunningJob, "no running job named %s to replace: %s", old.Name, reason)
		}
		old.ReplacedByJobID = nj.ID
		if err := s.drainOldJob(tx, nj, old, jr, rb, now, "drained to be replaced by job "+nj.ID); err != nil {
			return err
		}
		s.Opts.Logger.Info("replacement: draining the old job", "job_id", old.ID, "job_name", old.Name, "new_job_id", nj.ID, "max_stop", duration.Format(time.Duration(rep.MaxStopMillis)*time.Millisecond))
		return nil
	})
}

// drainOldJob moves the flow of replacement job nj to DRAINING_OLD at now
// and its old job old, whose live execution is jr, to DRAINING for reason
// (the replacement recorded on it): both records and the rollback cut rb
// (nil for none) in one write of tx, then old's execution drains. The
// caller took tx after the old job's name guard.
func (s *Replace) drainOldJob(tx *core.Tx, nj, old *record.Job, jr *core.Run, rb *snapshots.RollbackCut, now time.Time, reason string) error {
	rep := nj.Replacement
	rep.Phase, rep.PhaseTime, rep.DrainStart = record.PhaseDrainingOld, now, &now
	oldRep := *rep
	old.Replacement = &oldRep
	if err := record.Transition(old, record.StateDraining, now, reason); err != nil {
		return err
	}
	w := &state.Write{}
	addPhaseEvents(tx, w, nj, old)
	if err := core.PutJSON(w, record.JobKey(old.ID), old); err != nil {
		return err
	}
	if err := core.PutJSON(w, record.JobKey(nj.ID), nj); err != nil {
		return err
	}
	if err := rb.Put(w); err != nil {
		return err
	}
	if err := tx.Apply(w); err != nil {
		return errcode.Internalf("recording the drain of job %s: %w", old.ID, err)
	}
	rb.Landed(tx)
	jr.X.Drain()
	return nil
}

// checkRewindSources refuses a re-reading replacement whose new pipeline
// reads a topic of old's through another subscription than old did: the
// re-read positions old's subscriptions.
func checkRewindSources(old *record.Job, g *graph.Pipeline) error {
	og, err := graph.Parse(old.Graph)
	if err != nil {
		return errcode.Internalf("job %s: its graph does not parse: %w", old.ID, err)
	}
	oldIDs := map[string]string{}
	for _, st := range og.Steps {
		if st.Kind == graph.KindSource && st.Source != nil && st.Source.Kind == core.PubSubSourceKind {
			oldIDs[st.Source.Identity] = st.Name
		}
	}
	for _, st := range g.Steps {
		if st.Kind != graph.KindSource || st.Source == nil || st.Source.Kind != core.PubSubSourceKind {
			continue
		}
		if oldStep, ok := oldIDs[st.Source.Identity]; ok && oldStep != st.Name && strings.HasPrefix(st.Source.Identity, "topic/") {
			return errcode.Errorf(errcode.ReplacementUnavailable, "step %s of the new pipeline reads %s, which step %s of job %s read: a re-read positions the subscription named after the job and the old step, so keep the step's name %s (or read a named subscription); job %s was not changed",
				st.Name, st.Source.Identity, oldStep, old.ID, oldStep, old.ID)
		}
	}
	return nil
}

// positionRewind computes the rewind point of replacement job nj from its
// old job's final checkpoint (once; a resumed flow reuses the recorded
// one), records it on nj, and positions every subscription it names at
// its first sequence. The old job has ended and nothing reads them. It
// takes the service lock for the record only.
func (s *Replace) positionRewind(nj *record.Job) error {
	rep := nj.Replacement
	if rep.RewindPoint == nil {
		old, err := s.ReadJob(rep.OldJobID)
		if err != nil {
			return errcode.Internalf("reading job %s: %w", rep.OldJobID, err)
		}
		g, err := graph.Parse(nj.Graph)
		if err != nil {
			return errcode.Internalf("job %s: its graph does not parse: %w", nj.ID, err)
		}
		rp, err := s.rewind.Point(s.Ctx, old, g)
		if err != nil {
			return err
		}
		rep.RewindPoint = &rp
		w := &state.Write{}
		err = core.PutJSON(w, record.JobKey(nj.ID), nj)
		if err == nil {
			err = s.Apply(w)
		}
		if err != nil {
			return errcode.Internalf("recording the rewind point of job %s: %w", nj.ID, err)
		}
	}
	rw, ok := s.rewind.Broker()
	if !ok {
		return errcode.Errorf(errcode.RewindBeyondRetention, "this server has no Pub/Sub broker that can re-read a topic")
	}
	g, err := graph.Parse(nj.Graph)
	if err != nil {
		return errcode.Internalf("job %s: its graph does not parse: %w", nj.ID, err)
	}
	if len(rep.Handover) > 0 {
		// Under a new name: the new job's own subscriptions start at the
		// first sequence of the old one they take over.
		first := map[string]uint64{}
		for _, rs := range rep.RewindPoint.Sources {
			first[rs.Subscription] = rs.FirstSequence
		}
		for _, h := range rep.Handover {
			if _, ok := first[h.Old]; !ok {
				return errcode.Errorf(errcode.RewindBeyondRetention, "the rewind point of job %s has no position of subscription %s (topic %s), which step %s takes over", rep.OldJobID, h.Old, h.Topic, h.Step)
			}
		}
		if err := s.positionHandover(s.Ctx, nj, first); err != nil {
			return err
		}
		// A named subscription both jobs read is positioned below.
	}
	reads := readSubscriptions(nj.Name, g)
	for _, rs := range rep.RewindPoint.Sources {
		handed := false
		for _, h := range rep.Handover {
			handed = handed || h.Old == rs.Subscription
		}
		if handed {
			continue
		}
		if !reads[rs.Subscription] {
			continue // the new pipeline no longer reads it: left as the old job left it
		}
		ctx, cancel := context.WithTimeout(s.Ctx, core.BrokerCallTimeout)
		err := rw.SeekToSequence(ctx, rs.Subscription, rs.FirstSequence)
		cancel()
		if err != nil {
			return errcode.Internalf("positioning subscription %s of topic %s at sequence %d for the re-read: %w", rs.Subscription, rs.Topic, rs.FirstSequence, err)
		}
		s.Opts.Logger.Info("replacement: re-reading", "job_id", nj.ID, "topic", rs.Topic, "subscription", rs.Subscription,
			"first_seq", rs.FirstSequence, "last_seq_of_old_job", rs.LastSequence, "from_time", rs.FromTime)
	}
	return nil
}

// readSubscriptions returns the subscriptions the Pub/Sub sources of job
// name's graph g read.
func readSubscriptions(name string, g *graph.Pipeline) map[string]bool {
	out := map[string]bool{}
	for _, st := range g.Steps {
		if st.Kind != graph.KindSource || st.Source == nil || st.Source.Kind != core.PubSubSourceKind {
			continue
		}
		if sub, ok := strings.CutPrefix(st.Source.Identity, "subscription/"); ok {
			out[sub] = true
		} else if strings.HasPrefix(st.Source.Identity, "topic/") {
			out[contract.SubscriptionName(name, st.Name)] = true
		}
	}
	return out
}
