package record

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/weir-dev/weir/errcode"
)

// JobState is the state of a job. The zero value is not a state.
// Transitions happen only through transition (this file), which consults
// the transitions table; terminal states never change.
type JobState int

// Job states, Dataflow's (see docs/ARCHITECTURE.md, "Vocabulary").
const (
	// StatePending: the job is created but its execution has not started.
	StatePending JobState = iota + 1
	// StateRunning: the job's execution runs.
	StateRunning
	// StateDone: a batch job finished by itself (terminal).
	StateDone
	// StateDraining: a drain was requested; sources stopped reading and
	// every open window fires.
	StateDraining
	// StateDrained: the drain completed (terminal).
	StateDrained
	// StateCancelling: a cancel was requested.
	StateCancelling
	// StateCancelled: the job was cancelled (terminal); work not covered
	// by a committed checkpoint was discarded.
	StateCancelled
	// StateUpdated: the job was replaced by a newer job of its name, which
	// inherited its state (terminal; used by job updates).
	StateUpdated
	// StateFailed: the job failed (terminal); the job's error says why.
	StateFailed
)

var stateNames = [...]string{
	StatePending:    "PENDING",
	StateRunning:    "RUNNING",
	StateDone:       "DONE",
	StateDraining:   "DRAINING",
	StateDrained:    "DRAINED",
	StateCancelling: "CANCELLING",
	StateCancelled:  "CANCELLED",
	StateUpdated:    "UPDATED",
	StateFailed:     "FAILED",
}

// AllStates lists every job state in declaration order.
func AllStates() []JobState {
	return []JobState{StatePending, StateRunning, StateDone, StateDraining, StateDrained,
		StateCancelling, StateCancelled, StateUpdated, StateFailed}
}

// String returns the state's upper-case name (RUNNING), as in the API.
func (s JobState) String() string {
	if s < StatePending || int(s) >= len(stateNames) {
		return fmt.Sprintf("JobState(%d)", int(s))
	}
	return stateNames[s]
}

// Title returns the state in title case (Running), as `weir jobs list`
// prints it.
func (s JobState) Title() string {
	n := s.String()
	return n[:1] + strings.ToLower(n[1:])
}

// ParseJobState parses an upper-case state name.
func ParseJobState(name string) (JobState, error) {
	for _, s := range AllStates() {
		if s.String() == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("unknown job state %q", name)
}

// Terminal reports whether s never changes again.
func (s JobState) Terminal() bool {
	switch s {
	case StateDone, StateDrained, StateCancelled, StateUpdated, StateFailed:
		return true
	}
	return false
}

// MarshalJSON encodes the state as its upper-case name.
func (s JobState) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON decodes an upper-case state name.
func (s *JobState) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err != nil {
		return fmt.Errorf("job state: %w", err)
	}
	v, err := ParseJobState(name)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// transitions lists, per state, the states it may move to. FAILED is
// reachable from every non-terminal state; terminal states have no entry,
// so they never change.
//
// PENDING → DRAINING is the service's own: the job an update creates to
// replace a draining job is created draining. A drain request, as in
// Dataflow, applies to a running job only (Service.Drain refuses a
// PENDING one).
var transitions = map[JobState][]JobState{
	StatePending:    {StateRunning, StateDraining, StateCancelling, StateFailed},
	StateRunning:    {StateDone, StateDraining, StateCancelling, StateUpdated, StateFailed},
	StateDraining:   {StateDrained, StateCancelling, StateUpdated, StateFailed},
	StateCancelling: {StateCancelled, StateFailed},
}

// CanTransition reports whether a job may move from one state to another.
func CanTransition(from, to JobState) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// transition moves j to state to at time now, or returns an
// ILLEGAL_TRANSITION error naming both states (JOB_TERMINATED when j is
// terminal). It is the only place that changes the State of an existing
// Job (new jobs are created PENDING).
func Transition(j *Job, to JobState, now time.Time, reason string) error {
	if !CanTransition(j.State, to) {
		if j.State.Terminal() {
			return errcode.Errorf(errcode.JobTerminated, "job %s (%s) is %s, a final state: it can no longer move to %s", j.ID, j.Name, j.State, to)
		}
		return errcode.Errorf(errcode.IllegalTransition, "job %s (%s) cannot move from %s to %s", j.ID, j.Name, j.State, to)
	}
	j.State = to
	j.StateTime = now
	j.History = append(j.History, StateChange{State: to, Time: now, Reason: reason})
	if to == StateFailed && reason != "" {
		j.Error = reason
	}
	return nil
}
