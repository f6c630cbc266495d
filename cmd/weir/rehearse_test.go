package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/cmd/weir/internal/rehearsecmd"
	"github.com/weir-dev/weir/diff"
	"github.com/weir-dev/weir/io/pubsub"
)

// rehearseReport is the part of `weir rehearse --format json` the tests read.
type rehearseReport struct {
	Verdict      string                   `json:"verdict"`
	Conservation []diff.Conservation      `json:"conservation"`
	Runs         []rehearsecmd.SandboxRun `json:"runs"`
	Report       diff.Report              `json:"report"`
}

func rehearseJSON(t *testing.T, r cliResult) rehearseReport {
	t.Helper()
	var rep rehearseReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("the report is not JSON (%v): %s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return rep
}

// classes returns every non-zero class count as "output class=n".
func classes(rep diff.Report) []string {
	var out []string
	for _, o := range rep.Outputs {
		for c, n := range o.Classes {
			if n != 0 {
				out = append(out, fmt.Sprintf("%s %s=%d", o.Output, c, n))
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestCLIRehearse rehearses the reference fixture and variants of it in
// sandboxes and checks the verdict, the exit code and exactly which
// differences are reported.
func TestCLIRehearse(t *testing.T) {
	td, err := filepath.Abs("testdata/rehearse")
	if err != nil {
		t.Fatal(err)
	}
	const w0 = "2026-03-01T00:00:00.000Z/2026-03-01T00:05:00.000Z"
	const w1 = "2026-03-01T00:05:00.000Z/2026-03-01T00:10:00.000Z"
	tests := []struct {
		name        string
		old, new    string
		events      string
		extra       []string
		wantCode    int
		wantClasses []string
		// wantWhere lists "class output key window" of every difference.
		wantWhere []string
	}{
		{name: "the fixture against itself", old: "fixture.yaml", new: "fixture.yaml", events: "fixture.jsonl", wantCode: ExitOK},
		{
			name: "a filter threshold reports exactly the keys and windows it affects",
			old:  "threshold_100.yaml", new: "threshold_200.yaml", events: "regions.jsonl", wantCode: ExitRehearsalDiffers,
			wantClasses: []string{"WriteTotals missing_in_new=2", "WriteTotals value_changed=1"},
			wantWhere: []string{
				`missing_in_new WriteTotals {"region":"NORTH"} ` + w1,
				`missing_in_new WriteTotals {"region":"WEST"} ` + w0,
				`value_changed WriteTotals {"region":"NORTH"} ` + w0,
			},
		},
		{
			name: "an accumulating late pane against a discarding one is a pane difference",
			old:  "fixture.yaml", new: "fixture_append_discarding.yaml", events: "fixture.jsonl", wantCode: ExitRehearsalDiffers,
			wantClasses: []string{"WriteTotals pane_accumulation_changed=1"},
			wantWhere:   []string{`pane_accumulation_changed WriteTotals {"region":"NORTH"} ` + w0},
		},
		{
			name: "an upsert sink shows 475 where an append sink's panes add up to 900",
			old:  "fixture.yaml", new: "fixture_append.yaml", events: "fixture.jsonl", wantCode: ExitRehearsalDiffers,
			wantClasses: []string{"WriteTotals visible_changed=1"},
			wantWhere:   []string{`visible_changed WriteTotals {"region":"NORTH"} ` + w0},
		},
		{
			name: "a pure rename with a mapping has no difference",
			old:  "fixture.yaml", new: "fixture_renamed.yaml", events: "fixture.jsonl", wantCode: ExitOK,
			extra: []string{"--transform-name-mapping", `{"RegionTotals":"TotalsByRegion","WriteTotals":"WriteRegionTotals"}`},
		},
		{
			name: "a rename without its mapping is every row missing and extra",
			old:  "fixture.yaml", new: "fixture_renamed.yaml", events: "fixture.jsonl", wantCode: ExitRehearsalDiffers,
			// The late element's reject names the renamed step, too.
			wantClasses: []string{"WriteLate value_changed=1", "WriteRegionTotals extra_in_new=2", "WriteRegionTotals late_path_changed=1",
				"WriteTotals late_path_changed=1", "WriteTotals missing_in_new=2"},
		},
		{name: "within budget, none listed", old: "threshold_100.yaml", new: "threshold_200.yaml", events: "regions.jsonl", extra: []string{"--budget", "3", "--max-details", "0"}, wantCode: ExitOK,
			wantClasses: []string{"WriteTotals missing_in_new=2", "WriteTotals value_changed=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"rehearse", filepath.Join(td, tt.old), filepath.Join(td, tt.new), "--events", filepath.Join(td, tt.events), "--format", "json", "--conserve", "amount=total"}, tt.extra...)
			r := runCLI(t, dir, args...)
			if r.code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			rep := rehearseJSON(t, r)
			if got := classes(rep.Report); !reflect.DeepEqual(got, tt.wantClasses) {
				t.Errorf("classes %q, want %q", got, tt.wantClasses)
			}
			if tt.wantWhere != nil {
				var got []string
				for _, d := range rep.Report.Differences {
					got = append(got, fmt.Sprintf("%s %s %s %s", d.Class, d.Output, d.Key, d.Window))
				}
				sort.Strings(got)
				if !reflect.DeepEqual(got, tt.wantWhere) {
					t.Errorf("differences:\n got %q\nwant %q", got, tt.wantWhere)
				}
			}
			if strings.Contains(strings.Join(tt.extra, " "), "--max-details 0") && (len(rep.Report.Differences) != 0 || rep.Report.Omitted != rep.Report.Total) {
				t.Errorf("--max-details 0 listed %d differences, omitted %d of %d", len(rep.Report.Differences), rep.Report.Omitted, rep.Report.Total)
			}
			if !rep.Report.NoiseChecked || rep.Report.TotalNoise != 0 {
				t.Errorf("noise checked %v, noise %d: want a checked, deterministic pipeline", rep.Report.NoiseChecked, rep.Report.TotalNoise)
			}
			if wantVerdict := map[bool]string{true: "identical", false: "different"}[tt.wantCode == ExitOK]; rep.Verdict != wantVerdict {
				t.Errorf("verdict %q, want %q", rep.Verdict, wantVerdict)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 0 {
				t.Errorf("the rehearsal wrote %v where its pipelines' sinks point", entries)
			}
		})
	}
}

// TestCLIRehearseReferenceFixtureReport checks the text report of the
// reference fixture: the summary, and the conservation the runbook asks
// for (input = accepted + rejected).
func TestCLIRehearseReferenceFixtureReport(t *testing.T) {
	td, err := filepath.Abs("testdata/rehearse")
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, t.TempDir(), "rehearse", filepath.Join(td, "fixture.yaml"), filepath.Join(td, "fixture_append_discarding.yaml"),
		"--events", filepath.Join(td, "fixture.jsonl"), "--conserve", "amount=total")
	if r.code != ExitRehearsalDiffers {
		t.Fatalf("exit %d, want %d\n%s%s", r.code, ExitRehearsalDiffers, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"noise: none (the old pipeline agrees with itself)",
		"old run: 5 elements in, 1 rejected, 4 rows out",
		"conservation (amount=total) old: input 605 = accepted 505 + rejected 100: balanced",
		"conservation (amount=total) new: input 605 = accepted 505 + rejected 100: balanced",
		"verdict: DIFFERENT (1 difference(s), budget 0)",
		`pane_accumulation_changed  WriteTotals  key {"region":"NORTH"}  window 2026-03-01T00:00:00.000Z/2026-03-01T00:05:00.000Z`,
		`old: pane 1 LATE {"total":475}`,
		`new: pane 1 LATE {"total":50}`,
		`visible: old {"total":475}, new {"total":475}`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the report lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestCLIRehearseCouldNotRun(t *testing.T) {
	td, err := filepath.Abs("testdata/rehearse")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bad := writeTestFile(t, dir, "bad.jsonl", `{"element": {"region": "NORTH"}}`+"\n")
	other := writeTestFile(t, dir, "other.jsonl", `{"element": {"region": "NORTH"}, "event_time": 0, "source": "Nope"}`+"\n")
	broken := writeTestFile(t, dir, "broken.yaml", "pipeline:\n  transforms:\n    - type: Nope\n")
	fixture := filepath.Join(td, "fixture.yaml")
	events := filepath.Join(td, "fixture.jsonl")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no recorded input", []string{fixture, fixture}, ExitUsage, "--events FILE, --since TIME, --from-subscription-snapshot NAME or --from-snapshot ID"},
		{"two recorded inputs", []string{fixture, fixture, "--events", events, "--since", "1h"}, ExitUsage, "(one of them)"},
		{"until without since", []string{fixture, fixture, "--events", events, "--until", "1h"}, ExitUsage, "--until needs --since"},
		{"bad since", []string{fixture, fixture, "--since", "yesterday"}, ExitUsage, "--since"},
		{"malformed events", []string{fixture, fixture, "--events", bad}, ExitRehearsalFailed, "bad.jsonl:1: an element needs its event_time"},
		{"events for another source", []string{fixture, fixture, "--events", other}, ExitRehearsalFailed, `source "Nope", which the pipeline does not have`},
		{"invalid new pipeline", []string{fixture, broken, "--events", events}, ExitInvalidPipeline, "broken.yaml:3"},
		{"bad mapping", []string{fixture, fixture, "--events", events, "--transform-name-mapping", "{"}, ExitUsage, "--transform-name-mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, dir, append([]string{"rehearse"}, tt.args...)...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d naming %q", r.code, r.stderr, tt.code, tt.want)
			}
		})
	}
}

// TestCLIRehearseTraceMemory rehearses a stretch of a few MB under a 1MiB
// --trace-memory: the trace spills to --trace-dir, and the comparison (the
// verdict, every difference, the runs' counts, the conservation) is
// exactly the in-memory run's; the report says how much spilled, and
// nothing is left in the spill directory or in $TMPDIR afterwards.
func TestCLIRehearseTraceMemory(t *testing.T) {
	t.Parallel()
	td, err := filepath.Abs("testdata/rehearse")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	// 16,000 transactions over two hours, each with 200 bytes of note:
	// about 4 MB encoded.
	var b strings.Builder
	regions := []string{"NORTH", "EAST", "SOUTH", "WEST"}
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	note := strings.Repeat("n", 200)
	const n = 16000
	for i := range n {
		ts := base.Add(time.Duration(i) * 450 * time.Millisecond).Format(time.RFC3339Nano)
		fmt.Fprintf(&b, `{"element": {"region": %q, "amount": %d, "ts": %q, "note": %q}, "event_time": %q}`+"\n", regions[i%len(regions)], (i*37)%300, ts, note, ts)
		if (i+1)%1000 == 0 {
			fmt.Fprintf(&b, `{"watermark": %q}`+"\n", ts)
		}
	}
	events := writeTestFile(t, work, "big.jsonl", b.String())
	type traceReport struct {
		Elements          int64  `json:"elements"`
		Bytes             int64  `json:"bytes"`
		MemoryBudgetBytes int64  `json:"memory_budget_bytes"`
		SpilledBytes      int64  `json:"spilled_bytes"`
		SpillDir          string `json:"spill_dir"`
	}
	// rehearse runs the rehearsal with $TMPDIR and --trace-dir of their
	// own, and checks both are empty afterwards.
	rehearse := func(t *testing.T, extra ...string) (cliResult, traceReport, rehearseReport, string) {
		t.Helper()
		tmp, spill := t.TempDir(), t.TempDir()
		args := append([]string{"rehearse", filepath.Join(td, "threshold_100.yaml"), filepath.Join(td, "threshold_200.yaml"), "--events", events,
			"--conserve", "amount=total", "--trace-dir", spill}, extra...)
		r := runCLIEnv(t, work, []string{"TMPDIR=" + tmp}, args...)
		if r.code != ExitRehearsalDiffers {
			t.Fatalf("weir %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, ExitRehearsalDiffers, r.stdout, r.stderr)
		}
		for _, d := range []string{tmp, spill} {
			if ents, err := os.ReadDir(d); err != nil || len(ents) != 0 {
				t.Errorf("the rehearsal left %v in %s (%v)", ents, d, err)
			}
		}
		if !slices.Contains(extra, "json") {
			return r, traceReport{}, rehearseReport{}, spill
		}
		var tr struct {
			Trace traceReport `json:"trace"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &tr); err != nil {
			t.Fatal(err)
		}
		return r, tr.Trace, rehearseJSON(t, r), spill
	}
	_, memTrace, memRep, _ := rehearse(t, "--format", "json")
	_, spillTrace, spillRep, spill := rehearse(t, "--format", "json", "--trace-memory", "1MiB")
	if memTrace.SpilledBytes != 0 || memTrace.MemoryBudgetBytes != 256<<20 || memTrace.Elements != n || memTrace.Bytes < 3<<20 {
		t.Errorf("in memory: trace %+v, want %d elements in over 3 MiB, nothing spilled under 256 MiB", memTrace, n)
	}
	if spillTrace.MemoryBudgetBytes != 1<<20 || spillTrace.SpillDir != spill || spillTrace.Bytes != memTrace.Bytes ||
		spillTrace.SpilledBytes < spillTrace.Bytes-2<<20 || spillTrace.SpilledBytes > spillTrace.Bytes {
		t.Errorf("under --trace-memory 1MiB: trace %+v, want the %d bytes but at most 2 MiB spilled to %s", spillTrace, memTrace.Bytes, spill)
	}
	if memRep.Report.Total == 0 || len(memRep.Conservation) != 2 {
		t.Fatalf("the in-memory rehearsal found %d differences and %d conservation checks; want some and 2", memRep.Report.Total, len(memRep.Conservation))
	}
	if !reflect.DeepEqual(spillRep, memRep) {
		t.Errorf("the spilled rehearsal's comparison differs from the in-memory one:\n got %+v\nwant %+v", spillRep, memRep)
	}
	r, _, _, spill := rehearse(t, "--trace-memory", "1MiB")
	want := fmt.Sprintf("recorded stretch: %s encoded, %s of it spilled to disk in %s beyond --trace-memory 1.0 MiB\n",
		cli.Bytes(spillTrace.Bytes), cli.Bytes(spillTrace.SpilledBytes), spill)
	if !strings.Contains(r.stdout, want) {
		t.Errorf("the text report lacks %q:\n%s", want, r.stdout)
	}
}

// TestCLIRehearseScratchInTraceDir: with --trace-dir, a rehearsal keeps
// all of its scratch there (the trace's spill, the sandboxes' captured
// rows and their directories), so it runs where $TMPDIR cannot be
// written; without --trace-dir it needs $TMPDIR.
func TestCLIRehearseScratchInTraceDir(t *testing.T) {
	t.Parallel()
	td, err := filepath.Abs("testdata/rehearse")
	if err != nil {
		t.Fatal(err)
	}
	work, spill := t.TempDir(), t.TempDir()
	noTmp := []string{"TMPDIR=" + filepath.Join(work, "no-such-dir")}
	args := []string{"rehearse", filepath.Join(td, "fixture.yaml"), filepath.Join(td, "fixture.yaml"), "--events", filepath.Join(td, "fixture.jsonl")}
	if r := runCLIEnv(t, work, noTmp, append(args, "--trace-dir", spill)...); r.code != ExitOK {
		t.Fatalf("with --trace-dir and no $TMPDIR: exit %d, want %d\nstdout: %s\nstderr: %s", r.code, ExitOK, r.stdout, r.stderr)
	}
	if ents, err := os.ReadDir(spill); err != nil || len(ents) != 0 {
		t.Errorf("the rehearsal left %v in --trace-dir (%v)", ents, err)
	}
	if r := runCLIEnv(t, work, noTmp, args...); r.code == ExitOK {
		t.Errorf("without --trace-dir and with no $TMPDIR the rehearsal succeeded; the test no longer shows where scratch goes")
	}
}

// TestCLIRehearseTraceFlagsRefused: a --trace-memory that is no byte
// size, negative or 0, and a --trace-dir that does not exist or is a
// file are usage errors naming the flag and the value, for weir rehearse
// and for weir server's --rehearse-trace-* alike (the server refuses them
// before it opens anything).
func TestCLIRehearseTraceFlagsRefused(t *testing.T) {
	td, err := filepath.Abs("testdata/rehearse")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := writeTestFile(t, dir, "file", "x")
	missing := filepath.Join(dir, "missing")
	rehearse := []string{"rehearse", filepath.Join(td, "fixture.yaml"), filepath.Join(td, "fixture.yaml"), "--events", filepath.Join(td, "fixture.jsonl")}
	server := []string{"server", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0"}
	var cases []cliCase
	for _, c := range []struct {
		what, flag, value string
		want              string
	}{
		{"a size that does not parse", "trace-memory", "lots", `"lots": not a size: "lots" (want a byte size such as 64MiB, 1GiB or 512MB)`},
		{"a size with an unknown unit", "trace-memory", "64MB/s", `"64MB/s": not a size`},
		{"a negative size", "trace-memory", "-64MiB", `"-64MiB": the budget must not be negative`},
		{"a zero size", "trace-memory", "0", `"0": the budget must be more than 0 bytes (the default is 256.0 MiB)`},
		{"a directory that does not exist", "trace-dir", missing, fmt.Sprintf("%q: directory %s does not exist", missing, missing)},
		{"a file for a directory", "trace-dir", file, fmt.Sprintf("%q: %s is not a directory", file, file)},
	} {
		for _, cmd := range []struct {
			name, prefix string
			args         []string
		}{{"rehearse", "--", rehearse}, {"server", "--rehearse-", server}} {
			flag := cmd.prefix + c.flag
			cases = append(cases, cliCase{name: cmd.name + " " + c.what, args: append(slices.Clone(cmd.args), flag+"="+c.value),
				wantCode: ExitUsage, wantStderr: []string{flag + " " + c.want}})
		}
	}
	runCases(t, dir, cases)
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("a server refused for its flags created its data directory: %v", err)
	}
}

// TestCLIServerRehearseTouchesNothing rehearses a change of a running job
// (OLD given by its name, its pipeline read from a real `weir server`)
// and checks that the job's sink table, every subscription (its
// acknowledgement floor, delivered and pending counts), the topics and
// the job records are byte-identical before and after.
func TestCLIServerRehearseTouchesNothing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir, work := t.TempDir(), t.TempDir()
	db := filepath.Join(work, "totals.db")
	pipeline := writeTestFile(t, work, "p.yaml", totalsPipeline("topic: orders", "", "", "", db))
	changed := writeTestFile(t, work, "p2.yaml", totalsPipeline("topic: orders", `    - type: Filter
      name: Large
      input: Orders
      config: {keep: amount > 100}
`, "Large", "", db))
	in := newCrashInput(t, work, 5)
	chunk := in.chunk(0, 1500, 0)
	srv := startServer(t, dir)
	id := srv.runOrdersJob(t, work, pipeline)
	sub := pubsub.SubscriptionName("orders", "Orders")
	srv.publish(t, work, chunk)
	waitCaughtUp(t, srv, id)
	// The recorded stretch: the published messages as an events file,
	// the watermark 1s behind the newest event time as the job's source
	// keeps it (max_out_of_orderness: 1s).
	events := eventsFromChunk(t, work, chunk)
	state := func() string {
		var b strings.Builder
		b.WriteString(sinkTable(t, db))
		for _, args := range [][]string{
			{"subscriptions", "list", "--format", "json"},
			{"topics", "list", "--format", "json"},
			{"jobs", "list", "--format", "json"},
		} {
			b.WriteString(srv.mustCLI(t, work, args...).stdout)
		}
		j := srv.describe(id)
		for _, k := range []string{"id", "name", "state", "generation", "pipeline", "graph", "replaced_by_job_id", "replacement"} {
			fmt.Fprintf(&b, "%s=%v\n", k, j[k])
		}
		return b.String()
	}
	before := state()
	if !strings.Contains(before, `"ack_floor"`) || !strings.Contains(before, "k1") {
		t.Fatalf("the state compared holds no subscription or no sink row:\n%s", before)
	}
	r := srv.cli(work, "rehearse", "orders", changed, "--events", events, "--format", "json")
	if r.code != ExitRehearsalDiffers {
		t.Fatalf("rehearse: exit %d, want %d (the filter drops amounts up to 100)\n%s\n%s", r.code, ExitRehearsalDiffers, r.stdout, r.stderr)
	}
	rep := rehearseJSON(t, r)
	if rep.Runs[0].Input != 1500 || rep.Report.Total == 0 {
		t.Errorf("the rehearsal fed %d elements and found %d differences; want 1500 and some", rep.Runs[0].Input, rep.Report.Total)
	}
	// The recorded stretch read from the job's topic itself (--since): the
	// job's own pipeline agrees with itself; the changed one does not.
	r = srv.cli(work, "rehearse", "orders", pipeline, "--since", "1h", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("rehearse the job against its own pipeline --since 1h: exit %d, want 0\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if rep := rehearseJSON(t, r); rep.Runs[0].Input != 1500 || rep.Runs[2].Rows == 0 {
		t.Errorf("--since fed %d elements and the new run wrote %d rows; want 1500 and some", rep.Runs[0].Input, rep.Runs[2].Rows)
	}
	r = srv.cli(work, "rehearse", "orders", changed, "--since", "1h", "--format", "json")
	if r.code != ExitRehearsalDiffers {
		t.Fatalf("rehearse the change --since 1h: exit %d, want %d\n%s\n%s", r.code, ExitRehearsalDiffers, r.stdout, r.stderr)
	}
	if after := state(); after != before {
		t.Fatalf("the rehearsal changed the server's state:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// A stretch from a subscription snapshot's position: only what came
	// after it.
	srv.mustCLI(t, work, "subscriptions", "snapshots", "create", "before-more", "--subscription", sub)
	srv.publish(t, work, in.chunk(1500, 1800, 150*time.Second))
	waitCaughtUp(t, srv, id)
	r = srv.cli(work, "rehearse", "orders", pipeline, "--from-subscription-snapshot", "before-more", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("rehearse --from-subscription-snapshot: exit %d, want 0\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if rep := rehearseJSON(t, r); rep.Runs[0].Input != 300 {
		t.Errorf("--from-subscription-snapshot fed %d elements, want the 300 published after the snapshot", rep.Runs[0].Input)
	}
	srv.stop(syscall.SIGTERM)
}

// eventsFromChunk turns a published chunk (JSON lines with ts) into an
// events file, with a watermark line 1s behind the newest event time
// every 100 messages and at the end.
func eventsFromChunk(t *testing.T, dir, chunk string) string {
	t.Helper()
	b, err := os.ReadFile(chunk)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var newest time.Time
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		ts, err := time.Parse(time.RFC3339Nano, m["ts"].(string))
		if err != nil {
			t.Fatal(err)
		}
		if ts.After(newest) {
			newest = ts
		}
		fmt.Fprintf(&out, `{"element": %s, "event_time": %q}`+"\n", line, m["ts"])
		if (i+1)%100 == 0 {
			fmt.Fprintf(&out, `{"watermark": %q}`+"\n", newest.Add(-time.Second).Format(time.RFC3339Nano))
		}
	}
	return writeTestFile(t, dir, "events.jsonl", out.String())
}

// sinkTable dumps the totals table of the SQLite file db, every column.
func sinkTable(t *testing.T, db string) string {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT * FROM totals ORDER BY 1, 2, 3`)
	if err != nil {
		t.Fatalf("reading the sink table: %v", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintln(&b, strings.Join(cols, "|"))
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&b, vals...)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestCLITest runs the reference fixture's tests: block with `weir test`,
// and the same block with 475 changed to 900, which must fail.
func TestCLITest(t *testing.T) {
	td, err := filepath.Abs("testdata/rehearse")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := runCLI(t, dir, "test", filepath.Join(td, "fixture_tests.yaml"))
	if r.code != ExitOK || !strings.Contains(r.stdout, "PASS  reference fixture") || !strings.Contains(r.stdout, "1 of 1 tests passed") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	src, err := os.ReadFile(filepath.Join(td, "fixture_tests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	wrong := writeTestFile(t, dir, "wrong.yaml", strings.Replace(string(src), "total: 475", "total: 900", 1))
	r = runCLI(t, dir, "test", wrong)
	if r.code != ExitFailure || !strings.Contains(r.stdout, "FAIL  reference fixture") || !strings.Contains(r.stdout, `"total":900`) {
		t.Fatalf("475 changed to 900: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("weir test wrote into the working directory: %v", entries)
	}
	r = runCLI(t, dir, "test", filepath.Join(td, "fixture.yaml"))
	if r.code != ExitFailure || !strings.Contains(r.stderr, "has no tests: section") {
		t.Errorf("a file without tests: exit %d, %s", r.code, r.stderr)
	}
}

// TestCLITestFixTests: Beam's mock_inputs and expected_outputs through
// `weir test`, and --fix-tests: the expectations that did not match are
// rewritten with what was received (the file's comments and other tests
// kept), the tests report FIXED and exit 0, and the fixed file passes.
// Without --fix-tests the file is left alone.
func TestCLITestFixTests(t *testing.T) {
	src, err := os.ReadFile("../../sandbox/testdata/taps_tests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := writeTestFile(t, dir, "good.yaml", string(src))
	if r := runCLI(t, dir, "test", good); r.code != ExitOK || !strings.Contains(r.stdout, "2 of 2 tests passed") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	broken := strings.Replace(string(src), "{region: NORTH, amount: 700, big: true}", "{region: NORTH, amount: 700, big: false}", 1)
	broken = strings.Replace(broken, "{region: NORTH, total: 425}", "{region: NORTH, total: 1}", 1)
	path := writeTestFile(t, dir, "broken.yaml", broken)
	r := runCLI(t, dir, "test", path)
	if r.code != ExitFailure || !strings.Contains(r.stdout, "FAIL  filter and tag") || !strings.Contains(r.stdout, "0 of 2 tests passed") {
		t.Fatalf("broken: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(path); string(b) != broken {
		t.Fatal("weir test without --fix-tests changed the file")
	}
	r = runCLI(t, dir, "test", path, "--fix-tests")
	if r.code != ExitOK || !strings.Contains(r.stdout, "FIXED  filter and tag") || !strings.Contains(r.stdout, "FIXED  totals of tagged rows") ||
		!strings.Contains(r.stdout, "rewrote 2 expectation(s)") {
		t.Fatalf("--fix-tests: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	fixed, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Beam YAML's mock_inputs and expected_outputs", "big: true", "total: 425", "total: 100", "{region: WEST, amount: 50}"} {
		if !strings.Contains(string(fixed), want) {
			t.Errorf("the fixed file lacks %q:\n%s", want, fixed)
		}
	}
	if r := runCLI(t, dir, "test", path); r.code != ExitOK || !strings.Contains(r.stdout, "2 of 2 tests passed") {
		t.Fatalf("the fixed file: exit %d\n%s%s\n%s", r.code, r.stdout, r.stderr, fixed)
	}
}
