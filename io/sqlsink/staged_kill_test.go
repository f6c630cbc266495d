package sqlsink

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// killChildEnv carries, to the child process of TestStagedMergeKill, the
// driver, DSN, table and the merge step to stop at.
const killChildEnv = "WEIR_STAGED_MERGE_KILL_CHILD"

// TestStagedMergeKillChild is the child of TestStagedMergeKill: it runs a
// merge that stops at the given step, says so on stdout and waits there,
// mid-transaction, to be killed. Without the environment it does nothing.
func TestStagedMergeKillChild(t *testing.T) {
	spec := os.Getenv(killChildEnv)
	if spec == "" {
		t.Skip("the child of TestStagedMergeKill")
	}
	f := strings.SplitN(spec, "|", 4)
	k, _ := strconv.Atoi(f[3])
	calls := 0
	hook := func(step string) error {
		calls++
		if calls == k {
			fmt.Printf("AT %s\n", step)
			select {} // killed here, inside the transaction
		}
		return nil
	}
	_, err := MergeStaged(context.Background(), StagedTarget{Driver: f[0], DSN: f[1], Table: f[2], Hook: hook})
	fmt.Printf("DONE %v\n", err)
}

// TestStagedMergeKill kills (SIGKILL) a process in the middle of a merge,
// at each of the merge's steps in turn, and checks each time that the
// tables are exactly as before; between kills the job writes more; a last
// merge then leaves the principal holding exactly what the view served.
// With a re-key (the second generation writes the regions paired, NS and
// EW, and declares it), the first merge also folds the re-keyed rows: a
// kill after the fold, before the commit, changes nothing either. With a
// conversion (the second generation writes the totals as strings,
// declared convert), the first merge also converts the PostgreSQL
// principal's column: a kill after it changes nothing either.
func TestStagedMergeKill(t *testing.T) {
	for _, variant := range []string{"plain", "rekey", "convert"} {
		name := variant
		if variant != "convert" {
			name = fmt.Sprintf("rekey=%t", variant == "rekey")
		}
		t.Run(name, func(t *testing.T) { testStagedMergeKill(t, variant) })
	}
}

// pairRegion is the re-key of TestStagedMergeKill.
func pairRegion(region string) string {
	if region == "NORTH" || region == "SOUTH" {
		return "NS"
	}
	return "EW"
}

func testStagedMergeKill(t *testing.T, variant string) {
	rekey := variant == "rekey"
	forEachStagedDriver(t, func(t *testing.T, e *facadeEnv) {
		ctx := context.Background()
		cfg := e.config("", "region")
		cfg.Layout, cfg.MergeInterval = LayoutStaged, -1
		job := &stagedJob{totalsJob: totalsJob{sink: e.sink(cfg, totalsSchema), total: map[cell]int64{}, panes: map[cell]int64{}}}
		for r := range 2 {
			if err := job.step(ctx, round(r)); err != nil {
				t.Fatal(err)
			}
		}
		job.sink.Close(ctx)
		cfg2 := cfg
		cfg2.Generation, cfg2.SinkID = 2, cfg.SinkID+"-2"
		events := round
		if rekey {
			cfg2.Rekey = &Rekey{From: []string{"region"}, Merge: map[string]string{"total": "sum"}, Step: "Totals",
				Map: func(old []any) ([]any, error) { return []any{pairRegion(old[0].(string))}, nil }}
			// The state the new version restores, re-keyed: the totals of
			// paired regions added.
			merged, panes := map[cell]int64{}, map[cell]int64{}
			for c, v := range job.total {
				nc := cell{pairRegion(c.region), c.window}
				merged[nc] += v
				panes[nc] = max(panes[nc], job.panes[c])
			}
			job.total, job.panes = merged, panes
			events = func(r int) []fact {
				evs := round(r)
				for i := range evs {
					evs[i].region = pairRegion(evs[i].region)
				}
				return evs
			}
		}
		var step func(context.Context, []fact) error
		if variant == "convert" {
			cfg2.Convert = map[string]bool{"total": false}
			sj := e.schemaJob(cfg2, stringSchema, job.total, job.panes)
			step = sj.step
		} else {
			job = &stagedJob{totalsJob: totalsJob{sink: e.sink(cfg2, totalsSchema), total: job.total, panes: job.panes}}
			step = job.step
		}
		r := 2
		for k := 1; ; k++ {
			if err := step(ctx, events(r)); err != nil {
				t.Fatal(err)
			}
			r++
			before := stagedSnapshot(t, e)
			cmd := exec.Command(os.Args[0], "-test.run", "^TestStagedMergeKillChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%s|%d", killChildEnv, e.driver, e.dsn, e.table, k))
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(out)
			var line string
			for sc.Scan() {
				if line = sc.Text(); strings.HasPrefix(line, "AT ") || strings.HasPrefix(line, "DONE ") {
					break
				}
			}
			if strings.HasPrefix(line, "DONE ") {
				cmd.Wait()
				if line != "DONE <nil>" {
					t.Fatalf("the child's merge failed: %s", line)
				}
				if k < 5 {
					t.Fatalf("the merge ran to its end before step %d; it should have at least 4 steps", k)
				}
				break // k passed the last step: that merge committed
			}
			if !strings.HasPrefix(line, "AT ") {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the child said %q", line)
			}
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
			cmd.Wait()
			if got := stagedSnapshot(t, e); !maps.Equal(got, before) {
				t.Fatalf("killed %s: the tables changed:\nbefore %v\nafter  %v", line, before, got)
			}
		}
		before := stagedSnapshot(t, e)
		principal := PrincipalTableName(e.table)
		if before[principal] != before[e.table] {
			t.Errorf("after the merge, the principal:\n%s\nthe view:\n%s", before[principal], before[e.table])
		}
		staging := StagingTableName(e.table, 2)
		if before[staging] != "" {
			t.Errorf("%s still holds rows after the merge", staging)
		}
		if got := viewTotals(t, e, "total"); !maps.Equal(got, job.total) {
			t.Errorf("the view serves %v, want the totals %v", got, job.total)
		}
		if variant == "convert" {
			e.checkStringTotals(t, "after the merges", job.total)
		}
	})
}
