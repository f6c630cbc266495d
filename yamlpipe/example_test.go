package yamlpipe

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/weir-dev/weir"
)

// TestRegionalTotalsExample runs the bundled example as the README does,
// from the repository root.
func TestRegionalTotalsExample(t *testing.T) {
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	src, err := os.ReadFile(filepath.Join(repo, "examples", "regional-totals.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// It also loads from elsewhere with BaseDir set to the repository root.
	if _, err := Load("regional-totals.yaml", src, Options{BaseDir: repo}); err != nil {
		t.Fatal(err)
	}
	t.Chdir(out)
	if err := os.Symlink(filepath.Join(repo, "examples"), "examples"); err != nil {
		t.Fatal(err)
	}
	p, err := LoadFile(filepath.Join(repo, "examples", "regional-totals.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: 2})
	if err != nil {
		t.Fatal(err)
	}
	totals := readJSONL(t, "out/regional-totals.jsonl")
	got := map[string]float64{}
	for _, r := range totals {
		got[r["region"].(string)+"@"+r["window_start"].(string)[11:16]] = r["total"].(float64)
	}
	want := map[string]float64{"NORTH@10:00": 425, "WEST@10:00": 100, "EAST@10:05": 320, "SOUTH@10:05": 80,
		"NORTH@10:05": 60, "SOUTH@10:10": 210, "EAST@10:10": 130}
	if len(got) != len(want) {
		t.Errorf("totals = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("total %s = %v, want %v", k, got[k], v)
		}
	}
	var reasons []string
	for _, r := range readJSONL(t, "out/rejects.jsonl") {
		reasons = append(reasons, r["error"].(map[string]any)["reason"].(string))
	}
	sort.Strings(reasons)
	wantReasons := []string{"bad_timestamp", "known_region", "positive_amount", "schema_mismatch"}
	if len(reasons) != len(wantReasons) {
		t.Fatalf("reject reasons = %v, want %v", reasons, wantReasons)
	}
	for i := range wantReasons {
		if reasons[i] != wantReasons[i] {
			t.Errorf("reject reasons = %v, want %v", reasons, wantReasons)
		}
	}
	if n := res.Step("ReadTransactions").ElementsIn; n != 12 {
		t.Errorf("ReadTransactions read %d lines, want 12", n)
	}
}
