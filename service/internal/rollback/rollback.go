package rollback

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/weir-dev/weir/service/internal/replace"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/internal/snapshots"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/duration"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/state"
)

// Rollback snapshots and `weir jobs rollback` (issue 10 item 7).
//
// Every in-place update and every replacement keeps the old job's state
// at the handover as a rollback snapshot: a job snapshot (snapshot.go)
// with Kind SnapshotKindRollback, so it is listed, described, exported and
// deleted as any other, and a job can start from it.
//
//   - In-place update: the handover checkpoint is the cut. The snapshot's
//     record (RUNNING) is in the handover's own store write, and the store
//     is pinned right after that write under the same hold of the registry lock;
//     the copy of the pinned state into the snapshot's key space runs
//     afterwards with no lock (as a user snapshot's copy), so the update's
//     pause is not longer by anything. Steps the handover renamed are read
//     under their new names and kept under the old ones.
//   - Stop-and-replace (and a rollback, which is one): the old job's open
//     windows fire during its drain, so the drain's final checkpoint holds
//     no open window. The cut is the checkpoint the old job takes when it
//     is asked to drain (one ordinary checkpoint, as a periodic one: a
//     barrier, not a pause); the record is written with the drain's start.
//
// A rollback snapshot lives Options.RollbackRetention (its TTL), and is
// never deleted before the job that replaced its job has run that long on
// the service's clock (rollbackHeld). A rollback snapshot that was still
// being copied when the server stopped is FAILED at the next start, as a
// user snapshot is.
//
// Rollback starts the snapshot job's pipeline (its stored pipeline text,
// base directory, file name and options) as a NEW job of the name, one
// generation above the newest, so that its sink revisions win over every
// row the later generations wrote. It runs as a stop-and-replace with the
// strategy "rollback" (replace_flow.go): the new job is created PENDING as
// the name's active job, the current job drains (cancelled after
// RollbackRequest.MaxStop), and at the cut-over the snapshot's state is
// restored into the name's state (one write with the new job's checkpoint
// record, as CreateFromSnapshot) and the job starts with its subscriptions
// rewound to the snapshot's positions: the input since the snapshot is
// re-read from the topic's retention and every window it touches, and
// every window the snapshot held open, is emitted again by the new
// generation. The flow's state is the new job's record, so a restarted
// server resumes it (recoverJob → drive).

// DefaultRollbackMaxStop bounds the current job's drain in a rollback when
// the request gives no bound; it is then cancelled.
const DefaultRollbackMaxStop = 5 * time.Minute

// RollbackRequest asks to go back to an earlier generation of a job name.
type RollbackRequest struct {
	// Name is the job name.
	Name string
	// ToGeneration is the generation to go back to; 0: the one the
	// current job replaced.
	ToGeneration int64
	// ValidateOnly computes the report and changes nothing.
	ValidateOnly bool
	// MaxStop bounds the current job's drain (it is cancelled after);
	// 0: DefaultRollbackMaxStop.
	MaxStop time.Duration
	// RequestID makes the rollback idempotent as a submission's does: a
	// retry with the same ID within RequestIDRetention gets the first
	// answer (the rollback job, read anew, or the same refusal), never a
	// second rollback; the same ID with another request is
	// REQUEST_ID_REUSED. "" (the default): no ID.
	RequestID string
}

// RollbackSource is one source of the rollback job: where its subscription
// is rewound to and what the topic still holds.
type RollbackSource struct {
	Step         string `json:"step"`
	Subscription string `json:"subscription,omitempty"`
	Topic        string `json:"topic,omitempty"`
	// FromSeq is the first message re-read (the one after the snapshot's
	// position); LastSeq the topic's newest. Messages = LastSeq-FromSeq+1.
	FromSeq  uint64 `json:"from_seq,omitempty"`
	LastSeq  uint64 `json:"last_seq,omitempty"`
	Messages uint64 `json:"messages"`
	// Retained says whether the topic still holds every one of them.
	Retained bool `json:"retained"`
	// FirstRetainedSeq is the topic's oldest stored message.
	FirstRetainedSeq uint64 `json:"first_retained_seq,omitempty"`
}

// RollbackWindows says, for one keyed step, which windows the rollback job
// computes again.
type RollbackWindows struct {
	Step string `json:"step"`
	// Windowing describes the step's windows ("fixed 10s").
	Windowing string `json:"windowing"`
	// KeysWithState counts the keys that held state (open windows, panes
	// or timers) at the snapshot: every such window is emitted again.
	KeysWithState int64 `json:"keys_with_state"`
	// Recomputed says it in a sentence.
	Recomputed string `json:"recomputed"`
}

// RollbackResult is the report of a rollback (and of a validate-only one).
type RollbackResult struct {
	// Job is the rollback job (nil when validate-only).
	Job *record.Job `json:"job,omitempty"`
	// Current is the job that is stopped (or would be).
	Current *record.Summary `json:"current"`
	// Snapshot is the rollback snapshot it starts from.
	Snapshot *record.Snapshot `json:"snapshot"`
	// ToGeneration is the generation whose pipeline runs again;
	// NewGeneration the rollback job's.
	ToGeneration  int64 `json:"to_generation"`
	NewGeneration int64 `json:"new_generation"`
	// Sources and Windows say what is re-read and recomputed.
	Sources      []RollbackSource  `json:"sources"`
	Windows      []RollbackWindows `json:"windows"`
	ValidateOnly bool              `json:"validate_only,omitempty"`
	Notes        []string          `json:"notes,omitempty"`
}

// RetentionReader is what a rollback needs of the broker to refuse a
// rewind beyond the topic's retention: Options.Broker implements it
// (*pubsub.Broker does). See pubsub.Broker.RetainedAfter.
type RetentionReader interface {
	RetainedAfter(ctx context.Context, position []byte, topicHint string) (sub, topic string, next, first, last uint64, err error)
}

// Do goes back to an earlier generation of req.Name (see the top of this
// file); the service answers a retry of a request ID before it calls Do.
func (s *Rollback) Do(ctx context.Context, req RollbackRequest) (*RollbackResult, error) {
	if err := record.ValidateJobName(req.Name); err != nil {
		return nil, err
	}
	if req.ToGeneration < 0 {
		return nil, errcode.Errorf(errcode.InvalidRequest, "to_generation must be a generation (1 or more), got %d", req.ToGeneration)
	}
	if req.MaxStop < 0 {
		return nil, errcode.Errorf(errcode.InvalidRequest, "the maximum stop duration must not be negative")
	}
	if req.MaxStop == 0 {
		req.MaxStop = DefaultRollbackMaxStop
	}
	if res, done, err := s.rollbackOverlap(ctx, req); done {
		return res, err
	}
	unlock, err := s.LockName(ctx, req.Name) // lock order 1
	if err != nil {
		return nil, err
	}
	defer unlock()
	if s.Closing.Load() {
		return nil, errcode.Errorf(errcode.ShuttingDown, "the weir server is shutting down; roll back once it is back")
	}
	l, err := s.ReadLineage(req.Name)
	if err != nil {
		return nil, err
	}
	if l.ActiveJobID == "" {
		if l.LatestJobID == "" {
			return nil, errcode.Errorf(errcode.JobNotFound, "no job has the name %q", req.Name)
		}
		return nil, errcode.Errorf(errcode.NoRunningJob, "no running job named %s: a rollback replaces the running job (start a job from a rollback snapshot with weir run --create-from-snapshot instead)", req.Name)
	}
	cur, err := s.ReadJob(l.ActiveJobID)
	if err != nil {
		return nil, errcode.Internalf("reading the active job of %q: %w", req.Name, err)
	}
	if err := s.refuseRollbackDuringFlow(cur); err != nil {
		return nil, err
	}
	if cur.State != record.StateRunning {
		return nil, errcode.Errorf(errcode.NoRunningJob, "no running job named %s: its active job %s is %s", req.Name, cur.ID, cur.State)
	}
	if s.RunningJob(cur.ID) == nil {
		return nil, s.NoExecutionError(req.Name, cur, "a rollback drains the running job first: roll back once it runs, or cancel it and start the rollback snapshot with weir run --create-from-snapshot (weir snapshots list shows it)")
	}
	snap, err := s.findRollbackSnapshot(cur, req.ToGeneration)
	if err != nil {
		return nil, err
	}
	src, err := s.ReadJob(snap.SourceJobID)
	if err != nil {
		return nil, errcode.Internalf("reading job %s of rollback snapshot %s: %w", snap.SourceJobID, snap.ID, err)
	}
	if src.SDK == record.SDKGo {
		return nil, errcode.Errorf(errcode.IllegalTransition, "generation %d of %s (job %s) is a Go program's: roll it back by starting that build of the program with --create-from-snapshot %s", src.Generation, req.Name, src.ID, snap.ID)
	}
	oldGraph, err := snapshots.SnapshotGraph(snap)
	if err != nil {
		return nil, err
	}
	rec, err := s.Store.SnapshotRecord(snap.ID)
	if errors.Is(err, state.ErrNotFound) {
		// Its expiry may have deleted it since it was found (the sweep
		// takes no job name's guard): then it expired, nothing is corrupt.
		if now, rerr := s.snaps.ReadSnapshot(snap.ID); rerr == nil && now.State == record.SnapshotDeleted {
			return nil, errcode.Errorf(errcode.RollbackSnapshotExpired, "the rollback snapshot %s of generation %d of %s was deleted at %s, while this request read it (the rollback retention had passed); nothing changed",
				snap.ID, snap.Generation, req.Name, now.StateTime.UTC().Format(time.RFC3339))
		}
		return nil, errcode.Errorf(errcode.SnapshotCorrupt, "rollback snapshot %s is READY but its data is missing", snap.ID)
	}
	if err != nil {
		return nil, errcode.Internalf("reading rollback snapshot %s: %w", snap.ID, err)
	}
	now := s.Now()
	id, err := record.NewJobID(now)
	if err != nil {
		return nil, errcode.Internalf("%w", err)
	}
	gen := max(l.Generation, cur.Generation) + 1
	rep := &record.Replacement{Strategy: record.StrategyRollback, Phase: record.PhasePreparing, PhaseTime: now, OldJobID: cur.ID, NewJobID: id,
		MaxStopMillis: req.MaxStop.Milliseconds(), CancelOnDrainTimeout: true, Preallocate: true,
		Notes: []string{fmt.Sprintf("rollback to generation %d (job %s) from rollback snapshot %s", src.Generation, src.ID, snap.ID)}}
	nj := &record.Job{ID: id, Name: req.Name, State: record.StatePending, CreateTime: now, StateTime: now, Generation: gen,
		Pipeline: src.Pipeline, PipelineFile: src.PipelineFile, BaseDir: src.BaseDir, Options: src.Options,
		ReplacesJobID: cur.ID, Replacement: rep, CreatedFromSnapshotID: snap.ID,
		History: []record.StateChange{{State: record.StatePending, Time: now, Reason: fmt.Sprintf("rollback of job %s to generation %d (snapshot %s)", cur.ID, src.Generation, snap.ID)}}}
	p, err := s.Load(nj)
	if err != nil {
		return nil, fmt.Errorf("the pipeline of generation %d (job %s) no longer loads, so it cannot run again: %w", src.Generation, src.ID, err)
	}
	g := p.Graph()
	report := compat.Check(oldGraph, g, compat.Options{})
	if !report.Compatible {
		return nil, errcode.Errorf(errcode.IncompatibleUpdate, "the pipeline of generation %d (job %s) no longer builds the graph its rollback snapshot %s holds (%d problem(s)), so its state cannot be restored; nothing changed",
			src.Generation, src.ID, snap.ID, len(report.Errors))
	}
	cs := cur.Summary()
	res := &RollbackResult{Current: &cs, Snapshot: SnapshotView(snap), ToGeneration: src.Generation, NewGeneration: gen, ValidateOnly: req.ValidateOnly}
	if res.Sources, err = s.rollbackSources(ctx, oldGraph, rec); err != nil {
		return nil, err
	}
	res.Windows = s.rollbackWindows(snap.ID, oldGraph, res.Sources)
	for _, src := range res.Sources {
		if !src.Retained {
			return res, errcode.Errorf(errcode.RewindBeyondRetention, "topic %s no longer holds the messages from sequence %d on (its oldest is %d), which the rollback of %s to generation %d would have to re-read for step %s; nothing changed: start a job from rollback snapshot %s without the lost input (weir run --create-from-snapshot), or update the running job in place",
				src.Topic, src.FromSeq, src.FirstRetainedSeq, req.Name, res.ToGeneration, src.Step, snap.ID)
		}
	}
	if req.ValidateOnly {
		res.Notes = append(res.Notes, "validate only: nothing changed")
		return res, nil
	}
	w, err := replace.ReplacementJobWrite(nj, l, g, gen, nj.PipelineFile)
	if err != nil {
		return nil, err
	}
	err = s.Update(func(tx *core.Tx) error {
		if err := tx.Admit(nj.Name); err != nil { // it replaces the name's active job: admitted
			return err
		}
		tx.AddEvent(w, cur.ID, record.EventReplacementPhase, record.SeverityInfo, fmt.Sprintf("rollback to generation %d: job %s replaces this job from snapshot %s", src.Generation, nj.ID, snap.ID),
			map[string]any{"strategy": record.StrategyRollback, "phase": string(record.PhasePreparing), "new_job_id": nj.ID, "snapshot_id": snap.ID, "to_generation": src.Generation})
		return tx.Apply(w)
	})
	if err != nil {
		return nil, errcode.Internalf("recording the rollback job %s: %w", nj.ID, err)
	}
	s.Opts.Logger.Info("rollback job created", "job_id", nj.ID, "job_name", nj.Name, "generation", gen,
		"replaces_job_id", cur.ID, "to_generation", src.Generation, "snapshot_id", snap.ID)
	if err := s.replace.BeginDrain(nj.ID); err != nil {
		return nil, err
	}
	s.replace.StartDriver(nj.ID)
	if res.Job, err = s.ReadJob(nj.ID); err != nil {
		return nil, errcode.Internalf("reading job %s: %w", nj.ID, err)
	}
	res.Notes = append(res.Notes, fmt.Sprintf("job %s drains (at most %s), then job %s starts from snapshot %s", cur.ID, duration.Format(req.MaxStop), nj.ID, snap.ID))
	return res, nil
}

// rollbackOverlap is the rollback of a parallel replacement that has not
// begun to drain its old job (PREPARING or OVERLAP): the new job is
// cancelled and the old one kept (abortParallel: its façade generation
// dropped, its subscriptions deleted, the flow ROLLED_BACK), a real
// rollback with no snapshot. done is false when the name's active job is
// not in such a flow. It holds no guard: abortParallel takes them.
func (s *Rollback) rollbackOverlap(ctx context.Context, req RollbackRequest) (_ *RollbackResult, done bool, _ error) {
	l, err := s.ReadLineage(req.Name)
	if err != nil || l.ActiveJobID == "" {
		return nil, false, nil
	}
	cur, err := s.ReadJob(l.ActiveJobID)
	if err != nil {
		return nil, false, nil
	}
	rep := cur.Replacement
	if rep == nil || rep.Strategy != record.StrategyParallel || rep.NewJobID != cur.ID || (rep.Phase != record.PhasePreparing && rep.Phase != record.PhaseOverlap) {
		return nil, false, nil
	}
	old, err := s.ReadJob(rep.OldJobID)
	if err != nil {
		return nil, true, errcode.Internalf("reading job %s: %w", rep.OldJobID, err)
	}
	if req.ToGeneration != 0 && req.ToGeneration != old.Generation {
		return nil, true, errcode.Errorf(errcode.RollbackUnavailable, "job %s (%s) is in the overlap of a parallel replacement of generation %d: a rollback now goes back to generation %d only (cancelling job %s); nothing changed",
			cur.Name, cur.ID, old.Generation, old.Generation, cur.ID)
	}
	cs := cur.Summary()
	res := &RollbackResult{Current: &cs, ToGeneration: old.Generation, NewGeneration: old.Generation, ValidateOnly: req.ValidateOnly,
		Sources: []RollbackSource{}, Windows: []RollbackWindows{},
		Notes: []string{fmt.Sprintf("parallel replacement in phase %s: job %s (generation %d) is cancelled and job %s (generation %d) kept as it runs; the view serves job %s's rows again", rep.Phase, cur.ID, cur.Generation, old.ID, old.Generation, old.ID)}}
	if req.ValidateOnly {
		res.Notes = append(res.Notes, "validate only: nothing changed")
		return res, true, nil
	}
	if err := s.replace.AbortParallel(ctx, cur.ID, "rolled back (weir jobs rollback): job "+old.ID+" is kept"); err != nil {
		return nil, true, err
	}
	if res.Job, err = s.ReadJob(old.ID); err != nil {
		return nil, true, errcode.Internalf("reading job %s: %w", old.ID, err)
	}
	s.Opts.Logger.Info("parallel replacement rolled back", "job_name", cur.Name, "cancelled_job_id", cur.ID, "kept_job_id", old.ID)
	return res, true, nil
}

// refuseRollbackDuringFlow refuses a rollback while a replacement flow of
// the name is under way past the point rollbackOverlap handles: the active
// job is a replacement's that has not cut over.
func (s *Rollback) refuseRollbackDuringFlow(cur *record.Job) error {
	rep := cur.Replacement
	if rep == nil || rep.Phase.Final() || rep.NewJobID != cur.ID {
		return nil
	}
	return errcode.Errorf(errcode.RollbackUnavailable, "job %s (%s) is a %s still in phase %s: roll back once it has cut over (or cancel job %s); nothing changed",
		cur.Name, cur.ID, rep.Strategy, rep.Phase, cur.ID)
}

// findRollbackSnapshot returns the READY rollback snapshot to go back to:
// that of generation gen of cur's name, or (gen 0) the one kept when cur
// replaced its predecessor.
func (s *Rollback) findRollbackSnapshot(cur *record.Job, gen int64) (*record.Snapshot, error) {
	all, err := s.snaps.ListSnapshots(cur.Name, true)
	if err != nil {
		return nil, err
	}
	var expired, failed *record.Snapshot
	for _, snap := range all { // newest first
		if snap.Kind != record.SnapshotKindRollback {
			continue
		}
		if gen == 0 && snap.ReplacedByJobID != cur.ID || gen != 0 && snap.Generation != gen {
			continue
		}
		switch snap.State {
		case record.SnapshotReady:
			return snap, nil
		case record.SnapshotDeleted:
			if expired == nil {
				expired = snap
			}
		default:
			if failed == nil {
				failed = snap
			}
		}
	}
	which := fmt.Sprintf("generation %d of %s", gen, cur.Name)
	if gen == 0 {
		which = fmt.Sprintf("the job that job %s (%s, generation %d) replaced", cur.ID, cur.Name, cur.Generation)
		if cur.ReplacesJobID == "" {
			which = fmt.Sprintf("a job before job %s (%s, generation %d), which replaced none", cur.ID, cur.Name, cur.Generation)
		}
	}
	switch {
	case gen != 0 && gen >= cur.Generation:
		return nil, errcode.Errorf(errcode.NoRollbackSnapshot, "generation %d is not earlier than the running job's (%d): a rollback goes back to an earlier generation", gen, cur.Generation)
	case expired != nil:
		return nil, errcode.Errorf(errcode.RollbackSnapshotExpired, "the rollback snapshot %s of %s was deleted at %s (the rollback retention had passed); nothing changed",
			expired.ID, which, expired.StateTime.UTC().Format(time.RFC3339))
	case failed != nil && failed.State == record.SnapshotFailed:
		return nil, errcode.Errorf(errcode.NoRollbackSnapshot, "the rollback snapshot %s of %s failed (%s); nothing changed", failed.ID, which, failed.FailureReason)
	case failed != nil:
		return nil, errcode.Errorf(errcode.RollbackUnavailable, "the rollback snapshot %s of %s is still being written (%s); roll back in a moment", failed.ID, which, failed.State)
	}
	if prev, err := s.ReadJob(cur.ReplacesJobID); gen == 0 && cur.ReplacesJobID != "" && err == nil && prev.Name != cur.Name {
		return nil, errcode.Errorf(errcode.NoRollbackSnapshot, "job %s (%s) replaced job %s of another name, %s, whose rollback snapshot is kept under that name and is not rolled back to across names: "+
			"weir snapshots list --job-id %s shows it, and weir run OLD.yaml --job-name %s --create-from-snapshot ID starts a job from it; nothing changed", cur.ID, cur.Name, prev.ID, prev.Name, prev.Name, prev.Name)
	}
	return nil, errcode.Errorf(errcode.NoRollbackSnapshot, "there is no rollback snapshot of %s (weir jobs history %s lists the generations; weir snapshots list --job-id %s the snapshots); nothing changed", which, cur.Name, cur.Name)
}

// snapshotView is snap without its graph and positions, for a report.
func SnapshotView(snap *record.Snapshot) *record.Snapshot {
	v := *snap
	v.Graph, v.Positions = nil, nil
	return &v
}

// rollbackSources says, per source of g, where the rollback re-reads
// from and whether the topic still holds it.
func (s *Rollback) rollbackSources(ctx context.Context, g *graph.Pipeline, rec *state.CheckpointRecord) ([]RollbackSource, error) {
	rr, _ := s.Opts.Broker.(RetentionReader)
	out := []RollbackSource{}
	for _, st := range g.Steps {
		if st.Kind != graph.KindSource {
			continue
		}
		rs := RollbackSource{Step: st.Name, Retained: true}
		pos := rec.Positions[st.Name]
		if st.Source == nil || st.Source.Kind != core.PubSubSourceKind {
			// Another source resumes from its own position (a file's offset).
			out = append(out, rs)
			continue
		}
		if rr == nil || len(pos) != 1 {
			return nil, errcode.Errorf(errcode.RewindBeyondRetention, "step %s reads Pub/Sub, and the rollback cannot tell what its topic still holds (no broker, or %d positions in the snapshot); nothing changed", st.Name, len(pos))
		}
		hint := "" // a topic source creates its subscription again
		if kind, name, ok := strings.Cut(st.Source.Identity, "/"); ok && kind == "topic" {
			hint = name
		}
		sub, topic, next, first, last, err := rr.RetainedAfter(ctx, pos[0], hint)
		if err != nil {
			return nil, errcode.Errorf(errcode.RewindBeyondRetention, "step %s: the rollback cannot re-read its subscription: %w; nothing changed", st.Name, err)
		}
		rs.Subscription, rs.Topic, rs.FromSeq, rs.LastSeq, rs.FirstRetainedSeq = sub, topic, next, last, first
		if last >= next {
			rs.Messages = last - next + 1
		}
		rs.Retained = first <= next
		out = append(out, rs)
	}
	return out, nil
}

// rollbackWindows says, per keyed step of g, which windows the rollback
// job emits again: those open at the snapshot (its keys with state) and
// those the input since the snapshot falls into.
func (s *Rollback) rollbackWindows(snapID string, g *graph.Pipeline, sources []RollbackSource) []RollbackWindows {
	keys := map[string]int64{}
	pin := s.Store.Pin()
	_ = s.Store.SnapshotEntries(pin, snapID, func(rel, _ []byte) error {
		if r, ok := strings.CutPrefix(string(rel), "s/"); ok {
			if step, _, ok := strings.Cut(r, "\x00"); ok {
				keys[step]++
			}
		}
		return nil
	})
	_ = pin.Release()
	var since []string
	for _, src := range sources {
		if src.Topic != "" {
			since = append(since, fmt.Sprintf("the %d message(s) of topic %s from sequence %d", src.Messages, src.Topic, src.FromSeq))
		}
	}
	input := "the input since the snapshot"
	if len(since) > 0 {
		input = strings.Join(since, " and ")
	}
	out := []RollbackWindows{}
	for _, st := range g.Steps {
		if !st.Kind.IsKeyed() {
			continue
		}
		desc := "global window"
		for _, cid := range st.Inputs {
			if c := g.Collection(cid); c != nil {
				fn := c.Windowing.Fn
				desc = describeWindowFn(string(fn.Kind), int64(fn.Size), int64(fn.Period), int64(fn.Gap))
				break
			}
		}
		n := keys[st.Name]
		out = append(out, RollbackWindows{Step: st.Name, Windowing: desc, KeysWithState: n,
			Recomputed: fmt.Sprintf("every window (%s) that held state for the %d key(s) at the snapshot, and every window %s fall into, is computed again and supersedes the later generations' rows", desc, n, input)})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Step < out[b].Step })
	return out
}

// describeWindowFn says what windows the window function of a collection
// makes ("fixed 10s"). Its kinds are package window's (fixed, sliding,
// sessions, global), compared by name: the service does not import it.
func describeWindowFn(kind string, size, period, gap int64) string {
	d := func(v int64) string { return duration.Format(time.Duration(v) * time.Millisecond) }
	switch kind {
	case "fixed":
		return "fixed " + d(size)
	case "sliding":
		return fmt.Sprintf("sliding %s every %s", d(size), d(period))
	case "sessions":
		return "sessions with a gap of " + d(gap)
	}
	return "global window"
}

// ParseRollbackMaxStop parses the maximum stop duration of a rollback
// ("5m"); "" is 0, the default.
func ParseRollbackMaxStop(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := duration.Parse(v)
	if err != nil {
		return 0, errcode.Errorf(errcode.InvalidRequest, "max_stop_duration: %w", err)
	}
	return d, nil
}
