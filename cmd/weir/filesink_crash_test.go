package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestCLIServerCrashFileSinkExactlyOnce kills a real `weir server` with
// SIGKILL twice while a streaming job writes JSON lines (WriteToJson) or
// text (WriteToText), committed as part files per checkpoint epoch,
// restarts it each time, drains the job and checks the committed parts:
// every generated event exactly once, none lost, none twice, and no file
// but finalised parts in sight.
func TestCLIServerCrashFileSinkExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sink, file string
		// id reads an event's id from a committed line.
		id func(line string) (int64, error)
	}{
		{"WriteToJson", "ids.jsonl", func(line string) (int64, error) {
			var rec struct {
				ID int64 `json:"id"`
			}
			err := json.Unmarshal([]byte(line), &rec)
			return rec.ID, err
		}},
		{"WriteToText", "ids.txt", func(line string) (int64, error) { return strconv.ParseInt(line, 10, 64) }},
	} {
		t.Run(tc.sink, func(t *testing.T) {
			dir, work := t.TempDir(), t.TempDir()
			pipeline := filepath.Join(work, "events.yaml")
			src := idsPipeline(tc.sink, "{path: out/"+tc.file+"}")
			if tc.sink == "WriteToText" { // one field, written as str() writes it
				src = strings.Replace(src, "fields: {id: id, key: key}", "fields: {id: id}", 1)
			}
			if err := os.WriteFile(pipeline, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			srv, id := runThroughKills(t, dir, work, pipeline, 2)
			srv.waitJob(id, "its final commit", func(m map[string]any) bool { return m["pending_commit"] != true })

			out := filepath.Join(work, "out")
			ents, err := os.ReadDir(out)
			if err != nil {
				t.Fatal(err)
			}
			stem := strings.TrimSuffix(tc.file, filepath.Ext(tc.file))
			for _, e := range ents {
				if name := e.Name(); name != "."+tc.file+".weir" && !strings.HasPrefix(name, stem+"-g0001-e") {
					// Hidden in-progress or pending files of an interrupted epoch
					// are not output; they may stay, but must not be parts.
					if !strings.HasPrefix(name, ".") {
						t.Errorf("unexpected visible file %s", name)
					}
				}
			}
			b, err := readParts(filepath.Join(out, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				n, err := tc.id(line)
				if err != nil {
					t.Fatalf("a committed line does not parse (%q): %v", line, err)
				}
				ids = append(ids, n)
			}
			slices.Sort(ids)
			if len(ids) < 100 {
				t.Fatalf("only %d events committed", len(ids))
			}
			for i := 1; i < len(ids); i++ {
				switch {
				case ids[i] == ids[i-1]:
					t.Fatalf("event %d committed twice", ids[i])
				case ids[i] != ids[i-1]+1:
					t.Fatalf("events %d..%d lost", ids[i-1]+1, ids[i]-1)
				}
			}
			t.Logf("%d events committed exactly once across two kill -9 (ids %d..%d)", len(ids), ids[0], ids[len(ids)-1])
		})
	}
}

// TestCLIServerRollingFileSinkExactlyOnce: a streaming WriteToJson with
// roll_interval keeps each worker's part open across checkpoints (far
// fewer files than checkpoints) and stays exactly once through two
// kill -9, an in-flight rescale, an in-place update (a new generation)
// and a drain: every generated event is in exactly one finalised part,
// and no in-progress file is left.
func TestCLIServerRollingFileSinkExactlyOnce(t *testing.T) {
	t.Parallel()
	dir, work := t.TempDir(), t.TempDir()
	pipeline := func(rate int) string {
		return `pipeline:
  transforms:
    - type: Generate
      name: Events
      config: {rate: ` + fmt.Sprint(rate) + `, keys: 5, spacing: 10ms}
    - type: MapToFields
      name: Ids
      input: Events
      config:
        fields: {id: id, key: key}
    - type: WriteToJson
      name: WriteIds
      input: Ids
      config: {path: out/ids.jsonl, roll_interval: 1s, roll_size: 1MiB}
`
	}
	writeTestFile(t, work, "events.yaml", pipeline(300))
	srv := startServer(t, dir)
	r := srv.cli(work, "run", "events.yaml", "--job-name", "ids", "--no-wait")
	if r.code != ExitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	srv.waitJob(id, "three checkpoints", epochAtLeast(3))
	for range 2 {
		if code := srv.stop(syscall.SIGKILL); code != 128+int(syscall.SIGKILL) {
			t.Fatalf("kill -9: exit %d", code)
		}
		srv = startServer(t, dir)
		srv.waitJob(id, "new checkpoints after the restart", epochAtLeast(epochOf(srv.describe(id))+3))
	}
	srv.mustCLI(t, work, "jobs", "update-options", id, "--num-workers", "2")
	srv.waitJob(id, "checkpoints after the rescale", epochAtLeast(epochOf(srv.describe(id))+3))
	// An in-place update (the rate changes): generation 2 writes its own parts.
	writeTestFile(t, work, "events.yaml", pipeline(400))
	srv.mustCLI(t, work, "run", "events.yaml", "--job-name", "ids", "--update")
	srv.waitJob("ids", "checkpoints after the update", epochAtLeast(epochOf(srv.describe("ids"))+3))
	last := srv.describe("ids")
	if r := srv.cli("", "jobs", "drain", "ids", "--wait"); r.code != ExitOK {
		t.Fatalf("drain: %d %s", r.code, r.stderr)
	}
	srv.waitJob(last["id"].(string), "its final commit", func(m map[string]any) bool { return m["pending_commit"] != true })

	out := filepath.Join(work, "out")
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	parts := 0
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".inprogress"):
			t.Errorf("in-progress file %s left after the drain", name)
		case strings.HasPrefix(name, "ids-g0001-e"), strings.HasPrefix(name, "ids-g0002-e"):
			parts++
		case name == ".ids.jsonl.weir", strings.HasSuffix(name, ".pending"):
		default:
			t.Errorf("unexpected file %s", name)
		}
	}
	b, err := readParts(filepath.Join(out, "ids.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// Two generations: the update carries Generate's position over, so
	// the ids of both form one sequence.
	ids := map[string][]int64{}
	for _, p := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec struct {
			ID int64 `json:"id"`
		}
		if err := json.Unmarshal([]byte(p), &rec); err != nil {
			t.Fatalf("a committed line does not parse (%q): %v", p, err)
		}
		ids["all"] = append(ids["all"], rec.ID)
	}
	all := ids["all"]
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		switch {
		case all[i] == all[i-1]:
			t.Fatalf("event %d committed twice", all[i])
		case all[i] != all[i-1]+1:
			t.Fatalf("events %d..%d lost", all[i-1]+1, all[i]-1)
		}
	}
	epochs := int(epochOf(srv.describe(last["id"].(string))))
	t.Logf("%d events in %d parts (the last execution alone took %d checkpoints)", len(all), parts, epochs)
	if len(all) < 100 {
		t.Fatalf("only %d events committed", len(all))
	}
	if parts >= epochs {
		t.Errorf("%d parts for %d checkpoints of the last execution alone: the parts did not roll across checkpoints", parts, epochs)
	}
}
