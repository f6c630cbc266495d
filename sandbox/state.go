package sandbox

import (
	"context"
	"sort"
)

// State is keyed state a sandboxed run starts from: a job snapshot's, so
// that a rehearsal compares the windows open at the snapshot too. Add the
// snapshot's entries, then give it to Options.State with the step mapping
// of the pipeline that reads it. A State is read by any number of runs,
// never changed by them.
type State struct {
	steps   map[string]map[uint16][]stateEntry
	entries int64
}

type stateEntry struct{ key, value []byte }

// NewState returns an empty State.
func NewState() *State { return &State{steps: map[string]map[uint16][]stateEntry{}} }

// Add adds the entry of key in key group kg of step (the snapshot's step
// name). Entries of one step and key group are added in key order, as a
// snapshot file holds them. Add keeps the slices.
func (s *State) Add(step string, kg uint16, key, value []byte) {
	groups := s.steps[step]
	if groups == nil {
		groups = map[uint16][]stateEntry{}
		s.steps[step] = groups
	}
	groups[kg] = append(groups[kg], stateEntry{key: key, value: value})
	s.entries++
}

// Entries counts the entries added.
func (s *State) Entries() int64 { return s.entries }

// Steps returns the names of the steps that have state, sorted.
func (s *State) Steps() []string { return sortedKeys(s.steps) }

// stateView reads a State under a pipeline's step names: steps maps each
// step of the pipeline to the State's step whose state it takes (as an
// update's compatibility check matched them); a step not in it starts
// empty.
type stateView struct {
	s     *State
	steps map[string]string
}

// Scan implements contract.StateReader.
func (v stateView) Scan(ctx context.Context, step string, keyGroups []int, fn func(kg uint16, key, value []byte) error) error {
	from, ok := v.steps[step]
	if !ok {
		return nil
	}
	groups := v.s.steps[from]
	if len(groups) == 0 {
		return nil
	}
	kgs := append([]int(nil), keyGroups...)
	sort.Ints(kgs)
	for _, kg := range kgs {
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, e := range groups[uint16(kg)] {
			if err := fn(uint16(kg), e.key, e.value); err != nil {
				return err
			}
		}
	}
	return nil
}
