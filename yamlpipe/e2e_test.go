package yamlpipe

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/runner"
)

// runFixture loads testdata/name with BaseDir set to a temporary directory
// (so outputs land there), runs it and returns the result and the dir.
func runFixture(t *testing.T, name string, workers int) (*runner.Result, string) {
	t.Helper()
	dir := t.TempDir()
	p, err := LoadFile(filepath.Join("testdata", name), Options{BaseDir: dir})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	res, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: workers})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res, dir
}

// readJSONL reads a JSON lines file into maps.
func readJSONL(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v: %s", path, err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

func TestBatchFixture(t *testing.T) {
	for _, workers := range []int{1, 3} {
		res, dir := runFixture(t, "batch_fixture.yaml", workers)
		totals := readJSONL(t, filepath.Join(dir, "out/totals.jsonl"))
		got := map[string]float64{}
		var accepted float64
		for _, r := range totals {
			got[r["region"].(string)] = r["total"].(float64)
			accepted += r["total"].(float64)
			if r["window_start"] != nil || r["window_end"] != nil {
				t.Errorf("global window result has window bounds: %v", r)
			}
		}
		if len(got) != 2 || got["NORTH"] != 425 || got["WEST"] != 100 {
			t.Errorf("workers=%d: totals = %v, want NORTH 425, WEST 100", workers, got)
		}
		rejects := readJSONL(t, filepath.Join(dir, "out/rejects.jsonl"))
		if len(rejects) != 1 {
			t.Fatalf("rejects = %v, want one", rejects)
		}
		rj := rejects[0]
		elem := rj["element"].(map[string]any)
		errm := rj["error"].(map[string]any)
		if elem["region"] != "UNKNOWN" || errm["reason"] != "known_region" || errm["step"] != "CheckRegion" {
			t.Errorf("reject = %v", rj)
		}
		if src := rj["source"].(map[string]any); src["offset"].(float64) != 12 {
			t.Errorf("reject source = %v, want line 12 of the pipeline file", src)
		}
		rejected := elem["amount"].(float64)
		in := res.Step("Transactions").ElementsOut
		if accepted+rejected != 575 || accepted != 525 {
			t.Errorf("575 = accepted %v + rejected %v does not hold", accepted, rejected)
		}
		// Metrics: 4 read = 3 accepted (the Combine's input) + 1 rejected.
		v, c := res.Step("CheckRegion"), res.Step("Totals")
		if in != 4 || c.ElementsIn != 3 || v.Rejects != 1 || v.ElementsIn != 4 {
			t.Errorf("metrics: Transactions out %d, CheckRegion in %d rejects %d, Totals in %d; want 4 = 3 + 1", in, v.ElementsIn, v.Rejects, c.ElementsIn)
		}
	}
}

func TestStreamingFixture(t *testing.T) {
	res, dir := runFixture(t, "streaming_fixture.yaml", 2)
	panes := readJSONL(t, filepath.Join(dir, "out/panes.jsonl"))
	sort.SliceStable(panes, func(i, j int) bool {
		a, b := panes[i], panes[j]
		if a["window_start"] != b["window_start"] {
			return a["window_start"].(string) < b["window_start"].(string)
		}
		return a["pane"].(map[string]any)["index"].(float64) < b["pane"].(map[string]any)["index"].(float64)
	})
	type pane struct {
		start, end string
		total      float64
		index      float64
		timing     string
		first      bool
		last       bool
	}
	var got []pane
	for _, p := range panes {
		pi := p["pane"].(map[string]any)
		got = append(got, pane{p["window_start"].(string), p["window_end"].(string), p["total"].(float64),
			pi["index"].(float64), pi["timing"].(string), pi["is_first"].(bool), pi["is_last"].(bool)})
	}
	want := []pane{
		{"2026-03-01T00:00:00.000Z", "2026-03-01T00:05:00.000Z", 425, 0, "ON_TIME", true, false},
		{"2026-03-01T00:00:00.000Z", "2026-03-01T00:05:00.000Z", 475, 1, "LATE", false, false},
		{"2026-03-01T00:05:00.000Z", "2026-03-01T00:10:00.000Z", 30, 0, "ON_TIME", true, true},
	}
	if len(got) != len(want) {
		t.Fatalf("panes = %+v\nwant %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("pane %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if d := res.Step("RegionTotals").DroppedLateElements; d != 1 {
		t.Errorf("dropped_late_elements = %d, want 1", d)
	}
}
