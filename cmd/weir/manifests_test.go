package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// manifestPipeline is the reference fixture's batch part reading its
// input from a file source (source: "path: ..." or "manifest: NAME"),
// writing totals and rejects as JSON lines under out.
func manifestPipeline(source, out string) string {
	return `pipeline:
  transforms:
    - type: ReadFromJson
      name: Transactions
      config: {` + source + `, schema: {region: string, amount: int}}
    - type: Validate
      name: CheckRegion
      input: Transactions
      config:
        rules:
          known_region: region in ["NORTH", "WEST"]
      error_handling:
        output: invalid
    - type: Combine
      name: Totals
      input: CheckRegion
      config:
        group_by: region
        combine:
          total: {value: amount, fn: sum}
    - type: WriteToJson
      name: WriteTotals
      input: Totals
      config: {path: ` + out + `/totals.jsonl}
    - type: WriteToJson
      name: WriteRejects
      input: CheckRegion.invalid
      config: {path: ` + out + `/rejects.jsonl}
`
}

// readLines returns the non-empty lines of the file at path.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// totalsOf reads totals.jsonl lines {region, total} into a map.
func totalsOf(t *testing.T, path string) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	for _, l := range readLines(t, path) {
		var r struct {
			Region string `json:"region"`
			Total  int64  `json:"total"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		got[r.Region] += r.Total
	}
	return got
}

// TestCLIManifests pins a partition's input as a manifest on a real
// server and runs the reference fixture from it: the manifest is
// immutable (same content: a no-op; other content: MANIFEST_EXISTS), the
// run reads exactly the manifest's files (not a file the glob matches
// later), totals NORTH 425 and WEST 100 with one reject UNKNOWN 50
// (4 read = 3 accepted + 1 rejected), and a changed input is refused at
// submission with MANIFEST_CHANGED naming the file.
func TestCLIManifests(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	work := t.TempDir()
	in := filepath.Join(work, "in")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	a := writeTestFile(t, in, "a.jsonl", `{"region": "NORTH", "amount": 250}`+"\n"+`{"region": "WEST", "amount": 100}`+"\n")
	writeTestFile(t, in, "b.jsonl", `{"region": "NORTH", "amount": 175}`+"\n"+`{"region": "UNKNOWN", "amount": 50}`+"\n")
	writeTestFile(t, work, "regions.csv", "region\nNORTH\nWEST\n")
	sum := sha256.Sum256([]byte(`{"region": "NORTH", "amount": 250}` + "\n" + `{"region": "WEST", "amount": 100}` + "\n"))

	r := srv.mustCLI(t, work, "manifests", "create", "sales", "--partition", "2026-12-01", "--files", "in/*.jsonl", "--side-input", "regions=regions.csv")
	if !strings.Contains(r.stdout, "Created manifest sales partition 2026-12-01: 2 file(s), 1 side input(s)") {
		t.Fatalf("create printed %q", r.stdout)
	}
	r = srv.mustCLI(t, work, "manifests", "create", "sales", "--partition", "2026-12-01", "--files", "in/*.jsonl", "--side-input", "regions=regions.csv", "--format", "json")
	var again struct {
		Existed bool   `json:"existed"`
		Digest  string `json:"digest"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &again); err != nil || !again.Existed || !strings.HasPrefix(again.Digest, "sha256:") {
		t.Fatalf("create again: %v %+v\n%s", err, again, r.stdout)
	}
	// Other content under the same (name, partition) is refused.
	r = srv.cli(work, "manifests", "create", "sales", "--partition", "2026-12-01", "--files", a)
	if r.code != ExitFailure || !strings.Contains(r.stderr, "MANIFEST_EXISTS") || !strings.Contains(r.stderr, "new partition") {
		t.Fatalf("create with other files: exit %d, stderr %q", r.code, r.stderr)
	}
	// Outside the server's file roots: refused, nothing read.
	r = srv.cli(work, "manifests", "create", "etc", "--partition", "p1", "--files", "/etc/hostname")
	if r.code != ExitInvalidPipeline || !strings.Contains(r.stderr, "PATH_NOT_ALLOWED") {
		t.Fatalf("create outside the roots: exit %d, stderr %q", r.code, r.stderr)
	}
	r = srv.mustCLI(t, work, "manifests", "show", "sales", "--partition", "2026-12-01")
	for _, want := range []string{hex.EncodeToString(sum[:]), a, "regions", again.Digest} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show lacks %q:\n%s", want, r.stdout)
		}
	}
	r = srv.mustCLI(t, work, "manifests", "list")
	if !strings.Contains(r.stdout, "sales") || !strings.Contains(r.stdout, "2026-12-01") || strings.Contains(r.stdout, "etc") {
		t.Errorf("list:\n%s", r.stdout)
	}
	if r := srv.cli(work, "manifests", "show", "nope"); r.code != ExitFailure || !strings.Contains(r.stderr, "MANIFEST_NOT_FOUND") {
		t.Errorf("show nope: exit %d, stderr %q", r.code, r.stderr)
	}

	// A file the glob matches only now is not read: the run reads the manifest.
	writeTestFile(t, in, "c.jsonl", `{"region": "WEST", "amount": 1000}`+"\n")
	writeTestFile(t, work, "p.yaml", manifestPipeline("path: in/*.jsonl", "out1"))
	srv.mustCLI(t, work, "run", "p.yaml", "--job-name", "sales-daily", "--manifest", "sales", "--partition", "2026-12-01", "--wait")
	if got := totalsOf(t, filepath.Join(work, "out1", "totals.jsonl")); len(got) != 2 || got["NORTH"] != 425 || got["WEST"] != 100 {
		t.Errorf("totals %v, want NORTH 425 and WEST 100", got)
	}
	if rej := readLines(t, filepath.Join(work, "out1", "rejects.jsonl")); len(rej) != 1 || !strings.Contains(rej[0], "UNKNOWN") || !strings.Contains(rej[0], "50") {
		t.Errorf("rejects %q, want one UNKNOWN 50", rej)
	}
	d := srv.describe("sales-daily")
	if d["manifest"] != "sales" || d["partition"] != "2026-12-01" || d["manifest_digest"] != again.Digest {
		t.Errorf("describe: manifest %v partition %v digest %v", d["manifest"], d["partition"], d["manifest_digest"])
	}
	// Conservation in the job's metrics: 4 read = 3 accepted + 1 rejected.
	if in, out, rej := stepMetric(d, "CheckRegion", "elements_in"), stepMetric(d, "CheckRegion", "elements_out"), stepMetric(d, "CheckRegion", "rejects"); in != 4 || out != 3 || rej != 1 {
		t.Errorf("CheckRegion: in %v, out %v, rejects %v; want 4 = 3 + 1\n%v", in, out, rej, d["metrics"])
	}
	// The same through "manifest: NAME" in the source and --partition.
	writeTestFile(t, work, "q.yaml", manifestPipeline("manifest: sales", "out2"))
	srv.mustCLI(t, work, "run", "q.yaml", "--job-name", "sales-named", "--partition", "2026-12-01", "--wait")
	if got := totalsOf(t, filepath.Join(work, "out2", "totals.jsonl")); got["NORTH"] != 425 || got["WEST"] != 100 || len(got) != 2 {
		t.Errorf("manifest: in the source: totals %v", got)
	}

	// WriteToText in a partition run: staged, then published with a
	// publication manifest, as the other file sinks are.
	writeTestFile(t, work, "text.yaml", manifestPipeline("manifest: sales", "out4")+`    - type: MapToFields
      name: AsLine
      input: Totals
      config: {language: python, fields: {line: "region + '=' + str(total)"}}
    - type: WriteToText
      name: WriteLines
      input: AsLine
      config: {path: out4/totals.txt}
`)
	srv.mustCLI(t, work, "run", "text.yaml", "--job-name", "sales-text", "--partition", "2026-12-01", "--wait")
	if lines := readLines(t, filepath.Join(work, "out4", "totals.txt")); !slices.Equal(slices.Sorted(slices.Values(lines)), []string{"NORTH=425", "WEST=100"}) {
		t.Errorf("the published text view: %q, want NORTH=425 and WEST=100", lines)
	}
	if _, err := os.Stat(filepath.Join(work, "out4", "totals.txt.manifest.json")); err != nil {
		t.Errorf("no publication manifest beside the text output: %v", err)
	}

	// A changed input is refused at submission, naming the file.
	if err := os.WriteFile(a, []byte(`{"region": "NORTH", "amount": 999}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, work, "r.yaml", manifestPipeline("path: in/*.jsonl", "out3"))
	for _, args := range [][]string{
		{"run", "r.yaml", "--job-name", "sales-changed", "--manifest", "sales", "--partition", "2026-12-01"},
		{"run", "q.yaml", "--job-name", "sales-changed", "--partition", "2026-12-01"},
	} {
		r = srv.cli(work, args...)
		if r.code != ExitFailure || !strings.Contains(r.stderr, "MANIFEST_CHANGED") || !strings.Contains(r.stderr, a) {
			t.Errorf("%v with a changed input: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(work, "out3")); !os.IsNotExist(err) {
		t.Errorf("the refused run wrote its output directory (%v)", err)
	}
	if r := srv.cli(work, "jobs", "describe", "sales-changed"); r.code == ExitOK {
		t.Errorf("the refused run created a job:\n%s", r.stdout)
	}
}

// stepMetric returns metric of step in a describe's metrics.
func stepMetric(m map[string]any, step, metric string) float64 {
	mm, _ := m["metrics"].(map[string]any)
	steps, _ := mm["steps"].([]any)
	for _, s := range steps {
		if sm, _ := s.(map[string]any); sm["name"] == step {
			v, _ := sm[metric].(float64)
			return v
		}
	}
	return -1
}

// TestCLIManifestUsage: the flags' rules, checked before any server is asked.
func TestCLIManifestUsage(t *testing.T) {
	work := t.TempDir()
	writeTestFile(t, work, "m.yaml", manifestPipeline("manifest: sales", "out"))
	runCases(t, work, []cliCase{
		{name: "manifest without partition", args: []string{"run", "m.yaml", "--job-name", "j", "--manifest", "sales"}, wantCode: ExitUsage, wantStderr: []string{"--partition"}},
		{name: "manifest without a server", args: []string{"run", "m.yaml", "--manifest", "sales", "--partition", "p"}, wantCode: ExitNeedsServer, wantStderr: []string{"--job-name"}},
		{name: "manifest source in process", args: []string{"run", "m.yaml"}, wantCode: ExitNeedsServer, wantStderr: []string{"manifest sales", "weir server"}},
		{name: "create without partition", args: []string{"manifests", "create", "sales", "--files", "x"}, wantCode: ExitUsage, wantStderr: []string{"--partition"}},
		{name: "create without files", args: []string{"manifests", "create", "sales", "--partition", "p"}, wantCode: ExitUsage, wantStderr: []string{"--files"}},
		{name: "bad side input", args: []string{"manifests", "create", "sales", "--partition", "p", "--files", "x", "--side-input", "nope"}, wantCode: ExitUsage, wantStderr: []string{"NAME=FILE"}},
	})
}
