package api

import (
	"fmt"
	"strings"
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

// TestCollectUserMetrics: a step's user-defined counter and distribution
// are exported under the step's labels with their namespace and name, and
// a step without any exports none.
func TestCollectUserMetrics(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	st := record.StepMetrics{Name: "Measure", UserMetrics: []record.UserMetric{
		{Namespace: "orders", Name: "amount", Kind: "distribution", Count: i64(1000), Sum: i64(500500), Min: i64(1), Max: i64(1000)},
		{Namespace: "orders", Name: "big", Kind: "counter", Value: i64(100)},
	}}
	var got []string
	rec := func(m int, v float64, labels ...string) {
		got = append(got, fmt.Sprintf("%s{%s} %v", metricDefs[m].Name, strings.Join(labels, ","), v))
	}
	collectUserMetrics(rec, func(m int, v int64, labels ...string) { rec(m, float64(v), labels...) }, st, []string{"j1", "orders", "Measure"})
	want := []string{
		"weir_user_distribution_count{j1,orders,Measure,orders,amount} 1000",
		"weir_user_distribution_sum{j1,orders,Measure,orders,amount} 500500",
		"weir_user_distribution_min{j1,orders,Measure,orders,amount} 1",
		"weir_user_distribution_max{j1,orders,Measure,orders,amount} 1000",
		"weir_user_counter_total{j1,orders,Measure,orders,big} 100",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	got = nil
	collectUserMetrics(rec, func(m int, v int64, labels ...string) { rec(m, float64(v), labels...) }, record.StepMetrics{Name: "Other"}, []string{"j1", "orders", "Other"})
	if got != nil {
		t.Errorf("a step without user metrics exported %v", got)
	}
}
