package yamlpipe

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
)

// metricsPipeline counts and measures 1..100 in a Filter and a
// MapToFields (CEL, and Python, whose metrics are CEL too).
const metricsPipeline = `pipeline:
  transforms:
    - type: Create
      name: Orders
      config:
        elements: [%s]
    - type: Filter
      name: Positive
      input: Orders
      config:
        keep: "amount > 0"
        metrics:
          big: {counter: "amount > 90"}
          amounts: {distribution: amount, namespace: orders}
    - type: MapToFields
      name: Double
      input: Positive
      config:
        language: %s
        fields:
          doubled: "amount * 2"
        metrics:
          units: {counter: amount}
    - type: WriteToJson
      name: Write
      input: Double
      config:
        path: out.jsonl
`

// TestYAMLMetrics: a metrics: config's counters (of a boolean: the
// elements it holds for; of an integer: its sum) and distributions reach
// the run's result per step, exactly, whatever the step's language and
// the worker count.
func TestYAMLMetrics(t *testing.T) {
	var elems []string
	for i := 1; i <= 100; i++ {
		elems = append(elems, fmt.Sprintf("{amount: %d}", i))
	}
	for _, lang := range []string{"cel", "python"} {
		for _, workers := range []int{1, 2} {
			src := fmt.Sprintf(metricsPipeline, strings.Join(elems, ", "), lang)
			p, err := Load("p.yaml", []byte(src), Options{BaseDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			res, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: workers})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, st := range res.Steps {
				for _, m := range st.User {
					got[st.Name+"/"+m.Namespace+"/"+m.Name] = fmt.Sprintf("%s %d %d %d %d %d", m.Kind, m.Value, m.Count, m.Sum, m.Min, m.Max)
				}
			}
			want := map[string]string{
				"Positive/Positive/big":   "counter 10 0 0 0 0",
				"Positive/orders/amounts": "distribution 0 100 5050 1 100",
				"Double/Double/units":     "counter 5050 0 0 0 0",
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s, %d workers: metrics %v, want %v", lang, workers, got, want)
			}
		}
	}
}

func TestYAMLMetricsRefused(t *testing.T) {
	base := "pipeline:\n  transforms:\n    - type: Create\n      name: O\n      config:\n        elements: [{amount: 1, region: a}]\n" +
		"    - type: Filter\n      input: O\n      config:\n        keep: \"amount > 0\"\n        metrics:\n"
	for _, tt := range []struct{ metric, want string }{
		{"          m: {counter: amount, distribution: amount}\n", "p.yaml:12:14: metric m needs exactly one of counter"},
		{"          m: {distribution: \"amount > 0\"}\n", "metric m: a distribution records integers"},
		{"          m: {counter: region}\n", "metric m must be a boolean or an integer expression"},
		{"          m: {counter: nope}\n", "nope"},
		{"          m: 3\n", "metric m must be {counter: EXPR} or {distribution: EXPR}"},
		{"          m: {counter: amount, unit: x}\n", "unit"},
	} {
		loadErr(t, base+tt.metric, tt.want)
	}
}
