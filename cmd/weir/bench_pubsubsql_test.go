package main

import (
	"encoding/json"
	"testing"
)

// TestCLIBenchPubSubSQL runs `weir bench pubsub-to-sql` end to end at a
// tiny size: every child is a re-execution of the test binary acting as
// weir, and every table is verified.
func TestCLIBenchPubSubSQL(t *testing.T) {
	t.Parallel()
	args := []string{"bench", "pubsub-to-sql", "--messages", "3000", "--keys", "7", "--window", "1s",
		"--checkpoint-interval", "100ms", "--latency-rate", "2000", "--latency-duration", "500ms", "--format", "json"}
	r := runCLI(t, "", args...)
	if r.code != ExitOK {
		t.Fatalf("exit code %d\nstderr:\n%s", r.code, r.stderr)
	}
	var rep struct {
		Messages     int64                     `json:"messages"`
		Publish      *struct{ Messages int64 } `json:"publish"`
		Measurements []struct {
			Name           string  `json:"name"`
			MessagesPerSec float64 `json:"messages_per_sec"`
			PeakRSSBytes   int64   `json:"peak_rss_bytes"`
			LatencyP99Ms   float64 `json:"latency_p99_ms"`
		} `json:"measurements"`
		Summary struct {
			PipelineToRaw           float64 `json:"pipeline_to_raw"`
			CheckpointedToFinalOnly float64 `json:"checkpointed_to_final_only"`
			CheckpointMeanMs        float64 `json:"checkpoint_mean_ms"`
			LatencyP50Ms            float64 `json:"latency_p50_ms"`
		} `json:"summary"`
		Targets []struct {
			Variant string `json:"variant"`
		} `json:"targets"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("decoding %q: %v", r.stdout, err)
	}
	if rep.Messages != 3000 || rep.Publish == nil || rep.Publish.Messages != 3000 {
		t.Errorf("report: %s", r.stdout)
	}
	want := []string{"raw", "pipeline", "pipeline-final-cp", "latency"}
	if len(rep.Measurements) != len(want) {
		t.Fatalf("got %d measurements, want %d: %s", len(rep.Measurements), len(want), r.stdout)
	}
	for i, m := range rep.Measurements {
		if m.Name != want[i] || m.PeakRSSBytes <= 0 {
			t.Errorf("measurement %d: %+v", i, m)
		}
		if (m.Name == "latency") != (m.MessagesPerSec == 0) || (m.Name == "latency") != (m.LatencyP99Ms > 0) {
			t.Errorf("measurement %s: rate %v, p99 %v", m.Name, m.MessagesPerSec, m.LatencyP99Ms)
		}
	}
	s := rep.Summary
	if s.PipelineToRaw <= 0 || s.CheckpointedToFinalOnly <= 0 || s.CheckpointMeanMs <= 0 || s.LatencyP50Ms <= 0 || len(rep.Targets) != 1 {
		t.Errorf("summary %+v, targets %+v", s, rep.Targets)
	}

	runCases(t, "", []cliCase{
		{name: "bad messages", args: []string{"bench", "pubsub-to-sql", "--messages", "0"}, wantCode: ExitUsage, wantStderr: []string{"messages"}},
		{name: "bad window", args: []string{"bench", "pubsub-to-sql", "--window", "1500ms"}, wantCode: ExitUsage, wantStderr: []string{"window"}},
		{name: "unknown variant", args: []string{"bench", "pubsub-to-sql", "--variants", "publish"}, wantCode: ExitUsage, wantStderr: []string{"publish"}},
		{name: "child without dir", args: []string{"bench-child", "pubsub-to-sql", "raw"}, wantCode: ExitUsage, wantStderr: []string{"--dir"}},
		{name: "child unknown variant", args: []string{"bench-child", "pubsub-to-sql", "nope", "--dir", t.TempDir()}, wantCode: ExitUsage},
	})
}
