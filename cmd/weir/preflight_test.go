package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// preflightYAML sums clicks per user in one-minute windows from topic
// clicks into a SQLite table; FN is the combine function.
const preflightYAML = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: ReadClicks
      config: {topic: clicks, schema: {user: string, n: int}}
    - type: Combine
      name: PerUser
      input: ReadClicks
      windowing: {type: fixed, size: 1m}
      config:
        group_by: user
        combine: {total: {value: n, fn: FN}}
    - type: WriteToSql
      name: WriteTotals
      input: PerUser
      config: {dsn: totals.sqlite, table: totals, key: [user]}
`

// TestCLIServerPreflightRehearsal: weir run --update with
// weir_rehearse=required, against a server started with
// --rehearse-trace-memory 1B and --rehearse-trace-dir: the server
// rehearses the running job's pipeline and the new one on the topic's
// retained input before it changes anything. A pipeline that computes the
// same answers passes (validate-only: nothing changes); one that takes the
// maximum instead of the sum is refused with PARITY_FAILED and the
// verdict, the job untouched. The recorded stretch, over 1 MiB, spilled
// to the server's directory, which is empty afterwards.
func TestCLIServerPreflightRehearsal(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir, spill := t.TempDir(), t.TempDir()
	srv := startServerArgs(t, filepath.Join(dir, "data"), "--rehearse-trace-memory", "1B", "--rehearse-trace-dir", spill)
	srv.mustCLI(t, dir, "topics", "create", "clicks")
	write := func(name, fn string) string {
		return writeTestFile(t, dir, name, strings.Replace(preflightYAML, "FN", fn, 1))
	}
	sums, maxes := write("sums.yaml", "sum"), write("maxes.yaml", "max")
	r := srv.cli(dir, "run", sums, "--job-name", "clicks", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("submit: exit %d: %s", r.code, r.stderr)
	}
	var job struct{ ID string }
	if err := json.Unmarshal([]byte(r.stdout), &job); err != nil {
		t.Fatal(err)
	}
	// Twelve clicks of 200 KB each (a field the schema does not read).
	var b strings.Builder
	pad := strings.Repeat("x", 200<<10)
	for i := range 12 {
		fmt.Fprintf(&b, `{"user": "u%d", "n": %d, "pad": %q}`+"\n", i%3, i+1, pad)
	}
	srv.mustCLI(t, dir, "topics", "publish", "clicks", "--file", writeTestFile(t, dir, "clicks.jsonl", b.String()))
	update := func(pipeline string, extra ...string) cliResult {
		return srv.cli(dir, append([]string{"run", pipeline, "--job-name", "clicks", "--update",
			"--dataflow_service_options=weir_rehearse=required;since=30m"}, extra...)...)
	}
	r = update(sums, "--validate-only")
	if r.code != ExitOK || !regexp.MustCompile(`rehearsal passed: 12 input elements since \S+, 3 rows compared, 0 differences \(budget 0, noise 0\); recorded stretch 2\.\d MiB, [0-9.]+ (KiB|MiB) of it spilled to the server's disk`).MatchString(r.stderr) {
		t.Fatalf("a rehearsal of the same pipeline: exit %d, want 0 and the verdict\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	r = update(maxes)
	if r.code == ExitOK || !strings.Contains(r.stderr, "PARITY_FAILED") || !strings.Contains(r.stderr, "rehearsal refused: 12 input elements") {
		t.Fatalf("a rehearsal of a pipeline with other answers: exit %d, want PARITY_FAILED after the verdict\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	// --format json prints the verdict on stdout.
	if rj := update(maxes, "--format", "json"); rj.code != r.code {
		t.Errorf("--format json: exit %d, want %d as in text", rj.code, r.code)
	} else {
		var out struct {
			Rehearsal struct {
				Passed            bool  `json:"passed"`
				Differences       int64 `json:"differences"`
				TraceSpilledBytes int64 `json:"trace_spilled_bytes"`
			} `json:"rehearsal"`
		}
		if err := json.Unmarshal([]byte(rj.stdout), &out); err != nil || out.Rehearsal.Passed || out.Rehearsal.Differences != 3 || out.Rehearsal.TraceSpilledBytes == 0 {
			t.Errorf("--format json: %+v (%v), want the refused verdict with 3 differences and the spilled bytes\n%s", out, err, rj.stdout)
		}
	}
	for _, want := range []string{"3 difference(s) in 3 row(s) compared", `key {"user":"u0"}`, "value_changed", "the job was not changed"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, r.stderr)
		}
	}
	// Every verdict is a parity_gate event of the job, with the stretch's
	// size and what of it spilled under the server's one-byte budget.
	logs := srv.cli(dir, "jobs", "logs", "clicks", "--format", "json")
	var spilled []float64
	for _, line := range strings.Split(strings.TrimSpace(logs.stdout), "\n") {
		var ev struct {
			Type    string         `json:"type"`
			Details map[string]any `json:"details"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "parity_gate" {
			n, _ := ev.Details["trace_spilled_bytes"].(float64)
			total, _ := ev.Details["trace_bytes"].(float64)
			if total < 2<<20 {
				t.Errorf("a verdict's recorded stretch is %v bytes, want the 12 clicks' 2.4 MB", total)
			}
			spilled = append(spilled, n)
		}
	}
	if len(spilled) != 3 || slices.Contains(spilled, 0) {
		t.Errorf("the parity_gate events' trace_spilled_bytes: %v, want three verdicts that spilled\n%.3000s", spilled, logs.stdout)
	}
	if ents, err := os.ReadDir(spill); err != nil || len(ents) != 0 {
		t.Errorf("the rehearsals left %v in the server's --rehearse-trace-dir (%v)", ents, err)
	}
	if m := srv.describe("clicks"); m["id"] != job.ID || m["state"] != "RUNNING" {
		t.Fatalf("after the rehearsals the name's job is %v %v, want %s RUNNING", m["id"], m["state"], job.ID)
	}
}
