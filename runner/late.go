package runner

import (
	"fmt"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
)

// This file handles the elements a keyed step drops as late. Dropping late
// data is Beam's semantics, so a late element never fails a run; but it is
// data, not only a counter: when the step declares an error output it goes
// there as a too_late reject carrying its window and the watermark, else to
// the dead-letter hook when one is set. It is always counted
// (DroppedLateElements), by the caller.

// lateRoute sends the late elements of one keyed step instance on.
type lateRoute struct {
	out *outputs
	sp  *stepPlan
	tag int
	// on says late elements go somewhere (an error output or the
	// dead-letter hook); otherwise they are only counted.
	on bool
}

func newLateRoute(w *worker, sp *stepPlan, out *outputs) lateRoute {
	tag := errTag(sp)
	return lateRoute{out: out, sp: sp, tag: tag, on: tag >= 0 || w.r.opts.DeadLetter != nil}
}

// drop sends e, too late for its window at input watermark wm, to the
// step's error output or the dead-letter hook. The caller counts it.
func (l *lateRoute) drop(e *contract.Element, wm mtime.Time) error {
	if !l.on {
		return nil
	}
	rj := contract.Reject{Element: e.Value, Step: l.sp.step.Name, Reason: contract.ReasonTooLate,
		Message: fmt.Sprintf("the element at %s arrived when the watermark was %s, past the end of window %s plus its allowed lateness (or the window had closed)",
			e.Time, wm, e.Window),
		Source: e.Source, Late: &contract.Lateness{Window: e.Window, Watermark: wm}}
	if l.tag < 0 {
		dl := l.out.w.r.opts.DeadLetter
		if err := dl(l.out.w.r.ctx, rj); err != nil {
			return fmt.Errorf("sending a late element of step %q to the dead-letter topic: %w", rj.Step, err)
		}
		return nil
	}
	l.out.Emit(l.tag, contract.Element{Value: rj, Time: e.Time, Window: e.Window, Pane: e.Pane, Source: e.Source})
	return nil
}
