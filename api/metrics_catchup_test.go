package api

import (
	"testing"

	"github.com/weir-dev/weir/service/record"
)

// TestCollectCatchUp: a re-reading source's catch-up progress (catch_up
// of the job's JSON) is exported as the weir_step_catch_up_* gauges, and
// a source that re-reads nothing exports none of them.
func TestCollectCatchUp(t *testing.T) {
	type sample struct {
		name string
		v    float64
	}
	tests := []struct {
		name string
		step record.StepMetrics
		want []sample
	}{
		{"no re-read", record.StepMetrics{Name: "Events"}, nil},
		{"re-reading", record.StepMetrics{Name: "Events", CatchUp: &record.SourceCatchUp{ReadSequence: 40, HoldUntil: 102}},
			[]sample{{"weir_step_catch_up_read_sequence", 40}, {"weir_step_catch_up_hold_until_sequence", 102}, {"weir_step_catch_up_caught_up", 0}, {"weir_step_catch_up_expired_messages", 0}}},
		{"caught up", record.StepMetrics{Name: "Events", CatchUp: &record.SourceCatchUp{ReadSequence: 130, HoldUntil: 102, CaughtUp: true}},
			[]sample{{"weir_step_catch_up_read_sequence", 130}, {"weir_step_catch_up_hold_until_sequence", 102}, {"weir_step_catch_up_caught_up", 1}, {"weir_step_catch_up_expired_messages", 0}}},
		{"caught up past a gap", record.StepMetrics{Name: "Events", CatchUp: &record.SourceCatchUp{ReadSequence: 102, HoldUntil: 102, CaughtUp: true, ExpiredMessages: 60}},
			[]sample{{"weir_step_catch_up_read_sequence", 102}, {"weir_step_catch_up_hold_until_sequence", 102}, {"weir_step_catch_up_caught_up", 1}, {"weir_step_catch_up_expired_messages", 60}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []sample
			collectCatchUp(func(m int, v float64, labels ...string) {
				if len(labels) != 3 || labels[2] != "Events" {
					t.Fatalf("labels %q", labels)
				}
				got = append(got, sample{metricDefs[m].Name, v})
			}, tc.step, []string{"j1", "sums", "Events"})
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}
