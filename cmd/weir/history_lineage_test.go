package main

import (
	"strings"
	"testing"

	"github.com/weir-dev/weir/client"
)

// TestWriteGenerationsMarksOtherNames: weir jobs history NEW marks the
// generations of an old name that NEW's lineage continues with that name,
// and not NEW's own.
func TestWriteGenerationsMarksOtherNames(t *testing.T) {
	h := &client.HistoryResponse{Name: "sums-v2", Generations: []client.GenerationHistory{
		{Generation: 1, JobID: "j1", How: client.HowCreate, State: client.StateDrained, JobName: "sums"},
		{Generation: 2, JobID: "j2", How: client.HowStopAndReplace, State: client.StateRunning},
	}}
	var b strings.Builder
	if err := writeGenerations(&b, h); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	var g1, g2 string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "1 "):
			g1 = l
		case strings.HasPrefix(l, "2 "):
			g2 = l
		}
	}
	if !strings.Contains(g1, "j1 (as sums)") || strings.Contains(g2, "(as") || !strings.Contains(g2, "j2") {
		t.Fatalf("generations:\n%s", b.String())
	}
}
