package service

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"

	_ "modernc.org/sqlite"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/yamlpipe"
)

// updateYAML generates 6000 events at 3000/s (a Batch job that runs about
// two seconds) summed per key in one-hour windows that stay open across an
// update, into an upserting SQLite table. %s slots: an optional stateless
// step, the combine's name and its input, the table, and extra group_by fields.
const updateYAML = `pipeline:
  transforms:
    - type: Generate
      name: Events
      config: {count: 6000, rate: 3000, keys: 3, spacing: 1s, seed: 7}
%s    - type: Combine
      name: %s
      input: %s
      windowing: {type: fixed, size: 1h}
      config:
        group_by: [key%s]
        combine:
          total: {value: amount, fn: sum}
          n: {value: amount, fn: count}
    - type: WriteToSql
      name: WriteTotals
      input: %s
      config: {dsn: %s, table: totals, key: [key]}
`

const keepAll = `    - type: Filter
      name: KeepAll
      input: Events
      config: {keep: "amount >= 0"}
`

// asFloat makes an update pipeline's Combine sum amount as a float (a
// MapToFields casting it before the Combine).
func asFloat(y string) string {
	y = strings.Replace(y, "      input: Events\n      windowing", "      input: AsFloat\n      windowing", 1)
	return strings.Replace(y, "    - type: Combine\n", "    - type: MapToFields\n      name: AsFloat\n      input: Events\n      config:\n        fields: {key: key, amount: double(amount)}\n    - type: Combine\n", 1)
}

// appendInit makes an update pipeline's Combine append n2, a count
// declared with the migration decl (init: ...).
func appendInit(decl string) func(string) string {
	return func(y string) string {
		y = strings.Replace(y, "n: {value: amount, fn: count}", "n: {value: amount, fn: count}\n          n2: {value: amount, fn: count}", 1)
		return strings.Replace(y, "      windowing: {type: fixed, size: 1h}\n", "      windowing: {type: fixed, size: 1h}\n      migrations:\n        accumulators:\n          n2: {"+decl+"}\n", 1)
	}
}

// n2EqualsN fails the test unless n2 equals n in every row of the table
// (and it has rows): the init of an appended n2 from n reached every key
// and open window.
func n2EqualsN(t *testing.T, conn *sql.DB) {
	var differ, rows int
	if err := conn.QueryRow(`SELECT COUNT(*) FROM totals WHERE n2 IS NULL OR n2 != n`).Scan(&differ); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(`SELECT COUNT(*) FROM totals`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if differ != 0 || rows == 0 {
		t.Errorf("after the migration %d of %d rows have n2 != n", differ, rows)
	}
}

// withText makes an update pipeline's Combine keep the latest value of a
// field text, which a MapToFields before it computes by the CEL
// expression expr over the generated events.
func withText(expr string) func(string) string {
	return func(y string) string {
		y = strings.Replace(y, "      input: Events\n      windowing", "      input: Text\n      windowing", 1)
		y = strings.Replace(y, "    - type: Combine\n", "    - type: MapToFields\n      name: Text\n      input: Events\n      config:\n        fields: {key: key, amount: amount, text: \""+expr+"\"}\n    - type: Combine\n", 1)
		return strings.Replace(y, "n: {value: amount, fn: count}", "n: {value: amount, fn: count}\n          last: {value: text, fn: latest}", 1)
	}
}

// staged gives an update pipeline's WriteToSql the staged layout,
// merging only on demand.
func staged(y string) string {
	return strings.Replace(y, "table: totals, key: [key]}", "table: totals, key: [key], layout: staged, merge_interval: 0}", 1)
}

func updatePipeline(db string, filter bool, combine, extraGroup string) string {
	in, step := "Events", ""
	if filter {
		in, step = "KeepAll", keepAll
	}
	return fmt.Sprintf(updateYAML, step, combine, in, extraGroup, combine, db)
}

// tableRows reads the totals table as sorted "key window total n" lines.
func tableRows(t *testing.T, db string) []string {
	t.Helper()
	return tableRowsOf(t, db, "total")
}

// tableRowsOf is tableRows with the total in column total.
func tableRowsOf(t *testing.T, db, total string) []string {
	t.Helper()
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT key, window_start, ` + total + `, n FROM totals ORDER BY key, window_start`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var key, start string
		var total, n int64
		if err := rows.Scan(&key, &start, &total, &n); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %s %d %d", key, start, total, n))
	}
	return out
}

// oracle runs the same pipeline in-process, without any update, into its
// own table: the generator is deterministic, so an update must end with
// exactly these rows.
func oracle(t *testing.T, dir string) []string {
	t.Helper()
	db := filepath.Join(dir, "oracle.sqlite")
	p, err := yamlpipe.Load("oracle.yaml", []byte(updatePipeline(db, false, "Sums", "")), yamlpipe.Options{BaseDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := weir.Run(context.Background(), p, weir.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	return tableRows(t, db)
}

func TestUpdateKeepsState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		filter  bool
		combine string
		mapping string
		mutate  func(string) string
		warning string
		// noOracle: the new version computes something else from the swap on.
		noOracle bool
		// noTable: the table's rows are not compared at all (its column n
		// is no longer written), only check runs.
		noTable bool
		// slow runs the generator at 600 events/s instead of 3000 (the
		// same events), so that windows are surely open at the update
		// however loaded the machine.
		slow bool
		// check, when set, checks the table (on a connection to its
		// database) after the new job finished; checkJob the new job.
		check    func(t *testing.T, conn *sql.DB)
		checkJob func(t *testing.T, s *Service, j *record.Job)
		// totalColumn is the column the oracle's total is in afterwards
		// (default total).
		totalColumn string
		// first, when set, changes the running version's pipeline.
		first func(string) string
	}{
		{name: "add a stateless step", filter: true, combine: "Sums"},
		{name: "rename with a mapping", combine: "Totals", mapping: `{"Sums": "Totals"}`},
		{name: "add a sink branch", combine: "Sums", mutate: func(y string) string {
			return y + "    - type: WriteToJson\n      name: AlsoJSON\n      input: Sums\n      config: {path: out/sums.jsonl}\n"
		}},
		// The kept outputs' accumulators carry on exactly (the oracle's
		// total and n); the appended one starts empty in the open windows
		// and covers what arrived after the update.
		{name: "append an output to the combine", combine: "Sums", warning: string(errcode.CombineOutputsChanged),
			mutate: func(y string) string {
				return strings.Replace(y, "n: {value: amount, fn: count}", "n: {value: amount, fn: count}\n          biggest: {value: amount, fn: max}", 1)
			},
			check: func(t *testing.T, conn *sql.DB) {
				var withMax, rows int
				if err := conn.QueryRow(`SELECT COUNT(biggest), COUNT(*) FROM totals`).Scan(&withMax, &rows); err != nil {
					t.Fatal(err)
				}
				if withMax == 0 || rows == 0 {
					t.Errorf("after appending max: %d of %d rows have it", withMax, rows)
				}
			}},
		// The outputs declared in another order, a new one inserted
		// first: the stored accumulators keep their slots (the running
		// version's order) and carry on exactly; the rows and the table
		// follow the new order.
		{name: "reorder the combine's outputs and insert one first", combine: "Sums", warning: string(errcode.CombineOutputsChanged),
			mutate: func(y string) string {
				return strings.Replace(y, "total: {value: amount, fn: sum}\n          n: {value: amount, fn: count}",
					"biggest: {value: amount, fn: max}\n          n: {value: amount, fn: count}\n          total: {value: amount, fn: sum}", 1)
			},
			check: func(t *testing.T, conn *sql.DB) {
				var withMax, rows int
				if err := conn.QueryRow(`SELECT COUNT(biggest), COUNT(*) FROM totals`).Scan(&withMax, &rows); err != nil {
					t.Fatal(err)
				}
				if withMax == 0 || rows == 0 {
					t.Errorf("after inserting max: %d of %d rows have it", withMax, rows)
				}
			}},
		// The same with the step renamed in the same update
		// (--transform-name-mapping): the slots are found under the
		// step's old name.
		{name: "rename with a mapping and reorder the outputs", combine: "Totals", mapping: `{"Sums": "Totals"}`, warning: string(errcode.CombineOutputsChanged),
			mutate: func(y string) string {
				return strings.Replace(y, "total: {value: amount, fn: sum}\n          n: {value: amount, fn: count}",
					"biggest: {value: amount, fn: max}\n          n: {value: amount, fn: count}\n          total: {value: amount, fn: sum}", 1)
			}},
		// An output removed from between two others: its slot is
		// retired, and the outputs after it keep their stored
		// accumulators (total and n equal the oracle's).
		{name: "remove an output from the middle of the combine", combine: "Sums", warning: string(errcode.CombineOutputsChanged),
			first: func(y string) string {
				return strings.Replace(y, "total: {value: amount, fn: sum}\n          n: {value: amount, fn: count}",
					"total: {value: amount, fn: sum}\n          biggest: {value: amount, fn: max}\n          n: {value: amount, fn: count}", 1)
			}},
		// Another aggregate in the place of a removed one (n's count
		// replaced by a max): n's slot is retired and biggest starts
		// afresh, and the table takes biggest as a new column beside n
		// (no rename: they aggregate different things). total carries on.
		{name: "replace an output with another aggregate", combine: "Sums", warning: string(errcode.CombineOutputsChanged), noTable: true,
			mutate: func(y string) string {
				return strings.Replace(y, "n: {value: amount, fn: count}", "biggest: {value: amount, fn: max}", 1)
			},
			check: func(t *testing.T, conn *sql.DB) {
				var withMax, withN, rows int
				if err := conn.QueryRow(`SELECT COUNT(biggest), COUNT(n), COUNT(*) FROM totals`).Scan(&withMax, &withN, &rows); err != nil {
					t.Fatal(err)
				}
				if withMax == 0 || rows == 0 {
					t.Errorf("after replacing n with max: %d of %d rows have it", withMax, rows)
				}
			}},
		// An init that fails (here for every key) leaves the appended
		// output empty in the windows open at the update, and each key and
		// window it failed for is one of the step's rejects, by reason,
		// and a dead letter naming the key and the window: the update
		// adopts the accumulators in memory and carries them over when it
		// first touches each, where no restore reports it.
		{name: "a migration init that fails is counted as rejects", combine: "Sums", warning: string(errcode.CombineOutputsChanged), slow: true,
			mutate: func(y string) string {
				y = strings.Replace(y, "n: {value: amount, fn: count}", "n: {value: amount, fn: count}\n          n2: {value: amount, fn: count}", 1)
				return strings.Replace(y, "      windowing: {type: fixed, size: 1h}\n", "      windowing: {type: fixed, size: 1h}\n      migrations:\n        accumulators:\n          n2: {init: \"n / 0\"}\n", 1)
			},
			checkJob: func(t *testing.T, s *Service, j *record.Job) {
				if j.Metrics == nil {
					t.Fatal("the new job has no metrics")
				}
				var dead int
				for _, ev := range eventsOf(t, s, j.ID, record.EventDeadLetter) {
					if ev.Details["step"] == "Sums" && ev.Details["reason"] == "migration_init_failed" {
						dead++
						if !strings.Contains(ev.Message, "the init of output n2 did not evaluate") {
							t.Errorf("dead letter %q: want it to name the output whose init failed", ev.Message)
						}
					}
				}
				if dead == 0 {
					t.Errorf("no dead letter of step Sums with reason migration_init_failed: %v", eventsOf(t, s, j.ID, record.EventDeadLetter))
				}
				for _, st := range j.Metrics.Steps {
					if st.Name == "Sums" {
						if n := st.RejectsByReason["migration_init_failed"]; n < 1 || st.Rejects < n {
							t.Errorf("Sums: %d rejects, by reason %v; want the failed inits among them", st.Rejects, st.RejectsByReason)
						}
						return
					}
				}
				t.Errorf("no metrics of step Sums: %+v", j.Metrics.Steps)
			}},
		// A declared migration initialises the appended count from the
		// stored one: n2 equals n in every row, open windows included.
		{name: "append an output initialised by a migration", combine: "Sums", warning: string(errcode.CombineOutputsChanged), slow: true,
			mutate: appendInit(`init: "n"`), check: n2EqualsN},
		// The same with the init in Python (language: python).
		{name: "append an output initialised by a Python migration", combine: "Sums", warning: string(errcode.CombineOutputsChanged), slow: true,
			mutate: appendInit(`init: "n if n > 0 else 0", language: python`), check: n2EqualsN},
		// A declared rename: the accumulator carries on under the new
		// name and the table's column is renamed in place, so every row
		// (those written before the update too) has the total under it.
		{name: "rename an output declared", combine: "Sums", slow: true, totalColumn: "amount_total",
			mutate: func(y string) string {
				y = strings.Replace(y, "total: {value: amount, fn: sum}", "amount_total: {value: amount, fn: sum}", 1)
				return strings.Replace(y, "      windowing: {type: fixed, size: 1h}\n", "      windowing: {type: fixed, size: 1h}\n      migrations:\n        accumulators:\n          amount_total: {renamed_from: total}\n", 1)
			},
			check: func(t *testing.T, conn *sql.DB) {
				var old int
				if err := conn.QueryRow(`SELECT COUNT(*) FROM pragma_table_info('totals') WHERE name = 'total'`).Scan(&old); err != nil || old != 0 {
					t.Errorf("the table still has the column total (%d, %v)", old, err)
				}
			}},
		// The same on a staged table: the new generation's staging
		// table has the new name, the first one keeps total and the view
		// serves it as amount_total (no copy, no rename under the old job).
		{name: "rename an output declared on a staged table", combine: "Sums", slow: true, totalColumn: "amount_total", first: staged,
			mutate: func(y string) string {
				y = strings.Replace(staged(y), "total: {value: amount, fn: sum}", "amount_total: {value: amount, fn: sum}", 1)
				return strings.Replace(y, "      windowing: {type: fixed, size: 1h}\n", "      windowing: {type: fixed, size: 1h}\n      migrations:\n        accumulators:\n          amount_total: {renamed_from: total}\n", 1)
			},
			check: func(t *testing.T, conn *sql.DB) {
				var old, renamed int
				if err := conn.QueryRow(`SELECT COUNT(*) FROM pragma_table_info('totals') WHERE name = 'total'`).Scan(&old); err != nil || old != 0 {
					t.Errorf("the view still serves the column total (%d, %v)", old, err)
				}
				if err := conn.QueryRow(`SELECT COUNT(*) FROM pragma_table_info('totals__staging_v1') WHERE name = 'total'`).Scan(&renamed); err != nil || renamed != 1 {
					t.Errorf("the first staging table lost its column total (%d, %v)", renamed, err)
				}
			}},
		// The summed field widens from int to float on a staged table: the
		// view serves the first staging table's ints beside the floats.
		{name: "widen the summed field to float on a staged table", combine: "Sums", slow: true, warning: string(errcode.CombineOutputWidened), first: staged,
			mutate: func(y string) string { return asFloat(staged(y)) }},
		// The summed field widens from int to float: the stored int
		// totals carry on (read as floats) and the table's column takes
		// floats in place; every total equals a run without an update.
		{name: "widen the summed field to float", combine: "Sums", slow: true, warning: string(errcode.CombineOutputWidened), mutate: asFloat},
		// The summed field narrows from float to int, declared
		// allow_lossy: the stored float totals carry on truncated (whole
		// here, so exact) and the float column takes the ints; every
		// total equals a run without an update.
		{name: "narrow the summed field to int with allow_lossy", combine: "Sums", slow: true, warning: string(errcode.CombineOutputNarrowed), first: asFloat,
			mutate: func(y string) string {
				return strings.Replace(y, "      windowing: {type: fixed, size: 1h}\n", "      windowing: {type: fixed, size: 1h}\n      migrations:\n        accumulators:\n          total: {allow_lossy: true}\n", 1)
			}},
		// The same on a staged table: the new staging table holds ints, and
		// the view serves the first one's floats truncated (whole here).
		{name: "narrow the summed field to int with allow_lossy on a staged table", combine: "Sums", slow: true, warning: string(errcode.CombineOutputNarrowed),
			first: func(y string) string { return staged(asFloat(y)) },
			mutate: func(y string) string {
				return strings.Replace(staged(y), "      windowing: {type: fixed, size: 1h}\n", "      windowing: {type: fixed, size: 1h}\n      migrations:\n        accumulators:\n          total: {allow_lossy: true}\n", 1)
			},
			check: func(t *testing.T, conn *sql.DB) {
				var floats int
				if err := conn.QueryRow(`SELECT COUNT(*) FROM totals WHERE typeof(total) <> 'integer'`).Scan(&floats); err != nil || floats != 0 {
					t.Errorf("the view serves %d totals that are not integers (%v)", floats, err)
				}
			}},
		// A latest output's value field becomes a string on a staged
		// table that declares the conversion: the stored ints carry on as
		// their text, the new staging table holds strings, and the view
		// serves the first one's ints as text.
		{name: "a latest output becomes a string on a staged table, declared convert", combine: "Sums", slow: true, warning: string(errcode.CombineOutputConverted),
			first: func(y string) string { return staged(withText("amount")(y)) },
			mutate: func(y string) string {
				y = strings.Replace(staged(withText("string(amount)")(y)), "merge_interval: 0}", "merge_interval: 0, convert: [last]}", 1)
				return y
			},
			check: func(t *testing.T, conn *sql.DB) {
				var bad, rows int
				if err := conn.QueryRow(`SELECT COUNT(*) FROM totals WHERE typeof(last) <> 'text' OR CAST(CAST(last AS INTEGER) AS TEXT) <> last`).Scan(&bad); err != nil {
					t.Fatal(err)
				}
				if err := conn.QueryRow(`SELECT COUNT(*) FROM totals`).Scan(&rows); err != nil {
					t.Fatal(err)
				}
				if bad != 0 || rows == 0 {
					t.Errorf("the view serves %d of %d rows' last not as an integer's text", bad, rows)
				}
			}},
		{name: "change the window size", combine: "Sums", warning: string(errcode.WindowParamsChanged), noOracle: true,
			mutate: func(y string) string {
				return strings.Replace(y, "{type: fixed, size: 1h}", "{type: fixed, size: 2h}", 1)
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			want := oracle(t, dir)
			db := filepath.Join(dir, "job.sqlite")
			s := openService(t, filepath.Join(dir, "data"))
			first := updatePipeline(db, false, "Sums", "")
			next := updatePipeline(db, tc.filter, tc.combine, "")
			if tc.slow {
				first = strings.Replace(first, "rate: 3000", "rate: 600", 1)
				next = strings.Replace(next, "rate: 3000", "rate: 600", 1)
			}
			if tc.first != nil {
				first = tc.first(first)
			}
			old := submit(t, s, "totals", first, dir)
			waitElements(t, s, old.ID, "Events", 1500)
			if tc.mutate != nil {
				next = tc.mutate(next)
			}
			res, err := s.Update(context.Background(), UpdateRequest{
				SubmitRequest: SubmitRequest{Name: "totals", Pipeline: next, BaseDir: dir},
				Mapping:       tc.mapping})
			if err != nil {
				t.Fatalf("update: %v (report %+v)", err, res)
			}
			if !res.Report.Compatible || res.Job == nil {
				t.Fatalf("update refused: %+v", res.Report)
			}
			if tc.warning != "" {
				found := false
				for _, w := range res.Report.Warnings {
					found = found || string(w.Code) == tc.warning
				}
				if !found {
					t.Errorf("report lacks the warning %s: %+v", tc.warning, res.Report.Warnings)
				}
			}
			nj := waitDone(t, s, res.Job.ID)
			if nj.State != record.StateDone || nj.Generation != 2 || nj.ReplacesJobID != old.ID {
				t.Fatalf("new job: state %s generation %d replaces %q", nj.State, nj.Generation, nj.ReplacesJobID)
			}
			o, err := s.Get(old.ID)
			if err != nil {
				t.Fatal(err)
			}
			if o.State != record.StateUpdated || o.ReplacedByJobID != nj.ID || o.PendingCommit {
				t.Fatalf("old job: state %s replaced by %q pending commit %v", o.State, o.ReplacedByJobID, o.PendingCommit)
			}
			if tc.noOracle && !tc.noTable {
				// Windows change from the swap on, but every element still
				// counts exactly once across the table.
				var n int64
				for _, row := range tableRows(t, db) {
					var c int64
					f := strings.Fields(row)
					fmt.Sscan(f[len(f)-1], &c)
					n += c
				}
				if n != 6000 {
					t.Errorf("the table counts %d elements, want 6000", n)
				}
			}
			col := tc.totalColumn
			if col == "" {
				col = "total"
			}
			if tc.noTable {
				// nothing to compare
			} else if got := tableRowsOf(t, db, col); !tc.noOracle && strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("after the update the table holds:\n%s\nwithout an update it holds:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if tc.check != nil {
				conn, err := sql.Open("sqlite", db)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				tc.check(t, conn)
			}
			if tc.checkJob != nil {
				tc.checkJob(t, s, nj)
			}
			jobs, _, err := s.History("totals")
			if err != nil || len(jobs) != 2 || jobs[0].ID != old.ID || jobs[1].ID != nj.ID {
				t.Fatalf("history: %v %v", jobs, err)
			}
		})
	}
}

func TestUpdateRefusedLeavesJobRunning(t *testing.T) {
	t.Parallel()
	swap := func(old, new string) func(string) string {
		return func(y string) string { return strings.Replace(y, old, new, 1) }
	}
	tests := []struct {
		name, combine, extra, mapping, code string
		mutate                              func(string) string
		// first, when set, changes the running version's pipeline.
		first func(string) string
		// wantFix is a part of the refusal's fix.
		wantFix string
	}{
		{name: "narrowed without allow_lossy", combine: "Sums", code: string(errcode.StateCoderChanged), first: asFloat,
			wantFix: "migrations: {accumulators: {total: {allow_lossy: true}}}"},
		{name: "rename without a mapping", combine: "Totals", code: string(errcode.StepMissing)},
		{name: "key changed", combine: "Sums", extra: ", ts", code: string(errcode.KeyCoderChanged)},
		{name: "accumulator changed", combine: "Sums", code: string(errcode.StateCoderChanged),
			mutate: swap("total: {value: amount, fn: sum}", "total: {value: amount, fn: max}")},
		{name: "window type changed", combine: "Sums", code: string(errcode.WindowFnChanged),
			mutate: swap("{type: fixed, size: 1h}", "{type: sliding, size: 1h, period: 30m}")},
		{name: "trigger changed", combine: "Sums", code: string(errcode.TriggerChanged),
			mutate: swap("{type: fixed, size: 1h}", "{type: fixed, size: 1h, accumulation_mode: accumulating, trigger: {type: after_watermark, early: {type: after_count, count: 100}}}")},
		{name: "accumulation mode changed", combine: "Sums", code: string(errcode.AccumulationChanged),
			mutate: swap("{type: fixed, size: 1h}", "{type: fixed, size: 1h, accumulation_mode: accumulating}")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			want := oracle(t, dir)
			db := filepath.Join(dir, "job.sqlite")
			s := openService(t, filepath.Join(dir, "data"))
			first := updatePipeline(db, false, "Sums", "")
			if tc.first != nil {
				first = tc.first(first)
			}
			old := submit(t, s, "totals", first, dir)
			waitElements(t, s, old.ID, "Events", 500)
			next := updatePipeline(db, false, tc.combine, tc.extra)
			if tc.mutate != nil {
				next = tc.mutate(next)
			}
			res, err := s.Update(context.Background(), UpdateRequest{
				SubmitRequest: SubmitRequest{Name: "totals", Pipeline: next, BaseDir: dir},
				Mapping:       tc.mapping})
			var se *Error
			if !errors.As(err, &se) || se.Code != errcode.IncompatibleUpdate {
				t.Fatalf("err = %v, want INCOMPATIBLE_UPDATE", err)
			}
			found := false
			for _, f := range res.Report.Errors {
				found = found || string(f.Code) == tc.code && (tc.wantFix == "" || strings.Contains(f.Fix, tc.wantFix))
			}
			if !found {
				t.Errorf("report lacks %s (with the fix %q): %+v", tc.code, tc.wantFix, res.Report.Errors)
			}
			// The running job is untouched and finishes with the full result.
			j := waitDone(t, s, old.ID)
			if j.State != record.StateDone || j.ReplacedByJobID != "" {
				t.Fatalf("old job: %s replaced by %q", j.State, j.ReplacedByJobID)
			}
			if got := tableRows(t, db); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("table:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			_, attempts, err := s.History("totals")
			if err != nil || len(attempts) != 1 || attempts[0].Report.Compatible {
				t.Errorf("refused attempt not recorded: %+v %v", attempts, err)
			}
		})
	}
}

func TestUpdateErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openService(t, filepath.Join(dir, "data"))
	db := filepath.Join(dir, "job.sqlite")
	req := UpdateRequest{SubmitRequest: SubmitRequest{Name: "nothing", Pipeline: updatePipeline(db, false, "Sums", ""), BaseDir: dir}}
	if _, err := s.Update(context.Background(), req); !hasCode(err, errcode.NoRunningJob) || !strings.Contains(err.Error(), "no running job named nothing") {
		t.Errorf("no job: %v", err)
	}
	old := submit(t, s, "totals", updatePipeline(db, false, "Sums", ""), dir)
	waitElements(t, s, old.ID, "Events", 100)
	req.Name = "totals"
	res, err := s.Update(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, s, res.Job.ID, record.StateDone)
	if _, err := s.Update(context.Background(), req); !hasCode(err, errcode.JobAlreadyUpdated) && !hasCode(err, errcode.NoRunningJob) {
		t.Errorf("update of a finished lineage: %v", err)
	}
	req.Mapping = `{"Sums": `
	if _, err := s.Update(context.Background(), req); !hasCode(err, errcode.InvalidMapping) {
		t.Errorf("bad mapping: %v", err)
	}
	// Validate-only reports without changing anything.
	j2 := submit(t, s, "other", updatePipeline(filepath.Join(dir, "o.sqlite"), false, "Sums", ""), dir)
	waitElements(t, s, j2.ID, "Events", 10)
	res, err = s.Update(context.Background(), UpdateRequest{SubmitRequest: SubmitRequest{Name: "other", Pipeline: updatePipeline(filepath.Join(dir, "o.sqlite"), true, "Sums", ""), BaseDir: dir}, ValidateOnly: true})
	if err != nil || !res.Report.Compatible || res.Job != nil {
		t.Fatalf("validate-only: %+v %v", res, err)
	}
	j, _ := s.Get("other")
	if j.ID != j2.ID || j.State.Terminal() && j.State != record.StateDone {
		t.Errorf("validate-only changed the job: %s %s", j.ID, j.State)
	}
	// The job goes on after the validate-only update: its next checkpoint
	// (or its end) is still its own.
	var epoch uint64
	if j.LastCheckpoint != nil {
		epoch = j.LastCheckpoint.Epoch
	}
	j = waitFor(t, s, j2.ID, "a checkpoint after the validate-only update", func(j *record.Job) bool {
		return j.State.Terminal() || j.LastCheckpoint != nil && j.LastCheckpoint.Epoch > epoch
	})
	if j.ReplacedByJobID != "" || j.State.Terminal() && j.State != record.StateDone {
		t.Errorf("validate-only changed the job: %s %s replaced by %q", j.ID, j.State, j.ReplacedByJobID)
	}
}

// waitDone waits until job ref is DONE and its final sink commit is
// confirmed (DONE is durable before the sinks commit its last epoch).
func waitDone(t *testing.T, s *Service, ref string) *record.Job {
	t.Helper()
	return waitFor(t, s, ref, "DONE and committed", func(j *record.Job) bool {
		return j.State == record.StateDone && !j.PendingCommit || j.State.Terminal() && j.State != record.StateDone
	})
}

func hasCode(err error, code errcode.Code) bool {
	var se *Error
	return errors.As(err, &se) && se.Code == code
}

// TestRescaleInFlight: a running job rescales from 1 to 3 workers and back
// to 2 (same job ID, no restart of the job); the result equals a run
// without rescaling.
func TestRescaleInFlight(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	want := oracle(t, dir)
	db := filepath.Join(dir, "job.sqlite")
	s := openService(t, filepath.Join(dir, "data"))
	j := submit(t, s, "totals", updatePipeline(db, false, "Sums", ""), dir)
	for i, n := range []int{3, 2} {
		waitElements(t, s, j.ID, "Events", int64(1200*(i+1)))
		got, err := s.UpdateOptions(context.Background(), "totals", record.JobOptions{NumWorkers: n})
		if err != nil {
			t.Fatalf("rescale to %d: %v", n, err)
		}
		if got.ID != j.ID || got.Options.NumWorkers != n || got.State != record.StateRunning {
			t.Fatalf("after rescale: %s %d %s", got.ID, got.Options.NumWorkers, got.State)
		}
	}
	done := waitDone(t, s, j.ID)
	if done.State != record.StateDone {
		t.Fatalf("job ended %s: %s", done.State, done.Error)
	}
	if got := tableRows(t, db); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("after rescaling the table holds:\n%s\nwithout:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := s.UpdateOptions(context.Background(), "totals", record.JobOptions{NumWorkers: 2}); !hasCode(err, errcode.JobTerminated) {
		t.Errorf("rescaling a finished job: %v", err)
	}
	if _, err := s.UpdateOptions(context.Background(), "totals", record.JobOptions{NumWorkers: 2, WorkerUtilizationHint: 0.95}); !hasCode(err, errcode.InvalidOptions) {
		t.Errorf("bad utilization hint: %v", err)
	}
}

// TestUpdateKeepsUnsetOptions: an in-place update and a rescale that give
// no value for an option keep the running job's (a job rescaled to 3
// workers is not reset to 1 by an update without --num-workers), and the
// result says what changed.
func TestUpdateKeepsUnsetOptions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "job.sqlite")
	s := openService(t, filepath.Join(dir, "data"))
	// A long stream, so that the job still runs for every update below.
	long := strings.Replace(updatePipeline(db, false, "Sums", ""), "count: 6000,", "count: 6000000,", 1)
	j := submit(t, s, "totals", long, dir)
	waitElements(t, s, j.ID, "Events", 600)
	got, err := s.UpdateOptions(context.Background(), "totals", record.JobOptions{NumWorkers: 3, MaxNumWorkers: 4, WorkerUtilizationHint: 0.5})
	if err != nil {
		t.Fatalf("rescale: %v", err)
	}
	// A rescale giving only the hint keeps the worker count and bound.
	if got, err = s.UpdateOptions(context.Background(), "totals", record.JobOptions{WorkerUtilizationHint: 0.6}); err != nil {
		t.Fatalf("hint only: %v", err)
	}
	if want := (record.JobOptions{NumWorkers: 3, MaxNumWorkers: 4, WorkerUtilizationHint: 0.6}); got.Options != want {
		t.Fatalf("after a hint-only change the options are %+v, want %+v", got.Options, want)
	}
	tests := []struct {
		name    string
		give    record.JobOptions
		want    record.JobOptions
		changed []record.OptionChange
	}{
		{"no options given", record.JobOptions{}, record.JobOptions{NumWorkers: 3, MaxNumWorkers: 4, WorkerUtilizationHint: 0.6}, nil},
		{"only the worker count", record.JobOptions{NumWorkers: 2}, record.JobOptions{NumWorkers: 2, MaxNumWorkers: 4, WorkerUtilizationHint: 0.6},
			[]record.OptionChange{{Option: "num_workers", From: "3", To: "2"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.Update(context.Background(), UpdateRequest{
				SubmitRequest: SubmitRequest{Name: "totals", Pipeline: long, BaseDir: dir, Options: tc.give}})
			if err != nil || res.Job == nil {
				t.Fatalf("update: %v (%+v)", err, res)
			}
			if res.Job.Options != tc.want || *res.Options != tc.want {
				t.Errorf("the new job's options are %+v (result %+v), want %+v", res.Job.Options, *res.Options, tc.want)
			}
			if !slices.Equal(res.OptionsChanged, tc.changed) {
				t.Errorf("options changed %+v, want %+v", res.OptionsChanged, tc.changed)
			}
		})
	}
	// Out of range on its own: refused before anything changes.
	if _, err := s.Update(context.Background(), UpdateRequest{
		SubmitRequest: SubmitRequest{Name: "totals", Pipeline: long, BaseDir: dir, Options: record.JobOptions{WorkerUtilizationHint: 2}}}); !hasCode(err, errcode.InvalidOptions) {
		t.Errorf("bad hint: %v, want %s", err, errcode.InvalidOptions)
	}
	// Given options are checked against the inherited bound too.
	if _, err := s.Update(context.Background(), UpdateRequest{
		SubmitRequest: SubmitRequest{Name: "totals", Pipeline: long, BaseDir: dir, Options: record.JobOptions{NumWorkers: 9}}}); !hasCode(err, errcode.InvalidOptions) {
		t.Errorf("9 workers over the kept max of 4: %v, want %s", err, errcode.InvalidOptions)
	}
	if _, err := s.Cancel(context.Background(), "totals"); err != nil {
		t.Fatal(err)
	}
}
