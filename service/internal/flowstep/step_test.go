package flowstep

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weir-dev/weir/service/record"
)

// TestScripts walks the replacement flows step by step from the scripts in
// testdata/ (run with -rewrite to regenerate the expected output). The
// commands:
//
//	flow strategy=S phase=P [max-stop=D] [has-max-stop] [cancel-on-timeout]
//	     [drain-start=T] [drain-timed-out] [min-parallel=D] [overlap-start=T]
//	     [cut=T span=D] [wait-watermark] [tables=N] [tables-ended]
//	     [old-ended=T] [compacted] [taken-over]
//	new state=S [running|stopped] [error=E]   the new job (sums, new-1)
//	old state=S [running|stopped] [pending-commit|committed] [error=E]
//	                                          the old job (old-1)
//	env [no-broker] [watermark=T] [retention=D]
//	step now=T [apply[=N]]
//
// Times T are clock times of one day (HH:MM:SS), durations D Go's, error
// texts E words joined by '_'. step
// prints the decision: its actions, then "done" or "wait: why"; with apply
// it also applies the first N actions (all by default) to the records as
// the driver's functions would, and prints the records after, so a script
// walks a flow from phase to phase. Applying some actions and not the
// others is a driver that crashed between them: the next step takes the
// flow on from the records.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out, err := h.run(d)
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			return out
		})
	})
}

// harness holds the records a script builds.
type harness struct {
	in Input
}

var day = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func clock(v string) (time.Time, error) {
	t, err := time.Parse("15:04:05", v)
	if err != nil {
		return time.Time{}, err
	}
	return day.Add(time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second), nil
}

func (h *harness) run(d *datadriven.TestData) (string, error) {
	switch d.Cmd {
	case "flow":
		return "", h.flow(d)
	case "new", "old":
		j := h.in.New
		if d.Cmd == "old" {
			j = h.in.Old
		}
		if j == nil {
			return "", fmt.Errorf("%s before flow", d.Cmd)
		}
		for _, a := range d.CmdArgs {
			switch a.Key {
			case "state":
				s, err := record.ParseJobState(a.Vals[0])
				if err != nil {
					return "", err
				}
				j.State = s
			case "running":
				if d.Cmd == "new" {
					h.in.NewRunning = true
				} else {
					h.in.OldRunning = true
				}
			case "stopped":
				if d.Cmd == "new" {
					h.in.NewRunning = false
				} else {
					h.in.OldRunning = false
				}
			case "pending-commit":
				j.PendingCommit = true
			case "committed":
				j.PendingCommit = false
			case "error": // words joined by '_'
				j.Error = strings.ReplaceAll(a.Vals[0], "_", " ")
			default:
				return "", fmt.Errorf("%s: unknown argument %s", d.Cmd, a.Key)
			}
		}
		return "", nil
	case "env":
		for _, a := range d.CmdArgs {
			switch a.Key {
			case "no-broker":
				h.in.HasBroker = false
			case "watermark":
				t, err := clock(a.Vals[0])
				if err != nil {
					return "", err
				}
				h.in.OldWatermark = t
			case "retention":
				r, err := time.ParseDuration(a.Vals[0])
				if err != nil {
					return "", err
				}
				h.in.Retention = r
			default:
				return "", fmt.Errorf("env: unknown argument %s", a.Key)
			}
		}
		return "", nil
	case "step":
		return h.step(d)
	}
	return "", fmt.Errorf("unknown command %s", d.Cmd)
}

func (h *harness) flow(d *datadriven.TestData) error {
	rep := &record.Replacement{OldJobID: "old-1", NewJobID: "new-1"}
	nj := &record.Job{ID: "new-1", Name: "sums", State: record.StatePending, CreateTime: day, Replacement: rep}
	old := &record.Job{ID: "old-1", Name: "sums", State: record.StateRunning}
	h.in = Input{New: nj, Old: old, OldRunning: true, HasBroker: true, Retention: 24 * time.Hour}
	for _, a := range d.CmdArgs {
		v := ""
		if len(a.Vals) > 0 {
			v = a.Vals[0]
		}
		flow := func() *record.ParallelFlow {
			if rep.Parallel == nil {
				rep.Parallel = &record.ParallelFlow{}
			}
			return rep.Parallel
		}
		var err error
		switch a.Key {
		case "strategy":
			rep.Strategy = v
			if v == record.StrategyParallel {
				flow()
			}
		case "phase":
			rep.Phase = record.ReplacementPhase(v)
		case "max-stop":
			var m time.Duration
			m, err = time.ParseDuration(v)
			rep.MaxStopMillis = m.Milliseconds()
		case "has-max-stop":
			rep.HasMaxStop = true
		case "cancel-on-timeout":
			rep.CancelOnDrainTimeout = true
		case "drain-start":
			var t time.Time
			t, err = clock(v)
			rep.DrainStart = &t
		case "drain-timed-out":
			rep.DrainTimedOut = true
		case "min-parallel":
			var m time.Duration
			m, err = time.ParseDuration(v)
			flow().MinParallelMillis = m.Milliseconds()
		case "overlap-start":
			var t time.Time
			t, err = clock(v)
			flow().OverlapStart = &t
		case "cut":
			var t time.Time
			t, err = clock(v)
			flow().CutTime = &t
		case "span":
			var m time.Duration
			m, err = time.ParseDuration(v)
			flow().CutSpanMillis = m.Milliseconds()
		case "wait-watermark":
			flow().WaitWatermark = true
		case "tables":
			var n int
			n, err = strconv.Atoi(v)
			for i := range n {
				flow().Tables = append(flow().Tables, record.FacadeTable{Driver: "sqlite", Table: fmt.Sprintf("t%d", i)})
			}
		case "tables-ended":
			for i := range flow().Tables {
				flow().Tables[i].OldEnded = true
			}
		case "old-ended":
			var t time.Time
			t, err = clock(v)
			flow().OldEnded = &t
		case "compacted":
			flow().Compacted = true
		case "taken-over":
			rep.NewJobID = "later-1"
		default:
			return fmt.Errorf("flow: unknown argument %s", a.Key)
		}
		if err != nil {
			return fmt.Errorf("flow %s: %w", a.Key, err)
		}
	}
	return nil
}

func (h *harness) step(d *datadriven.TestData) (string, error) {
	apply := -1
	for _, a := range d.CmdArgs {
		switch a.Key {
		case "now":
			t, err := clock(a.Vals[0])
			if err != nil {
				return "", err
			}
			h.in.Now = t
		case "apply":
			apply = 1 << 30
			if len(a.Vals) > 0 {
				n, err := strconv.Atoi(a.Vals[0])
				if err != nil {
					return "", err
				}
				apply = n
			}
		default:
			return "", fmt.Errorf("step: unknown argument %s", a.Key)
		}
	}
	dec := Step(h.in)
	var b strings.Builder
	for _, a := range dec.Actions {
		fmt.Fprintln(&b, a)
	}
	switch {
	case dec.Done:
		fmt.Fprintln(&b, "done")
	case len(dec.Actions) == 0:
		fmt.Fprintf(&b, "wait: %s\n", dec.Why)
	}
	if apply < 0 {
		return b.String(), nil
	}
	for i, a := range dec.Actions {
		if i >= apply {
			break
		}
		h.effect(a)
	}
	fmt.Fprintf(&b, "=> %s\n", h.records())
	return b.String(), nil
}

// effect is what the driver's function for action a leaves in the records
// (package replace).
func (h *harness) effect(a Action) {
	nj, old, rep := h.in.New, h.in.Old, h.in.New.Replacement
	now := h.in.Now
	switch a.Kind {
	case FinishCancel:
		nj.State = record.StateCancelled
	case EndFlow:
		rep.Phase = a.Phase
		if a.Note != "" {
			rep.Notes = append(rep.Notes, a.Note)
		}
	case FailFlow:
		if nj.State == record.StatePending {
			nj.State, nj.Error = record.StateFailed, a.Reason
		}
		rep.Phase = record.PhaseFailed
	case BeginDrain, DrainOld:
		rep.Phase, rep.DrainStart = record.PhaseDrainingOld, &now
		old.State = record.StateDraining
	case CutOver:
		rep.Phase = record.PhaseCutOver
		nj.State, h.in.NewRunning = record.StateRunning, true
	case NoteDrainTimeout:
		rep.DrainTimedOut = true
		rep.Notes = append(rep.Notes, a.Note)
	case CancelOld:
		old.State = record.StateCancelling
	case GiveUp:
		rep.Phase = a.Phase
		if !nj.State.Terminal() {
			nj.State = record.StateCancelled
		}
		h.in.NewRunning = false
	case PositionSubscriptions:
	case StartOverlap:
		rep.Phase, rep.Parallel.OverlapStart = record.PhaseOverlap, &now
		nj.State, h.in.NewRunning = record.StateRunning, true
	case CompleteCutOver:
		rep.Phase, rep.Parallel.OldEnded = record.PhaseCutOver, &now
	case EndOldGenerations:
		for i := range rep.Parallel.Tables {
			rep.Parallel.Tables[i].OldEnded = true
		}
	case Compact:
		rep.Parallel.Compacted = true
	}
}

// records says the flow's phase and the jobs' states.
func (h *harness) records() string {
	run := func(running bool) string {
		if running {
			return " (running)"
		}
		return ""
	}
	return fmt.Sprintf("phase %s; new %s%s; old %s%s", h.in.New.Replacement.Phase, h.in.New.State, run(h.in.NewRunning), h.in.Old.State, run(h.in.OldRunning))
}
