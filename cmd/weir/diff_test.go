package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/cmd/weir/internal/diffcmd"
	"github.com/weir-dev/weir/diff"
)

// diffJSON decodes `weir diff --format json`.
func diffJSON(t *testing.T, r cliResult) diffcmd.Report {
	t.Helper()
	var rep diffcmd.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("the report is not JSON (%v): %s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return rep
}

func writeDiffFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The seed fixture's outputs: NORTH 250 + 175 and WEST 100 in one window,
// UNKNOWN 50 rejected.
const (
	fixtureWindow = `"window_start":"2026-03-01T10:00:00.000Z","window_end":"2026-03-01T10:05:00.000Z"`
	fixtureOld    = `{"region":"NORTH","total":425,` + fixtureWindow + "}\n" + `{"region":"WEST","total":100,` + fixtureWindow + "}\n"
	// The wrong replacement attributes WEST to NORTH: the same grand total.
	fixtureWrong   = `{"region":"NORTH","total":525,` + fixtureWindow + "}\n"
	fixtureRejects = `{"element":{"region":"UNKNOWN","amount":50},"error":{"reason":"known_region","step":"ValidateRegion","message":"region in known is false"},"source":{"source":"in.jsonl","offset":4}}` + "\n"
	// The same element rejected for another reason.
	fixtureRejectsOther = `{"element":{"region":"UNKNOWN","amount":50},"error":{"reason":"positive_amount","step":"ValidateRegion"}}` + "\n"
)

// TestCLIDiffFixture compares the seed fixture's outputs with itself, with
// a replacement that attributes WEST to NORTH, with a changed reject
// reason and with a run that does not conserve the amounts.
func TestCLIDiffFixture(t *testing.T) {
	dir := t.TempDir()
	old := writeDiffFile(t, dir, "old/totals.jsonl", fixtureOld)
	same := writeDiffFile(t, dir, "same/totals.jsonl", fixtureOld)
	wrong := writeDiffFile(t, dir, "wrong/totals.jsonl", fixtureWrong)
	rej := writeDiffFile(t, dir, "old/rejects.jsonl", fixtureRejects)
	rejSame := writeDiffFile(t, dir, "same/rejects.jsonl", fixtureRejects)
	rejOther := writeDiffFile(t, dir, "other/rejects.jsonl", fixtureRejectsOther)
	rejNone := writeDiffFile(t, dir, "none/rejects.jsonl", "")
	tests := []struct {
		name          string
		new, rejNew   string
		input         string
		wantCode      int
		wantKeyTotals []diff.KeyTotal
		wantClasses   []string
		wantBalanced  []bool
		wantRejects   []diffcmd.RejectCount
		wantText      []string
	}{
		{
			name: "identical, conserved", new: same, rejNew: rejSame, input: "575", wantCode: ExitOK,
			wantBalanced: []bool{true, true}, wantRejects: []diffcmd.RejectCount{{Reason: "known_region", Old: 1, New: 1}},
			wantText: []string{
				"grand totals: old total 525; new total 525: equal",
				"per-key totals: every key agrees",
				"conservation (amount=total) old: input 575 = accepted 525 + rejected 50: balanced",
				"conservation (amount=total) new: input 575 = accepted 525 + rejected 50: balanced",
				"verdict: IDENTICAL (0 difference(s), budget 0)",
			},
		},
		{
			name: "WEST attributed to NORTH: equal grand totals, per-key differences", new: wrong, rejNew: rejSame, input: "575", wantCode: ExitRehearsalDiffers,
			wantKeyTotals: []diff.KeyTotal{
				{Output: "output", Key: `{"region":"NORTH"}`, Old: map[string]float64{"total": 425}, New: map[string]float64{"total": 525}, Fields: []string{"total"}},
				{Output: "output", Key: `{"region":"WEST"}`, Old: map[string]float64{"total": 100}, Fields: []string{"total"}},
			},
			wantClasses:  []string{"output missing_in_new=1", "output value_changed=1"},
			wantBalanced: []bool{true, true}, wantRejects: []diffcmd.RejectCount{{Reason: "known_region", Old: 1, New: 1}},
			wantText: []string{
				"grand totals: old total 525; new total 525: equal",
				"per-key totals: 2 key(s) differ although the grand totals agree",
				`key {"region":"NORTH"}: total 425 -> total 525`,
				`key {"region":"WEST"}: total 100 -> missing`,
				"verdict: DIFFERENT (2 difference(s), budget 0)",
			},
		},
		{
			name: "a changed reject reason", new: same, rejNew: rejOther, input: "575", wantCode: ExitRehearsalDiffers,
			wantClasses:  []string{"rejects reject_reason_changed=1"},
			wantBalanced: []bool{true, true},
			wantRejects:  []diffcmd.RejectCount{{Reason: "known_region", Old: 1, New: 0}, {Reason: "positive_amount", Old: 0, New: 1}},
			wantText:     []string{"known_region: old 1, new 0  (differs)", "positive_amount: old 0, new 1  (differs)", "reject_reason_changed  rejects"},
		},
		{
			name: "the new run loses its reject: 575 is not 525 + 0", new: same, rejNew: rejNone, input: "575", wantCode: ExitRehearsalDiffers,
			wantClasses:  []string{"rejects missing_in_new=1"},
			wantBalanced: []bool{true, false}, wantRejects: []diffcmd.RejectCount{{Reason: "known_region", Old: 1, New: 0}},
			wantText: []string{"conservation (amount=total) new: input 575 = accepted 525 + rejected 0: NOT balanced"},
		},
		{
			name: "identical rows, but the input was larger than both runs account for", new: same, rejNew: rejSame, input: "600", wantCode: ExitRehearsalDiffers,
			wantBalanced: []bool{false, false}, wantRejects: []diffcmd.RejectCount{{Reason: "known_region", Old: 1, New: 1}},
			wantText: []string{"input 600 = accepted 525 + rejected 50: NOT balanced", "verdict: DIFFERENT (0 difference(s), budget 0)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"diff", old, tt.new, "--key", "region", "--rejects-old", rej, "--rejects-new", tt.rejNew,
				"--conserve", "amount=total", "--input-count", tt.input}
			r := runCLI(t, dir, append(args, "--format", "json")...)
			if r.code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			rep := diffJSON(t, r)
			if !rep.GrandTotalsEqual || rep.GrandTotals.Old["total"] != 525 {
				t.Errorf("grand totals %+v, want 525 on both sides", rep.GrandTotals)
			}
			if !reflect.DeepEqual(rep.Report.KeyTotals, tt.wantKeyTotals) {
				t.Errorf("per-key totals %+v\nwant %+v", rep.Report.KeyTotals, tt.wantKeyTotals)
			}
			if got := classes(*rep.Report); !reflect.DeepEqual(got, tt.wantClasses) {
				t.Errorf("classes %v, want %v", got, tt.wantClasses)
			}
			var balanced []bool
			for _, c := range rep.Conservation {
				balanced = append(balanced, c.Balanced)
				if c.Accepted != 525 || c.Input != mustFloat(t, tt.input) {
					t.Errorf("conservation %+v: want input %s, accepted 525", c, tt.input)
				}
			}
			if !reflect.DeepEqual(balanced, tt.wantBalanced) {
				t.Errorf("balanced %v, want %v (%+v)", balanced, tt.wantBalanced, rep.Conservation)
			}
			if !reflect.DeepEqual(rep.Rejects, tt.wantRejects) {
				t.Errorf("rejects %+v, want %+v", rep.Rejects, tt.wantRejects)
			}
			text := runCLI(t, dir, args...)
			if text.code != tt.wantCode {
				t.Fatalf("text: exit %d, want %d", text.code, tt.wantCode)
			}
			for _, w := range tt.wantText {
				if !strings.Contains(text.stdout, w) {
					t.Errorf("the report lacks %q:\n%s", w, text.stdout)
				}
			}
		})
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	var f float64
	if _, err := fmt.Sscan(s, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestCLIDiffLarge compares 50,000 rows that differ in 3, a JSON lines
// file against a CSV file, with room for 5,000 rows in memory: both sides
// are sorted on disk, and exactly the 3 differences are reported.
func TestCLIDiffLarge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n = 50_000
	var js, csv strings.Builder
	csv.WriteString("id,bucket,amount\n")
	changed := map[int]bool{7: true, 25_000: true, 49_999: true}
	for i := 0; i < n; i++ {
		// Written in an order that is not the key order.
		id := (i * 7919) % n
		fmt.Fprintf(&js, `{"id":%d,"bucket":"b%d","amount":%d}`+"\n", id, id%10, id*3)
		amount := id * 3
		if changed[id] {
			amount++
		}
		fmt.Fprintf(&csv, "%d,b%d,%d\n", id, id%10, amount)
	}
	old := writeDiffFile(t, dir, "old.jsonl", js.String())
	new := writeDiffFile(t, dir, "new.csv", csv.String())
	r := runCLI(t, dir, "diff", old, new, "--key", "id", "--memory-rows", "5000", "--max-details", "10", "--format", "json")
	if r.code != ExitRehearsalDiffers {
		t.Fatalf("exit %d, want %d\nstderr: %s", r.code, ExitRehearsalDiffers, r.stderr)
	}
	rep := diffJSON(t, r)
	if rep.SortedRuns[0] < 2 || rep.SortedRuns[1] < 2 {
		t.Errorf("sorted runs %v: both sides should have been sorted on disk", rep.SortedRuns)
	}
	var keys []string
	for _, d := range rep.Report.Differences {
		if d.Class != diff.ValueChanged {
			t.Errorf("difference %+v: want value_changed", d)
		}
		keys = append(keys, d.Key)
	}
	want := []string{`{"id":25000}`, `{"id":49999}`, `{"id":7}`}
	if rep.Report.Total != 3 || !reflect.DeepEqual(keys, want) {
		t.Fatalf("%d difference(s) at %v, want 3 at %v", rep.Report.Total, keys, want)
	}
	if o := rep.Report.Output("output"); o == nil || o.RowsOld != n || o.RowsNew != n || o.KeyTotals.Differing != 3 {
		t.Fatalf("output summary %+v", o)
	}
}

// TestCLIDiffUsage: bad specifiers and missing keys are usage errors (2)
// naming the problem; an output that cannot be read is 8.
func TestCLIDiffUsage(t *testing.T) {
	dir := t.TempDir()
	old := writeDiffFile(t, dir, "old.jsonl", fixtureOld)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{name: "a bad specifier", args: []string{old, "new.xml", "--key", "region"}, wantCode: ExitUsage, wantErr: `output "new.xml": cannot tell the format`},
		{name: "files need a key", args: []string{old, old}, wantCode: ExitUsage, wantErr: "give --key"},
		{name: "rejects come in pairs", args: []string{old, old, "--key", "region", "--rejects-old", old}, wantCode: ExitUsage, wantErr: "--rejects-new"},
		{name: "a missing file", args: []string{old, filepath.Join(dir, "none.jsonl"), "--key", "region"}, wantCode: ExitRehearsalFailed, wantErr: "none.jsonl"},
		{name: "a table that does not exist", args: []string{"sqlite:" + writeDiffFile(t, dir, "empty.db", "") + "#totals", old}, wantCode: ExitRehearsalFailed, wantErr: "the database has no table or view totals"},
		{name: "a key field the rows lack", args: []string{old, old, "--key", "country"}, wantCode: ExitRehearsalFailed, wantErr: `old.jsonl, row 1: the record has no key field "country"`},
		{name: "a line that is not JSON", args: []string{old, writeDiffFile(t, dir, "bad.jsonl", fixtureOld+"{oops\n"), "--key", "region"}, wantCode: ExitRehearsalFailed, wantErr: "bad.jsonl:3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, dir, append([]string{"diff"}, tt.args...)...)
			if r.code != tt.wantCode || !strings.Contains(r.stderr, tt.wantErr) {
				t.Fatalf("exit %d, want %d, with %q in stderr:\n%s", r.code, tt.wantCode, tt.wantErr, r.stderr)
			}
		})
	}
}

// diffPipeline is the seed fixture's pipeline: totals per region and
// five-minute window into a SQL table (key region) and a Parquet export,
// unknown regions rejected to a JSON lines file.
const diffPipeline = `pipeline:
  transforms:
    - type: ReadFromJson
      name: ReadTransactions
      config:
        path: in.jsonl
        schema: {region: string, amount: int, ts: timestamp}
        timestamp_field: ts
    - type: Create
      name: KnownRegions
      config:
        elements: [{region: NORTH}, {region: WEST}]
    - type: Validate
      name: ValidateRegion
      input: ReadTransactions
      config:
        side_inputs: {known: KnownRegions}
        side_input_key: region
        rules:
          known_region: region in known
      error_handling:
        output: invalid
    - type: Combine
      name: RegionTotals
      input: ValidateRegion
      windowing: {type: fixed, size: 5m}
      config:
        group_by: region
        combine:
          total: {value: amount, fn: sum}
    - type: WriteToSql
      name: WriteTotals
      input: RegionTotals
      config: {driver: %s, dsn: %q, table: %s, key: [region]}
    - type: WriteToParquet
      name: WriteExport
      input: RegionTotals
      config: {path: out/totals.parquet}
    - type: WriteToAvro
      name: WriteAvroExport
      input: RegionTotals
      config: {path: out/totals.avro}
    - type: WriteToJson
      name: WriteRejects
      input: ValidateRegion.invalid
      config: {path: out/rejects.jsonl}
`

// The fixture's input, and the wrong replacement's view of it (WEST's
// transaction attributed to NORTH).
const (
	diffInput = `{"region": "NORTH", "amount": 250, "ts": "2026-03-01T10:01:00Z"}
{"region": "NORTH", "amount": 175, "ts": "2026-03-01T10:03:00Z"}
{"region": "WEST", "amount": 100, "ts": "2026-03-01T10:04:10Z"}
{"region": "UNKNOWN", "amount": 50, "ts": "2026-03-01T10:04:30Z"}
`
	diffInputWrong = `{"region": "NORTH", "amount": 250, "ts": "2026-03-01T10:01:00Z"}
{"region": "NORTH", "amount": 175, "ts": "2026-03-01T10:03:00Z"}
{"region": "NORTH", "amount": 100, "ts": "2026-03-01T10:04:10Z"}
{"region": "UNKNOWN", "amount": 50, "ts": "2026-03-01T10:04:30Z"}
`
)

// runDiffPipeline runs the fixture pipeline over input in a directory of
// its own and returns the directory.
func runDiffPipeline(t *testing.T, input, driver, dsn, table string) string {
	t.Helper()
	dir := t.TempDir()
	writeDiffFile(t, dir, "in.jsonl", input)
	p := writeDiffFile(t, dir, "p.yaml", fmt.Sprintf(diffPipeline, driver, dsn, table))
	if r := runCLI(t, dir, "run", p); r.code != 0 {
		t.Fatalf("weir run: exit %d\n%s", r.code, r.stderr)
	}
	return dir
}

// TestCLIDiffSQLTables runs the fixture pipeline and the wrong
// replacement into real SQLite (and, when reachable, PostgreSQL) tables
// written by weir's SQL sink, and compares them without --key (the sink's
// declared key), and against the run's Parquet export.
func TestCLIDiffSQLTables(t *testing.T) {
	old := runDiffPipeline(t, diffInput, "sqlite", "out.db", "region_totals")
	wrong := runDiffPipeline(t, diffInputWrong, "sqlite", "out.db", "region_totals")
	oldTable := "sqlite:" + filepath.Join(old, "out.db") + "#region_totals"
	wrongTable := "sqlite:" + filepath.Join(wrong, "out.db") + "#region_totals"
	conserve := func(dirOld, dirNew string) []string {
		return []string{"--rejects-old", filepath.Join(dirOld, "out/rejects.jsonl"), "--rejects-new", filepath.Join(dirNew, "out/rejects.jsonl"),
			"--conserve", "amount=total", "--input-count", "575", "--format", "json"}
	}
	conserveInput := func(dirOld, dirNew, input string) []string {
		return []string{"--rejects-old", filepath.Join(dirOld, "out/rejects.jsonl"), "--rejects-new", filepath.Join(dirNew, "out/rejects.jsonl"),
			"--conserve", "amount=total", "--input", input, "--format", "json"}
	}
	type tc struct {
		name          string
		old, new      string
		extra         []string
		wantCode      int
		wantKeyTotals int
		wantInput     float64 // what --input read, when given
	}
	tests := []tc{
		{name: "the table against the run's Parquet export", old: oldTable, new: filepath.Join(old, "out/totals.parquet"), extra: conserve(old, old), wantCode: ExitOK},
		{name: "the run's Avro export against its Parquet export", old: filepath.Join(old, "out/totals.avro"), new: filepath.Join(old, "out/totals.parquet"),
			extra: []string{"--key", "region", "--format", "json"}, wantCode: ExitOK},
		{name: "a directory of part files against the table", old: partsDir(t), new: oldTable, extra: []string{"--key", "region", "--format", "json"}, wantCode: ExitOK},
		{name: "a glob against the wrong replacement", old: filepath.Join(partsDir(t), "part-*.jsonl"), new: wrongTable, extra: []string{"--key", "region", "--format", "json"},
			wantCode: ExitRehearsalDiffers, wantKeyTotals: 2},
		{name: "the wrong replacement's table", old: oldTable, new: wrongTable, extra: conserve(old, wrong), wantCode: ExitRehearsalDiffers, wantKeyTotals: 2},
		{name: "the input counted from its file", old: oldTable, new: filepath.Join(old, "out/totals.parquet"),
			extra: conserveInput(old, old, filepath.Join(old, "in.jsonl")), wantCode: ExitOK, wantInput: 575},
		{name: "a JSON export of the old system against the table", old: writeDiffFile(t, t.TempDir(), "export.jsonl", fixtureOld), new: oldTable,
			extra: []string{"--key", "region", "--format", "json"}, wantCode: ExitOK},
	}
	if dsn := postgresDSN(t); dsn != "" {
		table := fmt.Sprintf("diff_test_totals_%d", os.Getpid())
		dropPostgresTable(t, dsn, table)
		pg := runDiffPipeline(t, diffInput, "postgres", dsn, table)
		tests = append(tests,
			tc{name: "PostgreSQL against SQLite", old: dsn + "#" + table, new: oldTable, extra: conserve(pg, old), wantCode: ExitOK},
			tc{name: "PostgreSQL against the wrong replacement", old: dsn + "#" + table, new: wrongTable, extra: conserve(pg, wrong), wantCode: ExitRehearsalDiffers, wantKeyTotals: 2})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, old, append([]string{"diff", tt.old, tt.new}, tt.extra...)...)
			if r.code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			rep := diffJSON(t, r)
			if !reflect.DeepEqual(rep.Key, []string{"region"}) {
				t.Errorf("key %v, want [region]", rep.Key)
			}
			if rep.Report.KeyTotalsDiffering != int64(tt.wantKeyTotals) || !rep.GrandTotalsEqual {
				t.Errorf("per-key totals differing %d (want %d), grand totals %+v", rep.Report.KeyTotalsDiffering, tt.wantKeyTotals, rep.GrandTotals)
			}
			for _, c := range rep.Conservation {
				if !c.Balanced || c.Accepted != 525 || c.Rejected != 50 {
					t.Errorf("conservation %+v, want 575 = 525 + 50", c)
				}
			}
			if tt.wantInput != 0 && (rep.Input == nil || rep.Input.Sum != tt.wantInput || len(rep.Conservation) != 2) {
				t.Errorf("--input read %+v (conservation %+v), want a sum of %v on both sides", rep.Input, rep.Conservation, tt.wantInput)
			}
		})
	}
	// An input that is not what the runs read (a row short): conservation
	// fails on both sides, whatever the outputs say.
	short := writeDiffFile(t, t.TempDir(), "short.jsonl", strings.Join(strings.SplitAfter(diffInput, "\n")[:3], ""))
	r := runCLI(t, old, append([]string{"diff", oldTable, filepath.Join(old, "out/totals.parquet")}, conserveInput(old, old, short)...)...)
	if r.code != ExitRehearsalDiffers || !strings.Contains(r.stderr, "conservation does not hold") {
		t.Fatalf("a short input: exit %d, want %d\n%s", r.code, ExitRehearsalDiffers, r.stderr)
	}
	if rep := diffJSON(t, r); rep.Input == nil || rep.Input.Rows != 3 || rep.Input.Sum != 525 || len(rep.Conservation) != 2 || rep.Conservation[0].Balanced || rep.Conservation[1].Balanced {
		t.Errorf("a short input: read %+v, conservation %+v; want 3 rows, 525, unbalanced on both sides", rep.Input, rep.Conservation)
	}
}

// postgresDSN returns the test database (WEIR_TEST_POSTGRES_DSN, else the
// CI one), or "" when it does not answer.
func postgresDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("WEIR_TEST_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Logf("PostgreSQL left out: %v", err)
		return ""
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Logf("PostgreSQL is not reachable at %s (set WEIR_TEST_POSTGRES_DSN), left out: %v", dsn, err)
		return ""
	}
	return dsn
}

// dropPostgresTable drops table and its sink progress now and after the
// test.
func dropPostgresTable(t *testing.T, dsn, table string) {
	t.Helper()
	nowAndAfter(t, dsn, func(db *sql.DB) {
		if _, err := db.Exec(`DROP TABLE IF EXISTS ` + diffcmd.QuoteIdent(table)); err != nil {
			t.Error(err)
		}
		db.Exec(`DELETE FROM weir_sink_progress WHERE sink_id LIKE $1`, "%"+table+"%") // absent before the first run
	})
}

// nowAndAfter runs fn on the PostgreSQL database dsn now and when the test
// ends (a clean-up).
func nowAndAfter(t *testing.T, dsn string, fn func(db *sql.DB)) {
	t.Helper()
	run := func() {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Error(err)
			return
		}
		defer db.Close()
		fn(db)
	}
	run()
	t.Cleanup(run)
}

// partsDir returns a directory holding the fixture's output as two part
// files and an owner file, as a file sink's job leaves them.
func partsDir(t *testing.T) string {
	dir := t.TempDir()
	lines := strings.SplitAfter(fixtureOld, "\n")
	writeDiffFile(t, dir, "part-g0001-e00000001-w00.jsonl", lines[0])
	writeDiffFile(t, dir, "part-g0001-e00000001-w01.jsonl", lines[1])
	writeDiffFile(t, dir, ".part.jsonl.weir", `{"job_name":"totals"}`)
	return dir
}

// TestCLIDiffAppendRows: several rows of one key (an append table, the
// transactions themselves) add up to the key's total; the rows differ
// from a single total row, the per-key total does not.
func TestCLIDiffAppendRows(t *testing.T) {
	dir := t.TempDir()
	old := writeDiffFile(t, dir, "old.jsonl", `{"region":"NORTH","amount":250}`+"\n"+`{"region":"NORTH","amount":175}`+"\n"+`{"region":"WEST","amount":100}`+"\n")
	new := writeDiffFile(t, dir, "new.csv", "region,amount\nWEST,100\nNORTH,425\n")
	r := runCLI(t, dir, "diff", old, new, "--key", "region", "--value", "amount", "--input-count", "525", "--format", "json")
	if r.code != ExitRehearsalDiffers {
		t.Fatalf("exit %d, want %d\n%s", r.code, ExitRehearsalDiffers, r.stderr)
	}
	rep := diffJSON(t, r)
	if got := classes(*rep.Report); !reflect.DeepEqual(got, []string{"output missing_in_new=1", "output value_changed=1"}) {
		t.Errorf("classes %v", got)
	}
	if rep.Report.KeyTotalsDiffering != 0 || !rep.GrandTotalsEqual {
		t.Errorf("per-key totals %+v, grand totals %+v: want equal", rep.Report.KeyTotals, rep.GrandTotals)
	}
	for _, c := range rep.Conservation {
		if !c.Balanced || c.Accepted != 525 {
			t.Errorf("conservation %+v, want 525 = 525 + 0", c)
		}
	}
}

// TestCLIDiffPartition: --partition compares one partition of a published
// target (its rows whose weir_partition is P) against a staged output of
// that partition; without it the other partitions' rows are extra; the
// weir_partition column is never a compared value; --partition on outputs
// without the column is a usage error.
func TestCLIDiffPartition(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "target.db")
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE totals (region TEXT, total INTEGER, weir_partition TEXT)`,
		`INSERT INTO totals VALUES ('NORTH', 425, '2026-12-01'), ('WEST', 100, '2026-12-01'), ('NORTH', 90, '2026-12-02')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	target := "sqlite:" + dbPath + "#totals"
	staged := writeDiffFile(t, dir, "staged.jsonl", `{"region":"NORTH","total":425}
{"region":"WEST","total":100}
`)
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"one partition", []string{"--partition", "2026-12-01"}, ExitOK},
		{"every partition", nil, ExitRehearsalDiffers},
		{"another partition", []string{"--partition", "2026-12-02"}, ExitRehearsalDiffers},
	} {
		r := runCLI(t, dir, append([]string{"diff", target, staged, "--key", "region"}, tc.args...)...)
		if r.code != tc.want {
			t.Errorf("%s: exit %d, want %d\n%s%s", tc.name, r.code, tc.want, r.stdout, r.stderr)
		}
	}
	r := runCLI(t, dir, "diff", staged, staged, "--key", "region", "--partition", "2026-12-01")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "weir_partition") {
		t.Errorf("--partition without the column: exit %d\n%s", r.code, r.stderr)
	}
}
