package console_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/server"
)

// historySpan is the time between the first and the last point of job
// id's job-level system lag history (the fine tier, 5 s), 0 without two.
func historySpan(c *client.Client, id string) time.Duration {
	h, err := c.MetricsHistory(context.Background(), id, url.Values{"step": {"-"}, "metric": {"system_lag_seconds"}, "resolution": {"5s"}})
	if err != nil || len(h.Series) == 0 || len(h.Series[0].Points) < 2 {
		return 0
	}
	p := h.Series[0].Points
	return time.Duration(p[len(p)-1][0]-p[0][0]) * time.Millisecond
}

// chartView is what the test reads of one drawn chart.
type chartView struct {
	Points int     `json:"points"`
	T0     float64 `json:"t0"`
	T1     float64 `json:"t1"`
	Marks  int     `json:"marks"`
}

// TestConsoleChartsAcrossUpdate: the job page's charts show the server's
// history (which the console asks for at the resolutions the server
// keeps), across an in-place update of the job: more than a minute of
// points, the update marked on the time axis, and a throughput that is a
// rate over a window of the sources' counters (a steady source reads
// above 0/s).
func TestConsoleChartsAcrossUpdate(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a job for more than a minute")
	}
	ctx := newBrowser(t)
	p, c := startWeir(t, server.Config{})
	first := submit(t, c, "charted", streamingYAML)
	waitJob(t, c, first.ID, "the job runs and checkpoints", running)
	if !await.Until(2*time.Minute, time.Second, func() bool { return historySpan(c, first.ID) >= 30*time.Second }) {
		t.Fatalf("the first job's history never spanned 30 s (%s)", historySpan(c, first.ID))
	}
	up, err := c.Update(context.Background(), client.UpdateRequest{SubmitRequest: client.SubmitRequest{Name: "charted", Pipeline: streamingYAML, BaseDir: t.TempDir()}})
	if err != nil {
		t.Fatalf("updating the job: %v", err)
	}
	if up.Job == nil {
		t.Fatalf("the update answered without a job: %+v", up)
	}
	second := waitJob(t, c, up.Job.ID, "the updated job runs", running)
	if second.ID == first.ID {
		t.Fatalf("the update kept job ID %s; the test wants the lineage of two jobs", first.ID)
	}
	// A minute and more of the name's history: the first job's 30 s and
	// more, then the second's.
	if !await.Until(2*time.Minute, time.Second, func() bool { return historySpan(c, second.ID) >= 40*time.Second }) {
		t.Fatalf("the second job's history never spanned 40 s (%s)", historySpan(c, second.ID))
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(p.Address()+"/jobs/charted?refresh=1000"),
		present(`#chart-system-lag svg.chart[data-t0]`), present(`#chart-throughput svg.chart[data-t0]`)); err != nil {
		t.Fatalf("the job page draws no charts with points: %v", err)
	}
	var charts map[string]chartView
	read := `Object.fromEntries([...document.querySelectorAll('#charts .chart-box')].map(b => { const s = b.querySelector('svg.chart');
		return [b.id.replace('chart-', ''), {points: +s.dataset.points, t0: +(s.dataset.t0 || 0), t1: +(s.dataset.t1 || 0),
			marks: s.querySelectorAll('line.mark').length}]; }))`
	if !await.Until(30*time.Second, 200*time.Millisecond, func() bool {
		return evaluate(ctx, read, &charts) == nil && charts["system-lag"].Marks > 0 && charts["throughput"].Points > 0
	}) {
		t.Fatalf("the charts never showed the update's mark and the throughput: %+v", charts)
	}
	screenshot(t, ctx, "console-charts")
	for _, name := range []string{"system-lag", "throughput"} {
		cv := charts[name]
		if span := time.Duration(cv.T1-cv.T0) * time.Millisecond; span < time.Minute {
			t.Errorf("chart %s spans %s, want a minute or more across the update (%+v)", name, span, cv)
		}
		// 5 s points over more than a minute: a dozen or more.
		if cv.Points < 12 {
			t.Errorf("chart %s has %d points, want 12 or more (%+v)", name, cv.Points, cv)
		}
		if cv.Marks != 1 {
			t.Errorf("chart %s marks %d updates, want 1 (%+v)", name, cv.Marks, cv)
		}
	}
	// Clicking a step opens its details: the API's metrics of the step,
	// with the size of the state it keeps.
	if err := evaluate(ctx, `document.querySelector('svg.graph g.step[data-step="Sums"]').dispatchEvent(new MouseEvent('click', {bubbles: true})) && true`, new(bool)); err != nil {
		t.Fatal(err)
	}
	evalUntil(t, ctx, "the step details of Sums", `(() => { const b = document.querySelector('#step-details[data-step="Sums"]');
		const r = b && b.querySelector('tr[data-field="elements_in"] td'); return !!r && parseFloat(r.textContent) > 0
			&& !!b.querySelector('tr[data-field="keys"]') && !!b.querySelector('tr[data-field="system_lag_seconds"]')
			&& /^[0-9.]+ (B|KiB|MiB)$/.test((b.querySelector('tr[data-field="state_bytes"] td') || {}).textContent || ''); })()`)
	screenshot(t, ctx, "console-step-details")

	// The throughput: Generate's steady 200 elements/s, as a rate over
	// 30 s windows, never the 0/s of a one-second sample between bursts.
	var rates []float64
	if err := evaluate(ctx, `[...document.querySelectorAll('#chart-throughput polyline.series')].flatMap(l => l.querySelector('title').textContent.match(/last ([0-9.]+)/) ? [+l.querySelector('title').textContent.match(/last ([0-9.]+)/)[1]] : [])`, &rates); err != nil {
		t.Fatal(err)
	}
	if len(rates) == 0 || rates[0] <= 0 {
		t.Errorf("the throughput chart's last rate is %v, want above 0/s for a source of 200 elements/s", rates)
	}
}
