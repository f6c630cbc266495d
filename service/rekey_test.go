package service

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/io/sqlsink"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/yamlpipe"
)

// rekeyYAML sums the update test's generated events per key and shard (a
// field computed from the amount) in one-hour windows into table
// totals_by_shard; %s: the database.
const rekeyYAML = `pipeline:
  transforms:
    - type: Generate
      name: Events
      config: {count: 6000, rate: 600, keys: 3, spacing: 1s, seed: 7}
    - type: MapToFields
      name: Sharded
      input: Events
      config:
        fields: {key: key, amount: amount, shard: "amount %% 4"}
    - type: Combine
      name: Sums
      input: Sharded
      windowing: {type: fixed, size: 1h}
      config:
        group_by: [key, shard]
        combine:
          total: {value: amount, fn: sum}
          n: {value: amount, fn: count}
    - type: WriteToSql
      name: WriteShards
      input: Sums
      config: {dsn: %s, table: totals_by_shard, key: [key, shard]}
`

// rekeyedYAML is rekeyYAML's next version: the Combine sums per key only
// (group_by [key]) into table totals, declaring the re-key from
// (key, shard) with migration %s; %s: the database.
const rekeyedYAML = `pipeline:
  transforms:
    - type: Generate
      name: Events
      config: {count: 6000, rate: 600, keys: 3, spacing: 1s, seed: 7}
    - type: MapToFields
      name: Sharded
      input: Events
      config:
        fields: {key: key, amount: amount, shard: "amount %% 4"}
    - type: Combine
      name: Sums
      input: Sharded
      windowing: {type: fixed, size: 1h}
%s      config:
        group_by: [key]
        combine:
          total: {value: amount, fn: sum}
          n: {value: amount, fn: count}
    - type: WriteToSql
      name: WriteTotals
      input: Sums
      config: {dsn: %s, table: totals, key: [key]}
`

// TestUpdateRekeysState changes a running Combine's key from (key, shard)
// to key, in place, while its one-hour windows are open: refused without a
// declared re-key (the fix names it) or with one from other fields; with
// it, every (key, shard) accumulator moves to its key and those that meet
// merge, so every window's total and count equals a run of the new
// pipeline from scratch over the same events.
func TestUpdateRekeysState(t *testing.T) {
	t.Parallel()
	// One worker, and three becoming two (the keys move to other key
	// groups and other workers, with a rescale in the same update).
	for _, w := range [][2]int{{1, 1}, {3, 2}} {
		t.Run(fmt.Sprintf("workers %d to %d", w[0], w[1]), func(t *testing.T) {
			t.Parallel()
			testUpdateRekeysState(t, w[0], w[1])
		})
	}
}

func testUpdateRekeysState(t *testing.T, from, to int) {
	dir := t.TempDir()
	want := oracle(t, dir)
	db := filepath.Join(dir, "job.sqlite")
	s := openService(t, filepath.Join(dir, "data"))
	old, err := s.Submit(context.Background(), SubmitRequest{Name: "totals", Pipeline: fmt.Sprintf(rekeyYAML, db), BaseDir: dir,
		Options: record.JobOptions{NumWorkers: from}})
	if err != nil {
		t.Fatal(err)
	}
	waitElements(t, s, old.ID, "Events", 1500)

	refused := []struct {
		name, migration string
		code            errcode.Code
		text            string
	}{
		{"no migration", "", errcode.KeyCoderChanged, "rekey: {from: [key, shard]}"},
		{"from other fields", "      migrations:\n        rekey: {from: [shard, key]}\n", errcode.RekeyFromMismatch, "declare rekey: {from: [key, shard]}"},
	}
	for _, r := range refused {
		res, err := s.Update(context.Background(), UpdateRequest{
			SubmitRequest: SubmitRequest{Name: "totals", Pipeline: fmt.Sprintf(rekeyedYAML, r.migration, db), BaseDir: dir}})
		if err == nil || res.Report.Compatible {
			t.Fatalf("%s: the update went ahead: %+v", r.name, res.Report)
		}
		found := false
		for _, e := range res.Report.Errors {
			found = found || (e.Code == r.code && strings.Contains(e.Fix, r.text))
		}
		if !found {
			t.Errorf("%s: want %s with a fix naming %q, got %+v", r.name, r.code, r.text, res.Report.Errors)
		}
	}
	if j, err := s.Get(old.ID); err != nil || j.State != record.StateRunning {
		t.Fatalf("after the refused updates the job is %v (%v)", j.State, err)
	}

	next := fmt.Sprintf(rekeyedYAML, "      migrations:\n        rekey: {from: [key, shard]}\n", db)
	res, err := s.Update(context.Background(), UpdateRequest{SubmitRequest: SubmitRequest{Name: "totals", Pipeline: next, BaseDir: dir,
		Options: record.JobOptions{NumWorkers: to}}})
	if err != nil || !res.Report.Compatible || res.Job == nil {
		t.Fatalf("update: %v (report %+v)", err, res.Report)
	}
	found := false
	for _, w := range res.Report.Warnings {
		found = found || w.Code == errcode.StateRekeyed
	}
	if !found {
		t.Errorf("report lacks the warning %s: %+v", errcode.StateRekeyed, res.Report.Warnings)
	}
	nj := waitDone(t, s, res.Job.ID)
	if nj.State != record.StateDone {
		t.Fatalf("new job: %s", nj.State)
	}
	// The oracle sums per key over every event; the first window was open
	// at the update, so its total is made of the moved shards' partial
	// sums and what came after, and so is every later window.
	got := tableRows(t, db)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("after the re-key the table holds:\n%s\nthe new pipeline from scratch:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The windows the old version closed before the update hold per-shard
	// rows (none here at 1h windows), the rest are only in totals.
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var shardRows int
	if err := conn.QueryRow(`SELECT COUNT(*) FROM totals_by_shard`).Scan(&shardRows); err != nil {
		t.Fatal(err)
	}
	if shardRows != 0 {
		t.Errorf("the old version wrote %d per-shard rows: the update came after a window closed, the test needs it earlier", shardRows)
	}
}

// TestRekeyRefusedAtLoad: a re-key that cannot be applied is refused when
// the pipeline loads, at its line and column.
func TestRekeyRefusedAtLoad(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, migration, want string }{
		{"unknown from field", "      migrations:\n        rekey: {from: [key, zone]}\n", `"zone", which is not a field of the Combine's input`},
		{"unchanged key", "      migrations:\n        rekey: {from: [key]}\n", "the key does not change"},
		{"new field without expression", "      migrations:\n        rekey: {from: [shard]}\n", `the new group_by field "key" is not one of from`},
		{"expression for another field", "      migrations:\n        rekey: {from: [key, shard], key: {region: \"key\"}}\n", `key names "region"`},
		{"unknown option", "      migrations:\n        rekey: {from: [key, shard], merging: sum}\n", "merging"},
		{"unknown merge", "      migrations:\n        rekey: {from: [key, shard], merge: avg}\n", `merge "avg" is not one of sum, max, min or combine`},
		{"merge of no output", "      migrations:\n        rekey: {from: [key, shard], merge: {biggest: max}}\n", `merge names "biggest", which is not an output of the Combine (total, n)`},
		{"merge of a wrong shape", "      migrations:\n        rekey: {from: [key, shard], merge: [max]}\n", "merge must be sum, max, min or combine"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := yamlpipe.Load("p.yaml", []byte(fmt.Sprintf(rekeyedYAML, tc.migration, "x.sqlite")), yamlpipe.Options{BaseDir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "p.yaml:") {
				t.Errorf("load: %v; want an error at p.yaml:LINE:COL saying %q", err, tc.want)
			}
		})
	}
	_, err := yamlpipe.Load("p.yaml", []byte(fmt.Sprintf(rekeyedYAML, "      migrations:\n        rekey: {from: [key, shard], key: {key: \"key + '-x'\"}}\n", "x.sqlite")), yamlpipe.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatalf("a re-key with an expression: %v", err)
	}
	for _, merge := range []string{"max", "{total: max, n: min}", "combine", "{total: combine}"} {
		_, err := yamlpipe.Load("p.yaml", []byte(fmt.Sprintf(rekeyedYAML, "      migrations:\n        rekey: {from: [key, shard], merge: "+merge+"}\n", "x.sqlite")), yamlpipe.Options{BaseDir: t.TempDir()})
		if err != nil {
			t.Errorf("a re-key with merge: %s: %v", merge, err)
		}
	}
}

// rekeyRecipeYAML reads recipeYAML's topic and sums per group of keys
// (%s: the group of a message's key), declaring the re-key of the per-key
// state it starts from (%s: the group of a stored key); %s: the database.
const rekeyRecipeYAML = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Events
      config:
        topic: recipe-events
        schema: {key: string, amount: int}
    - type: MapToFields
      name: Grouped
      input: Events
      config:
        fields: {key: "%s", amount: amount}
    - type: Combine
      name: Sums
      input: Grouped
      migrations:
        rekey:
          from: [key]
          key: {key: "%s"}
      config:
        group_by: [key]
        combine:
          total: {value: amount, fn: sum}
          n: {value: amount, fn: count}
    - type: WriteToSql
      name: WriteTotals
      input: Sums
      config: {dsn: %s, table: totals, key: [key]}
`

// lowHigh groups keys k0 and k1 as low, the others as high.
const lowHigh = "key == 'k0' || key == 'k1' ? 'low' : 'high'"

// TestCreateFromSnapshotRekeys restores a snapshot's per-key state into a
// pipeline that re-keys it (the key's values change: five keys become two
// groups): the restore moves every stored key to its group and merges the
// sums (three workers: each reads every key group and keeps what lands in
// its own), and a restart after the new job's first checkpoints reads the
// moved keys as they are (not re-keyed twice). Every group's total and
// count is the snapshot's plus what was published after the cut.
func TestCreateFromSnapshotRekeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := drainedRecipeSnapshot(t)
	s, dir, snap := f.s, f.dir, f.snap

	// Into the table the snapshot's job wrote (a plain one, holding its
	// rows under the earlier keys): refused, nothing created.
	same := filepath.Join(dir, "totals.sqlite")
	if _, err := s.CreateFromSnapshot(ctx, FromSnapshotRequest{SubmitRequest: SubmitRequest{Name: "groups-same",
		Pipeline: fmt.Sprintf(rekeyRecipeYAML, lowHigh, lowHigh, same), PipelineFile: "p.yaml", BaseDir: dir}, SnapshotID: snap.ID}); !hasCode(err, errcode.SQLSchemaChangeRefused) || !strings.Contains(err.Error(), "layout: staged") {
		t.Fatalf("CreateFromSnapshot re-keying the snapshot job's plain table: %v; want SQL_SCHEMA_CHANGE_REFUSED naming layout: staged", err)
	}
	if _, err := s.Get("groups-same"); err == nil {
		t.Fatal("the refused CreateFromSnapshot created a job")
	}

	db := filepath.Join(dir, "groups.sqlite")
	res, got, byKey := f.fromSnapshotAcrossRestart(t, "groups", fmt.Sprintf(rekeyRecipeYAML, lowHigh, lowHigh, db), 3, db)
	found := false
	for _, w := range res.Report.Warnings {
		found = found || w.Code == errcode.StateRekeyed
	}
	if !found {
		t.Errorf("the report lacks %s: %+v", errcode.StateRekeyed, res.Report.Warnings)
	}
	addRecipe(byKey, 0, 400)

	want := map[string][2]int64{}
	for k, v := range byKey {
		g := "high"
		if k == "k0" || k == "k1" {
			g = "low"
		}
		w := want[g]
		want[g] = [2]int64{w[0] + v[0], w[1] + v[1]}
	}
	if w := rowsOf(want); strings.Join(got, "\n") != strings.Join(w, "\n") {
		t.Errorf("the re-keyed job (group total count):\n%s\nthe snapshot's sums by group and what came after:\n%s", strings.Join(got, "\n"), strings.Join(w, "\n"))
	}
}

// TestRekeyFailureIsAReject: a re-key expression that fails for one
// stored key (here k4's) leaves that key's state out — a reject of the
// step with reason rekey_failed, counted and sent as a dead letter naming
// the key — and moves every other key: the job runs on.
func TestRekeyFailureIsAReject(t *testing.T) {
	t.Parallel()
	// One worker re-keys as it reads; two read the stored keys between
	// them, and k4's failure is one reject and one dead letter, by the
	// worker that owns it.
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			t.Parallel()
			testRekeyFailureIsAReject(t, workers)
		})
	}
}

func testRekeyFailureIsAReject(t *testing.T, workers int) {
	ctx := context.Background()
	dir := t.TempDir()
	b := startBroker(t, dir, "recipe-events")
	s := openServiceWithBroker(t, filepath.Join(dir, "data"), b)
	snap, j := recipeSnapshot(t, s, b, "totals", filepath.Join(dir, "totals.sqlite"), dir)
	cancelAndWait(t, s, j.ID)

	db := filepath.Join(dir, "all.sqlite")
	failK4 := "key == 'k4' ? string(1 / (size(key) - 2)) : 'all'"
	res, err := s.CreateFromSnapshot(ctx, FromSnapshotRequest{SubmitRequest: SubmitRequest{Name: "all",
		Pipeline: fmt.Sprintf(rekeyRecipeYAML, "'all'", failK4, db), PipelineFile: "p.yaml", BaseDir: dir,
		Options: record.JobOptions{NumWorkers: workers}}, SnapshotID: snap.ID})
	if err != nil {
		t.Fatalf("CreateFromSnapshot: %v", err)
	}
	byKey := map[string][2]int64{}
	addRecipe(byKey, 0, 400)
	delete(byKey, "k4") // its stored state did not move
	publishRecipe(t, b, 400, 500, byKey)
	waitBacklog(t, s, b, pubsub.SubscriptionName("all", "Events"))
	var total, n int64
	for _, v := range byKey {
		total, n = total+v[0], n+v[1]
	}
	got := drainTotals(t, s, res.Job.ID, db)
	if w := fmt.Sprintf("all %d %d", total, n); strings.Join(got, "\n") != w {
		t.Errorf("the re-keyed job: %q, want %q (every key's state but k4's, and what came after)", got, w)
	}
	var dead int
	for _, ev := range eventsOf(t, s, res.Job.ID, record.EventDeadLetter) {
		if ev.Details["step"] == "Sums" && ev.Details["reason"] == "rekey_failed" {
			dead++
			if !strings.Contains(ev.Message, "k4") || !strings.Contains(ev.Message, "division by zero") {
				t.Errorf("dead letter %q: want it to name the key k4 and the error", ev.Message)
			}
		}
	}
	if dead != 1 {
		t.Errorf("%d dead letters of step Sums with reason rekey_failed, want 1: %v", dead, eventsOf(t, s, res.Job.ID, record.EventDeadLetter))
	}
	fin, err := s.Get(res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range fin.Metrics.Steps {
		if st.Name == "Sums" {
			if st.RejectsByReason["rekey_failed"] != 1 || st.Rejects < 1 {
				t.Errorf("Sums: %d rejects, by reason %v; want the failed re-key among them", st.Rejects, st.RejectsByReason)
			}
			return
		}
	}
	t.Errorf("no metrics of step Sums: %+v", fin.Metrics.Steps)
}

// TestUpdateRekeyFailureIsAReject: at an update in place across two
// workers, a re-key expression that fails for the stored keys of shard 3
// leaves their state out — each a reject of the step with reason
// rekey_failed, counted once and sent as a dead letter naming the key and
// the error by the worker that owned it — and moves every other key: the
// job runs to its end.
func TestUpdateRekeyFailureIsAReject(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "job.sqlite")
	s := openService(t, filepath.Join(dir, "data"))
	old, err := s.Submit(context.Background(), SubmitRequest{Name: "totals", Pipeline: fmt.Sprintf(rekeyYAML, db), BaseDir: dir,
		Options: record.JobOptions{NumWorkers: 2}})
	if err != nil {
		t.Fatal(err)
	}
	waitElements(t, s, old.ID, "Events", 1500)
	failShard3 := "      migrations:\n        rekey: {from: [key, shard], key: {key: \"shard == 3 ? key + string(1 / (shard - 3)) : key\"}}\n"
	res, err := s.Update(context.Background(), UpdateRequest{SubmitRequest: SubmitRequest{Name: "totals",
		Pipeline: fmt.Sprintf(rekeyedYAML, failShard3, db), BaseDir: dir}})
	if err != nil || !res.Report.Compatible || res.Job == nil {
		t.Fatalf("update: %v (report %+v)", err, res.Report)
	}
	nj := waitDone(t, s, res.Job.ID)
	if nj.State != record.StateDone {
		t.Fatalf("new job: %s", nj.State)
	}
	var dead int64
	for _, ev := range eventsOf(t, s, nj.ID, record.EventDeadLetter) {
		if ev.Details["step"] == "Sums" && ev.Details["reason"] == "rekey_failed" {
			dead++
			if !strings.Contains(ev.Message, "division by zero") || !strings.Contains(ev.Message, "3") {
				t.Errorf("dead letter %q: want it to name the key of shard 3 and the error", ev.Message)
			}
		}
	}
	if dead == 0 {
		t.Fatalf("no dead letter of step Sums with reason rekey_failed: %v", eventsOf(t, s, nj.ID, record.EventDeadLetter))
	}
	for _, st := range nj.Metrics.Steps {
		if st.Name == "Sums" {
			if st.RejectsByReason["rekey_failed"] != dead {
				t.Errorf("Sums: rejects by reason %v, want rekey_failed = %d (one per dead letter: each failed key reported once)", st.RejectsByReason, dead)
			}
			return
		}
	}
	t.Errorf("no metrics of step Sums: %+v", nj.Metrics.Steps)
}

// TestUpdateRekeysStagedTable re-keys, in place, a Combine whose rows a
// staged WriteToSql keys by the re-keyed key: the table written under
// (key, shard), windows of ten minutes of which two closed before the
// update, is served under key from the update on (the closed windows'
// rows re-keyed and merged by the view, the open ones by the state), so
// that the view equals a run of the new pipeline from scratch, before and
// after the merge that moves the earlier rows into the principal. A plain
// table holding the earlier rows refuses the update and the job goes on.
func TestUpdateRekeysStagedTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	windowed := func(y string) string {
		return strings.Replace(y, "{type: fixed, size: 1h}", "{type: fixed, size: 10m}", 1)
	}
	oldYAML := func(db, layout string) string {
		y := windowed(fmt.Sprintf(rekeyYAML, db))
		return strings.Replace(y, "table: totals_by_shard, key: [key, shard]}", "table: totals, key: [key, shard]"+layout+"}", 1)
	}
	newYAML := func(db, layout, migration string) string {
		y := windowed(fmt.Sprintf(rekeyedYAML, migration, db))
		return strings.Replace(y, "table: totals, key: [key]}", "table: totals, key: [key]"+layout+"}", 1)
	}
	const staged = ", layout: staged, merge_interval: 0"
	const migration = "      migrations:\n        rekey: {from: [key, shard]}\n"

	dir := t.TempDir()
	// The oracle: the new pipeline from scratch over the same events.
	odb := filepath.Join(dir, "oracle.sqlite")
	p, err := yamlpipe.Load("oracle.yaml", []byte(newYAML(odb, "", "")), yamlpipe.Options{BaseDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := weir.Run(ctx, p, weir.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	want := tableRows(t, odb)

	t.Run("plain table refused", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		db := filepath.Join(dir, "job.sqlite")
		s := openService(t, filepath.Join(dir, "data"))
		old := submit(t, s, "totals", oldYAML(db, ""), dir)
		waitElements(t, s, old.ID, "Events", 1500)
		_, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "totals", Pipeline: newYAML(db, "", migration), BaseDir: dir}})
		if !hasCode(err, errcode.SQLSchemaChangeRefused) || !strings.Contains(err.Error(), "layout: staged") {
			t.Fatalf("update of a plain table: %v; want SQL_SCHEMA_CHANGE_REFUSED naming layout: staged", err)
		}
		if j := waitDone(t, s, old.ID); j.State != record.StateDone || j.ReplacedByJobID != "" {
			t.Fatalf("the running job after the refusal: %s replaced by %q", j.State, j.ReplacedByJobID)
		}
	})

	// Through another step (a Filter) a table's re-key cannot follow the
	// rows: refused while the table holds the earlier rows.
	t.Run("through another step refused", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		db := filepath.Join(dir, "job.sqlite")
		s := openService(t, filepath.Join(dir, "data"))
		old := submit(t, s, "totals", newYAML(db, "", ""), dir)
		waitElements(t, s, old.ID, "Events", 1500)
		merge := "      migrations:\n        rekey: {from: [key], key: {key: \"key == 'key-1' ? 'key-0' : key\"}}\n"
		through := strings.Replace(newYAML(db, "", merge), "      name: WriteTotals\n      input: Sums\n",
			"      name: WriteTotals\n      input: Positive\n", 1)
		through = strings.Replace(through, "    - type: WriteToSql\n", "    - type: Filter\n      name: Positive\n      input: Sums\n      config: {keep: \"total >= 0\"}\n    - type: WriteToSql\n", 1)
		_, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "totals", Pipeline: through, BaseDir: dir}})
		if !hasCode(err, errcode.SQLSchemaChangeRefused) || !strings.Contains(err.Error(), "through other steps") {
			t.Fatalf("update re-keying through a Filter: %v; want SQL_SCHEMA_CHANGE_REFUSED", err)
		}
		if j := waitDone(t, s, old.ID); j.State != record.StateDone || j.ReplacedByJobID != "" {
			t.Fatalf("the running job after the refusal: %s replaced by %q", j.State, j.ReplacedByJobID)
		}
	})

	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run("staged/"+driver, func(t *testing.T) {
			t.Parallel()
			testRekeyStagedTable(t, driver, want, oldYAML(odb, staged), newYAML(odb, staged, migration), odb, false)
		})
		// A plain table moves to layout: staged and is re-keyed by the
		// same update: it becomes the principal, moved aside as the
		// earlier keys' member.
		t.Run("plain to staged/"+driver, func(t *testing.T) {
			t.Parallel()
			testRekeyStagedTable(t, driver, want, oldYAML(odb, ""), newYAML(odb, staged, migration), odb, true)
		})
	}
}

// testRekeyStagedTable runs TestUpdateRekeysStagedTable's staged case on
// driver: v1 and v2 are its pipelines writing table totals of database
// odb, which the case points at its own; fromPlain says v1 writes a plain
// table, which v2 adopts as its principal.
func testRekeyStagedTable(t *testing.T, driver string, want []string, v1, v2, odb string, fromPlain bool) {
	ctx := context.Background()
	dir := t.TempDir()
	target := sqlsink.StagedTarget{Driver: driver, DSN: filepath.Join(dir, "job.sqlite"), Table: "totals"}
	read := func(t *testing.T) []string { return tableRows(t, target.DSN) }
	point := func(y string) string { return strings.ReplaceAll(y, "dsn: "+odb+",", "dsn: "+target.DSN+",") }
	if driver == "postgres" {
		target.DSN = os.Getenv("WEIR_TEST_POSTGRES_DSN")
		if target.DSN == "" {
			target.DSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := pgx.Connect(cctx, target.DSN)
		cancel()
		if err != nil {
			t.Skipf("PostgreSQL is not reachable at %s (set WEIR_TEST_POSTGRES_DSN): %v", target.DSN, err)
		}
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		target.Table = fmt.Sprintf("rekey_totals_%d", time.Now().UnixNano()%1e9)
		point = func(y string) string {
			return strings.ReplaceAll(y, "{dsn: "+odb+", table: totals,", "{driver: postgres, dsn: \""+target.DSN+"\", table: "+target.Table+",")
		}
		read = func(t *testing.T) []string {
			rows, err := conn.Query(ctx, `SELECT key, to_char(window_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), total, n, generation FROM `+target.Table)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			got, _ := scanTotals(t, rows)
			return got
		}
	}
	s := openService(t, filepath.Join(dir, "data"))
	old := submit(t, s, "totals", point(v1), dir)
	waitElements(t, s, old.ID, "Events", 1500)
	res, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "totals", Pipeline: point(v2), BaseDir: dir}})
	if err != nil || !res.Report.Compatible {
		t.Fatalf("update: %v (%+v)", err, res.Report)
	}
	// Once the new version's sink has set up (at its first commit: until
	// then the view serves the rows per key and shard, as before the
	// update), a reader polls the view through the merge: no key and
	// window served twice, no total going backwards.
	waitStaged(t, s, target, res.Job.ID, "re-keyed")
	v := sqliteView(t, target.DSN)
	if driver == "postgres" {
		v = postgresView(t, target.DSN, target.Table)
	}
	defer v.close()
	c := startConsumer(s, v)
	nj := waitDone(t, s, res.Job.ID)
	if nj.State != record.StateDone {
		t.Fatalf("new job: %s (%s)", nj.State, nj.Error)
	}
	info, err := sqlsink.DescribeStaged(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	earlier, gone := target.Table+"__rkp_2, "+target.Table+"__staging_v1", []string{target.Table + "__rkp_2", target.Table + "__staging_v1", target.Table + "__rkagg_2"}
	if fromPlain {
		earlier, gone = target.Table+"__rkp_1", []string{target.Table + "__rkp_1", target.Table + "__rkagg_1"}
	}
	if !strings.Contains(info.View, earlier) {
		t.Errorf("the earlier members are not behind the view: %s", info.View)
	}
	if got := read(t); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after the re-key the view serves:\n%s\nthe new pipeline from scratch:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	m, err := s.MergeSQLTable(ctx, target.Table)
	if err != nil {
		t.Fatalf("merge: %v", err)
	}
	if got := read(t); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after the merge (%+v) the view serves:\n%s\nwant:\n%s", m, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	c.finish(t)
	info, err = sqlsink.DescribeStaged(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(info.View, "re-keyed") || len(info.Members) != 2 || info.Members[0].Rows != int64(len(want)) {
		t.Errorf("after the merge: %s, members %+v; want the principal holding all %d rows", info.View, info.Members, len(want))
	}
	for _, gone := range gone {
		if n, exists, err := sqlsink.TableRows(ctx, sqlsink.StagedTarget{Driver: driver, DSN: target.DSN, Table: gone}); err != nil || exists {
			t.Errorf("after the merge %s is left (%d rows, %v)", gone, n, err)
		}
	}
}

// waitStaged waits, at every change of s, until the description of the
// staged table target says what; job id ending first fails t.
func waitStaged(t *testing.T, s *Service, target sqlsink.StagedTarget, id, what string) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		changed := s.core.Changes.Next()
		info, err := sqlsink.DescribeStaged(context.Background(), target)
		if err == nil && strings.Contains(info.View, what) {
			return
		}
		if j, err := s.Get(id); err != nil || j.State.Terminal() {
			t.Fatalf("job %s ended (%v) before the staged table said %q: %s", id, err, what, info.View)
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting for the staged table to say %q: %s", what, info.View)
		}
	}
}

// TestCreateFromSnapshotRekeysWithDeclaredMerge re-keys a snapshot's
// per-key state into groups with a declared merge for one output
// (merge: {total: max}): a group's total starts from the largest of its
// keys' totals, its count from the sum of their counts (n keeps its
// combine's merge), and both go on adding what arrives after the cut,
// across a restart after the new job's first checkpoints.
func TestCreateFromSnapshotRekeysWithDeclaredMerge(t *testing.T) {
	t.Parallel()
	f := drainedRecipeSnapshot(t)
	before := map[string][2]int64{}
	addRecipe(before, 0, 400)
	db := filepath.Join(f.dir, "groups.sqlite")
	pipeline := strings.Replace(fmt.Sprintf(rekeyRecipeYAML, lowHigh, lowHigh, db), "          key: {key: ", "          merge: {total: max}\n          key: {key: ", 1)
	if !strings.Contains(pipeline, "merge: {total: max}") {
		t.Fatal("the test's pipeline did not change")
	}
	_, got, after := f.fromSnapshotAcrossRestart(t, "groups", pipeline, 2, db)

	group := func(k string) string {
		if k == "k0" || k == "k1" {
			return "low"
		}
		return "high"
	}
	want := map[string][2]int64{}
	for k, v := range before {
		w := want[group(k)]
		want[group(k)] = [2]int64{max(w[0], v[0]), w[1] + v[1]}
	}
	for k, v := range after {
		w := want[group(k)]
		want[group(k)] = [2]int64{w[0] + v[0], w[1] + v[1]}
	}
	if w := rowsOf(want); strings.Join(got, "\n") != strings.Join(w, "\n") {
		t.Errorf("the re-keyed job (group total count):\n%s\nthe largest snapshot total, the summed counts, and what came after:\n%s", strings.Join(got, "\n"), strings.Join(w, "\n"))
	}
}
