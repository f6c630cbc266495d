package core

import (
	"errors"
	"fmt"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/state"
)

// storeFault records the failure of the state store: Pebble reported a
// write that did not land (a full disk, an I/O error) and the store
// refuses every write from then on (state.ErrStoreFailed).
//
// The rule it enforces: nothing downstream commits what the store did not
// make durable. A checkpoint whose write failed never reaches its sinks'
// Commit or its sources' acknowledgements (checkpoint returns first), and
// at the first store failure the service stops every execution, so no job
// goes on processing input it could never checkpoint. The jobs stay
// RUNNING (or DRAINING) in the store with their last durable checkpoint;
// reads add a Condition with code STORAGE_UNAVAILABLE and the cause; every
// request that would change a job is refused with that code; the API keeps
// answering. Every Options.StorageRetryInterval the service tries to bring
// the store back (fault_resume.go); once it writes again, the fault clears
// and the jobs resume from their last durable checkpoint, without a
// restart (a restart does the same).
type storeFault struct {
	cause error
	since time.Time
}

// noteStoreError is called with the result of every store write. When the
// store has failed it records the fault (once: it logs at error level and
// stops every execution) and reports true. Safe with or without
// the registry lock; it takes no lock.
func (s *Core) noteStoreError(err error) bool {
	cause := s.Store.Failed()
	if cause == nil {
		// An error of a failed database that a reopen has replaced since
		// (the write started before the swap): the store works now.
		return err != nil && errors.Is(err, state.ErrStoreFailed)
	}
	if !s.fault.CompareAndSwap(nil, &storeFault{cause: cause, since: s.Now()}) {
		return true
	}
	s.Opts.Logger.Error(fmt.Sprintf("the state store failed: every job stops at its last durable checkpoint and no sink commits or source acknowledges beyond it; weir retries every %s and the jobs resume by themselves once the disk has room", s.Opts.StorageRetryInterval),
		"code", errcode.StorageUnavailable, "error", cause.Error())
	s.running.Range(func(_, v any) bool {
		v.(*Run).X.Cancel()
		return true
	})
	s.Changes.Notify()
	return true
}

// storeFailed returns the store's fault, or nil while the store works.
func (s *Core) StoreFailed() *storeFault { return s.fault.Load() }

// refuseIfStoreFailed returns a STORAGE_UNAVAILABLE error when the store
// has failed: requests that change jobs call it first.
func (s *Core) RefuseIfStoreFailed() error {
	if s.Opts.Inspect {
		return errcode.Errorf(errcode.ReadOnlyInspection, "data directory %s is open only to read its records: start weir server (or the Go program) on it to change a job", s.Opts.DataDir)
	}
	f := s.StoreFailed()
	if f == nil {
		return nil
	}
	return errcode.Errorf(errcode.StorageUnavailable, "the state store failed at %s, so no job can change: %w (every job stopped at its last durable checkpoint; weir retries every %s and the jobs resume by themselves once the disk has room; retry the request then)",
		f.since.UTC().Format(time.RFC3339), f.cause, s.Opts.StorageRetryInterval)
}

// withCondition adds to an active job's record what keeps it from
// processing or committing: the store's fault, a sink commit being retried
// (fault_sink.go), a connector being waited for (fault_connector.go), or
// a resumption after a restart that has not happened yet.
func (s *Core) WithCondition(j *record.Job) *record.Job {
	if j == nil || !j.Active() {
		return j
	}
	if f := s.StoreFailed(); f != nil {
		j.Condition = &record.Condition{Code: errcode.StorageUnavailable, Since: f.since,
			Message: fmt.Sprintf("the job stopped at its last durable checkpoint: %v (weir retries every %s and the job resumes by itself once the store writes again)", f.cause, s.Opts.StorageRetryInterval)}
	} else if c := s.sinkCondition(j.ID); c != nil {
		j.Condition = c
	} else if c := s.connectorCondition(j.ID); c != nil {
		j.Condition = c
	} else if since, ok := s.resuming.Load(j.ID); ok {
		j.Condition = &record.Condition{Code: errcode.Resuming, Message: "the job resumes from its last checkpoint (after a restart, or once the state store writes again)", Since: since.(time.Time)}
	}
	return j
}
