package yamlpipe

import (
	"errors"
	"strings"
	"testing"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
	"github.com/weir-dev/weir/yamlpipe/combine"
)

// TestCombineMigrationsRefused: a migrations: block that names an output
// the Combine does not have, sets one whose function init cannot set, does
// not compile, or sits on another transform is refused at load with its
// position.
func TestCombineMigrationsRefused(t *testing.T) {
	base := "pipeline:\n  transforms:\n    - type: Create\n      name: O\n      config:\n        elements: [{k: a, amount: 1}]\n" +
		"    - type: Combine\n      input: O\n      config:\n        group_by: [k]\n        combine:\n          total: {value: amount, fn: sum}\n          avg: {value: amount, fn: mean}\n"
	for _, tt := range []struct{ migrations, want string }{
		{"      migrations:\n        accumulators:\n          nope: {init: \"total\"}\n", "p.yaml:16:11: migration of nope: the Combine has no output \"nope\" (its outputs: avg, total)"},
		{"      migrations:\n        accumulators:\n          avg: {init: \"total\"}\n", "init sets a sum, count, min or max output"},
		{"      migrations:\n        accumulators:\n          total: {init: \"total +\"}\n", "migration of total init"},
		{"      migrations:\n        accumulators:\n          total: {start: 1}\n", "start"},
		{"      migrations:\n        other: {}\n", "other"},
		{"      migrations: 3\n", "migrations must be a mapping"},
		{"      migrations:\n        accumulators:\n          total: {renamed_from: avg}\n", "p.yaml:16:33: migration of total: renamed_from \"avg\", but \"avg\" is still an output of this Combine"},
		{"      migrations:\n        accumulators:\n          total: {renamed_from: total}\n", "renamed_from needs the output's old name"},
		{"      migrations:\n        accumulators:\n          total: {renamed_from: sum, init: \"1\"}\n", "not both"},
		{"      migrations:\n        accumulators:\n          total: {renamed_from: sum}\n          avg: {renamed_from: sum}\n", "which total is already renamed from"},
		{"      migrations:\n        accumulators:\n          total: {renamed_from: [a]}\n", "renamed_from"},
		{"      migrations:\n        accumulators:\n          total: {allow_lossy: yes please}\n", "p.yaml:16:32: migration of total: allow_lossy must be true or false"},
		{"      migrations:\n        accumulators:\n          avg: {allow_lossy: true}\n", "allow_lossy lets an int sum, min, max or latest read the float accumulators"},
		{"      migrations:\n        accumulators:\n          total: {allow_lossy: true, init: \"1\"}\n", "an output with init is appended now"},
	} {
		loadErr(t, base+tt.migrations, tt.want)
	}
	loadErr(t, "pipeline:\n  transforms:\n    - type: Create\n      name: O\n      config:\n        elements: [{k: a}]\n"+
		"    - type: Filter\n      input: O\n      config:\n        keep: \"true\"\n      migrations:\n        accumulators: {}\n",
		"p.yaml:11:7: migrations: only a Combine declares state migrations")
}

// TestTopLevelMigrations declares a Combine's migrations at the top of the
// file, as a map and as a list: the step records them as if it had
// declared them itself (its graph config carries the rename).
func TestTopLevelMigrations(t *testing.T) {
	base := "pipeline:\n  transforms:\n    - type: Create\n      name: O\n      config:\n        elements: [{k: a, amount: 1}]\n" +
		"    - type: Combine\n      name: Totals\n      input: O\n      config:\n        group_by: [k]\n        combine:\n          amount_total: {value: amount, fn: sum}\n"
	for _, top := range []string{
		"migrations:\n  Totals:\n    accumulators:\n      amount_total: {renamed_from: total}\n",
		"migrations:\n  - step: Totals\n    accumulators:\n      amount_total: {renamed_from: total}\n",
	} {
		p, err := Load("p.yaml", []byte(base+top), Options{BaseDir: t.TempDir()})
		if err != nil {
			t.Fatalf("load:\n%s\n%v", top, err)
		}
		var cfg string
		for _, s := range p.Graph().Steps {
			if s.Name == "Totals" && s.Fn != nil {
				cfg = string(s.Fn.Config)
			}
		}
		if !strings.Contains(cfg, `"renamed_outputs":{"amount_total":"total"}`) {
			t.Errorf("%s: the step's config %s lacks the rename", top, cfg)
		}
	}
	for _, tt := range []struct{ top, want string }{
		{"migrations:\n  Nope:\n    accumulators: {}\n", "p.yaml:15:3: a top-level migration names step \"Nope\", which the pipeline does not have (its Combine steps: Totals)"},
		{"migrations:\n  O:\n    accumulators: {}\n", "a Create: only a Combine declares state migrations"},
		{"migrations:\n  - accumulators: {}\n", "needs step: NAME"},
		{"migrations:\n  - step: Totals\n    other: 1\n", "other"},
		{"migrations:\n  - step: Totals\n    accumulators:\n      amount_total: {renamed_from: total}\n  - step: Totals\n    accumulators: {}\n", "two top-level migrations"},
		{"migrations: 3\n", "the top-level migrations must map step names"},
		{"migrations:\n  Totals:\n    accumulators:\n      nope: {renamed_from: total}\n", "the Combine has no output \"nope\""},
	} {
		loadErr(t, base+tt.top, tt.want)
	}
	loadErr(t, base+"      migrations:\n        accumulators:\n          amount_total: {renamed_from: total}\n"+
		"migrations:\n  Totals:\n    accumulators: {}\n", "declares its migrations: on the step already")
}

// TestLossyMigrationRecorded: allow_lossy on an int output loads (alone
// or beside renamed_from), and the step's recorded config lists it, where
// the compatibility check reads it.
func TestLossyMigrationRecorded(t *testing.T) {
	base := "pipeline:\n  transforms:\n    - type: Create\n      name: O\n      config:\n        elements: [{k: a, amount: 1}]\n" +
		"    - type: Combine\n      name: Totals\n      input: O\n      config:\n        group_by: [k]\n        combine:\n          total: {value: amount, fn: sum}\n          top: {value: amount, fn: max}\n"
	for _, tt := range []struct{ migrations, want string }{
		{"      migrations:\n        accumulators:\n          total: {allow_lossy: true}\n          top: {allow_lossy: true}\n", `"lossy_outputs":["top","total"]`},
		{"      migrations:\n        accumulators:\n          total: {allow_lossy: true, renamed_from: sum}\n", `"lossy_outputs":["total"]`},
		{"      migrations:\n        accumulators:\n          total: {allow_lossy: false}\n", ""},
	} {
		p, err := Load("p.yaml", []byte(base+tt.migrations), Options{BaseDir: t.TempDir()})
		if err != nil {
			t.Fatalf("load:\n%s\n%v", tt.migrations, err)
		}
		var cfg string
		for _, s := range p.Graph().Steps {
			if s.Name == "Totals" && s.Fn != nil {
				cfg = string(s.Fn.Config)
			}
		}
		if tt.want == "" && strings.Contains(cfg, "lossy_outputs") || tt.want != "" && !strings.Contains(cfg, tt.want) {
			t.Errorf("%s: the step's config %s, want %q", tt.migrations, cfg, tt.want)
		}
	}
}

// TestMigrationInitFailureIsReported: an init that does not evaluate for a
// stored accumulator leaves its output empty and the others as stored,
// and DecodeState says so (a contract.PartialStateError with reason
// migration_init_failed naming the output), so that the runner sends the
// key and window to the dead-letter topic.
func TestMigrationInitFailureIsReported(t *testing.T) {
	enc := storedTotals(t, totalsAggregator(t, totalsHead))
	next := totalsAggregator(t, totalsHead+"          n_big: {value: amount, fn: count}\n"+
		"      migrations:\n        accumulators:\n          n_big: {init: \"n / (total - 4200)\"}\n")
	v, err := next.DecodeState(contract.AccumulatorCell, enc)
	var partial *contract.PartialStateError
	if !errors.As(err, &partial) || partial.Reason != combine.MigrationInitFailed || !strings.Contains(partial.Message, "the init of output n_big did not evaluate") {
		t.Fatalf("DecodeState: %v, want a PartialStateError naming n_big", err)
	}
	if out := totalsOut(next, 7, v); out != [3]any{int64(4200), int64(12), int64(0)} {
		t.Errorf("total, n, n_big %v: want the stored total and n kept, n_big empty", out)
	}
	if got := next.StateRejects(); got[combine.MigrationInitFailed] != 1 {
		t.Errorf("rejects %v, want 1 %s", got, combine.MigrationInitFailed)
	}
}

// TestAdoptedInitFailureIsTaken: an accumulator adopted in memory from
// the execution an update replaces (in the old shape) is carried over
// when first used; an init that does not evaluate then is held for the
// runner (TakeStateRejects), once, so that it reports the key and window
// as a restore does.
func TestAdoptedInitFailureIsTaken(t *testing.T) {
	old := totalsAggregator(t, totalsHead)
	next := totalsAggregator(t, totalsHead+"          n_big: {value: amount, fn: count}\n"+
		"      migrations:\n        accumulators:\n          n_big: {init: \"n / (total - 4200)\"}\n")
	adopted := totalsAcc(t, old, 7, 12, 350)
	untouched := old.NewAccumulator()
	if next.PendingStateRejects() {
		t.Fatal("rejects pending before any accumulator was carried over")
	}
	acc := next.Output(int64(7), adopted, window.Global, window.NoFiring) // the first use carries it over
	if acc == nil || !next.PendingStateRejects() {
		t.Fatalf("after carrying over an accumulator whose init fails: output %v, pending %v", acc, next.PendingStateRejects())
	}
	if got := next.TakeStateRejects(untouched); got != nil {
		t.Errorf("rejects of an accumulator never carried over: %v", got)
	}
	got := next.TakeStateRejects(adopted)
	if len(got) != 1 || got[0].Reason != combine.MigrationInitFailed || !strings.Contains(got[0].Message, "the init of output n_big did not evaluate") {
		t.Fatalf("TakeStateRejects: %+v, want one migration_init_failed naming n_big", got)
	}
	if next.PendingStateRejects() || next.TakeStateRejects(adopted) != nil {
		t.Error("a taken reject is still pending")
	}
	if out := totalsOut(next, 7, adopted); out != [3]any{int64(4200), int64(12), int64(0)} {
		t.Errorf("total, n, n_big %v: want the adopted total and n kept, n_big empty", out)
	}
	if got := next.StateRejects(); got[combine.MigrationInitFailed] != 1 {
		t.Errorf("rejects %v, want 1 %s", got, combine.MigrationInitFailed)
	}
	// A checkpoint's encoding is a use too: an adopted accumulator that no
	// element or firing touched carries over there, and its failure waits
	// to be taken (the runner takes it before the checkpoint commits).
	encoded := totalsAcc(t, old, 8, 1, 4200)
	if _, err := next.EncodeState(contract.AccumulatorCell, encoded); err != nil {
		t.Fatal(err)
	}
	if got := next.TakeStateRejects(encoded); len(got) != 1 || got[0].Reason != combine.MigrationInitFailed {
		t.Fatalf("after encoding an adopted accumulator whose init fails: %+v, want one %s", got, combine.MigrationInitFailed)
	}
}

// TestPythonMigrationInit: an init written in Python (language: python)
// sets the appended output from the stored ones, as a CEL init does; one
// that fails for a key is reported as a CEL init's failure is (the key's
// output starts empty, reason migration_init_failed); a Python init that
// does not compile, or another language, is refused at load.
func TestPythonMigrationInit(t *testing.T) {
	withInit := func(init string) string {
		return totalsHead + "          n_big: {value: amount, fn: count}\n" +
			"      migrations:\n        accumulators:\n          n_big: {init: " + init + ", language: python}\n"
	}
	enc := storedTotals(t, totalsAggregator(t, totalsHead)) // key 7: 12 elements of 350, total 4200
	for _, c := range []struct {
		init   string
		want   any
		failed bool
	}{
		{`"n * 2 if total > 4000 else 0"`, int64(24), false},
		{`"n // 4"`, int64(3), false},
		{`"float(n)"`, int64(12), false}, // a whole float for an int output
		{`"n / (total - 4200)"`, int64(0), true},
		{`"n / 5"`, int64(0), true}, // 2.4: not a whole number
	} {
		next := totalsAggregator(t, withInit(c.init))
		v, err := next.DecodeState(contract.AccumulatorCell, enc)
		var partial *contract.PartialStateError
		if c.failed != errors.As(err, &partial) || err != nil && (partial == nil || partial.Reason != combine.MigrationInitFailed) {
			t.Errorf("init %s: DecodeState: %v, want failed %v", c.init, err, c.failed)
			continue
		}
		if out := totalsOut(next, 7, v); out != [3]any{int64(4200), int64(12), c.want} {
			t.Errorf("init %s: total, n, n_big %v, want 4200, 12, %v", c.init, out, c.want)
		}
	}
	// The graph records the output as initialised, as for a CEL init (the
	// compatibility check then says it starts from its init).
	p, err := Load("p.yaml", []byte(withInit(`"n"`)), Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range p.Graph().Steps {
		if st.Name == "Totals" && (st.Fn == nil || !strings.Contains(string(st.Fn.Config), `"initialized_outputs":["n_big"]`)) {
			t.Errorf("the graph's Totals config does not record n_big's init: %s", st.Fn.Config)
		}
	}
	loadErr(t, withInit(`"n +"`), "p.yaml:18:29: migration of n_big init: python")
	loadErr(t, strings.Replace(withInit(`"n"`), "language: python", "language: java", 1), `language "java" is not supported: an init is CEL`)
	loadErr(t, totalsHead+"      migrations:\n        accumulators:\n          total: {renamed_from: sum, language: python}\n", "give init: EXPR beside it")
}

// TestAdoptedCompactAccumulatorCarriesOverOnce: an accumulator adopted in
// the old shape is held without a header (a pointer to its slots), so it
// cannot grow where it is; used by a pane's output, then by an element,
// then by a checkpoint, its appended output's init is evaluated once and
// its failure taken once, and the element adds to the carried-over form.
func TestAdoptedCompactAccumulatorCarriesOverOnce(t *testing.T) {
	old := totalsAggregator(t, totalsHead)
	next := totalsAggregator(t, totalsHead+"          n_big: {value: amount, fn: count}\n"+
		"      migrations:\n        accumulators:\n          n_big: {init: \"n / (total - 4200)\"}\n")
	adopted := totalsAcc(t, old, 7, 12, 350)
	totalsOut(next, 7, adopted) // a firing: carried over, its init fails
	in := row.MustSchema(row.Field{Name: "k", Type: row.Of(row.KindInt)}, row.Field{Name: "amount", Type: row.Of(row.KindInt)})
	held, err := next.AddInputErr(adopted, &contract.Element{Value: &row.Row{Schema: in, Values: []any{int64(7), int64(50)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := next.EncodeState(contract.AccumulatorCell, adopted); err != nil { // a checkpoint of the old form
		t.Fatal(err)
	}
	if got := next.StateRejects(); got[combine.MigrationInitFailed] != 1 {
		t.Errorf("rejects %v, want the init's failure counted once", got)
	}
	if got := next.TakeStateRejects(held); len(got) != 1 {
		t.Fatalf("TakeStateRejects of the form the runner holds: %+v, want one", got)
	}
	if next.PendingStateRejects() || next.TakeStateRejects(adopted) != nil {
		t.Error("a taken reject is still pending under the old form")
	}
	if out := totalsOut(next, 7, held); out != [3]any{int64(4250), int64(13), int64(1)} {
		t.Errorf("total, n, n_big %v: want the element added to the carried-over accumulator", out)
	}
	if out := totalsOut(next, 7, adopted); out != [3]any{int64(4250), int64(13), int64(1)} {
		t.Errorf("the old form reads %v: want what the runner holds", out)
	}
}
