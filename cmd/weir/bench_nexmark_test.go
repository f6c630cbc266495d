package main

import (
	"encoding/json"
	"testing"

	"github.com/weir-dev/weir/bench"
	"github.com/weir-dev/weir/cmd/weir/internal/benchcmd"
	"github.com/weir-dev/weir/nexmark"
)

// TestCLIBenchNexmark runs `weir bench nexmark` end to end at a small size
// and checks each query's result count against the generated events.
func TestCLIBenchNexmark(t *testing.T) {
	t.Parallel()
	const events = 5000
	r := runCLI(t, "", "bench", "nexmark", "--events", "5000", "--query", "q0,q2,q3", "--workers", "1,2", "--yaml", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("exit code %d\nstderr:\n%s", r.code, r.stderr)
	}
	var rs []benchcmd.NexmarkResult
	if err := json.Unmarshal([]byte(r.stdout), &rs); err != nil {
		t.Fatalf("decoding %q: %v", r.stdout, err)
	}
	// What the queries must count, from the generator itself.
	g, err := nexmark.NewGenerator(nexmark.Config{}, nexmark.BaseTime)
	if err != nil {
		t.Fatal(err)
	}
	var bids, q2 int64
	for _, e := range g.Generate(0, events) {
		if e.Bid != nil {
			bids++
			if e.Bid.Auction%123 == 0 {
				q2++
			}
		}
	}
	want := []struct {
		query   string
		workers int
		results int64
	}{
		{"generator", 1, bids}, {"q0", 1, events}, {"q0", 2, events}, {"yaml-q0", 1, events}, {"yaml-q0", 2, events},
		{"q2", 1, q2}, {"q2", 2, q2}, {"yaml-q2", 1, q2}, {"yaml-q2", 2, q2}, {"q3", 1, -1}, {"q3", 2, -1},
		{"yaml-q3", 1, -1}, {"yaml-q3", 2, -1},
	}
	if len(rs) != len(want) {
		t.Fatalf("got %d measurements, want %d: %s", len(rs), len(want), r.stdout)
	}
	for i, w := range want {
		got := rs[i]
		if got.Query != w.query || got.Workers != w.workers {
			t.Errorf("measurement %d is %s w%d, want %s w%d", i, got.Query, got.Workers, w.query, w.workers)
		}
		if w.results >= 0 && got.Results != w.results {
			t.Errorf("%s w%d: %d results, want %d", got.Query, got.Workers, got.Results, w.results)
		}
		if got.Events != events || got.EventsPerSec <= 0 || got.CPUSeconds <= 0 || got.PerCPUSecond <= 0 {
			t.Errorf("%s w%d: incomplete measurement %+v", got.Query, got.Workers, got)
		}
	}
	// q3 in Go and in YAML: the same join, the same results.
	q3 := rs[len(rs)-4].Results
	for _, r := range rs[len(rs)-4:] {
		if r.Results != q3 || q3 == 0 {
			t.Errorf("%s w%d gave %d results, q3 w1 %d", r.Query, r.Workers, r.Results, q3)
		}
	}
}

// TestCLIBenchNexmarkCheckpoints: with checkpoints into Pebble and the
// exactly-once sink, every result is committed once.
func TestCLIBenchNexmarkCheckpoints(t *testing.T) {
	r := runCLI(t, "", "bench", "nexmark", "--events", "20000", "--query", "q0,q8", "--workers", "2", "--checkpoint-interval", "20ms", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("exit code %d\nstderr:\n%s", r.code, r.stderr)
	}
	var rs []benchcmd.NexmarkResult
	if err := json.Unmarshal([]byte(r.stdout), &rs); err != nil {
		t.Fatalf("decoding %q: %v", r.stdout, err)
	}
	if len(rs) != 3 || rs[1].Query != "q0" || rs[2].Query != "q8" {
		t.Fatalf("got %s, want the generator, q0 and q8", r.stdout)
	}
	if rs[1].Results != 20000 {
		t.Errorf("q0 committed %d results, want each of the 20000 events once", rs[1].Results)
	}
	for _, q := range rs[1:] {
		if q.Checkpoints < 1 || q.Results == 0 {
			t.Errorf("%s: %d checkpoints, %d results", q.Query, q.Checkpoints, q.Results)
		}
	}
}

func TestCLIBenchNexmarkUsage(t *testing.T) {
	runCases(t, "", []cliCase{
		{name: "unknown query", args: []string{"bench", "nexmark", "--query", "q0,q42"}, wantCode: ExitUsage, wantStderr: []string{`"q42"`, "q8"}},
		{name: "no events", args: []string{"bench", "nexmark", "--events", "0"}, wantCode: ExitUsage, wantStderr: []string{"--events"}},
		{name: "no workers", args: []string{"bench", "nexmark", "--workers", "0"}, wantCode: ExitUsage, wantStderr: []string{"--workers"}},
		{name: "negative checkpoint interval", args: []string{"bench", "nexmark", "--checkpoint-interval", "-1s"}, wantCode: ExitUsage, wantStderr: []string{"--checkpoint-interval"}},
		{name: "unknown language", args: []string{"bench", "nexmark", "--unbounded", "--query", "q1", "--language", "yaml,java"}, wantCode: ExitUsage, wantStderr: []string{"--language", `"java"`}},
		{name: "no YAML version", args: []string{"bench", "nexmark", "--unbounded", "--query", "q9", "--language", "yaml,go"}, wantCode: ExitUsage,
			wantStderr: []string{"q9 has no YAML version"}},
		{name: "max rate of two queries", args: []string{"bench", "nexmark", "--unbounded", "--query", "q1,q2", "--max-rate", "1000"}, wantCode: ExitUsage,
			wantStderr: []string{"--max-rate"}},
		{name: "go with a fraction of a second", args: []string{"bench", "nexmark", "--unbounded", "--query", "q5", "--language", "go", "--window", "1500ms"}, wantCode: ExitUsage,
			wantStderr: []string{"--language go", "whole seconds"}},
	})
}

// TestCLIBenchNexmarkUnboundedGo runs a Go SDK query unbounded through
// the command, briefly, at a given rate: one report, the Go query's,
// with results and their latency.
func TestCLIBenchNexmarkUnboundedGo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a job service for seconds")
	}
	t.Parallel()
	r := runCLI(t, "", "bench", "nexmark", "--unbounded", "--query", "q1", "--language", "go", "--max-rate", "2000",
		"--duration", "3s", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("exit code %d\nstderr:\n%s", r.code, r.stderr)
	}
	var outs []bench.ChangeOutcome
	if err := json.Unmarshal([]byte(r.stdout), &outs); err != nil {
		t.Fatalf("decoding %q: %v", r.stdout, err)
	}
	if len(outs) != 1 {
		t.Fatalf("%d reports, want 1: %+v", len(outs), outs)
	}
	o := outs[0]
	if o.Query != "q1" || o.Language != "go" || o.Results == 0 || o.LatencyP99Millis <= 0 || o.Rate > 1400 || o.Rate < 1390 {
		t.Errorf("report %+v: want q1 in Go at 70%% of 2000 events/s (a rate whose events are whole microseconds apart) with results and their latency", o)
	}
}
