package core

import (
	"errors"
	"fmt"
	"time"

	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/graph"
)

// A failed sink commit (issue 12 item 1, the sink half).
//
// A checkpoint is written to the store first and committed to the sinks
// after; the sources acknowledge only once every sink committed. So when a
// sink's commit fails, nothing past the sink's last committed checkpoint
// is acknowledged, and the rows of the failed epoch stay pending in the
// sink (io/sqlsink carries them into the next epoch's part). What happens
// then depends on the error (the sink decides: contract.PermanentCommitter):
//
//   - An error that may pass (the database is down, busy or out of disk, a
//     connection broke, a trigger raised): the job stays RUNNING with
//     condition SINK_UNAVAILABLE (and a warning event and log line); it
//     takes its next checkpoint, which retries the commit with the carried
//     rows, only every Options.StorageRetryInterval; when a commit
//     succeeds the condition clears (an info event and log line), the
//     sources acknowledge and the job goes on. Meanwhile the job keeps
//     reading and its sink buffers rows in memory.
//   - An error that cannot pass (the table was dropped or no longer fits
//     the rows, the database refuses a value): the job FAILS, with a
//     message naming the last committed checkpoint and how to resume.

// sinkFault is a sink commit of a running execution that failed and is
// being retried.
type sinkFault struct {
	cause error
	since time.Time
	// tried is when the last commit was tried.
	tried time.Time
	// epoch is the checkpoint whose commit failed first.
	epoch uint64
}

// commitError is a checkpoint that was written to the store but whose
// commit (the sinks', then the sources' acknowledgements) failed.
type commitError struct {
	epoch uint64
	err   error
}

func (e *commitError) Error() string {
	return fmt.Sprintf("committing checkpoint %d: %v", e.epoch, e.err)
}

func (e *commitError) Unwrap() error { return e.err }

// sinkRetryDue reports whether jr's next periodic checkpoint is due: always
// while its sinks commit, and once per retry interval while a commit
// failure is being retried.
func (s *Core) sinkRetryDue(jr *Run) bool {
	f := jr.sinkFault.Load()
	return f == nil || time.Since(f.tried) >= s.Opts.StorageRetryInterval
}

// sinkCommitted is called after each checkpoint of jr that committed: it
// clears a sink fault, with an event and an info log line.
func (s *Core) sinkCommitted(jr *Run, epoch uint64) {
	jr.committed.Store(epoch)
	f := jr.sinkFault.Swap(nil)
	if f == nil {
		return
	}
	down := time.Since(f.since).Round(time.Millisecond)
	msg := fmt.Sprintf("the sink accepts commits again after %s: checkpoint %d committed the rows held back since checkpoint %d, and the sources acknowledged them", down, epoch, f.epoch)
	s.Emit(jr.ID, record.EventConditionChanged, record.SeverityInfo, msg,
		map[string]any{"code": string(errcode.SinkUnavailable), "set": false, "epoch": epoch})
	s.Opts.Logger.Info(msg, "job_id", jr.ID, "job_name", jr.Name)
	s.Changes.Notify()
}

// sinkUnavailable handles a failed periodic checkpoint of jr whose commit
// failed for a reason that may pass: it records (or updates) jr's sink
// fault and reports true; the job goes on and retries. It reports false
// for every other error, which fails the job.
func (s *Core) sinkUnavailable(jr *Run, err error) bool {
	var ce *commitError
	if !errors.As(err, &ce) {
		return false
	}
	if _, permanent := permanentCommit(jr.Prog, err); permanent {
		return false
	}
	now := time.Now()
	if old := jr.sinkFault.Load(); old != nil {
		jr.sinkFault.Store(&sinkFault{cause: err, since: old.since, tried: now, epoch: old.epoch})
		s.Opts.Logger.Warn(fmt.Sprintf("a sink commit failed again: the job acknowledges nothing past checkpoint %d and retries in %s", jr.committed.Load(), s.Opts.StorageRetryInterval),
			"job_id", jr.ID, "job_name", jr.Name, "code", errcode.SinkUnavailable, "error", err.Error())
		s.Changes.Notify()
		return true
	}
	jr.sinkFault.Store(&sinkFault{cause: err, since: now, tried: now, epoch: ce.epoch})
	msg := fmt.Sprintf("a sink commit failed: %v; the job keeps running, acknowledges nothing past checkpoint %d and retries every %s", err, jr.committed.Load(), s.Opts.StorageRetryInterval)
	s.Emit(jr.ID, record.EventConditionChanged, record.SeverityWarning, msg,
		map[string]any{"code": string(errcode.SinkUnavailable), "set": true, "epoch": ce.epoch, "error": err.Error()})
	s.Opts.Logger.Warn(msg, "job_id", jr.ID, "job_name", jr.Name, "code", errcode.SinkUnavailable)
	s.Changes.Notify()
	return true
}

// checkpointFailure is the FAILED reason of a job whose periodic
// checkpoint failed with err: for a sink's permanent refusal it says
// which checkpoint was committed last and how to resume.
func (s *Core) checkpointFailure(jr *Run, err error) string {
	var ce *commitError
	reason, permanent := permanentCommit(jr.Prog, err)
	if !errors.As(err, &ce) || !permanent {
		return fmt.Sprintf("checkpoint failed: %v", err)
	}
	return fmt.Sprintf("a sink refused the commit of checkpoint %d for good (%s): %v. Nothing past checkpoint %d, the last the sinks committed, was acknowledged: fix the table, then run the pipeline again under the same job name (weir run PIPELINE --job-name %s), which reads its Pub/Sub subscriptions from there (keyed state, such as windows still open, starts empty)",
		ce.epoch, reason, ce.err, jr.committed.Load(), jr.Name)
}

// runFailure is the FAILED reason of a job whose execution failed with
// err. A job that takes checkpoints and reads Pub/Sub acknowledged nothing
// past its sinks' last committed checkpoint: the reason says so and how to
// go on from there (through a new subscription when the job's was deleted).
func (s *Core) runFailure(jr *Run, err error) string {
	if !jr.Checkpointed || !readsPubSub(jr.Prog.Graph) {
		return err.Error()
	}
	if errors.Is(err, contract.ErrInputGone) {
		return fmt.Sprintf("%v. The results up to checkpoint %d, the last the sinks committed, are stored; the messages after it are no longer kept for the job: create the subscription again (weir subscriptions create NAME --topic TOPIC), seek it to the time to reprocess from (weir subscriptions seek NAME --time T), then run the pipeline again (keyed state, such as windows still open, starts empty)",
			err, jr.committed.Load())
	}
	return fmt.Sprintf("%v. Nothing past checkpoint %d, the last the sinks committed, was acknowledged: run the pipeline again under the same job name (weir run PIPELINE --job-name %s), which reads its Pub/Sub subscriptions from there (keyed state, such as windows still open, starts empty)",
		err, jr.committed.Load(), jr.Name)
}

// readsPubSub says whether a step of g reads a Pub/Sub topic or
// subscription.
func readsPubSub(g *graph.Pipeline) bool {
	for _, st := range g.Steps {
		if st.Source != nil && st.Source.Kind == "pubsub" {
			return true
		}
	}
	return false
}

// sinkCondition returns the SINK_UNAVAILABLE condition of job id's live
// execution, or nil.
func (s *Core) sinkCondition(id string) *record.Condition {
	jr := s.RunningJob(id)
	if jr == nil {
		return nil
	}
	f := jr.sinkFault.Load()
	if f == nil {
		return nil
	}
	return &record.Condition{Code: errcode.SinkUnavailable, Since: f.since,
		Message: fmt.Sprintf("a sink does not accept commits since checkpoint %d: %v (the job runs on, acknowledges nothing past checkpoint %d and retries every %s)", f.epoch, f.cause, jr.committed.Load(), s.Opts.StorageRetryInterval)}
}

// LastSinkRetry returns when the execution last retried a failed sink
// commit; ok is false while no commit is failing.
func (jr *Run) LastSinkRetry() (t time.Time, ok bool) {
	if f := jr.sinkFault.Load(); f != nil {
		return f.tried, true
	}
	return time.Time{}, false
}

// permanentCommit asks the sinks of prog whether commit error err is
// permanent (contract.PermanentCommitter): a sink classifies only its own
// errors, so the first that says so decides. A panic (runner.PanicError)
// is permanent.
func permanentCommit(prog *contract.Program, err error) (reason string, permanent bool) {
	// A sink whose commit panicked has a bug that a retry would meet again.
	if pe := (*runner.PanicError)(nil); errors.As(err, &pe) {
		return pe.Error(), true
	}
	for _, code := range prog.Code {
		if pc, ok := code.(contract.PermanentCommitter); ok {
			if reason, ok := pc.PermanentCommitError(err); ok {
				return reason, true
			}
		}
	}
	return "", false
}
