package yamlpipe

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
	"github.com/weir-dev/weir/yamlpipe/combine"
)

// latestPipeline keeps the latest value of a field text, computed by the
// CEL expression expr, per region.
func latestPipeline(expr string) string {
	return fmt.Sprintf(`pipeline:
  transforms:
    - type: Create
      name: In
      config:
        elements: [{region: "a", amount: 1, at: "2026-03-01T00:00:00Z"}]
    - type: MapToFields
      name: Text
      input: In
      config:
        fields: {region: region, text: %q}
    - type: Combine
      name: Sums
      input: Text
      windowing: {type: fixed, size: 1h}
      config:
        group_by: [region]
        combine: {last: {value: text, fn: latest}}
    - type: WriteToJson
      name: Out
      input: Sums
      config: {path: out.jsonl}
`, expr)
}

// TestLatestBecomesString: a latest output whose value field becomes a
// string (an int, a float, a bool or a timestamp before) passes the
// compatibility check with COMBINE_OUTPUT_CONVERTED, and the stored value
// reads as its text, as string() in CEL writes it; a min does not (its
// order would change) and is refused.
func TestLatestBecomesString(t *testing.T) {
	at := mtime.FromTime(time.Date(2026, 3, 1, 0, 0, 0, 250e6, time.UTC))
	cases := []struct {
		expr string
		v    any
		want string
	}{
		{"amount", int64(-42), "-42"},
		{"double(amount) / 4.0", 0.25, "0.25"},
		{"amount > 0", true, "true"},
		{"timestamp(at)", at, "2026-03-01T00:00:00.25Z"},
	}
	for _, c := range cases {
		t.Run(c.expr, func(t *testing.T) {
			v1g, v1 := loadLatest(t, latestPipeline(c.expr), nil)
			stored, err := v1.EncodeState("", addText(t, v1, v1.NewAccumulator(), c.v))
			if err != nil {
				t.Fatal(err)
			}
			v2g, v2 := loadLatest(t, latestPipeline("string("+c.expr+")"), v1g)
			rep := compat.Check(v1g, v2g, compat.Options{})
			if !rep.Compatible || !hasWarning(rep, errcode.CombineOutputConverted) {
				t.Fatalf("v1 → v2: %+v", rep)
			}
			acc, err := v2.DecodeState("", stored)
			if err != nil {
				t.Fatal(err)
			}
			if got := outputsOf(v2, acc); got != "last="+c.want {
				t.Errorf("after the restore: %s, want last=%s", got, c.want)
			}
			if v, ok := lastValue(v2, acc).(string); !ok {
				t.Errorf("the restored latest is %v (%T), want a string", v, v)
			}
		})
	}
	// A min's order would change (10 < 9 as text): refused.
	minOf := func(expr string) string { return strings.Replace(latestPipeline(expr), "fn: latest", "fn: min", 1) }
	v1g, _ := loadLatest(t, minOf("amount"), nil)
	v2g, _ := loadLatest(t, minOf("string(amount)"), v1g)
	if rep := compat.Check(v1g, v2g, compat.Options{}); rep.Compatible || !strings.Contains(fmt.Sprint(rep.Errors), string(errcode.StateCoderChanged)) {
		t.Errorf("a min becoming a string: %+v, want STATE_CODER_CHANGED", rep)
	}
}

// loadLatest loads a pipeline as a job reading the state of prior (nil:
// none) and returns its graph and its Combine.
func loadLatest(t *testing.T, text string, prior *graph.Pipeline) (*graph.Pipeline, *combine.Aggregator) {
	t.Helper()
	slots, stored := compat.CombineSlotsByStep(prior, nil)
	p, err := Load("p.yaml", []byte(text), Options{BaseDir: t.TempDir(), PriorCombineSlots: slots, PriorCombineStored: stored})
	if err != nil {
		t.Fatal(err)
	}
	a, ok := p.Program().Code["Sums"].(*combine.Aggregator)
	if !ok {
		t.Fatalf("step Sums has code %T", p.Program().Code["Sums"])
	}
	return p.Graph(), a
}

// addText folds a row whose text is v into acc.
func addText(t *testing.T, a *combine.Aggregator, acc any, v any) any {
	t.Helper()
	k := map[string]row.Kind{"int64": row.KindInt, "float64": row.KindFloat, "bool": row.KindBool, "mtime.Time": row.KindTimestamp, "string": row.KindString}[fmt.Sprintf("%T", v)]
	schema, err := row.NewSchema(row.Field{Name: "region", Type: row.Of(row.KindString)}, row.Field{Name: "text", Type: row.Of(k)})
	if err != nil {
		t.Fatal(err)
	}
	r := row.New(schema)
	r.Values[0], r.Values[1] = "a", v
	if acc, err = a.AddInputErr(acc, &contract.Element{Value: r}); err != nil {
		t.Fatal(err)
	}
	return acc
}

// lastValue is the value of output last of a's pane for acc.
func lastValue(a *combine.Aggregator, acc any) any {
	r := a.Output([]any{"a"}, acc, window.Window{Start: 0, End: 3600000}, window.PaneInfo{}).(*row.Row)
	return r.Values[r.Schema.Index("last")]
}

// TestLatestFromString: a latest output whose value field was a string
// and is a number is refused without allow_lossy (STATE_CODER_CHANGED,
// naming the declaration) and passes with it (COMBINE_OUTPUT_CONVERTED);
// the stored strings then read as the numbers they spell, null where
// they spell none.
func TestLatestFromString(t *testing.T) {
	lossy := func(y string) string {
		return strings.Replace(y, "      windowing: {type: fixed, size: 1h}\n",
			"      windowing: {type: fixed, size: 1h}\n      migrations:\n        accumulators:\n          last: {allow_lossy: true}\n", 1)
	}
	cases := []struct {
		stored string
		expr   string // the new value field's expression
		want   any    // nil: null
	}{
		{"42", "amount", int64(42)},
		{" -7 ", "amount", int64(-7)},
		{"2.75", "amount", nil},
		{"1e3", "amount", nil},
		{"n/a", "amount", nil},
		{"", "amount", nil},
		{"99999999999999999999", "amount", nil},
		{"1.5", "double(amount)", 1.5},
		{"1e3", "double(amount)", 1000.0},
		{"NaN", "double(amount)", nil},
	}
	for _, c := range cases {
		t.Run(c.stored+"→"+c.expr, func(t *testing.T) {
			v1g, v1 := loadLatest(t, latestPipeline("string(amount)"), nil)
			stored, err := v1.EncodeState("", addText(t, v1, v1.NewAccumulator(), c.stored))
			if err != nil {
				t.Fatal(err)
			}
			plain, _ := loadLatest(t, latestPipeline(c.expr), v1g)
			if rep := compat.Check(v1g, plain, compat.Options{}); rep.Compatible || !strings.Contains(fmt.Sprint(rep.Errors), "last: {allow_lossy: true}") {
				t.Fatalf("undeclared: %+v, want refused naming the declaration", rep)
			}
			v2g, v2 := loadLatest(t, lossy(latestPipeline(c.expr)), v1g)
			rep := compat.Check(v1g, v2g, compat.Options{})
			if !rep.Compatible || !hasWarning(rep, errcode.CombineOutputConverted) {
				t.Fatalf("declared: %+v", rep)
			}
			acc, err := v2.DecodeState("", stored)
			if err != nil {
				t.Fatal(err)
			}
			if got := lastValue(v2, acc); got != c.want {
				t.Errorf("the restored latest of %q is %v (%T), want %v (%T)", c.stored, got, got, c.want, c.want)
			}
		})
	}
}

// TestConversionBesideAppendedOutput: one update that converts a latest
// output to a string and appends an output passes the check with both
// warnings (each kind of change as the check decides it alone), and the
// stored value reads as its text beside the appended output, empty.
func TestConversionBesideAppendedOutput(t *testing.T) {
	v1g, v1 := loadLatest(t, latestPipeline("amount"), nil)
	stored, err := v1.EncodeState("", addText(t, v1, v1.NewAccumulator(), int64(-42)))
	if err != nil {
		t.Fatal(err)
	}
	v2g, v2 := loadLatest(t, strings.Replace(latestPipeline("string(amount)"), "combine: {last: {value: text, fn: latest}}",
		"combine: {last: {value: text, fn: latest}, n: {value: text, fn: count}}", 1), v1g)
	rep := compat.Check(v1g, v2g, compat.Options{})
	if !rep.Compatible || !hasWarning(rep, errcode.CombineOutputConverted) || !hasWarning(rep, errcode.CombineOutputsChanged) {
		t.Fatalf("v1 → v2: %+v", rep)
	}
	acc, err := v2.DecodeState("", stored)
	if err != nil {
		t.Fatal(err)
	}
	if got := outputsOf(v2, acc); got != "last=-42 n=0" {
		t.Errorf("after the restore: %s, want last=-42 n=0", got)
	}
	// A change of another kind beside them is still refused.
	v3g, _ := loadLatest(t, strings.Replace(latestPipeline("string(amount)"), "combine: {last: {value: text, fn: latest}}",
		"combine: {last: {value: text, fn: min}, n: {value: text, fn: count}}", 1), v1g)
	if rep := compat.Check(v1g, v3g, compat.Options{}); rep.Compatible {
		t.Errorf("a latest become a min of strings beside an appended output passed: %+v", rep)
	}
}
