package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
	"github.com/weir-dev/weir/yamlpipe"
)

// yamlOutput is the file, relative to the pipeline's base directory, that
// the YAML variant writes its window sums to.
const yamlOutput = "sums.jsonl"

// YAMLText returns the YAML form of the workload: Generate (the same events
// as Event) → a CEL Filter → Combine sum by key in five-minute fixed
// windows → WriteToJson of the window sums to yamlOutput. YAML has no
// in-memory sink, so the sums (one row per window and key, a few tens of
// thousands for 10M events) go to a file that is tallied after the run.
// Its source step is named Events, like sourceStep.
func YAMLText(cfg Config) string {
	cfg.EnsureDefaults()
	return fmt.Sprintf(`# weir bench windowed-sum, YAML variant.
pipeline:
  transforms:
    - type: Generate
      name: Events
      config:
        count: %d
        keys: %d
        max_amount: %d
        seed: 0
        start: %d
        spacing: 1ms
    - type: Filter
      name: NonNegative
      input: Events
      config:
        keep: amount >= 0
    - type: Combine
      name: SumPerKey
      input: NonNegative
      windowing:
        type: fixed
        size: 5m
      config:
        group_by: key
        combine:
          total: {value: amount, fn: sum}
    - type: WriteToJson
      name: WriteSums
      input: SumPerKey
      config:
        path: %s
`, cfg.Events, cfg.Keys, AmountMax, int64(Start), yamlOutput)
}

// runYAML loads YAMLText into a temporary directory, runs it and tallies
// the file it wrote. The elapsed time covers loading and running, not the
// tally; the tally's CPU time and page faults are returned apart
// (Outcome.checkCPU), for Run to leave out too.
func runYAML(ctx context.Context, v Variant, cfg Config, logger *slog.Logger) (Outcome, error) {
	dir, err := os.MkdirTemp("", "weir-bench-yaml-")
	if err != nil {
		return Outcome{}, fmt.Errorf("creating a directory for the YAML variant's output: %w", err)
	}
	defer os.RemoveAll(dir)
	start := time.Now()
	p, err := yamlpipe.Load("windowed-sum.yaml", []byte(YAMLText(cfg)), yamlpipe.Options{BaseDir: dir})
	if err != nil {
		return Outcome{}, fmt.Errorf("loading the %s pipeline: %w", v, err)
	}
	res, err := weir.Run(ctx, p, weir.RunOptions{NumWorkers: v.Workers, Logger: logger})
	if err != nil {
		return Outcome{}, fmt.Errorf("running the %s pipeline: %w", v, err)
	}
	elapsed := time.Since(start)
	cpu0, faults0 := processCPU(), minorFaults()
	var t Tally
	if err := tallyJSONLines(filepath.Join(dir, yamlOutput), &t); err != nil {
		return Outcome{}, fmt.Errorf("%s: %w", v, err)
	}
	o := t.outcome(v, res.Step(sourceStep).ElementsOut, elapsed)
	o.checkCPU, o.checkFaults = processCPU()-cpu0, minorFaults()-faults0
	return o, nil
}

// sumRow is one output row of the YAML variant.
type sumRow struct {
	Key         string `json:"key"`
	Total       *int64 `json:"total"`
	WindowStart string `json:"window_start"`
	WindowEnd   string `json:"window_end"`
}

// tallyJSONLines adds the window sums in the JSON lines file at path to t.
func tallyJSONLines(path string, t *Tally) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening the window sums: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var results, total int64
	var checksum uint64
	for line := 1; sc.Scan(); line++ {
		var r sumRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
		ws, err1 := mtime.Parse(r.WindowStart)
		we, err2 := mtime.Parse(r.WindowEnd)
		num, ok := strings.CutPrefix(r.Key, "key-")
		key, err3 := strconv.ParseInt(num, 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || !ok || r.Total == nil {
			return fmt.Errorf("%s:%d: want a row {key: key-N, total, window_start, window_end}, got %s", path, line, sc.Text())
		}
		if err := checkWindow(window.Window{Start: ws, End: we}); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
		results++
		total += *r.Total
		checksum += resultMix(ws, key, *r.Total)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	t.add(results, total, checksum)
	return nil
}
