package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCLIJobsLogs: `weir jobs logs` prints a job's events as text and as
// JSON lines, and --follow prints them until the job ends (here drained
// from another command while it follows).
func TestCLIJobsLogs(t *testing.T) {
	srv := startServer(t, t.TempDir())
	work := t.TempDir()
	r := srv.cli(work, "run", testdata(t, "stream_windows.yaml"), "--job-name", "sums")
	cliCase{wantCode: ExitOK}.check(t, r)
	srv.waitJob("sums", "a checkpoint", epochAtLeast(1))

	r = srv.cli(work, "jobs", "logs", "sums")
	cliCase{wantCode: ExitOK, wantStdout: []string{"INFO", "state_changed", "job is PENDING", "job moved from PENDING to RUNNING: execution started"}}.check(t, r)

	followed := make(chan cliResult, 1)
	go func() {
		followed <- runCLI(t, work, "jobs", "logs", "sums", "--follow", "--format", "json", "--server", srv.url)
	}()
	cliCase{wantCode: ExitOK}.check(t, srv.cli(work, "jobs", "drain", "sums"))
	r = <-followed
	cliCase{wantCode: ExitOK}.check(t, r)
	var states []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev struct {
			Seq     uint64            `json:"seq"`
			Type    string            `json:"type"`
			Details map[string]string `json:"details"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("--format json line %q: %v", line, err)
		}
		if ev.Type == "state_changed" {
			states = append(states, ev.Details["to"])
		}
	}
	if got := strings.Join(states, " "); got != "PENDING RUNNING DRAINING DRAINED" {
		t.Errorf("followed state events %q, want PENDING RUNNING DRAINING DRAINED", got)
	}

	r = srv.cli(work, "jobs", "logs", "nope")
	cliCase{wantCode: ExitFailure, wantStderr: []string{"JOB_NOT_FOUND"}}.check(t, r)
	r = srv.cli(work, "jobs", "logs")
	cliCase{wantCode: ExitUsage}.check(t, r)
}
