package main

import (
	"strings"
	"testing"

	"github.com/weir-dev/weir/client"
)

// TestParallelProgressGate: `weir run --wait` shows a parity gate's last
// figures during the overlap, and prints a new line (its state changes)
// when they change.
func TestParallelProgressGate(t *testing.T) {
	r := &client.Replacement{Phase: client.PhaseOverlap, OldJobID: "old", Parallel: &client.ParallelFlow{
		Progress: &client.FlowProgress{MinParallelMillis: 0},
		Gate:     &client.ParityGate{Outcome: client.GateHolding, Windows: 3, Last: client.ParityFigures{WindowsCompared: 4, Agreed: 1, Differing: 2}}}}
	line := parallelProgressLine(r)
	if !strings.Contains(line, "parity gate HOLDING: 1 of 3 consecutive complete windows agreed (4 windows compared, 2 differing rows, budget 0)") {
		t.Fatalf("progress line %q lacks the gate's figures", line)
	}
	before := progressState(r)
	r.Parallel.Gate.Last.Agreed = 2
	if progressState(r) == before {
		t.Fatalf("the progress state %q does not change with the gate's figures", before)
	}
}
