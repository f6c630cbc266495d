package main

import (
	"strings"
	"testing"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/graph"
)

// TestDescribeSubscriptions: weir jobs describe shows the subscriptions a
// replacement gave a job's steps, and for a step that names a
// subscription, that it reads the service's in place of it.
func TestDescribeSubscriptions(t *testing.T) {
	g := &graph.Pipeline{Steps: []*graph.Step{
		{Name: "Events", Kind: graph.KindSource, Source: &graph.IOIdentity{Kind: "pubsub", Identity: "subscription/par-sub"}},
		{Name: "Clicks", Kind: graph.KindSource, Source: &graph.IOIdentity{Kind: "pubsub", Identity: "topic/clicks"}},
	}}
	raw, err := g.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		subs map[string]string
		want string
	}{
		{"none", nil, ""},
		{"named and topic", map[string]string{"Events": "sums--g2--Events", "Clicks": "sums--g2--Clicks"},
			"Clicks reads sums--g2--Clicks (created by the service); Events reads sums--g2--Events (created by the service) in place of the named subscription par-sub, which it does not read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := &client.Job{ID: "j1", Name: "sums", Graph: raw, Subscriptions: tc.subs}
			if got := describeSubscriptions(j); got != tc.want {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
			var b strings.Builder
			if err := describeJob(&b, j, false); err != nil {
				t.Fatal(err)
			}
			if has := strings.Contains(b.String(), "Subscriptions:"); has != (tc.want != "") {
				t.Fatalf("describe shows a Subscriptions row %v, want %v:\n%s", has, tc.want != "", b.String())
			}
		})
	}
}

// TestDescribeCatchUp: weir jobs describe shows a re-reading source's
// catch-up progress (catch_up of the JSON) as a Catch-up row, and no row
// for a job that re-reads nothing.
func TestDescribeCatchUp(t *testing.T) {
	tests := []struct {
		name  string
		steps []client.StepMetrics
		want  string
	}{
		{"none", []client.StepMetrics{{Name: "Events"}, {Name: "Sums"}}, ""},
		{"re-reading", []client.StepMetrics{{Name: "Events", CatchUp: &client.SourceCatchUp{ReadSequence: 40, HoldUntil: 102}}, {Name: "Sums"}},
			"Events re-reading: seq 40 of 102 (its watermark is held until then, so no pane fires)"},
		{"caught up", []client.StepMetrics{{Name: "Events", CatchUp: &client.SourceCatchUp{ReadSequence: 130, HoldUntil: 102, CaughtUp: true}}},
			"Events caught up (read seq 130, re-read through seq 102)"},
		{"caught up past a gap", []client.StepMetrics{{Name: "Events", CatchUp: &client.SourceCatchUp{ReadSequence: 102, HoldUntil: 102, CaughtUp: true, ExpiredMessages: 60}}},
			"Events caught up (read seq 102, re-read through seq 102; 60 messages of the re-read were gone from the topic's retention)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := &client.Job{ID: "j1", Name: "sums", Metrics: &client.JobMetrics{Steps: tc.steps}}
			var b strings.Builder
			if err := describeJob(&b, j, false); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if tc.want == "" {
				if strings.Contains(out, "Catch-up") {
					t.Fatalf("describe shows a Catch-up row for a job that re-reads nothing:\n%s", out)
				}
				return
			}
			if !strings.Contains(out, "Catch-up:") || !strings.Contains(out, tc.want) {
				t.Fatalf("describe:\n%s\nwithout a Catch-up row %q", out, tc.want)
			}
		})
	}
}

// TestDescribeStepSections: describe lists a step's user metrics (its
// counter and distribution) under "User metrics", and each step's rejects
// by reason, most first, under "Rejects by reason"; a job without any has
// no such section.
func TestDescribeStepSections(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	tests := []struct {
		name    string
		section string
		steps   []client.StepMetrics
		want    []string
	}{
		{"no user metrics", "User metrics", []client.StepMetrics{{Name: "Measure"}}, nil},
		{"counter and distribution", "User metrics", []client.StepMetrics{{Name: "Measure", UserMetrics: []client.UserMetric{
			{Namespace: "orders", Name: "amount", Kind: "distribution", Count: i64(1000), Sum: i64(500500), Min: i64(1), Max: i64(1000)},
			{Namespace: "orders", Name: "big", Kind: "counter", Value: i64(100)},
		}}}, []string{"User metrics (this execution):", "count 1000, sum 500500, min 1, max 1000", "big", "value 100"}},
		{"no rejects", "Rejects by reason", []client.StepMetrics{{Name: "Check"}}, nil},
		{"two reject reasons", "Rejects by reason", []client.StepMetrics{{Name: "Check", Rejects: 7, RejectsByReason: map[string]int64{"known_region": 2, "positive_amount": 5}}},
			[]string{"Rejects by reason:", "Check  positive_amount  5\n  Check  known_region     2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := describeJob(&b, &client.Job{ID: "j1", Name: "orders", Metrics: &client.JobMetrics{Steps: tc.steps}}, false); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if tc.want == nil && strings.Contains(out, tc.section) {
				t.Fatalf("describe shows %q for a job without any:\n%s", tc.section, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("describe lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestDescribeSinks: weir jobs describe shows what a job's buffering
// sinks hold and how long its sources waited for them, and no row for a
// job without such a sink.
func TestDescribeSinks(t *testing.T) {
	held := int64(3 << 20)
	tests := []struct {
		name string
		m    *client.JobMetrics
		want string
	}{
		{"no buffering sink", &client.JobMetrics{SinkWaitSeconds: 0}, ""},
		{"waiting", &client.JobMetrics{SinkWaitSeconds: 12.5, SinkBufferedBytes: &held},
			"Sinks:         3.0 MiB held for the next checkpoint; the sources waited 12.5s for them"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := describeJob(&b, &client.Job{ID: "j1", Name: "sums", Metrics: tc.m}, false); err != nil {
				t.Fatal(err)
			}
			got := ""
			for line := range strings.Lines(b.String()) {
				if strings.HasPrefix(line, "Sinks:") {
					got = strings.TrimSpace(line)
				}
			}
			if got != tc.want {
				t.Fatalf("Sinks row %q, want %q:\n%s", got, tc.want, b.String())
			}
		})
	}
}
