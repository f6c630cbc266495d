package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIUpdateReports: what `weir run --update` prints in each outcome.
// An update that fails for another reason than the check prints that
// reason only; --validate-only prints the whole report; an update without
// --num-workers keeps a rescaled job's worker count and says so; a key
// change whose table cannot hold the new rows is the check's
// KEY_CODER_CHANGED (exit 6) online as in `weir check`, not an invalid
// pipeline.
func TestCLIUpdateReports(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir := t.TempDir()
	p := startServer(t, filepath.Join(dir, "data"))
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	v1 := write("v1.yaml", updateV1)
	keyChange := write("v3.yaml", strings.Replace(updateV1, "group_by: [key]", "group_by: [key, amount]", 1))
	r := p.cli(dir, "run", v1, "--job-name", "totals", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("submit: exit %d: %s", r.code, r.stderr)
	}
	var sub struct{ ID string }
	if err := json.Unmarshal([]byte(r.stdout), &sub); err != nil {
		t.Fatal(err)
	}
	p.waitJob(sub.ID, "a checkpoint", epochAtLeast(1))

	t.Run("no running job: the reason only", func(t *testing.T) {
		r := p.cli(dir, "run", v1, "--job-name", "nobody", "--update")
		if r.code == ExitOK || !strings.Contains(r.stderr, "no running job named nobody") {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout+r.stderr, "incompatible") || strings.Contains(r.stdout+r.stderr, "would be refused") {
			t.Errorf("a refusal without a check prints a report:\n%s%s", r.stdout, r.stderr)
		}
	})
	t.Run("validate-only prints the whole report", func(t *testing.T) {
		r := p.cli(dir, "run", v1, "--job-name", "totals", "--update", "--validate-only")
		if r.code != ExitOK {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		for _, want := range []string{"compatible:", "state carried over:", "Sums (combine_per_key)"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("validate-only output lacks %q:\n%s", want, r.stdout)
			}
		}
	})
	t.Run("key change whose table does not fit", func(t *testing.T) {
		online := p.cli(dir, "run", keyChange, "--job-name", "totals", "--update")
		offline := p.cli(dir, "check", "totals", keyChange)
		for name, r := range map[string]cliResult{"run --update": online, "check": offline} {
			if r.code != ExitIncompatible || !strings.Contains(r.stdout, "KEY_CODER_CHANGED") {
				t.Errorf("%s: exit %d, want %d with KEY_CODER_CHANGED\n%s%s", name, r.code, ExitIncompatible, r.stdout, r.stderr)
			}
			if strings.Contains(r.stdout, "  Sums (combine_per_key)") {
				t.Errorf("%s: the step with the key change is listed as carrying its state over:\n%s", name, r.stdout)
			}
		}
		if m := p.describe("totals"); m["id"] != sub.ID || m["state"] != "RUNNING" {
			t.Fatalf("after the refused update the job is %v %v", m["id"], m["state"])
		}
	})
	t.Run("unset options keep the running job's", func(t *testing.T) {
		if r := p.cli(dir, "jobs", "update-options", "totals", "--num-workers", "2"); r.code != ExitOK {
			t.Fatalf("rescale: exit %d %s", r.code, r.stderr)
		}
		r := p.cli(dir, "run", v1, "--job-name", "totals", "--update", "--format", "json")
		if r.code != ExitOK {
			t.Fatalf("update: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		var upd struct {
			ID      string `json:"id"`
			Options struct {
				NumWorkers int `json:"num_workers"`
			} `json:"options"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &upd); err != nil {
			t.Fatalf("%v\n%s", err, r.stdout)
		}
		if upd.Options.NumWorkers != 2 {
			t.Errorf("the update reports num_workers %d, want the running job's 2:\n%s", upd.Options.NumWorkers, r.stdout)
		}
		nj := p.describe(upd.ID)
		if opts, _ := nj["options"].(map[string]any); opts["num_workers"] != float64(2) {
			t.Errorf("the new job's options are %v, want num_workers 2", nj["options"])
		}
		r = p.cli(dir, "run", v1, "--job-name", "totals", "--update", "--num-workers", "3")
		if r.code != ExitOK || !strings.Contains(r.stderr, "option num_workers: 2 -> 3") {
			t.Errorf("update with --num-workers 3: exit %d, want the change reported\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}
