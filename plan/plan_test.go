package plan_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/plan"
	"github.com/weir-dev/weir/yamlpipe"
)

// base is the running job of the cases: orders from a subscription,
// enriched, summed per region in 5-minute windows into a SQL table, and
// passed through to a JSON file.
const base = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: ReadOrders
      config:
        topic: orders
        schema: {order_id: string, region: string, amount: int, ts: timestamp}
        timestamp_field: ts
    - type: MapToFields
      name: Project
      input: ReadOrders
      config:
        fields: {region: region, amount: amount}
    - type: Combine
      name: RegionTotals
      input: Project
      windowing: {type: fixed, size: 5m}
      config:
        group_by: [region]
        combine:
          total: {value: amount, fn: sum}
    - type: MapToFields
      name: Shape
      input: RegionTotals
      config:
        fields: {region: region, total: total}
    - type: WriteToSql
      name: WriteTotals
      input: Shape
      config: {table: region_totals, key: [region]}
`

func load(t *testing.T, text string) *graph.Pipeline {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	job := &yamlpipe.JobEnv{Name: "plan-test", ID: "t", Generation: 1, DataDir: dir, Broker: (*pubsub.Broker)(nil)}
	p, err := yamlpipe.LoadFile(path, yamlpipe.Options{BaseDir: dir, Job: job, GraphOnly: true})
	if err != nil {
		t.Fatalf("loading:\n%s\n%v", text, err)
	}
	return p.Graph()
}

func TestPlan(t *testing.T) {
	rewindOff := false
	tests := []struct {
		name    string
		newText string
		oldText string // base when empty
		opts    plan.Options
		check   func(t *testing.T, p plan.Plan)
	}{
		{
			name:    "unchanged",
			newText: base,
			opts:    plan.Options{Keys: map[string]int64{"RegionTotals": 42}, KeysFrom: "metrics"},
			check: func(t *testing.T, p plan.Plan) {
				wantCompatible(t, p, true)
				st := step(t, p, "RegionTotals")
				if st.Action != plan.Kept || st.Keys == nil || *st.Keys != 42 || st.State != "by region: total=sum(amount)" {
					t.Errorf("step = %+v", st)
				}
				if s := sink(t, p, "WriteTotals"); s.Action != plan.Kept || len(s.Columns) != 0 || s.Key.Old != "region" || s.Mode.Old != "upsert" {
					t.Errorf("sink = %+v", s)
				}
				if src := p.Sources[0]; src.Action != plan.Kept || !strings.Contains(src.Position, "continues at the running job's read position") {
					t.Errorf("source = %+v", src)
				}
			},
		},
		{
			name:    "rename through the mapping",
			newText: strings.ReplaceAll(base, "RegionTotals", "TotalsByRegion"),
			opts:    plan.Options{Check: compat.Options{Mapping: compat.Mapping{"RegionTotals": "TotalsByRegion"}}},
			check: func(t *testing.T, p plan.Plan) {
				wantCompatible(t, p, true)
				if st := step(t, p, "RegionTotals"); st.Action != plan.Renamed || st.New != "TotalsByRegion" {
					t.Errorf("step = %+v", st)
				}
				if len(p.Steps) != 1 {
					t.Errorf("steps = %+v, want only the renamed one", p.Steps)
				}
			},
		},
		{
			name:    "renamed without a mapping is refused, the new step starts empty",
			newText: strings.ReplaceAll(base, "RegionTotals", "TotalsByRegion"),
			check: func(t *testing.T, p plan.Plan) {
				wantCompatible(t, p, false)
				if st := step(t, p, "RegionTotals"); st.Action != plan.Refused || !strings.Contains(st.Detail, "STEP_MISSING") || !strings.Contains(st.Detail, "--transform-name-mapping") {
					t.Errorf("step = %+v", st)
				}
				if st := step(t, p, "TotalsByRegion"); st.Action != plan.Added {
					t.Errorf("step = %+v", st)
				}
			},
		},
		{
			name:    "state dropped on purpose",
			newText: base,
			opts:    plan.Options{Check: compat.Options{Mapping: compat.Mapping{"RegionTotals": ""}}},
			check: func(t *testing.T, p plan.Plan) {
				if st := step(t, p, "RegionTotals"); st.Action != plan.Dropped || !strings.Contains(st.Detail, "dropped on purpose") {
					t.Errorf("step = %+v", st)
				}
			},
		},
		{
			name:    "an added column, a removed one",
			newText: strings.Replace(base, "fields: {region: region, total: total}", "fields: {region: region, n: total + 1}", 1),
			check: func(t *testing.T, p plan.Plan) {
				wantCompatible(t, p, true)
				s := sink(t, p, "WriteTotals")
				if s.Action != plan.Refused || len(s.Columns) != 2 {
					t.Fatalf("sink = %+v", s)
				}
				// The sink takes the pair for an undeclared rename and refuses it.
				if c := s.Columns[0]; c.Name != "n" || c.Action != plan.Refused || c.NewType != "int" || !strings.Contains(c.Effect, "rename of total") || !strings.Contains(c.Effect, "renamed_from: total") {
					t.Errorf("column = %+v", c)
				}
				if c := s.Columns[1]; c.Name != "total" || c.Action != plan.Removed || c.OldType != "int" {
					t.Errorf("column = %+v", c)
				}
			},
		},
		{
			name: "a staged table takes a new column beside a removed one for a rename",
			newText: strings.Replace(strings.Replace(base, "fields: {region: region, total: total}", "fields: {region: region, sum: total}", 1),
				"config: {table: region_totals, key: [region]}", "config: {table: region_totals, key: [region], layout: staged}", 1),
			check: func(t *testing.T, p plan.Plan) {
				s := sink(t, p, "WriteTotals")
				if s.Action != plan.Refused || s.Layout.Old != "table" || s.Layout.New != "staged" || len(s.Columns) != 2 {
					t.Fatalf("sink = %+v", s)
				}
				if c := s.Columns[0]; c.Name != "sum" || c.Action != plan.Refused || !strings.Contains(c.Effect, "rename of total") {
					t.Errorf("column = %+v", c)
				}
			},
		},
		{
			name:    "a type conversion is refused by the table",
			newText: strings.Replace(base, "fields: {region: region, total: total}", "fields: {region: region, total: string(total)}", 1),
			check: func(t *testing.T, p plan.Plan) {
				s := sink(t, p, "WriteTotals")
				if s.Action != plan.Refused || len(s.Columns) != 1 {
					t.Fatalf("sink = %+v", s)
				}
				if c := s.Columns[0]; c.Action != plan.Refused || c.OldType != "int" || c.NewType != "string" || !strings.Contains(c.Effect, "layout: staged") || !strings.Contains(c.Effect, "convert: [total]") {
					t.Errorf("column = %+v", c)
				}
			},
		},
		{
			name:    "a staged table converts a column where the sink declares it",
			oldText: strings.Replace(base, "config: {table: region_totals, key: [region]}", "config: {table: region_totals, key: [region], layout: staged}", 1),
			newText: strings.Replace(strings.Replace(base, "fields: {region: region, total: total}", "fields: {region: region, total: string(total)}", 1),
				"config: {table: region_totals, key: [region]}", "config: {table: region_totals, key: [region], layout: staged, convert: [total]}", 1),
			check: func(t *testing.T, p plan.Plan) {
				s := sink(t, p, "WriteTotals")
				if s.Action != plan.Changed || len(s.Columns) != 1 {
					t.Fatalf("sink = %+v", s)
				}
				if c := s.Columns[0]; c.Action != plan.Converted || c.OldType != "int" || c.NewType != "string" || !strings.Contains(c.Effect, "declared (convert)") {
					t.Errorf("column = %+v", c)
				}
			},
		},
		{
			name: "a staged table refuses an undeclared or a lossy conversion without leave",
			oldText: strings.Replace(strings.Replace(base, "fields: {region: region, total: total}", "fields: {region: region, total: string(total)}", 1),
				"config: {table: region_totals, key: [region]}", "config: {table: region_totals, key: [region], layout: staged}", 1),
			newText: strings.Replace(base, "config: {table: region_totals, key: [region]}", "config: {table: region_totals, key: [region], layout: staged, convert: [total]}", 1),
			check: func(t *testing.T, p plan.Plan) {
				s := sink(t, p, "WriteTotals")
				if s.Action != plan.Refused || len(s.Columns) != 1 {
					t.Fatalf("sink = %+v", s)
				}
				if c := s.Columns[0]; c.Action != plan.Refused || c.OldType != "string" || c.NewType != "int" || !strings.Contains(c.Effect, "convert: {total: {allow_lossy: true}}") {
					t.Errorf("column = %+v", c)
				}
			},
		},
		{
			name:    "re-keying the table is refused",
			newText: strings.Replace(base, "config: {table: region_totals, key: [region]}", "config: {table: region_totals, key: [region, total]}", 1),
			check: func(t *testing.T, p plan.Plan) {
				s := sink(t, p, "WriteTotals")
				if s.Action != plan.Refused || s.Key.Old != "region" || s.Key.New != "region,total" || !strings.Contains(s.Detail, "write to a new table") {
					t.Errorf("sink = %+v", s)
				}
			},
		},
		{
			name:    "stop-and-replace without rewind continues from the acknowledged position",
			newText: base,
			opts:    plan.Options{Strategy: plan.StopAndReplace, Rewind: &rewindOff},
			check: func(t *testing.T, p plan.Plan) {
				if src := p.Sources[0]; !strings.Contains(src.Position, "weir_replace_rewind=false") {
					t.Errorf("source = %+v", src)
				}
			},
		},
		{
			name:    "a replacement re-reads the open windows' input by default",
			newText: base,
			opts:    plan.Options{Strategy: plan.Parallel},
			check: func(t *testing.T, p plan.Plan) {
				if src := p.Sources[0]; !strings.Contains(src.Position, "re-reads retained input") {
					t.Errorf("source = %+v", src)
				}
				if s := sink(t, p, "WriteTotals"); !strings.Contains(s.Detail, "façade view") {
					t.Errorf("sink = %+v", s)
				}
			},
		},
		{
			name: "a source that reads something else, a new sink",
			newText: strings.Replace(base, "topic: orders", "topic: orders-v2", 1) + `    - type: WriteToJson
      name: WriteCopy
      input: Shape
      config: {path: out/copy.jsonl}
`,
			opts: plan.Options{Check: compat.Options{AllowSourceChange: true}},
			check: func(t *testing.T, p plan.Plan) {
				if src := p.Sources[0]; src.Action != plan.Changed || !strings.Contains(src.Position, "orders-v2") {
					t.Errorf("source = %+v", src)
				}
				if s := sink(t, p, "WriteCopy"); s.Action != plan.Added {
					t.Errorf("sink = %+v", s)
				}
			},
		},
	}
	old := load(t, base)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := old
			if tc.oldText != "" {
				o = load(t, tc.oldText)
			}
			p := plan.Make(o, load(t, tc.newText), tc.opts)
			tc.check(t, p)
			var b bytes.Buffer
			if err := p.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), "state:") || !strings.Contains(b.String(), "sinks:") || !strings.Contains(b.String(), "sources:") {
				t.Errorf("text:\n%s", b.String())
			}
		})
	}
}

func wantCompatible(t *testing.T, p plan.Plan, want bool) {
	t.Helper()
	if p.Compatible != want {
		t.Fatalf("compatible = %v, want %v: %+v", p.Compatible, want, p.Check.Errors)
	}
}

func step(t *testing.T, p plan.Plan, name string) plan.Step {
	t.Helper()
	for _, s := range p.Steps {
		if s.Old == name || s.Old == "" && s.New == name {
			return s
		}
	}
	t.Fatalf("no step %s in %+v", name, p.Steps)
	return plan.Step{}
}

func sink(t *testing.T, p plan.Plan, name string) plan.Sink {
	t.Helper()
	for _, s := range p.Sinks {
		if s.Old == name || s.New == name {
			return s
		}
	}
	t.Fatalf("no sink %s in %+v", name, p.Sinks)
	return plan.Sink{}
}

// TestPlanDeclaredRename plans a Combine output renamed in place with
// renamed_from: the state carries on, the SQL sink reading the Combine
// renames its column in place, and a staged table or a parallel
// replacement's façade renames it behind its view.
func TestPlanDeclaredRename(t *testing.T) {
	direct := directBase()
	renamed := strings.Replace(strings.Replace(direct, "total: {value: amount, fn: sum}", "amount_total: {value: amount, fn: sum}", 1),
		"      config:\n        group_by: [region]\n", "      migrations: {accumulators: {amount_total: {renamed_from: total}}}\n      config:\n        group_by: [region]\n", 1)
	for _, tc := range []struct {
		strategy plan.Strategy
		staged   bool
		action   plan.Action
		effect   string
	}{
		{plan.InPlace, false, plan.Renamed, "rows written before the update keep their values under amount_total"},
		{plan.Parallel, false, plan.Renamed, "renamed from total behind the façade"},
		{plan.Parallel, true, plan.Renamed, "the view and the merges read it as amount_total"},
		{plan.InPlace, true, plan.Renamed, "the principal is renamed in place"},
	} {
		oldText, newText := direct, renamed
		if tc.staged {
			oldText, newText = stagedCfg(direct), stagedCfg(renamed)
		}
		p := plan.Make(load(t, oldText), load(t, newText), plan.Options{Strategy: tc.strategy})
		wantCompatible(t, p, true)
		if len(p.Check.Warnings) != 0 {
			t.Errorf("%s: warnings %+v, want none for a declared rename", tc.strategy, p.Check.Warnings)
		}
		if st := step(t, p, "RegionTotals"); st.Action != plan.Migrated || !strings.Contains(st.Detail, "amount_total from total") {
			t.Errorf("%s: step = %+v, want migrated naming the rename", tc.strategy, st)
		}
		s := sink(t, p, "WriteTotals")
		var got *plan.Column
		for i := range s.Columns {
			if s.Columns[i].Name == "amount_total" {
				got = &s.Columns[i]
			}
			if s.Columns[i].Name == "total" {
				t.Errorf("%s: total listed as %+v, want it only as amount_total's old name", tc.strategy, s.Columns[i])
			}
		}
		if got == nil || got.Action != tc.action || got.From != "total" || !strings.Contains(got.Effect, tc.effect) {
			t.Errorf("%s: column amount_total = %+v, want %s from total (%q)", tc.strategy, got, tc.action, tc.effect)
		}
	}
}

// TestPlanGoMigrations: a Go SDK step whose accumulator or state cell
// changed type with a declared migration is planned as migrated, with the
// check's warning.
func TestPlanGoMigrations(t *testing.T) {
	build := func(next bool) *graph.Pipeline {
		p := weir.NewPipeline()
		s := p.Root()
		in := weir.Create(s, "In", []weir.KV[string, int64]{{Key: "a", Value: 1}})
		fn := func(c *weir.StateContext[string, int64], v int64) error { return nil }
		if !next {
			weir.CombinePerKey(s, "Totals", in, weir.Sum[int64]())
			weir.StatefulParDo(s, "Last", in, weir.StatefulFn[string, int64, int64]{State: []weir.StateDecl{weir.ValueState[int64]{ID: "v"}}, Process: fn})
		} else {
			weir.CombinePerKey(s, "Totals", in, weir.Mean[int64](), weir.MigrateAccumulator(func(n int64) (weir.MeanAcc, error) { return weir.MeanAcc{Sum: float64(n), Count: 1}, nil }))
			weir.StatefulParDo(s, "Last", in, weir.StatefulFn[string, int64, int64]{State: []weir.StateDecl{weir.ValueState[float64]{ID: "v"}}, Process: fn},
				weir.MigrateState("v", func(n int64) (float64, error) { return float64(n), nil }))
		}
		if err := p.Err(); err != nil {
			t.Fatal(err)
		}
		return p.Graph()
	}
	p := plan.Make(build(false), build(true), plan.Options{Strategy: plan.InPlace})
	wantCompatible(t, p, true)
	for name, code := range map[string]string{"Totals": "ACCUMULATOR_MIGRATED", "Last": "STATE_MIGRATED"} {
		if st := step(t, p, name); st.Action != plan.Migrated || !strings.Contains(st.Detail, code) {
			t.Errorf("%s: %+v, want migrated with %s", name, st, code)
		}
	}
}

// TestPlanRekey: a Combine whose key changes with a declared re-key is
// planned as migrated, with the check's warning; its sink writing to
// another table is planned as a new table.
func TestPlanRekey(t *testing.T) {
	byStore := strings.Replace(strings.Replace(base, "fields: {region: region, amount: amount}", "fields: {region: region, store: order_id, amount: amount}", 1),
		"group_by: [region]", "group_by: [region, store]", 1)
	byStore = strings.Replace(byStore, "fields: {region: region, total: total}", "fields: {region: region, store: store, total: total}", 1)
	byStore = strings.Replace(byStore, "key: [region]", "key: [region, store]", 1)
	rekeyed := strings.Replace(strings.Replace(byStore, "group_by: [region, store]", "group_by: [region]", 1),
		"      config:\n        group_by: [region]\n", "      migrations: {rekey: {from: [region, store]}}\n      config:\n        group_by: [region]\n", 1)
	rekeyed = strings.Replace(strings.Replace(rekeyed, "fields: {region: region, store: store, total: total}", "fields: {region: region, total: total}", 1),
		"{table: region_totals, key: [region, store]}", "{table: region_only_totals, key: [region]}", 1)
	p := plan.Make(load(t, byStore), load(t, rekeyed), plan.Options{Strategy: plan.InPlace})
	wantCompatible(t, p, true)
	if st := step(t, p, "RegionTotals"); st.Action != plan.Migrated || !strings.Contains(st.Detail, "STATE_REKEYED") {
		t.Errorf("step = %+v, want migrated with the re-key's warning", st)
	}
}

// TestPlanAppendedInit: a Combine output appended with an init (CEL or
// Python) makes the step migrated, naming the output; the same pipeline
// against itself (the init computes nothing) keeps the step.
func TestPlanAppendedInit(t *testing.T) {
	direct := directBase()
	for _, init := range []string{`{init: "total * 2"}`, `{init: "total * 2", language: python}`} {
		withInit := strings.Replace(strings.Replace(direct, "total: {value: amount, fn: sum}", "total: {value: amount, fn: sum}\n          twice: {value: amount, fn: sum}", 1),
			"      config:\n        group_by: [region]\n", "      migrations: {accumulators: {twice: "+init+"}}\n      config:\n        group_by: [region]\n", 1)
		if withInit == direct {
			t.Fatal("the test's pipeline did not change")
		}
		p := plan.Make(load(t, direct), load(t, withInit), plan.Options{Strategy: plan.InPlace})
		wantCompatible(t, p, true)
		if st := step(t, p, "RegionTotals"); st.Action != plan.Migrated || !strings.Contains(st.Detail, "appended with an init") || !strings.Contains(st.Detail, "twice") {
			t.Errorf("%s: step = %+v, want migrated naming twice", init, st)
		}
		if st := step(t, plan.Make(load(t, withInit), load(t, withInit), plan.Options{Strategy: plan.InPlace}), "RegionTotals"); st.Action != plan.Kept {
			t.Errorf("%s: against itself: step = %+v, want kept", init, st)
		}
	}
}

// TestPlanWidenedColumn: an int column whose field widens to float is
// widened in place for a plain table, and served beside the older ints by
// a staged table's view and by a parallel replacement's façade.
func TestPlanWidenedColumn(t *testing.T) {
	widened := strings.Replace(base, "fields: {region: region, total: total}", "fields: {region: region, total: double(total)}", 1)
	staged := func(text string) string {
		return strings.Replace(text, "config: {table: region_totals, key: [region]}", "config: {table: region_totals, key: [region], layout: staged}", 1)
	}
	for _, tc := range []struct {
		name          string
		strategy      plan.Strategy
		oldText, text string
		effect        string
	}{
		{"staged", plan.InPlace, staged(base), staged(widened), "the next merge widens the principal's column"},
		{"parallel", plan.Parallel, base, widened, "the façade's view serves them beside the running job's ints"},
	} {
		p := plan.Make(load(t, tc.oldText), load(t, tc.text), plan.Options{Strategy: tc.strategy})
		s := sink(t, p, "WriteTotals")
		if len(s.Columns) != 1 {
			t.Fatalf("%s: sink = %+v", tc.name, s)
		}
		if c := s.Columns[0]; c.Name != "total" || c.Action != plan.Widened || c.OldType != "int" || c.NewType != "float" || !strings.Contains(c.Effect, tc.effect) {
			t.Errorf("%s: column = %+v, want widened int → float (%q)", tc.name, c, tc.effect)
		}
	}
}

// TestPlanRekeyedTable: a Combine that declares a re-key re-keys the rows
// of the SQL table it feeds: a staged table in place is changed (its view
// serves the earlier rows under their new keys), and so is a plain table
// that the same update moves to layout: staged; a plain table that stays
// plain, or a parallel replacement, is refused with the fix.
func TestPlanRekeyedTable(t *testing.T) {
	direct := directBase()
	rekeyed := strings.Replace(direct, "      config:\n        group_by: [region]\n",
		"      migrations: {rekey: {from: [region], key: {region: \"region == 'eu-west' ? 'eu' : region\"}}}\n      config:\n        group_by: [region]\n", 1)
	for _, tc := range []struct {
		strategy plan.Strategy
		staged   bool
		action   plan.Action
		detail   string
		toStaged bool // OLD writes a plain table, NEW layout: staged
	}{
		{plan.InPlace, true, plan.Changed, "the view serves them under their new keys", false},
		{plan.InPlace, false, plan.Refused, "write it with layout: staged", false},
		{plan.Parallel, true, plan.Refused, "re-key it by an update in place", false},
		{plan.InPlace, false, plan.Changed, "the plain table becomes the staged table's principal", true},
	} {
		oldText, newText := direct, rekeyed
		switch {
		case tc.staged:
			oldText, newText = stagedCfg(direct), stagedCfg(rekeyed)
		case tc.toStaged:
			newText = stagedCfg(rekeyed)
		}
		p := plan.Make(load(t, oldText), load(t, newText), plan.Options{Strategy: tc.strategy})
		s := sink(t, p, "WriteTotals")
		if s.Action != tc.action || !strings.Contains(s.Detail, tc.detail) || !strings.Contains(s.Detail, "RegionTotals") {
			t.Errorf("%s (staged %v): sink = %+v, want %s naming RegionTotals and %q", tc.strategy, tc.staged, s, tc.action, tc.detail)
		}
		// The table's key list follows the Combine's group_by: the same.
		if tc.staged && tc.strategy == plan.InPlace {
			sharded := strings.Replace(strings.Replace(oldText, "group_by: [region]", "group_by: [region, shard]", 1), "key: [region]", "key: [region, shard]", 1)
			sharded = strings.Replace(sharded, "fields: {region: region, amount: amount}", "fields: {region: region, amount: amount, shard: \"amount % 4\"}", 1)
			merged := strings.Replace(newText, "rekey: {from: [region], key: {region: \"region == 'eu-west' ? 'eu' : region\"}}", "rekey: {from: [region, shard]}", 1)
			merged = strings.Replace(merged, "fields: {region: region, amount: amount}", "fields: {region: region, amount: amount, shard: \"amount % 4\"}", 1)
			if s := sink(t, plan.Make(load(t, sharded), load(t, merged), plan.Options{Strategy: tc.strategy}), "WriteTotals"); s.Action != plan.Changed || !strings.Contains(s.Detail, "re-keyed by RegionTotals") {
				t.Errorf("(region, shard) to region: sink = %+v, want changed, re-keyed", s)
			}
		}
		// The same pipeline again: the re-key was done, nothing moves.
		if again := sink(t, plan.Make(load(t, newText), load(t, newText), plan.Options{Strategy: tc.strategy}), "WriteTotals"); strings.Contains(again.Detail, "re-key") {
			t.Errorf("%s: the re-keyed version against itself: %+v", tc.strategy, again)
		}
	}
}

// directBase is base with the sink fed by the Combine directly (no Shape
// step in between).
func directBase() string {
	return strings.Replace(strings.Replace(base, "      input: Shape\n", "      input: RegionTotals\n", 1), "fields: {region: region, total: total}", "fields: {region: region}", 1)
}

// stagedCfg gives the sink of a directBase pipeline layout: staged.
func stagedCfg(text string) string {
	return strings.Replace(text, "config: {table: region_totals, key: [region]}", "config: {table: region_totals, key: [region], layout: staged}", 1)
}
