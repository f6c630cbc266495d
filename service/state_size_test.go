package service

import (
	"testing"

	"github.com/weir-dev/weir/service/record"
)

// TestStateSizeInMetrics: a running job's description gives each keyed
// step the size of the state its checkpoints stored (state_bytes, exact
// for small state), and no size to the steps that keep none; the plain
// metrics (the plan's, Prometheus's) read no store and carry no size.
func TestStateSizeInMetrics(t *testing.T) {
	t.Parallel()
	s := openService(t, t.TempDir())
	j := submit(t, s, "sums", streamingYAML, t.TempDir())
	waitFor(t, s, j.ID, "two checkpoints", checkpointed(2))
	var sums record.StepMetrics
	waitStepOf(t, s, s.DescribeMetrics, j.ID, "Sums", "a stored state size", func(st record.StepMetrics) bool {
		sums = st
		return st.StateBytes != nil && *st.StateBytes > 0
	})
	if sums.StateBytesEstimated {
		t.Errorf("a few keys' state is estimated, not counted: %d bytes", *sums.StateBytes)
	}
	// Three keys, each in its current 10 s window (and the one before, while
	// the watermark has not passed its end).
	if w := sums.OpenWindows; w == nil || sums.OpenWindowsEstimated || *w < 1 || *w > 6 || sums.Keys == nil || *w < *sums.Keys {
		t.Errorf("Sums holds %v open windows (estimated %t) for %v keys, want 1 to 2 a key, counted", w, sums.OpenWindowsEstimated, sums.Keys)
	}
	// Three keys in a 10 s window or two: some tens of bytes each, not
	// kilobytes.
	if n := *sums.StateBytes; n > 64<<10 {
		t.Errorf("Sums holds %d bytes of state for 3 keys", n)
	}
	m, err := s.DescribeMetrics(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range m.Steps {
		if st.Name != "Sums" && (st.StateBytes != nil || st.OpenWindows != nil) {
			t.Errorf("step %s, which keeps no state, has a state size %v or open windows %v", st.Name, st.StateBytes, st.OpenWindows)
		}
	}
	if m, err = s.Metrics(j.ID); err != nil {
		t.Fatal(err)
	}
	for _, st := range m.Steps {
		if st.StateBytes != nil {
			t.Errorf("the plain metrics of step %s read the store: state size %d", st.Name, *st.StateBytes)
		}
	}
}
