package api

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/weir-dev/weir/internal/await"
)

// dashboard is the part of a Grafana dashboard JSON the test reads.
type dashboard struct {
	Inputs []struct {
		Name     string `json:"name"`
		PluginID string `json:"pluginId"`
	} `json:"__inputs"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Title      string `json:"title"`
		Datasource struct {
			Type string `json:"type"`
			UID  string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr         string `json:"expr"`
			LegendFormat string `json:"legendFormat"`
		} `json:"targets"`
	} `json:"panels"`
}

// grafanaVars stands in for Grafana's variables when an expression is
// parsed: the dashboard's own ($job_name, a regex matcher) and Grafana's
// built-in intervals.
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h", "$job_name", ".*")

// family is what a scrape says of one metric name a query may select:
// its type and the labels its samples carry.
type family struct {
	typ    dto.MetricType
	labels map[string]bool
}

// familyOf resolves a selected series name to the scraped family: a
// histogram's _bucket, _sum and _count series belong to the histogram, a
// summary's _sum and _count to the summary.
func familyOf(fams map[string]*dto.MetricFamily, name string) (family, bool) {
	f := fams[name]
	series := ""
	if f == nil {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && fams[base] != nil {
				switch typ := fams[base].GetType(); {
				case typ == dto.MetricType_HISTOGRAM, typ == dto.MetricType_SUMMARY && suffix != "_bucket":
					f, series = fams[base], suffix
				}
			}
		}
	}
	if f == nil {
		return family{}, false
	}
	out := family{typ: f.GetType(), labels: map[string]bool{}}
	for _, m := range f.Metric {
		for _, lp := range m.Label {
			out.labels[lp.GetName()] = true
		}
	}
	if series == "_bucket" {
		out.labels["le"] = true
	}
	if series != "_bucket" && series != "" {
		out.typ = dto.MetricType_COUNTER // _sum and _count are counters
	}
	return out, true
}

// checkExpr parses one panel query with Prometheus's own PromQL parser
// and checks it against a scrape: every metric it selects is exported,
// every label it matches, groups by or prints is one those series carry,
// rate-like functions read counters (or histogram buckets) only, and
// histogram_quantile reads buckets grouped by le. It returns the problems.
func checkExpr(p parser.Parser, fams map[string]*dto.MetricFamily, expr, legend string) []string {
	e, err := p.ParseExpr(grafanaVars.Replace(expr))
	if err != nil {
		return []string{fmt.Sprintf("does not parse as PromQL: %v", err)}
	}
	var problems []string
	// available is the union of the labels of the selected series: what
	// grouping and the legend may name.
	available := map[string]bool{}
	parser.Inspect(e, func(n parser.Node, path []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		f, ok := familyOf(fams, vs.Name)
		if !ok {
			problems = append(problems, fmt.Sprintf("selects %s, which /metrics does not export", vs.Name))
			return nil
		}
		for l := range f.labels {
			available[l] = true
		}
		for _, m := range vs.LabelMatchers {
			if m.Name != "__name__" && !f.labels[m.Name] {
				problems = append(problems, fmt.Sprintf("matches label %s, which %s does not carry", m.Name, vs.Name))
			}
		}
		for _, anc := range path {
			call, ok := anc.(*parser.Call)
			if !ok {
				continue
			}
			switch call.Func.Name {
			case "rate", "irate", "increase", "resets":
				if f.typ != dto.MetricType_COUNTER && !(f.typ == dto.MetricType_HISTOGRAM && strings.HasSuffix(vs.Name, "_bucket")) {
					problems = append(problems, fmt.Sprintf("%s() of %s, a %s", call.Func.Name, vs.Name, strings.ToLower(f.typ.String())))
				}
			case "histogram_quantile":
				if !strings.HasSuffix(vs.Name, "_bucket") {
					problems = append(problems, fmt.Sprintf("histogram_quantile() of %s, not a histogram's buckets", vs.Name))
				}
			}
		}
		return nil
	})
	parser.Inspect(e, func(n parser.Node, path []parser.Node) error {
		switch n := n.(type) {
		case *parser.AggregateExpr:
			if n.Without {
				return nil
			}
			for _, l := range n.Grouping {
				if !available[l] {
					problems = append(problems, fmt.Sprintf("groups by %s, which the selected series do not carry", l))
				}
			}
		case *parser.Call:
			if n.Func.Name == "histogram_quantile" && len(n.Args) == 2 {
				if agg, ok := n.Args[1].(*parser.AggregateExpr); ok && !agg.Without && !slices.Contains(agg.Grouping, "le") {
					problems = append(problems, "histogram_quantile() over an aggregation that drops le")
				}
			}
		}
		return nil
	})
	for _, m := range regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`).FindAllStringSubmatch(legend, -1) {
		if !available[m[1]] {
			problems = append(problems, fmt.Sprintf("legend names label %s, which the selected series do not carry", m[1]))
		}
	}
	return problems
}

// TestGrafanaDashboard: every query of docs/grafana/weir.json parses as
// PromQL with Prometheus's parser and uses only metrics and labels that a
// real server's /metrics exports, scraped while a Pub/Sub-fed keyed job
// runs (so every documented metric is there).
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("../docs/grafana/weir.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash dashboard
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("docs/grafana/weir.json: %v", err)
	}
	if len(dash.Inputs) != 1 || dash.Inputs[0].Name != "DS_PROMETHEUS" || dash.Inputs[0].PluginID != "prometheus" {
		t.Errorf("the dashboard's __inputs %+v, want one Prometheus data source DS_PROMETHEUS", dash.Inputs)
	}

	st := openStack(t, t.TempDir(), t.TempDir())
	ctx := context.Background()
	if _, err := st.c.CreateTopic(ctx, CreateTopicRequest{Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	res, err := st.c.Submit(ctx, SubmitRequest{Name: "orders", Pipeline: ordersPipeline, BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	publishOrders(t, st.c, 0, 100)
	publishReusedID(t, st.c)
	var fams map[string]*dto.MetricFamily
	missing := ""
	await.Until(30*time.Second, 50*time.Millisecond, func() bool {
		fams = scrape(t, st.ts.URL)
		missing = missingMetric(fams, res.ID)
		return missing == ""
	})
	if missing != "" {
		t.Fatalf("/metrics: %s", missing)
	}
	// Every metric there, the Go runtime's and the process's too, passes
	// promtool check metrics (Prometheus's promlint).
	for _, problem := range lintScrape(t, st.ts.URL) {
		t.Errorf("promtool check metrics: %s: %s", problem.Metric, problem.Text)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_inuse_bytes", "go_gc_duration_seconds", "process_cpu_seconds_total", "process_resident_memory_bytes"} {
		if fams[name] == nil {
			t.Errorf("/metrics lacks the runtime's or the process's %s", name)
		}
	}

	p := parser.NewParser(parser.Options{})
	queries := 0
	for _, v := range dash.Templating.List {
		// Grafana's label_values(METRIC, LABEL) is not PromQL: check its two parts.
		m := regexp.MustCompile(`^label_values\((\w+),\s*(\w+)\)$`).FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(METRIC, LABEL)", v.Name, v.Definition)
			continue
		}
		if f, ok := familyOf(fams, m[1]); !ok || !f.labels[m[2]] {
			t.Errorf("variable %s: %s is not exported with label %s", v.Name, m[1], m[2])
		}
	}
	for _, panel := range dash.Panels {
		if panel.Datasource.Type != "prometheus" || panel.Datasource.UID != "${DS_PROMETHEUS}" {
			t.Errorf("panel %d %q: data source %+v, want the dashboard's Prometheus input", panel.ID, panel.Title, panel.Datasource)
		}
		if len(panel.Targets) == 0 {
			t.Errorf("panel %d %q has no query", panel.ID, panel.Title)
		}
		for _, target := range panel.Targets {
			queries++
			for _, problem := range checkExpr(p, fams, target.Expr, target.LegendFormat) {
				t.Errorf("panel %d %q: %s: %s", panel.ID, panel.Title, target.Expr, problem)
			}
		}
	}
	if queries < len(dash.Panels) {
		t.Errorf("%d queries in %d panels", queries, len(dash.Panels))
	}
}

// TestGrafanaCheckFindsMistakes: the dashboard check refuses the mistakes
// it is there for, against a scrape of known families.
func TestGrafanaCheckFindsMistakes(t *testing.T) {
	counter, gauge, histogram := dto.MetricType_COUNTER, dto.MetricType_GAUGE, dto.MetricType_HISTOGRAM
	fam := func(name string, typ dto.MetricType, labels ...string) *dto.MetricFamily {
		m := &dto.Metric{}
		for _, l := range labels {
			m.Label = append(m.Label, &dto.LabelPair{Name: &l})
		}
		return &dto.MetricFamily{Name: &name, Type: &typ, Metric: []*dto.Metric{m}}
	}
	fams := map[string]*dto.MetricFamily{
		"weir_step_elements_produced_total": fam("weir_step_elements_produced_total", counter, "job_id", "job_name", "step"),
		"weir_step_keys":                    fam("weir_step_keys", gauge, "job_id", "job_name", "step"),
		"weir_checkpoint_duration_seconds":  fam("weir_checkpoint_duration_seconds", histogram, "job_id", "job_name"),
	}
	for _, tc := range []struct {
		expr, legend, want string
	}{
		{`sum by (job_name, step) (rate(weir_step_elements_produced_total{job_name=~"$job_name"}[1m]))`, "{{job_name}} {{step}}", ""},
		{`histogram_quantile(0.99, sum by (le, job_name) (rate(weir_checkpoint_duration_seconds_bucket[5m])))`, "{{job_name}}", ""},
		{`rate(weir_checkpoint_duration_seconds_sum[5m]) / rate(weir_checkpoint_duration_seconds_count[5m])`, "", ""},
		{`weir_step_keys{job_name=~"$job_name"`, "", "does not parse"},
		{`weir_step_key{job_name=~"$job_name"}`, "", "does not export"},
		{`weir_step_keys{region="x"}`, "", "does not carry"},
		{`rate(weir_step_keys[1m])`, "", "rate() of weir_step_keys, a gauge"},
		{`sum by (region) (weir_step_keys)`, "", "groups by region"},
		{`histogram_quantile(0.5, sum by (job_name) (rate(weir_checkpoint_duration_seconds_bucket[5m])))`, "", "drops le"},
		{`histogram_quantile(0.5, weir_step_keys)`, "", "not a histogram's buckets"},
		{`weir_step_keys`, "{{worker}}", "legend names label worker"},
	} {
		got := strings.Join(checkExpr(parser.NewParser(parser.Options{}), fams, tc.expr, tc.legend), "; ")
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: problems %q, want %q", tc.expr, got, tc.want)
		}
	}
}
