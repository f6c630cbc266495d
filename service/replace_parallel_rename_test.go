package service

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/service/record"
)

// TestParallelRenameThenRollback: a parallel replacement whose Combine
// renames its output total to amount_total (renamed_from) joins the old
// job's SQLite table behind the façade: during the overlap the view serves
// amount_total over both jobs' rows while the old job's table keeps its
// column total (and its writes go on); a rollback cancels the new job and
// drops its generation with its rename, so the view serves total again,
// and after the old job drained every total equals the ground truth.
func TestParallelRenameThenRollback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc := startParScenario(t)
	waitAcked(t, sc.s, sc.b, pubsub.SubscriptionName("sums", "Events"))
	renamed := strings.Replace(strings.Replace(sc.pipeline, "total: {value: amount, fn: sum}", "amount_total: {value: amount, fn: sum}", 1),
		"      config:\n        group_by: [key]\n", "      migrations: {accumulators: {amount_total: {renamed_from: total}}}\n      config:\n        group_by: [key]\n", 1)
	sc.clock.advance(DefaultMinReplaceInterval)
	res, err := sc.s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: renamed, BaseDir: sc.dir,
		ServiceOptions: append([]string{"update_strategy_parallel_job_update"}, parallelOverlapOptions...)}})
	if err != nil {
		t.Fatalf("parallel replacement with a renamed output: %v", err)
	}
	phase2 := sc.overlap(t, res.Job)

	db, err := sql.Open("sqlite", "file:"+filepath.Join(sc.dir, "totals.sqlite")+"?_pragma=busy_timeout(5000)&mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	columns := func(table string) []string {
		t.Helper()
		rows, err := db.Query(`SELECT name FROM pragma_table_info(?)`, table)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
		return out
	}
	if got := columns("totals"); !slices.Contains(got, "amount_total") || slices.Contains(got, "total") {
		t.Fatalf("during the overlap the view serves %v, want amount_total and no total", got)
	}
	var served int
	if err := db.QueryRow(`SELECT COUNT(*) FROM totals WHERE amount_total IS NOT NULL AND generation = ?`, sc.old.Generation).Scan(&served); err != nil || served == 0 {
		t.Fatalf("the view serves %d of the old job's rows under amount_total (%v)", served, err)
	}
	if got := columns("totals__g1"); !slices.Contains(got, "total") {
		t.Fatalf("the old job's table has %v: its column total was renamed under it", got)
	}

	rb, err := sc.s.Rollback(ctx, RollbackRequest{Name: "sums"})
	if err != nil || rb.Job == nil || rb.Job.ID != sc.old.ID || rb.Job.State != record.StateRunning {
		t.Fatalf("rollback during the overlap: %+v %v", rb.Job, err)
	}
	if got := columns("totals"); !slices.Contains(got, "total") || slices.Contains(got, "amount_total") {
		t.Fatalf("after the rollback the view serves %v, want total again", got)
	}
	cons := startConsumer(sc.s, sc.view)
	sc.drainToTruth(t, cons, sc.old.ID, len(sc.phase1)+len(phase2), phase2)
}
