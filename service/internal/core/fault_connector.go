package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/record"
)

// A connector that cannot be reached (the Pub/Sub broker down, reloading
// its streams after a full disk, out of storage).
//
// An execution that ends with an error wrapping contract.ErrUnavailable
// did not fail for anything in the job: the service it reads or writes
// through is away for now. When the job takes checkpoints, nothing past
// its last committed checkpoint was acknowledged, so the job is not
// FAILED: it stays RUNNING (or DRAINING) with condition
// CONNECTOR_UNAVAILABLE (a warning event and log line), its sinks drop
// what no commit covered, and every Options.StorageRetryInterval the
// service starts it again from its last durable checkpoint, as a restart
// would. The condition clears (an info event) at the first checkpoint a
// new execution commits. A cancel meanwhile completes at the next retry;
// a drain drains the execution the retry starts.
//
// A job whose sinks refuse, as it starts, the commit of its last
// checkpoint repeated (Launch) waits the same way when no sink says the
// error is permanent: a database busy or away, a table a killed writer
// left locked.

// connectorFault is a job whose execution stopped because a connector was
// unavailable, waiting to be started again.
type connectorFault struct {
	cause error
	since time.Time
	// tried is when the job was last started again (since, at first).
	tried time.Time
	// attempts counts the starts since the fault.
	attempts int
	// epoch is the last checkpoint the sinks had committed.
	epoch uint64
	// code is CONNECTOR_UNAVAILABLE, or SINK_UNAVAILABLE for a sink that
	// refused the repeated commit of the last checkpoint as the job
	// started (Launch): the code of the condition and its events, the
	// first fault's.
	code errcode.Code
}

// what names what the job waits for, for its messages.
func (f *connectorFault) what() (waiting, back string) {
	if f.code == errcode.SinkUnavailable {
		return "a sink refuses the commit of the job's last checkpoint, repeated as it starts", "the sinks accept again"
	}
	return "a connector is unavailable", "the connectors answer again"
}

// waitForConnector handles the end of execution jr of job j with runErr:
// when the error says a connector is unavailable and the job can be
// started again from its checkpoints, it records the fault, releases the
// sinks, forgets jr and reports true (the job stays active). The caller
// holds j's name guard.
func (s *Core) waitForConnector(jr *Run, j *record.Job, runErr error) bool {
	if !jr.Checkpointed || !s.canWaitForConnector(j, runErr) {
		return false
	}
	if err := jr.X.ReleaseSinks(context.Background()); err != nil {
		s.Opts.Logger.Error("releasing the sinks of a job stopped by an unavailable connector", "job_id", jr.ID, "job_name", jr.Name, "error", err)
	}
	s.Forget(jr)
	s.noteConnectorFault(j, runErr, jr.committed.Load(), errcode.ConnectorUnavailable)
	return true
}

// canWaitForConnector reports whether job j, whose execution ended or
// could not start with err, waits for its connector rather than fail: err
// says a connector is unavailable, the job ran already (RUNNING or
// DRAINING: a new job's first start fails at once, so that its submitter
// hears of it) and this service can build it again.
func (s *Core) canWaitForConnector(j *record.Job, err error) bool {
	return errors.Is(err, contract.ErrUnavailable) &&
		(j.State == record.StateRunning || j.State == record.StateDraining) &&
		(j.SDK != record.SDKGo || s.Opts.Program != nil)
}

// canWaitForSink reports whether job j waits and starts again rather than
// fail when the sinks' commit of its last checkpoint, repeated as it
// starts, failed with err: no sink of prog says err is permanent
// (contract.PermanentCommitter, as a running job's failed commit is
// judged: fault_sink.go), and the job could wait for a connector
// (canWaitForConnector). Nothing past that checkpoint was acknowledged,
// so nothing is lost while it waits.
func (s *Core) canWaitForSink(j *record.Job, prog *contract.Program, err error) bool {
	if _, permanent := permanentCommit(prog, err); permanent {
		return false
	}
	return (j.State == record.StateRunning || j.State == record.StateDraining) &&
		(j.SDK != record.SDKGo || s.Opts.Program != nil)
}

// noteConnectorFault records that job j has no execution because a
// connector is unavailable (err; code CONNECTOR_UNAVAILABLE, or
// SINK_UNAVAILABLE for a sink that refused the repeated commit), the
// sinks having committed checkpoint epoch: a warning event and log line
// the first time, a log line on every failed retry.
func (s *Core) noteConnectorFault(j *record.Job, err error, epoch uint64, code errcode.Code) {
	now := time.Now()
	f := &connectorFault{cause: err, since: now, tried: now, epoch: epoch, code: code}
	if v, ok := s.connFaults.Load(j.ID); ok {
		old := v.(*connectorFault)
		f.since, f.attempts, f.epoch, f.code = old.since, old.attempts, old.epoch, old.code
		s.connFaults.Store(j.ID, f)
		still := "a connector is still unavailable"
		if f.code == errcode.SinkUnavailable {
			still = "a sink still refuses the commit of the job's last checkpoint"
		}
		s.Opts.Logger.Warn(fmt.Sprintf("%s: the job starts again from its last durable checkpoint in %s", still, s.Opts.StorageRetryInterval),
			"job_id", j.ID, "job_name", j.Name, "code", f.code, "attempts", f.attempts, "error", err.Error())
		s.Changes.Notify()
		return
	}
	s.connFaults.Store(j.ID, f)
	waiting, _ := f.what()
	until := "the connector answers"
	if code == errcode.SinkUnavailable {
		until = "the sink accepts it"
	}
	msg := fmt.Sprintf("%s: %v; the job stopped at checkpoint %d, the last its sinks committed, acknowledged nothing past it, and starts again from its last durable checkpoint every %s until %s", waiting, err, epoch, s.Opts.StorageRetryInterval, until)
	s.Emit(j.ID, record.EventConditionChanged, record.SeverityWarning, msg,
		map[string]any{"code": string(code), "set": true, "epoch": epoch, "error": err.Error()})
	s.Opts.Logger.Warn(msg, "job_id", j.ID, "job_name", j.Name, "code", code)
	s.Changes.Notify()
}

// retryConnectors starts again every job waiting for a connector whose
// last start is at least one retry interval old.
func (s *Core) retryConnectors(ctx context.Context) {
	var due []string
	s.connFaults.Range(func(k, v any) bool {
		// A job started again keeps its fault until its execution commits
		// a checkpoint (connectorCommitted) or stops again.
		if s.liveRun(k.(string)) == nil && time.Since(v.(*connectorFault).tried) >= s.Opts.StorageRetryInterval {
			due = append(due, k.(string))
		}
		return true
	})
	for _, id := range due {
		if err := s.retryConnector(ctx, id); err != nil && ctx.Err() == nil {
			s.Opts.Logger.Error("starting a job again after a connector was unavailable", "job_id", id, "error", err)
		}
	}
	if len(due) > 0 {
		s.Changes.Notify()
	}
}

// retryConnector starts job id again from its last durable checkpoint.
func (s *Core) retryConnector(ctx context.Context, id string) error {
	v, ok := s.connFaults.Load(id)
	if !ok {
		return nil
	}
	f := v.(*connectorFault)
	next := *f
	next.tried, next.attempts = time.Now(), f.attempts+1
	s.connFaults.CompareAndSwap(id, f, &next)
	j, started, err := s.relaunch(ctx, id)
	if started {
		s.Opts.Logger.Info(fmt.Sprintf("a connector was unavailable: the job starts again from its last durable checkpoint (attempt %d)", next.attempts),
			"job_id", id, "job_name", j.Name, "since", f.since)
		return nil
	}
	// Not started: still waiting (noteConnectorFault replaced next), the
	// attempt failed (the next interval tries again), or an execution
	// started meanwhile by a request (its first commit clears the fault);
	// or the job ended (cancelled, failed to start: its record says why).
	if cur, rerr := s.ReadJob(id); rerr == nil && !cur.Active() {
		s.connFaults.CompareAndDelete(id, &next)
	}
	return err
}

// WaitsForConnector reports whether job id has no execution because a
// connector is unavailable, the service starting it again on every retry
// interval (its condition is CONNECTOR_UNAVAILABLE).
func (s *Core) WaitsForConnector(id string) bool {
	_, ok := s.connFaults.Load(id)
	return ok && s.liveRun(id) == nil
}

// MoveConnectorWait hands job oldID's wait for its connector to job newID,
// which replaced it in the store while it waited (an in-place update): the
// next retry starts newID, and its condition says since when the
// connector has been away. The caller holds the name's guard.
func (s *Core) MoveConnectorWait(oldID, newID string) {
	v, ok := s.connFaults.LoadAndDelete(oldID)
	if !ok {
		return
	}
	f := *v.(*connectorFault)
	f.tried = time.Time{} // due at the next retry tick, not an interval later
	s.connFaults.Store(newID, &f)
	s.Changes.Notify()
}

// NoExecutionError is the NO_RUNNING_JOB answer to a request (what it
// does, then what to do instead: fix) about job j of name, which is
// active but has no live execution: it names the condition that keeps
// the job from running, when there is one (its broker away, the store
// failed), and since when.
func (s *Core) NoExecutionError(name string, j *record.Job, fix string) error {
	why := ""
	if c := s.WithCondition(new(*j)).Condition; c != nil {
		why = fmt.Sprintf(" (%s since %s: %s)", c.Code, c.Since.UTC().Format(time.RFC3339), c.Message)
	}
	return errcode.Errorf(errcode.NoRunningJob, "no running job named %s: job %s has no live execution%s; %s", name, j.ID, why, fix)
}

// liveRun returns job id's execution unless it has none or a rescale
// superseded it (it is leaving the running table).
func (s *Core) liveRun(id string) *Run {
	if jr := s.RunningJob(id); jr != nil && !jr.Superseded.Load() {
		return jr
	}
	return nil
}

// connectorCommitted is called after each committed checkpoint of jr: the
// first after a connector fault clears it, with an info event.
func (s *Core) connectorCommitted(jr *Run, epoch uint64) {
	v, ok := s.connFaults.LoadAndDelete(jr.ID)
	if !ok {
		return
	}
	f := v.(*connectorFault)
	down := time.Since(f.since).Round(time.Millisecond)
	_, back := f.what()
	msg := fmt.Sprintf("%s after %s: the job started again from checkpoint %d and committed checkpoint %d", back, down, f.epoch, epoch)
	s.Emit(jr.ID, record.EventConditionChanged, record.SeverityInfo, msg,
		map[string]any{"code": string(f.code), "set": false, "epoch": epoch})
	s.Opts.Logger.Info(msg, "job_id", jr.ID, "job_name", jr.Name)
}

// connectorCondition returns job id's CONNECTOR_UNAVAILABLE condition
// (SINK_UNAVAILABLE for a sink that refused the repeated commit), or nil.
func (s *Core) connectorCondition(id string) *record.Condition {
	v, ok := s.connFaults.Load(id)
	if !ok {
		return nil
	}
	f := v.(*connectorFault)
	waiting, _ := f.what()
	return &record.Condition{Code: f.code, Since: f.since,
		Message: fmt.Sprintf("%s: %v (the job acknowledged nothing past checkpoint %d and starts again from its last durable checkpoint every %s; %d start(s) so far)", waiting, f.cause, f.epoch, s.Opts.StorageRetryInterval, f.attempts)}
}
