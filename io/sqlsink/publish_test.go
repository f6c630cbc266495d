package sqlsink

import (
	"context"
	"strings"
	"testing"

	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// TestStagedPublication: a staged sink publishes its rows to the target at
// its checkpointed end, with the partition and one publication log entry;
// a rerun with the same manifest digest publishes nothing; a new digest
// replaces the partition's rows; a run that took no checkpoint, or was
// aborted, publishes nothing; the same rows publish the same output digest
// whichever run wrote them. On both databases.
func TestStagedPublication(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		target, job := e.table, e.table // the job name keeps the log's entries apart between tests
		t.Cleanup(func() {
			for _, run := range []string{"r1", "r2", "r3", "r4", "r5", "r6", "r7"} {
				_ = e.exec("DROP TABLE IF EXISTS " + quoteTable(StageTable(target, "p1", run)))
			}
			_ = e.exec("DELETE FROM " + PublicationTable + " WHERE job_name = '" + job + "'")
		})
		shadow, abort := false, false
		run := func(runID, digest string, epochs bool, totals map[string]int64) {
			t.Helper()
			cfg := e.config("upsert", "region")
			cfg.JobID = runID
			cfg.SinkID = target + "/" + runID
			cfg.Stage = &Stage{Target: target, JobName: job, JobID: runID, Partition: "p1", ManifestDigest: digest, Shadow: shadow}
			cfg.Table = StageTable(target, "p1", runID)
			s := e.sink(cfg, totalsSchema)
			var elems []contract.Element
			for region, n := range totals {
				elems = append(elems, total(region, n, window.Global, onTime0))
			}
			if epochs {
				commit(t, s, 1, elems...)
			} else if err := s.Write(ctx, 0, elems); err != nil {
				t.Fatal(err)
			}
			end := s.Close
			if abort {
				end = s.Abort
			}
			if err := end(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
		}
		published := func() map[string]int64 {
			t.Helper()
			out := map[string]int64{}
			for _, r := range e.query("SELECT region, total, " + PartitionColumn + " FROM " + quoteTable(target)) {
				if r[2] != "p1" {
					t.Errorf("row %v: partition %v, want p1", r, r[2])
				}
				out[r[0].(string)] += r[1].(int64)
			}
			return out
		}
		logEntries := func() int {
			t.Helper()
			return len(e.query("SELECT job_id FROM "+PublicationTable+" WHERE job_name = "+e.q(1), job))
		}
		run("r1", "sha256:a", true, map[string]int64{"NORTH": 425, "WEST": 100})
		if got := published(); len(got) != 2 || got["NORTH"] != 425 || got["WEST"] != 100 || logEntries() != 1 {
			t.Fatalf("first run: published %v, %d log entries", got, logEntries())
		}
		run("r2", "sha256:a", true, map[string]int64{"NORTH": 1})
		if got := published(); len(got) != 2 || got["NORTH"] != 425 || logEntries() != 1 {
			t.Fatalf("rerun of the same manifest: published %v, %d log entries", got, logEntries())
		}
		run("r3", "sha256:b", false, map[string]int64{"NORTH": 2})
		if got := published(); got["NORTH"] != 425 || logEntries() != 1 {
			t.Fatalf("a run without checkpoints published: %v, %d log entries", got, logEntries())
		}
		// A run that stopped short (aborted) publishes nothing, though it
		// committed an epoch.
		abort = true
		run("r6", "sha256:b", true, map[string]int64{"NORTH": 7})
		abort = false
		if got := published(); got["NORTH"] != 425 || logEntries() != 1 {
			t.Fatalf("an aborted run published: %v, %d log entries", got, logEntries())
		}
		run("r4", "sha256:b", true, map[string]int64{"NORTH": 3})
		if got := published(); len(got) != 1 || got["NORTH"] != 3 || logEntries() != 2 {
			t.Fatalf("a new manifest: published %v, %d log entries", got, logEntries())
		}
		if rows := e.query("SELECT row_count, replaced_rows FROM "+PublicationTable+" WHERE job_name = "+e.q(1)+" AND job_id = 'r4'", job); len(rows) != 1 || rows[0][0] != int64(1) || rows[0][1] != int64(2) {
			t.Errorf("log entry of r4: %v, want row_count 1, replaced_rows 2", rows)
		}
		// A shadow run stages and keeps its staging table; nothing is published.
		shadow = true
		run("r5", "sha256:c", true, map[string]int64{"NORTH": 9})
		if got := published(); len(got) != 1 || got["NORTH"] != 3 || logEntries() != 2 {
			t.Fatalf("a shadow run published: %v, %d log entries", got, logEntries())
		}
		cfg := e.config("upsert", "region")
		pubs, stages, err := PartitionLog(ctx, StagedTarget{Driver: cfg.Driver, DSN: cfg.DSN, Table: target}, job)
		if err != nil {
			t.Fatal(err)
		}
		if len(pubs) != 2 || pubs[0].Partition != "p1" || pubs[0].Rows+pubs[1].Rows != 3 {
			t.Errorf("PartitionLog entries: %+v, want r1 (2 rows) and r4 (1 row)", pubs)
		}
		_, bare := splitTable(StageTable(target, "p1", "r5"))
		if !stages[strings.ToLower(bare)] {
			t.Errorf("PartitionLog staging tables %v lack the shadow run's %s", stages, bare)
		}
		// The output digest is of the rows, not of the run that wrote them:
		// another run of r1's rows (another job ID, generation and write
		// time) publishes the same digest, read as the rows stream by.
		shadow = false
		run("r7", "sha256:d", true, map[string]int64{"NORTH": 425, "WEST": 100})
		digests := map[string]string{}
		for _, r := range e.query("SELECT job_id, output_digest FROM "+PublicationTable+" WHERE job_name = "+e.q(1), job) {
			digests[r[0].(string)] = r[1].(string)
		}
		if d := digests["r1"]; !strings.HasPrefix(d, "sha256:") || d != digests["r7"] || d == digests["r4"] {
			t.Errorf("output digests %v: want r1's equal to r7's (the same rows) and unlike r4's", digests)
		}
	})
}
