package runner_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/scripts")

// TestScripts runs the engine scripts in testdata/scripts. Each case lists
// directives, a line "----", then the expected panes (sorted) and counters:
//
//	workers 1,2,3
//	windowing {"window_fn": {"type": "fixed", "size_ms": 300000}, ...}
//	add KEY=VALUE@HH:MM:SS ...      (one bundle)
//	watermark HH:MM:SS
//	processing 30s                  (advance the processing-time clock)
//	----
//	KEY [start, end) total TIMING index first|last
//
// Cases are separated by a line "====". With -rewrite the expected output
// is regenerated from what the engine does; every worker count must agree.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/scripts/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			cases := strings.Split(string(data), "\n====\n")
			for i, c := range cases {
				directives, want, ok := strings.Cut(c+"\n", "\n----\n")
				if !ok {
					t.Fatalf("case %d: no ---- line", i+1)
				}
				got := runScript(t, fmt.Sprintf("%s case %d", file, i+1), directives)
				if *rewrite {
					cases[i] = directives + "\n----\n" + strings.TrimSuffix(got, "\n")
					continue
				}
				if strings.TrimSpace(got) != strings.TrimSpace(want) {
					t.Errorf("case %d:\n%s\ngot:\n%s\nwant:\n%s", i+1, directives, got, want)
				}
			}
			if *rewrite {
				if err := os.WriteFile(file, []byte(strings.Join(cases, "\n====\n")), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

type kv = weir.KV[string, int64]

func clock(s string) mtime.Time {
	t, err := mtime.Parse("2026-03-01T" + s + "Z")
	if err != nil {
		panic(err)
	}
	return t
}

func runScript(t *testing.T, name, directives string) string {
	t.Helper()
	workers := []int{1}
	var strategy window.Strategy
	var events []weir.TestEvent[kv]
	for _, line := range strings.Split(directives, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cmd, arg, _ := strings.Cut(line, " ")
		switch cmd {
		case "workers":
			workers = nil
			for _, w := range strings.Split(arg, ",") {
				n, err := strconv.Atoi(w)
				if err != nil {
					t.Fatalf("%s: workers %q: %v", name, w, err)
				}
				workers = append(workers, n)
			}
		case "windowing":
			if err := json.Unmarshal([]byte(arg), &strategy); err != nil {
				t.Fatalf("%s: windowing: %v", name, err)
			}
		case "add":
			var add []weir.TimestampedValue[kv]
			for _, f := range strings.Fields(arg) {
				k, rest, _ := strings.Cut(f, "=")
				v, ts, _ := strings.Cut(rest, "@")
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("%s: add %q: %v", name, f, err)
				}
				add = append(add, weir.TimestampedValue[kv]{Value: kv{Key: k, Value: n}, Time: clock(ts)})
			}
			events = append(events, weir.AddElements(add...))
		case "watermark":
			events = append(events, weir.AdvanceWatermark[kv](clock(arg)))
		case "processing":
			d, err := mtime.ParseDuration(arg)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			events = append(events, weir.AdvanceProcessingTime[kv](d))
		default:
			t.Fatalf("%s: unknown directive %q", name, cmd)
		}
	}
	var first string
	for _, w := range workers {
		out := runOnce(t, strategy, events, w)
		if first == "" {
			first = out
		} else if out != first {
			t.Errorf("%s: %d workers disagree with %d:\n%s\nvs\n%s", name, w, workers[0], out, first)
		}
	}
	return first
}

func runOnce(t *testing.T, strategy window.Strategy, events []weir.TestEvent[kv], workers int) string {
	p := weir.NewPipeline()
	s := p.Root()
	w := weir.WindowInto(s, "Window", weir.TestStream(s, "Events", events), strategy)
	got := weir.Collect(s, "Out", weir.CombinePerKey(s, "Sum", w, weir.Sum[int64]()))
	res, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: workers})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range got.Elements() {
		flags := ""
		if e.Pane.IsFirst {
			flags += " first"
		}
		if e.Pane.IsLast {
			flags += " last"
		}
		win := "global"
		if !e.Window.IsGlobal() {
			win = "[" + e.Window.Start.ToTime().Format("15:04:05") + ", " + e.Window.End.ToTime().Format("15:04:05") + ")"
		}
		lines = append(lines, fmt.Sprintf("%s %s %d %s %d%s", e.Value.Key, win, e.Value.Value, e.Pane.Timing, e.Pane.Index, flags))
	}
	sort.Strings(lines)
	lines = append(lines, fmt.Sprintf("dropped_late_elements %d", res.Step("Sum").DroppedLateElements))
	return strings.Join(lines, "\n") + "\n"
}
