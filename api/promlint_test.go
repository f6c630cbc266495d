package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// lintScrape scrapes base's /metrics and returns what Prometheus's
// metric linter (promtool check metrics) finds wrong with it.
func lintScrape(t *testing.T, base string) []promlint.Problem {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	problems, err := promlint.New(resp.Body).Lint()
	if err != nil {
		t.Fatalf("linting /metrics: %v", err)
	}
	return problems
}

// TestPromlintFindsMistakes: the linter the dashboard test runs on a real
// scrape refuses the mistakes this package's metrics once had (a
// precomputed rate, a counter without _total, a timestamp gauge without
// its unit) and passes their fixed spelling.
func TestPromlintFindsMistakes(t *testing.T) {
	for _, tc := range []struct {
		text string
		want string // "" for clean
	}{
		{"# HELP weir_step_elements_in_total Elements.\n# TYPE weir_step_elements_in_total counter\nweir_step_elements_in_total 1\n", ""},
		{"# HELP weir_step_elements_in Elements.\n# TYPE weir_step_elements_in counter\nweir_step_elements_in 1\n", `counter metrics should have "_total" suffix`},
		{"# HELP weir_step_watermark_timestamp_seconds W.\n# TYPE weir_step_watermark_timestamp_seconds gauge\nweir_step_watermark_timestamp_seconds 1\n", ""},
		{"# HELP weir_step_watermark_ms W.\n# TYPE weir_step_watermark_ms gauge\nweir_step_watermark_ms 1\n", "abbreviated units"},
		{"# TYPE weir_jobs gauge\nweir_jobs 1\n", "no help text"},
		{"# HELP weir_lag_total L.\n# TYPE weir_lag_total gauge\nweir_lag_total 1\n", `non-counter metrics should not have "_total" suffix`},
	} {
		problems, err := promlint.New(strings.NewReader(tc.text)).Lint()
		if err != nil {
			t.Fatalf("%q: %v", tc.text, err)
		}
		var got []string
		for _, p := range problems {
			got = append(got, p.Text)
		}
		all := strings.Join(got, "; ")
		if tc.want == "" && len(problems) > 0 || tc.want != "" && !strings.Contains(all, tc.want) {
			t.Errorf("lint of %q: %q, want %q", tc.text, all, tc.want)
		}
	}
}
