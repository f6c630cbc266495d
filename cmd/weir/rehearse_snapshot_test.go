package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/cmd/weir/internal/rehearsecmd"
	"github.com/weir-dev/weir/diff"
)

// TestCLIServerRehearseFromSnapshot rehearses a change of a running job
// from a job snapshot taken while a window was open: both pipelines start
// from the snapshot's state, so the old run's pane for that window equals
// what the job itself wrote (input before and after the snapshot), and
// the new run's pane adds only the new pipeline's share of what came
// after it.
func TestCLIServerRehearseFromSnapshot(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir, work := t.TempDir(), t.TempDir()
	db := filepath.Join(work, "totals.db")
	pipeline := writeTestFile(t, work, "p.yaml", totalsPipeline("topic: orders", "", "", "", db))
	even := writeTestFile(t, work, "even.yaml", totalsPipeline("topic: orders", `    - type: Filter
      name: Even
      input: Orders
      config: {keep: amount % 2 == 0}
`, "Even", "", db))
	in := newCrashInput(t, work, 5)
	srv := startServer(t, dir)
	id := srv.runOrdersJob(t, work, pipeline)
	// Messages 0..1499 at 0..150s: windows 00:00 and 00:01 close, 00:02
	// is open at the snapshot with 120..150s in it.
	srv.publish(t, work, in.chunk(0, 1500, 0))
	waitCaughtUp(t, srv, id)
	var snap struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(srv.mustCLI(t, work, "snapshots", "create", "--job-id", "orders", "--wait", "--format", "json").stdout), &snap); err != nil || snap.ID == "" {
		t.Fatalf("snapshots create: %v", err)
	}
	// 1500..1799 at 150..180s: the rest of window 00:02.
	srv.publish(t, work, in.chunk(1500, 1800, 150*time.Second))
	waitCaughtUp(t, srv, id)

	// What each key's pane of window 00:02 must hold: the old pipeline's
	// is what the job wrote (the ground truth of both chunks); the new
	// one's is the snapshot's 120..150s plus the even amounts after it.
	window := "2026-03-01T00:02:00.000Z/2026-03-01T00:03:00.000Z"
	type pane struct{ N, Total int64 }
	wantOld, wantNew := map[string]pane{}, map[string]pane{}
	for i := 1200; i < 1800; i++ {
		k := fmt.Sprintf(`{"key":"k%d"}`, i%5)
		if i < 1500 || i%2 == 0 {
			p := wantNew[k]
			wantNew[k] = pane{p.N + 1, p.Total + int64(i)}
		}
	}
	for k := range 5 {
		w := "k" + fmt.Sprint(k) + " 2026-03-01T00:02:00Z"
		wantOld[fmt.Sprintf(`{"key":"k%d"}`, k)] = pane{in.wantN[w], in.want[w]}
	}
	check := func(what string, args ...string) {
		t.Helper()
		r := srv.cli(work, append([]string{"rehearse", "orders", even, "--format", "json", "--max-details", "1000"}, args...)...)
		if r.code != ExitRehearsalDiffers {
			t.Fatalf("%s: exit %d, want %d\n%s\n%s", what, r.code, ExitRehearsalDiffers, r.stdout, r.stderr)
		}
		var rep struct {
			rehearseReport
			Snapshot *rehearsecmd.SnapshotReport `json:"snapshot"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Runs[0].Input != 300 {
			t.Errorf("%s: fed %d elements, want the 300 published after the snapshot", what, rep.Runs[0].Input)
		}
		if rep.Snapshot == nil || rep.Snapshot.ID != snap.ID || rep.Snapshot.Entries == 0 || !slices.Contains(rep.Snapshot.Steps, "Totals") {
			t.Errorf("%s: the report's snapshot is %+v, want %s with Totals' state", what, rep.Snapshot, snap.ID)
		}
		got := map[string][2]pane{}
		for _, d := range rep.Report.Differences {
			if d.Class != diff.ValueChanged || d.Window != window || d.Old == nil || d.New == nil {
				t.Errorf("%s: unexpected difference %+v (only window 00:02 was open at the snapshot)", what, d)
				continue
			}
			var o, n pane
			if err := errors.Join(json.Unmarshal([]byte(d.Old.Value), &o), json.Unmarshal([]byte(d.New.Value), &n)); err != nil {
				t.Fatal(err)
			}
			got[d.Key] = [2]pane{o, n}
		}
		for k, o := range wantOld {
			if g := got[k]; g != [2]pane{o, wantNew[k]} {
				t.Errorf("%s: key %s window 00:02: old %+v new %+v, want old %+v (what the job wrote) and new %+v", what, k, g[0], g[1], o, wantNew[k])
			}
		}
		if len(got) != 5 {
			t.Errorf("%s: %d keys differ, want 5", what, len(got))
		}
	}
	check("rehearse --from-snapshot ID", "--from-snapshot", snap.ID)
	// The same from the exported snapshot file.
	file := filepath.Join(work, "orders.weirsnap")
	srv.mustCLI(t, work, "snapshots", "export", snap.ID, "--output", file)
	check("rehearse --from-snapshot FILE", "--from-snapshot", file)

	// The job's own pipeline agrees with itself from the snapshot.
	if r := srv.cli(work, "rehearse", "orders", pipeline, "--from-snapshot", snap.ID, "--format", "json"); r.code != ExitOK {
		t.Errorf("rehearse the job's own pipeline from the snapshot: exit %d, want 0\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// A renamed Combine takes its old state through the mapping, as an
	// update would: nothing differs.
	renamed := writeTestFile(t, work, "renamed.yaml", strings.Replace(strings.Replace(totalsPipeline("topic: orders", "", "", "", db), "name: Totals", "name: Sums", 1), "input: Totals", "input: Sums", 1))
	if r := srv.cli(work, "rehearse", "orders", renamed, "--from-snapshot", snap.ID, "--transform-name-mapping", `{"Totals":"Sums"}`); r.code != ExitOK {
		t.Errorf("rehearse a renamed Combine from the snapshot with a mapping: exit %d, want 0\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// A new pipeline an update could not take the state over with, an
	// unknown snapshot, and a second recorded input are refused.
	rekeyed := writeTestFile(t, work, "rekeyed.yaml", strings.Replace(totalsPipeline("topic: orders", "", "", "", db), "group_by: key", "group_by: [key, amount]", 1))
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"renamed without a mapping", []string{renamed, "--from-snapshot", snap.ID}, ExitRehearsalFailed, "Totals"},
		{"incompatible", []string{rekeyed, "--from-snapshot", snap.ID}, ExitRehearsalFailed, "KEY_CODER_CHANGED"},
		{"unknown snapshot", []string{even, "--from-snapshot", "00000000-0000-0000-0000-000000000000"}, ExitFailure, "00000000-0000-0000-0000-000000000000"},
		{"with since", []string{even, "--from-snapshot", snap.ID, "--since", "1h"}, ExitUsage, "--from-snapshot reads what came after"},
	} {
		r := srv.cli(work, append([]string{"rehearse", "orders"}, tt.args...)...)
		if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d naming %q", tt.name, r.code, r.stderr, tt.code, tt.want)
		}
	}
	// On another server the file's positions count another broker's
	// messages: refused, naming both brokers, unless the input is given.
	other := startServer(t, t.TempDir())
	other.mustCLI(t, work, "topics", "create", "orders")
	r := other.cli(work, "rehearse", pipeline, even, "--from-snapshot", file)
	if r.code != ExitRehearsalFailed || !strings.Contains(r.stderr, "holds positions of broker") || !strings.Contains(r.stderr, "give the input with --events") {
		t.Errorf("rehearse from the file on another server: exit %d, stderr %q; want exit %d naming the brokers", r.code, r.stderr, ExitRehearsalFailed)
	}
	other.stop(syscall.SIGTERM)
	srv.stop(syscall.SIGTERM)
}

// TestCLIServerRehearseDropsDuplicatesAsTheJob: a source with id_field
// drops a message whose ID it saw within its dedupe window. A rehearsal
// from a job snapshot does as the job did: a duplicate of a message read
// before the snapshot (the IDs are read back from the topic, as a resume
// reads them) and a duplicate within the stretch are dropped, so the old
// run's pane equals the job's own total.
func TestCLIServerRehearseDropsDuplicatesAsTheJob(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir, work := t.TempDir(), t.TempDir()
	db := filepath.Join(work, "totals.db")
	p := strings.Replace(totalsPipeline("topic: orders, id_field: id", "", "", "", db), "schema: {key: string, amount: int, ts: timestamp}", "schema: {key: string, amount: int, ts: timestamp, id: int}", 1)
	pipeline := writeTestFile(t, work, "p.yaml", p)
	no4 := writeTestFile(t, work, "no4.yaml", strings.Replace(p, "    - type: Combine\n      name: Totals\n      input: Orders\n", `    - type: Filter
      name: No4
      input: Orders
      config: {keep: amount != 4}
    - type: Combine
      name: Totals
      input: No4
`, 1))
	msg := func(id, amount, sec int) string {
		return fmt.Sprintf(`{"key": "k", "amount": %d, "ts": "2026-03-01T00:00:%02dZ", "id": %d}`+"\n", amount, sec, id)
	}
	srv := startServer(t, dir)
	id := srv.runOrdersJob(t, work, pipeline)
	// Published without message IDs of the topic's own: the topic keeps
	// every copy; the source's id_field drops the repeats.
	srv.mustCLI(t, work, "topics", "publish", "orders", "--file", writeTestFile(t, work, "a.jsonl", msg(1, 1, 10)+msg(2, 2, 20)+msg(3, 3, 30)))
	waitCaughtUp(t, srv, id)
	var snap struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(srv.mustCLI(t, work, "snapshots", "create", "--job-id", "orders", "--wait", "--format", "json").stdout), &snap); err != nil || snap.ID == "" {
		t.Fatalf("snapshots create: %v", err)
	}
	// After the snapshot: a repeat of message 2 (read before it), message
	// 4, and a repeat of 4.
	srv.mustCLI(t, work, "topics", "publish", "orders", "--file", writeTestFile(t, work, "b.jsonl", msg(2, 2, 20)+msg(4, 4, 40)+msg(4, 4, 40)))
	waitCaughtUp(t, srv, id)

	r := srv.cli(work, "rehearse", "orders", no4, "--from-snapshot", snap.ID, "--format", "json")
	if r.code != ExitRehearsalDiffers {
		t.Fatalf("rehearse: exit %d, want %d\n%s\n%s", r.code, ExitRehearsalDiffers, r.stdout, r.stderr)
	}
	rep := rehearseJSON(t, r)
	for _, run := range rep.Runs {
		if run.Input != 1 || run.Duplicates != 2 {
			t.Errorf("%s run: %d elements in, %d duplicates dropped; want 1 and 2", run.Run, run.Input, run.Duplicates)
		}
	}
	type pane struct{ N, Total int64 }
	var diffs []string
	for _, d := range rep.Report.Differences {
		var o, n pane
		if d.Old == nil || d.New == nil || errors.Join(json.Unmarshal([]byte(d.Old.Value), &o), json.Unmarshal([]byte(d.New.Value), &n)) != nil {
			t.Fatalf("unexpected difference %+v", d)
		}
		diffs = append(diffs, fmt.Sprintf("%s old %+v new %+v", d.Key, o, n))
	}
	// The job's total is 1+2+3+4 = 10 over 4 orders; without order 4, 6
	// over 3.
	if want := []string{`{"key":"k"} old {N:4 Total:10} new {N:3 Total:6}`}; !slices.Equal(diffs, want) {
		t.Errorf("differences %q, want %q", diffs, want)
	}
	srv.stop(syscall.SIGTERM)
}
