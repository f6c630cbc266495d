package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/state"
)

// Job events: what happened to a job, as a user reads it in `weir jobs
// logs` and the console. Each event is one registry record,
// event/<job ID>/<seq>, written under the registry lock like every other store
// write — a state transition's event in the same atomic write as the
// transition. A job keeps its last MaxEventsPerJob events: the write that
// adds event n deletes event n-MaxEventsPerJob.

func eventPrefix(jobID string) string { return "event/" + jobID + "/" }

func eventKey(jobID string, seq uint64) string {
	return fmt.Sprintf("%s%020d", eventPrefix(jobID), seq)
}

// nextEventSeq returns the sequence number of job id's next event,
// reading the job's last stored one the first time.
func (tx *Tx) nextEventSeq(id string) uint64 {
	s := tx.s
	if s.eventSeq == nil {
		s.eventSeq = map[string]uint64{}
	}
	if n, ok := s.eventSeq[id]; ok {
		s.eventSeq[id] = n + 1
		return n + 1
	}
	var last uint64
	_ = s.Store.Scan(eventPrefix(id), func(k string, _ []byte) error {
		if n, err := strconv.ParseUint(strings.TrimPrefix(k, eventPrefix(id)), 10, 64); err == nil {
			last = max(last, n)
		}
		return nil
	})
	s.eventSeq[id] = last + 1
	return last + 1
}

// AddEvent adds an event of job id to w, with the deletion of the event
// that falls out of the job's bound. The caller applies w in the same Tx.
func (tx *Tx) AddEvent(w *state.Write, id string, typ record.EventType, sev record.Severity, msg string, details map[string]any) {
	s := tx.s
	if s == nil {
		return
	}
	if len(msg) > record.MaxEventMessageBytes {
		msg = msg[:record.MaxEventMessageBytes] + "…"
	}
	seq := tx.nextEventSeq(id)
	ev := record.Event{Seq: seq, Time: s.Now(), Type: typ, Severity: sev, Message: msg, Details: details}
	b, err := json.Marshal(ev)
	if err != nil {
		b, _ = json.Marshal(record.Event{Seq: seq, Time: ev.Time, Type: typ, Severity: sev, Message: msg})
	}
	w.Put(eventKey(id, seq), b)
	if seq > s.eventCap {
		w.Delete(eventKey(id, seq-s.eventCap))
	}
}

// emit records an event of job id in a write of its own, in a Tx of its
// own. It is the one call the service's work uses to tell a job's user
// what happened (state transitions use Tx.StateEvent, within their write).
// A failed write is logged: an event never fails the work it describes.
func (s *Core) Emit(id string, typ record.EventType, sev record.Severity, msg string, details map[string]any) {
	_ = s.Update(func(tx *Tx) error {
		tx.Emit(id, typ, sev, msg, details)
		return nil
	})
}

// Emit is emit within tx.
func (tx *Tx) Emit(id string, typ record.EventType, sev record.Severity, msg string, details map[string]any) {
	s := tx.s
	if s == nil || s.StoreFailed() != nil {
		return // nothing can be written; the fault is logged once
	}
	w := &state.Write{}
	tx.AddEvent(w, id, typ, sev, msg, details)
	if err := tx.Apply(w); err != nil {
		s.Opts.Logger.Warn("recording a job event", "job_id", id, "type", typ, "error", err)
	}
}

// StateEvent adds to w the event of j's move from state from to its
// current state, when it moved.
func (tx *Tx) StateEvent(w *state.Write, j *record.Job, from record.JobState) {
	if j.State == from {
		return
	}
	reason := ""
	if n := len(j.History); n > 0 {
		reason = j.History[n-1].Reason
	}
	sev := record.SeverityInfo
	if j.State == record.StateFailed {
		sev = record.SeverityError
	}
	msg := fmt.Sprintf("job is %s", j.State)
	if from != 0 {
		msg = fmt.Sprintf("job moved from %s to %s", from, j.State)
	}
	if reason != "" {
		msg += ": " + reason
	}
	d := map[string]any{"to": j.State.String()}
	if from != 0 {
		d["from"] = from.String()
	}
	if reason != "" {
		d["reason"] = reason
	}
	tx.AddEvent(w, j.ID, record.EventStateChanged, sev, msg, d)
}

// Events returns the events of job ref with a sequence number above
// after, oldest first, at most limit of them (0: all the job keeps). It
// takes no lock.
func (s *Core) Events(ref string, after uint64, limit int) (*record.Job, []record.Event, error) {
	j, err := s.Resolve(ref)
	if err != nil {
		return nil, nil, err
	}
	evs, err := s.ReadEvents(j.ID, after, limit)
	return j, evs, err
}

func (s *Core) ReadEvents(id string, after uint64, limit int) ([]record.Event, error) {
	evs := []record.Event{}
	err := s.Store.Scan(eventPrefix(id), func(k string, v []byte) error {
		if limit > 0 && len(evs) >= limit {
			return errStopScan
		}
		n, err := strconv.ParseUint(strings.TrimPrefix(k, eventPrefix(id)), 10, 64)
		if err != nil || n <= after {
			return nil
		}
		var ev record.Event
		if err := json.Unmarshal(v, &ev); err != nil {
			return errcode.Internalf("decoding event %s: %w", k, err)
		}
		evs = append(evs, ev)
		return nil
	})
	if err != nil && !errors.Is(err, errStopScan) {
		return nil, errcode.Internalf("reading the events of job %s: %w", id, err)
	}
	return evs, nil
}

var errStopScan = errors.New("stop scan")

// FollowEvents calls fn with the events of job ref after seq after, in
// order, as they are recorded, until the job is terminal and every event
// is delivered, ctx ends, or fn fails. It takes no lock while it waits.
func (s *Core) FollowEvents(ctx context.Context, ref string, after uint64, fn func([]record.Event) error) error {
	j, err := s.Resolve(ref)
	if err != nil {
		return err
	}
	id := j.ID
	for {
		next := s.Changes.Next()
		evs, err := s.ReadEvents(id, after, 1000)
		if err != nil {
			return err
		}
		if len(evs) > 0 {
			if err := fn(evs); err != nil {
				return err
			}
			after = evs[len(evs)-1].Seq
			continue
		}
		cur, err := s.ReadJob(id)
		if err != nil {
			return errcode.Internalf("reading job %s: %w", id, err)
		}
		if !cur.Active() && s.RunningJob(id) == nil {
			// A terminal job's last events are written with its end:
			// read once more after it, then stop.
			evs, err := s.ReadEvents(id, after, 0)
			if err != nil {
				return err
			}
			if len(evs) > 0 {
				return fn(evs)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.Ctx.Done():
			return nil // the service closes: the follower reconnects to the next one
		case <-next:
		}
	}
}

// logWriter routes a job's LogForTesting lines to its events
// (yamlpipe.Options.LogOutput): every Write is one line.
type logWriter struct {
	s  *Core
	id string
}

// Write records p, one line, as a log event of the job.
func (w logWriter) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	w.s.Emit(w.id, record.EventLog, record.SeverityInfo, line, nil)
	return len(p), nil
}

// attemptEvent records a refused or validate-only update attempt of job id.
func (s *Core) AttemptEvent(id string, report compat.Report) {
	if !report.Compatible {
		s.Emit(id, record.EventUpdateRefused, record.SeverityWarning,
			fmt.Sprintf("update refused: the new pipeline is not compatible (%d problem(s)); the job was not changed", len(report.Errors)),
			map[string]any{"problems": len(report.Errors), "errors": report.Errors})
		return
	}
	s.Emit(id, record.EventUpdateValidated, record.SeverityInfo, "a validate-only update was checked: compatible", map[string]any{"compatible": true})
}
