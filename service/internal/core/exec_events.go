package core

import (
	"context"
	"fmt"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/runner/contract"

	"github.com/weir-dev/weir/state"
)

// This file holds what an execution reports as its job's events: dead
// letters (rate-limited in the log), and the events emitted before the
// job's start is recorded, held until it is.

// deadLetter returns the runner's dead-letter hook for jr.
func (s *Core) deadLetter(jr *Run) func(context.Context, contract.Reject) error {
	log := s.Opts.Logger.With("job_id", jr.ID, "job_name", jr.Name)
	return func(ctx context.Context, r contract.Reject) error {
		n := jr.DeadLetters.Add(1)
		// An element derived from many (a window's aggregate) has no one
		// position in a source.
		at, attrs := "", []any{"step", r.Step}
		if r.Source != nil {
			at = " at " + r.Source.String()
			attrs = append(attrs, "source", r.Source.String())
		}
		desc := fmt.Sprintf("step %q%s: %s: %s", r.Step, at, r.Reason, r.Message)
		jr.LastDeadLetter.Store(&desc)
		attrs = append(attrs, "reason", r.Reason, "message", r.Message, "dead_letters", n)
		// The first ten, then every thousandth: a log line per reject would
		// drown the log (the topic and dead_letters count them all).
		logIt := n <= 10 || n%1000 == 0
		if logIt {
			d := map[string]any{"step": r.Step, "reason": r.Reason, "dead_letters": n}
			if r.Source != nil {
				d["source"] = r.Source.String()
			}
			s.EmitRun(jr, record.EventDeadLetter, record.SeverityWarning, "element rejected by a step without error_handling: "+desc, d)
		}
		if s.Opts.DeadLetter != nil {
			if err := s.Opts.DeadLetter.PublishDeadLetter(ctx, jr.Name, jr.ID, r); err != nil {
				return fmt.Errorf("publishing a reject of step %q to the dead-letter topic: %w", r.Step, err)
			}
			if logIt {
				log.Warn("element rejected by a step without error_handling: sent to the dead-letter topic", attrs...)
			}
			return nil
		}
		if logIt {
			log.Warn("element rejected by a step without error_handling (no broker for a dead-letter topic: counted only)", attrs...)
		}
		return nil
	}
}

// heldEvent is an event an execution emitted before its job's start was
// recorded (jobRun.held).
type heldEvent struct {
	typ     record.EventType
	sev     record.Severity
	msg     string
	details map[string]any
}

// emitRun records an event of jr's job, or holds it while the job's start
// is not recorded yet (Tx.ReleaseEvents writes it then). The caller holds
// no Tx.
func (s *Core) EmitRun(jr *Run, typ record.EventType, sev record.Severity, msg string, details map[string]any) {
	jr.emu.Lock() // a leaf
	if !jr.recorded {
		jr.held = append(jr.held, heldEvent{typ, sev, msg, details})
		jr.emu.Unlock()
		return
	}
	jr.emu.Unlock()
	s.Emit(jr.ID, typ, sev, msg, details)
}

// ReleaseEvents adds to w the events jr held until its job's start was
// recorded, after whatever w holds, and lets the later ones through; it
// reports whether there were any. The Tx holds the registry lock, so an
// event emitted meanwhile is written after these.
func (tx *Tx) ReleaseEvents(w *state.Write, jr *Run) bool {
	jr.emu.Lock() // a leaf
	held := jr.held
	jr.held, jr.recorded = nil, true
	jr.emu.Unlock()
	for _, ev := range held {
		tx.AddEvent(w, jr.ID, ev.typ, ev.sev, ev.msg, ev.details)
	}
	return len(held) > 0
}
