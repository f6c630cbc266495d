package main

import (
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCLIReprocessingRecipe runs the reprocessing recipe of the README and
// docs/JOBS.md as written against a real server, and checks the sink
// window by window against what was published:
//
//  1. with --create-from-snapshot (snapshot the job with its sources,
//     cancel, run the fixed pipeline from the snapshot): every window's total
//     is exact, those the old job had read past the cut included;
//  2. with a plain seek to the middle of a window (the case the docs call
//     unsafe): the new job starts with no state, its pane of the window
//     holding the seek point is partial, marked cut short, and the table
//     keeps the old job's complete total instead of replacing it; the job's
//     describe says where its input started.
func TestCLIReprocessingRecipe(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server")
	}
	work := t.TempDir()
	srv := startServer(t, filepath.Join(work, "data"))
	db := filepath.Join(work, "totals.sqlite")
	in := newCrashInput(t, work, 3)
	v1 := writeTestFile(t, work, "v1.yaml", totalsPipeline("topic: orders", "", "", "", db))
	fixed := writeTestFile(t, work, "fixed.yaml", totalsPipeline("topic: orders", "", "", "", db))
	srv.mustCLI(t, work, "topics", "create", "orders")
	srv.mustCLI(t, work, "run", v1, "--job-name", "sums")
	srv.publish(t, work, in.chunk(0, 1500, 0)) // 00:00:00 to 00:02:29.9
	waitCaughtUp(t, srv, "sums")

	// The recipe with --create-from-snapshot.
	r := srv.mustCLI(t, work, "snapshots", "create", "--job-id", "sums", "--snapshot-sources", "--wait", "--format", "json")
	var snap map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &snap); err != nil {
		t.Fatalf("snapshots create: %v\n%s", err, r.stdout)
	}
	id, _ := snap["id"].(string)
	// The old job reads on past the cut before it is cancelled.
	srv.publish(t, work, in.chunk(1500, 2400, 150*time.Second)) // to 00:03:59.9
	waitCaughtUp(t, srv, "sums")
	srv.mustCLI(t, work, "jobs", "cancel", "sums", "--wait")
	srv.mustCLI(t, work, "run", fixed, "--job-name", "sums", "--create-from-snapshot", id)
	srv.publish(t, work, in.chunk(2400, 2550, 240*time.Second)) // 00:04:00 to 00:04:14.9
	waitCaughtUp(t, srv, "sums")
	time.Sleep(20 * time.Millisecond) // publish times have milliseconds: the seek point falls between
	seekAt := time.Now().UTC()
	time.Sleep(20 * time.Millisecond)
	srv.publish(t, work, in.chunk(2550, 3300, 255*time.Second)) // 00:04:15 to 00:05:29.9
	waitCaughtUp(t, srv, "sums")
	complete := func(before time.Time) (want, wantN map[string]int64) {
		want, wantN = map[string]int64{}, map[string]int64{}
		for k, v := range in.want {
			ws, _ := time.Parse(time.RFC3339, k[strings.IndexByte(k, ' ')+1:])
			if ws.Before(before) {
				want[k], wantN[k] = v, in.wantN[k]
			}
		}
		return want, wantN
	}
	// The watermark is at 00:05:28.9: the windows up to 00:04 fired.
	want, wantN := complete(in.base.Add(5 * time.Minute))
	waitTotals(t, db, want, wantN)

	// A plain seek to the middle of window 00:04, and the pipeline run
	// again without state.
	srv.mustCLI(t, work, "jobs", "cancel", "sums", "--wait")
	srv.mustCLI(t, work, "subscriptions", "seek", "sums--Orders", "--time", seekAt.Format(time.RFC3339Nano))
	srv.mustCLI(t, work, "run", fixed, "--job-name", "sums")
	srv.publish(t, work, in.chunk(3300, 3900, 330*time.Second)) // 00:05:30 to 00:06:29.9
	waitCaughtUp(t, srv, "sums")
	d := srv.mustCLI(t, work, "jobs", "describe", "sums")
	if !strings.Contains(d.stdout, "Input start") || !strings.Contains(d.stdout, "2026-03-01T00:04:14.901Z") {
		t.Errorf("describe does not say where the job's input started (after the newest skipped event, 00:04:14.9):\n%s", d.stdout)
	}
	srv.mustCLI(t, work, "jobs", "drain", "sums", "--wait")
	srv.waitJob("sums", "its last commit", func(m map[string]any) bool { return m["state"] == "DRAINED" && m["pending_commit"] == nil })
	checkTotals(t, db, in.want, in.wantN)
	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Window 00:04 keeps generation 2's complete total; 00:05 is
	// generation 3's complete one; 00:06, drained while open, is cut short.
	for _, c := range []struct {
		window string
		gen    int64
		cut    bool
	}{{"2026-03-01T00:04:00.000Z", 2, false}, {"2026-03-01T00:05:00.000Z", 3, false}, {"2026-03-01T00:06:00.000Z", 3, true}} {
		var gen int64
		var cut bool
		if err := conn.QueryRow(`SELECT generation, pane_cut_short FROM totals WHERE key = 'k0' AND window_start = ?`, c.window).Scan(&gen, &cut); err != nil {
			t.Fatalf("window %s: %v", c.window, err)
		}
		if gen != c.gen || cut != c.cut {
			t.Errorf("window %s: generation %d cut short %v, want %d %v", c.window, gen, cut, c.gen, c.cut)
		}
	}
}

// waitTotals waits until the totals table of the SQLite file db holds want
// and wantN for each of their "key window_start" (other rows may exist),
// then checks them.
func waitTotals(t *testing.T, db string, want, wantN map[string]int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][2]int64{}
		rows, err := conn.Query(`SELECT key, window_start, total, n FROM totals`)
		if err == nil {
			for rows.Next() {
				var k, w string
				var tot, n int64
				if rows.Scan(&k, &w, &tot, &n) == nil {
					ws, _ := time.Parse(time.RFC3339Nano, w)
					got[k+" "+ws.UTC().Format(time.RFC3339)] = [2]int64{tot, n}
				}
			}
			rows.Close()
		}
		conn.Close()
		var bad []string
		for k, w := range want {
			if g := got[k]; g != [2]int64{w, wantN[k]} {
				bad = append(bad, k)
			}
		}
		if len(bad) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, k := range bad {
				t.Errorf("%s: total and count %v, want %d and %d", k, got[k], want[k], wantN[k])
			}
			t.FailNow()
		}
		time.Sleep(100 * time.Millisecond)
	}
}
