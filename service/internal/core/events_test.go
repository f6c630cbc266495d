package core

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/weir-dev/weir/service/record"
)

// TestEventBound: a job keeps its last eventCap events, and numbering goes
// on after a restart.
func TestEventBound(t *testing.T) {
	dir := t.TempDir()
	s := openCore(t, dir)
	s.eventCap = 3
	for i := range 5 {
		s.Emit("job-x", record.EventLog, record.SeverityInfo, fmt.Sprint("line ", i), nil)
	}
	evs, err := s.ReadEvents("job-x", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := seqs(evs); !slices.Equal(got, []uint64{3, 4, 5}) || evs[2].Message != "line 4" {
		t.Fatalf("kept events %v (%+v), want 3, 4, 5", got, evs)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s = openCore(t, dir)
	s.eventCap = 3
	s.Emit("job-x", record.EventLog, record.SeverityInfo, "after the restart", nil)
	evs, _ = s.ReadEvents("job-x", 0, 0)
	if got := seqs(evs); !slices.Equal(got, []uint64{4, 5, 6}) {
		t.Fatalf("after a restart: events %v, want 4, 5, 6", got)
	}
	if evs, _ = s.ReadEvents("job-x", 5, 0); !slices.Equal(seqs(evs), []uint64{6}) {
		t.Errorf("after 5: %v", seqs(evs))
	}
	if evs, _ = s.ReadEvents("job-x", 0, 1); !slices.Equal(seqs(evs), []uint64{4}) {
		t.Errorf("limit 1: %v", seqs(evs))
	}
}
