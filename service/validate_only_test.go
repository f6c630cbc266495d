package service

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"
	_ "modernc.org/sqlite"
)

// TestValidateOnlyChangesNothing: a validate-only request of every kind —
// a creation (create_or_update_job on a free name), an in-place update,
// create-or-update of a running job, a stop-and-replace, a parallel
// replacement under the same name and under another, a rollback and a job
// from a snapshot — runs its checks and answers, and leaves the job
// records, the names' lineages, the subscriptions, the subscription
// snapshots and the sink's tables (their schema and rows) exactly as they
// were. Before, a validate-only stop-and-replace or parallel replacement
// performed the replacement.
func TestValidateOnlyChangesNothing(t *testing.T) {
	t.Parallel()
	sc := startParScenario(t)
	s, ctx := sc.s, context.Background()
	sc.acked(t)
	waitCheckpointsAfter(t, s, 2, sc.old.ID)
	snap := snapshotOf(t, s, "sums")
	// A real in-place update first, so that a rollback has a snapshot to
	// go back to.
	res, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: sc.pipeline, BaseDir: sc.dir}})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	waitCheckpointsAfter(t, s, 2, res.Job.ID)
	waitRollbackSnapshotReady(t, s, "sums")
	sc.clock.advance(DefaultMinReplaceInterval) // a same-name replacement may start
	db := filepath.Join(sc.dir, "totals.sqlite")
	before := fingerprint(t, sc, db)

	update := func(name string, opts ...string) UpdateRequest {
		return UpdateRequest{SubmitRequest: SubmitRequest{Name: name, Pipeline: sc.pipeline, BaseDir: sc.dir, ServiceOptions: opts}, ValidateOnly: true}
	}
	for _, tc := range []struct {
		name string
		do   func() ([]string, error)
	}{
		{"create (create_or_update_job on a free name)", func() ([]string, error) {
			res, err := s.Update(ctx, update("fresh", "create_or_update_job"))
			return notesOf(res), err
		}},
		{"submission", func() ([]string, error) {
			res, err := s.ValidateSubmit(ctx, SubmitRequest{Name: "fresh", Pipeline: sc.pipeline, BaseDir: sc.dir})
			return notesOf(res), err
		}},
		{"in place", func() ([]string, error) {
			res, err := s.Update(ctx, update("sums"))
			return notesOf(res), err
		}},
		{"create-or-update of a running job", func() ([]string, error) {
			res, err := s.Update(ctx, update("sums", "create_or_update_job"))
			return notesOf(res), err
		}},
		{"stop-and-replace", func() ([]string, error) {
			res, err := s.Update(ctx, update("sums", "update_strategy_parallel_job_update", "parallel_replace_job_max_stop_duration=5m"))
			return notesOf(res), err
		}},
		{"parallel, same name", func() ([]string, error) {
			res, err := s.Update(ctx, update("sums", append([]string{"update_strategy_parallel_job_update"}, parallelOverlapOptions...)...))
			return notesOf(res), err
		}},
		{"parallel, another name", func() ([]string, error) {
			res, err := s.ValidateSubmit(ctx, SubmitRequest{Name: "sums-v2", Pipeline: sc.pipeline, BaseDir: sc.dir,
				ServiceOptions: append([]string{"parallel_replace_job_name=sums"}, parallelOverlapOptions...)})
			return notesOf(res), err
		}},
		{"rollback", func() ([]string, error) {
			res, err := s.Rollback(ctx, RollbackRequest{Name: "sums", ValidateOnly: true})
			if res == nil {
				return nil, err
			}
			return res.Notes, err
		}},
		{"from a snapshot", func() ([]string, error) {
			res, err := s.CreateFromSnapshot(ctx, FromSnapshotRequest{
				SubmitRequest: SubmitRequest{Name: "restored", Pipeline: sc.pipeline, BaseDir: sc.dir}, SnapshotID: snap.ID, ValidateOnly: true})
			return notesOf(res), err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notes, err := tc.do()
			if err != nil {
				t.Fatalf("validate-only: %v", err)
			}
			if !strings.Contains(strings.Join(notes, " "), "nothing changed") && !strings.Contains(strings.Join(notes, " "), "not created") {
				t.Errorf("notes %q do not say that nothing changed", notes)
			}
			if after := fingerprint(t, sc, db); after != before {
				t.Errorf("a validate-only request changed the service:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

func notesOf(res *UpdateResult) []string {
	if res == nil {
		return nil
	}
	return res.Notes
}

// fingerprint is what a validate-only request must leave as it is: every
// job record (but the fields its running execution's checkpoints move),
// the lineages of their names, the broker's subscriptions and subscription
// snapshots, and the SQLite sink's schema and rows.
func fingerprint(t *testing.T, sc *parScenario, db string) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	jobs, err := sc.s.List(StatusAll)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, j := range jobs {
		c := *j
		c.LastCheckpoint, c.Counters, c.Metrics, c.Condition = nil, nil, nil, nil
		c.DeadLetters, c.LastDeadLetter = 0, ""
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "job %s\n", out)
		names[j.Name] = true
	}
	for _, n := range []string{"sums", "fresh", "sums-v2", "restored"} {
		names[n] = true
	}
	var sorted []string
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		l, err := sc.s.core.ReadLineage(n)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := json.Marshal(l)
		fmt.Fprintf(&b, "lineage %s\n", out)
	}
	subs, err := sc.b.ListSubscriptions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range subs {
		fmt.Fprintf(&b, "subscription %s on %s\n", sub.Name, sub.Topic)
	}
	snaps, err := sc.b.ListSubscriptionSnapshots(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, snap := range snaps {
		fmt.Fprintf(&b, "subscription snapshot %s\n", snap.Name)
	}
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, "SELECT type, name, COALESCE(sql, '') FROM sqlite_master ORDER BY type, name")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var typ, name, def string
		if err := rows.Scan(&typ, &name, &def); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s: %s\n", typ, name, def)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	totals, err := sc.view.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range totals {
		lines = append(lines, fmt.Sprint(r))
	}
	sort.Strings(lines)
	fmt.Fprintf(&b, "rows\n%s\n", strings.Join(lines, "\n"))
	return b.String()
}

// waitRollbackSnapshotReady waits until the newest rollback snapshot of
// name is READY.
func waitRollbackSnapshotReady(t *testing.T, s *Service, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	snaps, err := s.ListSnapshots(name, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, snap := range snaps {
		if snap.Kind == record.SnapshotKindRollback {
			if got, err := s.WaitSnapshot(ctx, snap.ID); err != nil || got.State != record.SnapshotReady {
				t.Fatalf("rollback snapshot %s: %+v, %v", snap.ID, got, err)
			}
			return
		}
	}
	t.Fatalf("%s has no rollback snapshot", name)
}
