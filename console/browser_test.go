package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/server"
)

// The browser tests drive Debian's headless Chromium through the DevTools
// protocol (chromedp) against a real weir process (package server: the
// same assembly as `weir server`) running real jobs. They skip, saying
// so, when no Chromium is installed; .ci/run installs it.

const batchYAML = `pipeline:
  transforms:
    - type: Create
      name: Orders
      config:
        elements: [{region: NORTH, amount: 250}, {region: WEST, amount: 100}, {region: NORTH, amount: 5}, {region: EAST, amount: -1}]
    - type: Filter
      name: Positive
      input: Orders
      config: {keep: amount > 0}
    - type: Combine
      name: Totals
      input: Positive
      config:
        group_by: region
        combine: {total: {value: amount, fn: sum}}
`

// checkedYAML is the reference fixture's input with its region rule: one
// order (UNKNOWN 50) is rejected with the reason known_region.
const checkedYAML = `pipeline:
  transforms:
    - type: Create
      name: Transactions
      config:
        elements: [{region: NORTH, amount: 250}, {region: NORTH, amount: 175}, {region: WEST, amount: 100}, {region: UNKNOWN, amount: 50}]
    - type: Validate
      name: CheckRegion
      input: Transactions
      config:
        rules:
          known_region: region in ["NORTH", "WEST"]
      error_handling: {output: invalid}
    - type: Combine
      name: Totals
      input: CheckRegion
      config:
        group_by: region
        combine: {total: {value: amount, fn: sum}}
    - type: MapToFields
      name: Rejected
      input: CheckRegion.invalid
      config:
        fields: {reason: error.reason}
`

// streamingYAML runs until drained: two keyed steps the update preview
// renames and refuses.
const streamingYAML = `pipeline:
  transforms:
    - type: Generate
      name: Events
      config: {rate: 200, keys: 3, spacing: 100ms}
    - type: Combine
      name: Sums
      input: Events
      windowing: {type: fixed, size: 10s}
      config:
        group_by: key
        combine: {total: {value: amount, fn: sum}}
    - type: Combine
      name: Counts
      input: Events
      windowing: {type: fixed, size: 10s}
      config:
        group_by: key
        combine: {n: {value: amount, fn: count}}
`

// updatedYAML is streamingYAML with Sums renamed Totals (through the
// mapping) and Counts' windows changed from fixed to sessions, which the
// check refuses.
func updatedYAML() string {
	return strings.NewReplacer(
		"name: Sums\n", "name: Totals\n",
		"name: Counts\n      input: Events\n      windowing: {type: fixed, size: 10s}\n",
		"name: Counts\n      input: Events\n      windowing: {type: sessions, gap: 10s}\n",
	).Replace(streamingYAML)
}

// chromiumPath finds the browser, "" when none is installed.
func chromiumPath() string {
	if p := os.Getenv("WEIR_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// newBrowser starts a headless Chromium for the test and returns a tab's
// context, bounded by a deadline.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		if os.Getenv("WEIR_REQUIRE_BROWSER") != "" {
			t.Fatal("WEIR_REQUIRE_BROWSER is set but no Chromium was found (chromium, chromium-browser, google-chrome or $WEIR_CHROMIUM)")
		}
		t.Skip("no Chromium found (install Debian's chromium: apt-get install -y chromium; .ci/run does): skipping the browser test")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1440, 1000), chromedp.Flag("headless", "new"))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	ctx, cancelTime := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

// startWeir opens and serves a weir process in a temp data directory.
func startWeir(t *testing.T, cfg server.Config) (*server.Process, *client.Client) {
	t.Helper()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.CheckpointInterval = 100 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := server.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Serve(); err != nil {
		t.Fatal(errors.Join(err, p.Close(context.Background())))
	}
	t.Cleanup(func() {
		if err := p.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	c, err := client.NewClient(p.Address(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok := p.GeneratedToken(); tok != "" {
		c = c.WithToken(tok)
	}
	return p, c
}

func submit(t *testing.T, c *client.Client, name, yaml string) *client.SubmitResponse {
	t.Helper()
	r, err := c.Submit(context.Background(), client.SubmitRequest{Name: name, Pipeline: yaml, BaseDir: t.TempDir()})
	if err != nil {
		t.Fatalf("submitting %s: %v", name, err)
	}
	return r
}

// waitJob polls the API until the job satisfies ok.
func waitJob(t *testing.T, c *client.Client, id string, what string, ok func(*client.Job) bool) *client.Job {
	t.Helper()
	var j *client.Job
	if !await.Until(30*time.Second, 20*time.Millisecond, func() bool {
		got, err := c.Get(context.Background(), id)
		if err == nil {
			j = got
		}
		return err == nil && ok(j)
	}) {
		t.Fatalf("waiting for %s: job %s is %v", what, id, j)
	}
	return j
}

func running(j *client.Job) bool {
	return j.State == client.StateRunning && j.Metrics != nil && j.LastCheckpoint != nil
}

// screenshot saves the page under docs/images/NAME.png.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("..", "docs", "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// evalUntil evaluates js in the page until it returns true, or fails.
func evalUntil(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	if !await.Until(30*time.Second, 50*time.Millisecond, func() bool {
		var ok bool
		return evaluate(ctx, js, &ok) == nil && ok
	}) {
		t.Fatalf("waiting for %s: %s never held", what, js)
	}
}

type stepCounts struct {
	In, Out, Rejects, Late int64
}

// TestConsoleJobsAndJobPage: the jobs page lists real jobs; the job page
// draws the graph with the job's step names and the API's per-step
// counts; a chart gets points while the page is open; drain from the
// console (behind its confirmation) drains the job.
func TestConsoleJobsAndJobPage(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	p, c := startWeir(t, server.Config{})
	batch := submit(t, c, "orders", batchYAML)
	stream := submit(t, c, "events", streamingYAML)
	done := waitJob(t, c, batch.ID, "the batch job is DONE with its metrics", func(j *client.Job) bool { return j.State == client.StateDone && j.Metrics != nil })
	waitJob(t, c, stream.ID, "the streaming job runs and checkpoints", running)

	base := p.Address()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?refresh=300"),
		present(fmt.Sprintf(`tr[data-job-id=%q]`, batch.ID)),
		present(fmt.Sprintf(`tr[data-job-id=%q]`, stream.ID))); err != nil {
		t.Fatalf("the jobs page does not list both jobs: %v", err)
	}
	var rows []map[string]string
	if err := evaluate(ctx, `[...document.querySelectorAll('#jobs tbody tr')].map(r => ({id: r.dataset.jobId, name: r.dataset.jobName, state: r.dataset.state}))`, &rows); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r["id"]] = r["name"] + " " + r["state"]
	}
	if got[batch.ID] != "orders DONE" || !strings.HasPrefix(got[stream.ID], "events ") {
		t.Errorf("jobs page rows %v, want orders DONE and events", got)
	}
	screenshot(t, ctx, "console-jobs")
	// The filter for active jobs leaves the DONE job out.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?status=active&refresh=300"),
		present(fmt.Sprintf(`tr[data-job-id=%q]`, stream.ID))); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := evaluate(ctx, fmt.Sprintf(`document.querySelectorAll('tr[data-job-id=%q]').length`, batch.ID), &n); err != nil || n != 0 {
		t.Errorf("the active filter shows the DONE job (%d rows, %v)", n, err)
	}

	// The batch job's graph: every step of its graph, counts equal to the API's.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/jobs/"+batch.ID),
		present(`svg.graph g.step[data-step="Totals"][data-in]`)); err != nil {
		t.Fatalf("the job page draws no graph with counts: %v", err)
	}
	var drawn map[string]stepCounts
	if err := evaluate(ctx, `Object.fromEntries([...document.querySelectorAll('svg.graph g.step')].map(g =>
		[g.dataset.step, {In: +g.dataset.in, Out: +g.dataset.out, Rejects: +g.dataset.rejects, Late: +g.dataset.late}]))`, &drawn); err != nil {
		t.Fatal(err)
	}
	want := map[string]stepCounts{}
	for _, s := range done.Metrics.Steps {
		want[s.Name] = stepCounts{s.ElementsIn, s.ElementsOut, s.Rejects, s.DroppedLateElements}
	}
	var graph struct {
		Steps []struct{ Name string } `json:"steps"`
	}
	if err := json.Unmarshal(done.Graph, &graph); err != nil {
		t.Fatal(err)
	}
	var names, drawnNames []string
	for _, s := range graph.Steps {
		names = append(names, s.Name)
	}
	for n := range drawn {
		drawnNames = append(drawnNames, n)
	}
	sort.Strings(names)
	sort.Strings(drawnNames)
	if strings.Join(names, ",") != strings.Join(drawnNames, ",") {
		t.Errorf("graph boxes %v, want the job's steps %v", drawnNames, names)
	}
	for name, w := range want {
		if drawn[name] != w {
			t.Errorf("step %s drawn with %+v, the API says %+v", name, drawn[name], w)
		}
	}
	if want["Orders"].Out != 4 || want["Totals"].In != 3 {
		t.Errorf("API metrics %+v: want Orders out 4, Totals in 3", want)
	}
	var edges int
	if err := evaluate(ctx, `document.querySelectorAll('svg.graph path.edge').length`, &edges); err != nil || edges != 2 {
		t.Errorf("the graph has %d edges (%v), want 2", edges, err)
	}

	// A step's details count its rejects by reason: the reference
	// fixture's UNKNOWN order fails the rule known_region.
	checked := submit(t, c, "checked", checkedYAML)
	waitJob(t, c, checked.ID, "the checked job is DONE with its metrics", func(j *client.Job) bool { return j.State == client.StateDone && j.Metrics != nil })
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/jobs/"+checked.ID),
		present(`svg.graph g.step[data-step="CheckRegion"]`)); err != nil {
		t.Fatalf("the checked job's page draws no graph: %v", err)
	}
	evalUntil(t, ctx, "clicking CheckRegion", `(() => { const e = document.querySelector('svg.graph g.step[data-step="CheckRegion"]'); if (!e) return false; e.dispatchEvent(new MouseEvent('click', {bubbles: true})); return true; })()`)
	evalUntil(t, ctx, "CheckRegion's rejects by reason", `(() => { const td = document.querySelector('#step-details[data-step="CheckRegion"] tr[data-field="rejects_by_reason"] td');
		return !!td && td.textContent === 'known_region: 1'; })()`)

	// The streaming job: a chart fills while the page is open.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/jobs/events?refresh=250"),
		present(`svg.graph g.step[data-step="Sums"]`)); err != nil {
		t.Fatal(err)
	}
	evalUntil(t, ctx, "the throughput chart has points", `+(document.querySelector('#chart-throughput svg.chart')||{dataset:{}}).dataset.points >= 3`)
	evalUntil(t, ctx, "the system lag chart has points", `+(document.querySelector('#chart-system-lag svg.chart')||{dataset:{}}).dataset.points >= 3`)
	// The stateful boxes show their key counts, the API's: Generate
	// writes 3 keys, and each windowed Combine holds all 3 at every moment
	// after the first elements (a key's next window opens before its
	// previous one ends).
	evalUntil(t, ctx, "the stateful boxes show key counts",
		`['Sums', 'Counts'].every(n => (document.querySelector('svg.graph g.step[data-step="' + n + '"]')||{dataset:{}}).dataset.keys === '3')`)
	// The page draws what the API said at its last refresh; a window
	// that fires between two samples can make a count dip for a moment on
	// a loaded machine, so the two are compared until they agree.
	var drawnKeys map[string]string
	apiKeys := map[string]string{}
	if !await.Until(30*time.Second, 100*time.Millisecond, func() bool {
		sj, err := c.Get(context.Background(), stream.ID)
		if err != nil || sj.Metrics == nil {
			return false
		}
		apiKeys = map[string]string{}
		for _, st := range sj.Metrics.Steps {
			if st.Keys != nil {
				apiKeys[st.Name] = fmt.Sprint(*st.Keys)
			}
		}
		if err := evaluate(ctx, `Object.fromEntries([...document.querySelectorAll('svg.graph g.step.keyed')].map(g => [g.dataset.step, g.dataset.keys || '']))`, &drawnKeys); err != nil {
			return false
		}
		return fmt.Sprint(drawnKeys) == fmt.Sprint(apiKeys) && apiKeys["Sums"] == "3" && apiKeys["Counts"] == "3"
	}) {
		t.Errorf("key counts drawn %v, the API says %v (want them equal, Sums and Counts 3)", drawnKeys, apiKeys)
	}
	screenshot(t, ctx, "console-job")
	// The composite of the windowed Combine collapses into one box and
	// expands again.
	// The graph is redrawn at every refresh, so the clicks are sent in
	// the page, to the element there at that moment.
	clickJS := func(sel string) string {
		return fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.dispatchEvent(new MouseEvent('click', {bubbles: true})); return true; })()`, sel)
	}
	evalUntil(t, ctx, "clicking the composite frame of Sums", clickJS(`g.composite-frame[data-composite="Sums"] text`))
	if err := chromedp.Do(ctx, present(`svg.graph g.step.composite[data-step="Sums"]`)); err != nil {
		t.Fatalf("collapsing the composite Sums: %v", err)
	}
	var inner int
	if err := evaluate(ctx, `document.querySelectorAll('svg.graph g.step[data-step="Sums/Window"]').length`, &inner); err != nil || inner != 0 {
		t.Errorf("the collapsed composite still shows Sums/Window (%d, %v)", inner, err)
	}
	evalUntil(t, ctx, "clicking the collapsed Sums", clickJS(`svg.graph g.step.composite[data-step="Sums"]`))
	if err := chromedp.Do(ctx, present(`svg.graph g.step[data-step="Sums/Window"]`)); err != nil {
		t.Fatalf("expanding the composite Sums: %v", err)
	}

	// Cancel, then "keep the job": nothing is sent.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#action-cancel`)),
		present(`#confirm-dialog:not([hidden])`), chromedp.Click(chromedp.CSS(`#confirm-no`))); err != nil {
		t.Fatal(err)
	}
	evalUntil(t, ctx, "the page says the cancel was not sent", `document.getElementById('action-result').textContent.includes('Cancel not sent')`)
	// A snapshot from the console.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#action-snapshot`)),
		present(`#confirm-dialog:not([hidden])`), chromedp.Click(chromedp.CSS(`#confirm-yes`))); err != nil {
		t.Fatal(err)
	}
	evalUntil(t, ctx, "the page names the new snapshot", `/Snapshot \S+ is /.test(document.getElementById('action-result').textContent)`)
	if snaps, err := c.ListSnapshots(context.Background(), stream.ID, false); err != nil || len(snaps) != 1 {
		t.Errorf("the job has %d snapshots (%v), want the console's one", len(snaps), err)
	}
	if j, err := c.Get(context.Background(), stream.ID); err != nil || j.State != client.StateRunning {
		t.Fatalf("the job is %v (%v) after a kept cancel and a snapshot, want RUNNING", j.State, err)
	}
	// Drain from the console, behind the confirmation.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#action-drain`)),
		present(`#confirm-dialog:not([hidden])`)); err != nil {
		t.Fatal(err)
	}
	if j, err := c.Get(context.Background(), stream.ID); err != nil || j.State != client.StateRunning {
		t.Fatalf("the job changed before the confirmation: %v %v", j.State, err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#confirm-yes`))); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, stream.ID, "the job drains after the console's drain", func(j *client.Job) bool { return j.State == client.StateDrained })
	evalUntil(t, ctx, "the page shows DRAINED", `!!document.querySelector('#job-head [data-state="DRAINED"]')`)
}

// TestConsoleLineageAndPreview: the lineage page links a job replaced by
// an in-place update to its successor; the update preview marks a step
// renamed through the mapping and a refused one, at their steps.
func TestConsoleLineageAndPreview(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	p, c := startWeir(t, server.Config{})
	old := submit(t, c, "totals", streamingYAML)
	waitJob(t, c, old.ID, "the job runs and checkpoints", running)
	base := p.Address()

	// Preview first (the check changes nothing).
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/jobs/totals/update"),
		present(`#pipeline`),
		chromedp.SetValue(chromedp.CSS(`#pipeline`), updatedYAML()),
		chromedp.SendKeys(chromedp.CSS(`#mapping`), `{"Sums": "Totals"}`),
		chromedp.Click(chromedp.CSS(`#check`)),
		present(`#preview-result[data-checked] .report`)); err != nil {
		t.Fatalf("the update preview shows no report: %v", err)
	}
	var marks map[string]string
	if err := evaluate(ctx, `Object.fromEntries([...document.querySelectorAll('#old-graph g.step, #new-graph g.step')].map(g =>
		[g.closest('.graph-box').id + ':' + g.dataset.step, (g.getAttribute('class').match(/mark-(\w+)/)||[])[1] || '']))`, &marks); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"old-graph:Sums": "renamed", "old-graph:Counts": "refused", "old-graph:Events": "matched",
		"new-graph:Totals": "renamed", "new-graph:Counts": "refused", "new-graph:Events": "matched",
	} {
		if marks[k] != want {
			t.Errorf("%s is marked %q, want %q (all: %v)", k, marks[k], want, marks)
		}
	}
	var finding struct{ Code, Fix string }
	if err := evaluate(ctx, `(() => { const r = document.querySelector('tr.finding.error[data-step="Counts"]'); return r ? {Code: r.dataset.code, Fix: r.cells[4].textContent} : {}; })()`, &finding); err != nil {
		t.Fatal(err)
	}
	if finding.Code == "" {
		t.Errorf("the report shows no refusal at Counts")
	}
	// The new graph is the server's: the windowed Combine's inner step,
	// which the pipeline's text does not name, is drawn and marked too.
	if marks["new-graph:Totals/Window"] != "renamed" || marks["new-graph:Counts/Window"] == "" {
		t.Errorf("the new graph's inner steps are marked %q and %q, want the server's graph with Totals/Window renamed (all: %v)",
			marks["new-graph:Totals/Window"], marks["new-graph:Counts/Window"], marks)
	}
	// The plan below the report: Sums carried over as Totals with the keys
	// the running job holds, Counts refused.
	var plan map[string]string
	if err := evaluate(ctx, `Object.fromEntries([...document.querySelectorAll('#plan-steps tbody tr')].map(r => [r.dataset.name, r.dataset.action + ':' + r.cells[4].textContent]))`, &plan); err != nil {
		t.Fatal(err)
	}
	if a := plan["Sums"]; !strings.HasPrefix(a, "renamed:") || a == "renamed:" {
		t.Errorf("the plan shows Sums as %q, want renamed with its key count (all: %v)", a, plan)
	}
	if a := plan["Counts"]; !strings.HasPrefix(a, "refused:") {
		t.Errorf("the plan shows Counts as %q, want refused (all: %v)", a, plan)
	}
	screenshot(t, ctx, "console-update-preview")

	// The same update as a Jinja template: the server renders it with the
	// page's variables, the marks are the same and the rendered text is shown.
	template := strings.Replace(updatedYAML(), "name: Totals", "name: {{ total_step }}", 1)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/jobs/totals/update"),
		present(`#pipeline`),
		chromedp.SetValue(chromedp.CSS(`#pipeline`), template),
		chromedp.SendKeys(chromedp.CSS(`#mapping`), `{"Sums": "Totals"}`),
		chromedp.SendKeys(chromedp.CSS(`#jinja-variables`), `{"total_step": "Totals"}`),
		chromedp.Click(chromedp.CSS(`#check`)),
		present(`#preview-result[data-checked] .report`), present(`#rendered pre`)); err != nil {
		t.Fatalf("the preview of a template shows no report or rendered text: %v", err)
	}
	var jinjaMarks map[string]string
	if err := evaluate(ctx, `Object.fromEntries([...document.querySelectorAll('#new-graph g.step')].map(g =>
		[g.dataset.step, (g.getAttribute('class').match(/mark-(\w+)/)||[])[1] || '']))`, &jinjaMarks); err != nil {
		t.Fatal(err)
	}
	var renderedText string
	if err := evaluate(ctx, `document.querySelector('#rendered pre').textContent`, &renderedText); err != nil {
		t.Fatal(err)
	}
	if jinjaMarks["Totals"] != "renamed" || jinjaMarks["Counts"] != "refused" || !strings.Contains(renderedText, "name: Totals") {
		t.Errorf("the rendered template's new graph is marked %v and rendered as %q, want Totals renamed, Counts refused", jinjaMarks, renderedText)
	}

	// A pipeline that does not load: no graph, the error at its line.
	broken := strings.Replace(updatedYAML(), "type: Combine\n      name: Totals", "type: NoSuchTransform\n      name: Totals", 1)
	wantLine := 1 + strings.Count(broken[:strings.Index(broken, "NoSuchTransform")], "\n")
	_, apiErr := c.Update(context.Background(), client.UpdateRequest{SubmitRequest: client.SubmitRequest{Name: "totals", Pipeline: broken, BaseDir: t.TempDir()},
		TransformNameMapping: `{"Sums": "Totals"}`, ValidateOnly: true})
	if apiErr == nil || !strings.Contains(apiErr.Error(), fmt.Sprintf(":%d:", wantLine)) {
		t.Fatalf("the API's answer to a broken pipeline: %v, want an error at line %d", apiErr, wantLine)
	}
	for _, tc := range []struct{ what, text string }{
		{"an unknown transform", broken},
		{"a Jinja include", strings.Replace(updatedYAML(), "name: Totals", "name: {% include 'steps.yaml' %}", 1)},
	} {
		line := wantLine
		if tc.what == "a Jinja include" {
			line = 1 + strings.Count(tc.text[:strings.Index(tc.text, "{%")], "\n")
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/jobs/totals/update"),
			present(`#pipeline`),
			chromedp.SetValue(chromedp.CSS(`#pipeline`), tc.text),
			chromedp.Click(chromedp.CSS(`#check`)),
			present(`#preview-result[data-checked] #load-error a.position`)); err != nil {
			t.Fatalf("%s: the preview shows no positioned error: %v", tc.what, err)
		}
		var pos struct {
			Code, Line string
			Boxes      int
		}
		if err := evaluate(ctx, `(() => { const a = document.querySelector('#load-error a.position');
			return {Code: document.getElementById('load-error').dataset.code, Line: a.dataset.line, Boxes: document.querySelectorAll('#new-graph g.step').length}; })()`, &pos); err != nil {
			t.Fatal(err)
		}
		if pos.Code != "INVALID_PIPELINE" || pos.Line != fmt.Sprint(line) || pos.Boxes != 0 {
			t.Errorf("%s: error shown %+v, want INVALID_PIPELINE at line %d and no new graph", tc.what, pos, line)
		}
		if tc.what == "an unknown transform" {
			screenshot(t, ctx, "console-update-preview-error")
		}
	}
	if j, err := c.Get(context.Background(), old.ID); err != nil || j.State != client.StateRunning {
		t.Fatalf("the preview changed the job: %v %v", j.State, err)
	}

	// A compatible in-place update, then the lineage page.
	res, err := c.Update(context.Background(), client.UpdateRequest{SubmitRequest: client.SubmitRequest{Name: "totals", Pipeline: streamingYAML, BaseDir: t.TempDir()}})
	if err != nil {
		t.Fatalf("updating: %v", err)
	}
	succ := res.Job.ID
	waitJob(t, c, old.ID, "the old job is UPDATED", func(j *client.Job) bool { return j.State == client.StateUpdated })
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/lineage/totals"),
		present(fmt.Sprintf(`li[data-job-id=%q] a.successor`, old.ID))); err != nil {
		t.Fatalf("the lineage page shows no successor link: %v", err)
	}
	var link struct{ Href, Successor, How string }
	if err := evaluate(ctx, fmt.Sprintf(`(() => { const li = document.querySelector('li[data-job-id=%q]'); const a = li.querySelector('a.successor');
		return {Href: a.getAttribute('href'), Successor: a.dataset.successor, How: document.querySelector('li[data-job-id=%q] strong').textContent}; })()`, old.ID, succ), &link); err != nil {
		t.Fatal(err)
	}
	if link.Href != "/jobs/"+succ || link.Successor != succ || link.How != "in-place update" {
		t.Errorf("lineage link %+v, want /jobs/%s, an in-place update", link, succ)
	}
	var attempts int
	if err := evaluate(ctx, `document.querySelectorAll('#attempts .attempt').length`, &attempts); err != nil || attempts < 1 {
		t.Errorf("the lineage page shows %d attempts (%v), want the validate-only check", attempts, err)
	}
	screenshot(t, ctx, "console-lineage")
	// Following the link opens the successor's job page.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`li[data-job-id=%q] a.successor`, old.ID))),
		present(`#job-id`)); err != nil {
		t.Fatal(err)
	}
	var shown string
	if err := evaluate(ctx, `document.getElementById('job-id').textContent`, &shown); err != nil || shown != succ {
		t.Errorf("the successor link opened job %q (%v), want %s", shown, err, succ)
	}
}

// TestConsoleAsksForToken: with a token required, the page is served but
// the API calls are refused until the user gives the token, which the page
// then sends as a bearer token; the Host check still guards the pages.
func TestConsoleAsksForToken(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	p, c := startWeir(t, server.Config{GenerateAuthToken: true})
	j := submit(t, c, "orders", batchYAML)
	base := p.Address()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?refresh=300"),
		present(`#token-dialog:not([hidden]) #token-input`)); err != nil {
		t.Fatalf("the console does not ask for a token: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(`#token-input`), "wrong-token-0123456789"),
		chromedp.Click(chromedp.CSS(`#token-save`))); err != nil {
		t.Fatal(err)
	}
	evalUntil(t, ctx, "a wrong token is asked again", `!document.getElementById('token-dialog').hidden && document.getElementById('token-why').textContent.includes('refused')`)
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`#token-input`), p.GeneratedToken()),
		chromedp.Click(chromedp.CSS(`#token-save`)),
		present(fmt.Sprintf(`tr[data-job-id=%q]`, j.ID))); err != nil {
		t.Fatalf("the jobs page does not load with the token: %v", err)
	}
	var stored string
	if err := evaluate(ctx, `sessionStorage.getItem('weir.token')`, &stored); err != nil || stored != p.GeneratedToken() {
		t.Errorf("sessionStorage holds %q (%v), want the token", stored, err)
	}
	// A page of the console under a foreign Host name is refused
	// (DNS rebinding), and so is the API with a foreign Origin.
	for _, tc := range []struct {
		path, header, value string
		status              int
	}{
		{"/", "Host", "evil.example", 403},
		{"/console/app.js", "Host", "evil.example", 403},
		{"/", "", "", 200},
		{"/v1/jobs", "", "", 401},
		{"/v1/jobs", "Origin", "http://evil.example", 403},
	} {
		if got := status(t, base+tc.path, tc.header, tc.value); got != tc.status {
			t.Errorf("GET %s with %s %q: %d, want %d", tc.path, tc.header, tc.value, got, tc.status)
		}
	}
}

// status sends GET url with one header (when name is not "") and returns
// the reply's status.
func status(t *testing.T, url, name, value string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	switch name {
	case "Host":
		req.Host = value
	case "":
	default:
		req.Header.Set(name, value)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// evaluate runs js in the page and decodes its value into dst.
func evaluate[T any](ctx context.Context, js string, dst *T) error {
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err == nil {
		*dst = v
	}
	return err
}

// TestConsoleTopics: the topics page lists a topic and its subscription
// with its backlog, and the job that reads the subscription.
func TestConsoleTopics(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	p, c := startWeir(t, server.Config{})
	bg := context.Background()
	if _, err := c.CreateTopic(bg, client.CreateTopicRequest{Name: "clicks"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSubscription(bg, client.CreateSubscriptionRequest{Name: "clicks-audit", Topic: "clicks"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSubscription(bg, client.CreateSubscriptionRequest{Name: "clicks-idle", Topic: "clicks"}); err != nil {
		t.Fatal(err)
	}
	var msgs []client.PublishMessage
	for i := 0; i < 5; i++ {
		msgs = append(msgs, client.PublishMessage{Data: json.RawMessage(fmt.Sprintf(`{"user": "u%d", "n": %d}`, i, i))})
	}
	if _, err := c.Publish(bg, "clicks", msgs); err != nil {
		t.Fatal(err)
	}
	j := submit(t, c, "audit", `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: ReadClicks
      config:
        subscription: clicks-audit
        schema: {user: string, n: int}
    - type: Combine
      name: PerUser
      input: ReadClicks
      windowing: {type: fixed, size: 1m}
      config:
        group_by: user
        combine: {total: {value: n, fn: sum}}
`)
	waitJob(t, c, j.ID, "the reading job runs", running)
	if err := chromedp.Do(ctx, chromedp.Navigate(p.Address()+"/topics?refresh=300"),
		present(`tr[data-topic="clicks"]`),
		present(`tr[data-subscription="clicks-idle"]`)); err != nil {
		t.Fatalf("the topics page does not list the topic and its subscriptions: %v", err)
	}
	evalUntil(t, ctx, "the audit subscription names its reader", fmt.Sprintf(`!!document.querySelector('tr[data-subscription="clicks-audit"] a[href="/jobs/%s"]')`, j.ID))
	var idle struct{ Backlog, Readers string }
	if err := evaluate(ctx, `(() => { const r = document.querySelector('tr[data-subscription="clicks-idle"]'); return {Backlog: r.cells[2].textContent, Readers: r.cells[5].textContent}; })()`, &idle); err != nil {
		t.Fatal(err)
	}
	if idle.Backlog != "5" || idle.Readers != "" {
		t.Errorf("clicks-idle shows backlog %q, readers %q; want 5 and none", idle.Backlog, idle.Readers)
	}
	screenshot(t, ctx, "console-topics")

	// A topic source's subscription, made by the server for job tally:
	// read by tally while it runs, by nobody once it ended (issue 22
	// item 7) — not by another job whose name it starts with.
	tally := submit(t, c, "tally", tallyYAML)
	waitJob(t, c, tally.ID, "the topic job runs", running)
	tallyRow := `tr[data-subscription="tally--ReadClicks"]`
	evalUntil(t, ctx, "tally's subscription names its reader", fmt.Sprintf(`!!document.querySelector('%s a[href="/jobs/%s"]')`, tallyRow, tally.ID))
	if _, err := c.Cancel(bg, tally.ID); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, tally.ID, "the topic job ends", func(j *client.Job) bool { return j.State == client.StateCancelled })
	// Job tal reads the same topic through its own subscription; its name
	// begins tally's subscription's, which it does not read.
	tal := submit(t, c, "tal", tallyYAML)
	waitJob(t, c, tal.ID, "job tal runs", running)
	evalUntil(t, ctx, "tal's subscription names its reader", fmt.Sprintf(`!!document.querySelector('tr[data-subscription="tal--ReadClicks"] a[href="/jobs/%s"]')`, tal.ID))
	evalUntil(t, ctx, "tally's subscription lists no reader once tally ended", fmt.Sprintf(`(() => { const r = document.querySelector('%s'); return !!r && r.cells[5].textContent === ''; })()`, tallyRow))
}

// tallyYAML reads topic clicks through the job's own subscription.
const tallyYAML = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: ReadClicks
      config:
        topic: clicks
        schema: {user: string, n: int}
    - type: Combine
      name: PerUser
      input: ReadClicks
      windowing: {type: fixed, size: 1m}
      config:
        group_by: user
        combine: {total: {value: n, fn: sum}}
`

// present waits until an element matches sel, asking the page (the pages
// redraw what they poll, so a node found by the DevTools protocol may be
// gone before it is inspected). The tab's context bounds the wait.
func present(sel string) chromedp.Action[chromedp.Void] {
	js := fmt.Sprintf(`!!document.querySelector(%q)`, sel)
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if ok, err := chromedp.Evaluate[bool](js)(ctx, tg); err == nil && ok {
				return chromedp.Void{}, nil
			}
			select {
			case <-ctx.Done():
				return chromedp.Void{}, fmt.Errorf("waiting for %s: %w", sel, ctx.Err())
			case <-tick.C:
			}
		}
	}
}

// rehearseYAML sums clicks per user into a SQL table; rehearsals compare
// its sink's rows.
const rehearseYAML = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: ReadClicks
      config:
        topic: rclicks
        schema: {user: string, n: int}
    - type: Combine
      name: PerUser
      input: ReadClicks
      windowing: {type: fixed, size: 1m}
      config:
        group_by: user
        combine: {total: {value: n, fn: sum}}
    - type: WriteToSql
      name: WriteTotals
      input: PerUser
      config: {table: rtotals, key: [user]}
`

// TestConsoleRehearse: the update preview's "Rehearse on the last N
// minutes" runs the running job's pipeline and the new one over the input
// its topic retains and shows the verdict: a pipeline that computes the
// same answers passes, one that takes the maximum instead of the sum is
// refused with its differences; neither changes the job.
func TestConsoleRehearse(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	// A one-byte trace budget: the recorded stretch goes to the spill
	// directory (but for its last chunk), and the verdict says how much did.
	spill := t.TempDir()
	p, c := startWeir(t, server.Config{RehearseTraceMemory: 1, RehearseTraceDir: spill})
	bg := context.Background()
	if _, err := c.CreateTopic(bg, client.CreateTopicRequest{Name: "rclicks"}); err != nil {
		t.Fatal(err)
	}
	j := submit(t, c, "rsums", rehearseYAML)
	waitJob(t, c, j.ID, "the job runs", running)
	// Six clicks of 300 KB each (a field the schema does not read): the
	// stretch passes the trace's 1 MiB chunk, so part of it spills.
	pad := strings.Repeat("x", 300<<10)
	var msgs []client.PublishMessage
	for i := 0; i < 6; i++ {
		msgs = append(msgs, client.PublishMessage{Data: json.RawMessage(fmt.Sprintf(`{"user": "u%d", "n": %d, "pad": %q}`, i%2, i+1, pad))})
	}
	if _, err := c.Publish(bg, "rclicks", msgs); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, pipeline, want string
		differences          bool
	}{
		{"same answers", strings.Replace(rehearseYAML, "name: PerUser", "name: PerUser # unchanged", 1), "passed", false},
		{"max instead of sum", strings.Replace(rehearseYAML, "fn: sum", "fn: max", 1), "refused", true},
	} {
		if err := chromedp.Do(ctx, chromedp.Navigate(p.Address()+"/jobs/rsums/update"),
			present(`#pipeline`),
			chromedp.SetValue(chromedp.CSS(`#pipeline`), tc.pipeline),
			chromedp.SetValue(chromedp.CSS(`#rehearse-minutes`), "30"),
			chromedp.Click(chromedp.CSS(`#rehearse`)),
			present(`#rehearsal-result[data-done]`)); err != nil {
			t.Fatalf("%s: the rehearsal shows no verdict: %v", tc.name, err)
		}
		var got struct {
			Done, Text                  string
			Elements, Rows, Differences string
			Recorded                    string
		}
		if err := evaluate(ctx, `(() => { const r = document.querySelector('#rehearsal-result'); const f = (k) => { const c = r.querySelector('tr[data-figure="'+k+'"] td'); return c ? c.textContent : ''; };
			return {Done: r.dataset.done, Text: r.textContent, Elements: f('input'), Rows: f('rows'), Differences: f('differences'), Recorded: f('recorded')}; })()`, &got); err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`^[0-9.]+ MiB \([0-9.]+ (KiB|MiB) on disk\)$`).MatchString(got.Recorded) {
			t.Errorf("%s: the recorded stretch reads %q, want its size and the part spilled to disk", tc.name, got.Recorded)
		}
		if left, err := os.ReadDir(spill); err != nil || len(left) != 0 {
			t.Errorf("%s: the spill directory holds %v after the rehearsal (%v), want nothing", tc.name, left, err)
		}
		if got.Done != tc.want || got.Elements != "6" || got.Rows == "0" || (got.Differences != "0") != tc.differences {
			t.Errorf("%s: rehearsal %q with %s elements, %s rows compared, %s differences; want %s over 6 elements (differences: %v)\n%s",
				tc.name, got.Done, got.Elements, got.Rows, got.Differences, tc.want, tc.differences, got.Text)
		}
		if tc.name == "max instead of sum" {
			screenshot(t, ctx, "console-rehearse")
		}
	}
	if cur, err := c.Get(bg, "rsums"); err != nil || cur.ID != j.ID || cur.State != client.StateRunning {
		t.Fatalf("after the rehearsals the job is %v: %v", cur, err)
	}
}

// sinkYAML writes per-second totals into a SQLite table: a buffering
// sink, which holds each checkpoint's rows until it commits them.
const sinkYAML = `pipeline:
  transforms:
    - type: Generate
      name: Events
      config: {rate: 200, keys: 3, spacing: 100ms}
    - type: Combine
      name: Sums
      input: Events
      windowing: {type: fixed, size: 1s}
      config:
        group_by: key
        combine: {total: {value: amount, fn: sum}}
    - type: WriteToSql
      name: WriteSums
      input: Sums
      config: {table: sums, key: [key]}
`

// TestConsoleJobPageSinks: the job page of a job whose sink holds more
// than the server's bound between checkpoints says what the sink holds
// and how long the job's sources waited for it.
func TestConsoleJobPageSinks(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	p, c := startWeir(t, server.Config{MaxSinkBuffer: 16})
	j := submit(t, c, "sums", sinkYAML)
	waitJob(t, c, j.ID, "the job waits for its sink", func(j *client.Job) bool {
		return running(j) && j.Metrics.SinkWaitSeconds > 0 && j.Metrics.SinkBufferedBytes != nil
	})
	if err := chromedp.Do(ctx, chromedp.Navigate(p.Address()+"/jobs/"+j.ID), present(`#sinks`)); err != nil {
		t.Fatalf("the job page shows no Sinks row: %v", err)
	}
	var text string
	if err := evaluate(ctx, `document.querySelector('#sinks').textContent`, &text); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9.]+ (B|KiB|MiB) held for the next checkpoint; the sources waited [0-9.]+ (ms|s) for them$`).MatchString(text) {
		t.Errorf("Sinks row %q: want what the sink holds and the sources' wait", text)
	}
}
