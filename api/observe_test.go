package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/errcode"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/service"
)

// stack is a service, a real embedded broker and the API over both, on
// data directories that outlive it (a restart opens a new stack on them).
type stack struct {
	ts    *httptest.Server
	c     *Client
	close func()
}

func openStack(t *testing.T, dataDir, brokerDir string) *stack {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx := context.Background()
	b, err := pubsub.StartEmbedded(ctx, pubsub.Options{StoreDir: brokerDir, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.Open(ctx, service.Options{DataDir: dataDir, CheckpointInterval: 50 * time.Millisecond, Logger: logger, Broker: b})
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(svc, logger, WithPubSub(b))
	ts := httptest.NewServer(srv)
	c, err := NewClient(ts.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	st := &stack{ts: ts, c: c}
	st.close = func() {
		if closed {
			return
		}
		closed = true
		srv.EndStreams()
		ts.Close()
		if err := svc.Close(ctx); err != nil {
			t.Error(err)
		}
		if err := b.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(st.close)
	return st
}

// ordersPipeline reads orders from Pub/Sub and sums them per region in
// one-minute windows: a source with a backlog and a keyed step with timers.
const ordersPipeline = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Orders
      config:
        topic: orders
        schema: {region: string, amount: int, ts: timestamp}
        timestamp_field: ts
    - type: Combine
      name: Totals
      input: Orders
      windowing: {type: fixed, size: 1m}
      config:
        group_by: region
        combine: {total: {value: amount, fn: sum}}
    - type: LogForTesting
      name: Log
      input: Totals
`

func publishOrders(t *testing.T, c *Client, from, n int) {
	t.Helper()
	var msgs []PublishMessage
	for i := from; i < from+n; i++ {
		region := []string{"NORTH", "WEST"}[i%2]
		ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second).Format(time.RFC3339)
		msgs = append(msgs, PublishMessage{Data: json.RawMessage(fmt.Sprintf(`{"region": %q, "amount": %d, "ts": %q}`, region, i, ts)), ID: fmt.Sprint("o", i)})
	}
	if _, err := c.Publish(context.Background(), "orders", msgs); err != nil {
		t.Fatal(err)
	}
}

// publishReusedID publishes to topic orders a message whose ID, o0, the
// topic stores with other data (publishOrders): an ID conflict, dropped.
func publishReusedID(t *testing.T, c *Client) {
	t.Helper()
	res, err := c.Publish(context.Background(), "orders", []PublishMessage{{Data: json.RawMessage(`{"region": "NORTH", "amount": -1}`), ID: "o0"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Published != 0 || res.Duplicates != 1 || res.IDConflicts != 1 || !res.Results[0].IDConflict {
		t.Fatalf("publishing a reused ID: %+v, want one duplicate, an ID conflict", res)
	}
}

// scrape parses GET /metrics with the Prometheus text-format parser.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// counterOf returns the value of counter name for job id's step, or -1.
func counterOf(fams map[string]*dto.MetricFamily, name, id, step string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
	for _, m := range f.Metric {
		l := map[string]string{}
		for _, lp := range m.Label {
			l[lp.GetName()] = lp.GetValue()
		}
		if l["job_id"] == id && l["step"] == step && m.Counter != nil {
			return m.Counter.GetValue()
		}
	}
	return -1
}

// missingMetric returns the first documented metric that the scrape lacks
// for job id, or has with another type or without its labels; "" when all
// are there.
func missingMetric(fams map[string]*dto.MetricFamily, id string) string {
	for _, d := range MetricDefs() {
		if strings.HasPrefix(d.Name, "weir_step_catch_up_") {
			continue // only a re-reading replacement's sources (TestCollectCatchUp)
		}
		if strings.HasPrefix(d.Name, "weir_sql_merge") {
			continue // only a staged SQL table's merges (cmd/weir's TestTablesCommands)
		}
		if strings.HasPrefix(d.Name, "weir_user_") {
			continue // only steps whose code updates user-defined metrics (TestCollectUserMetrics)
		}
		if d.Name == "weir_job_sink_buffered_bytes" {
			continue // only jobs with a buffering sink (service's TestSinkBackpressureIsAnEvent)
		}
		if d.Name == "weir_step_duplicate_id_conflicts_total" {
			continue // only a deduplicating source that met a reused ID (service's TestSourceIDConflictMetric)
		}
		f := fams[d.Name]
		if f == nil {
			return d.Name + ": absent"
		}
		if got := strings.ToLower(f.GetType().String()); got != d.Type {
			return fmt.Sprintf("%s: type %s, documented %s", d.Name, got, d.Type)
		}
		found := false
		for _, m := range f.Metric {
			l := map[string]string{}
			for _, lp := range m.Label {
				l[lp.GetName()] = lp.GetValue()
			}
			ok := true
			for _, want := range d.Labels {
				if _, has := l[want]; !has {
					ok = false
				}
			}
			if ok && (d.Name == "weir_jobs" || strings.HasPrefix(d.Name, "weir_broker_") || l["job_id"] == id || l["topic"] == "orders") {
				found = true
			}
		}
		if !found {
			return fmt.Sprintf("%s: no sample of job %s with labels %v", d.Name, id, d.Labels)
		}
	}
	return ""
}

// TestPrometheusMetricsAcrossRescaleAndRestart: every documented metric
// is exported with its type and labels, and the job's counters never drop
// across an in-flight rescale and a restart of the service; the job's
// events and its metrics history tell the same story.
func TestPrometheusMetricsAcrossRescaleAndRestart(t *testing.T) {
	dataDir, brokerDir := t.TempDir(), t.TempDir()
	st := openStack(t, dataDir, brokerDir)
	ctx := context.Background()
	if _, err := st.c.CreateTopic(ctx, CreateTopicRequest{Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	res, err := st.c.Submit(ctx, SubmitRequest{Name: "orders", Pipeline: ordersPipeline, BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	id := res.ID
	publishOrders(t, st.c, 0, 200)
	publishReusedID(t, st.c)

	// Every documented metric, and the source's 200 elements.
	var fams map[string]*dto.MetricFamily
	missing := ""
	await.Until(30*time.Second, 50*time.Millisecond, func() bool {
		fams = scrape(t, st.ts.URL)
		missing = missingMetric(fams, id)
		return missing == "" && counterOf(fams, "weir_step_elements_in_total", id, "Orders") >= 200
	})
	if missing != "" {
		t.Fatalf("/metrics: %s", missing)
	}
	before := counterOf(fams, "weir_step_elements_in_total", id, "Orders")
	if before != 200 {
		t.Fatalf("Orders read %v elements, want 200", before)
	}
	// Each value is exported once, under one name: the duplicates
	// (elements_out beside elements_produced, pending_timers beside
	// timers_pending) and the precomputed throughput rate are gone.
	for _, gone := range []string{"weir_step_elements_out_total", "weir_step_pending_timers", "weir_step_throughput_elements_per_second", "weir_step_watermark_seconds"} {
		if fams[gone] != nil {
			t.Errorf("/metrics still exports %s", gone)
		}
	}

	// A rescale keeps the counters.
	if _, err := st.c.UpdateOptions(ctx, id, client.JobOptions{NumWorkers: 2}); err != nil {
		t.Fatal(err)
	}
	fams = scrape(t, st.ts.URL)
	if got := counterOf(fams, "weir_step_elements_in_total", id, "Orders"); got < before {
		t.Fatalf("after the rescale Orders counts %v elements, before %v", got, before)
	}
	publishOrders(t, st.c, 200, 50)
	await.Until(30*time.Second, 50*time.Millisecond, func() bool {
		fams = scrape(t, st.ts.URL)
		return counterOf(fams, "weir_step_elements_in_total", id, "Orders") >= 250
	})
	before = counterOf(fams, "weir_step_elements_in_total", id, "Orders")
	if before < 250 {
		t.Fatalf("after the rescale Orders read %v elements, want 250", before)
	}
	// Wait for a checkpoint that covers them, then restart.
	j0, err := st.c.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	await.Until(30*time.Second, 50*time.Millisecond, func() bool {
		j, err := st.c.Get(ctx, id)
		return err == nil && j.LastCheckpoint != nil && j.LastCheckpoint.Epoch > j0.LastCheckpoint.Epoch+1
	})
	st.close()

	st = openStack(t, dataDir, brokerDir)
	// The coarse tier of the history survived the restart.
	coarse, err := st.c.MetricsHistory(ctx, id, url.Values{"step": {"Orders"}, "metric": {service.HistElementsIn}, "resolution": {"1m"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(coarse.Series) != 1 || len(coarse.Series[0].Points) == 0 || coarse.Series[0].Points[len(coarse.Series[0].Points)-1][1] < 250 {
		t.Errorf("the coarse history of Orders' elements_in after the restart: %+v", coarse.Series)
	}
	after := -1.0
	await.Until(30*time.Second, 50*time.Millisecond, func() bool {
		fams = scrape(t, st.ts.URL)
		after = counterOf(fams, "weir_step_elements_in_total", id, "Orders")
		return after >= 0
	})
	if after < before {
		t.Fatalf("after the restart Orders counts %v elements, before %v: a counter dropped", after, before)
	}
	// New orders move the watermark again, and every metric is back (the
	// count of reused message IDs starts again with the server).
	publishOrders(t, st.c, 250, 10)
	publishReusedID(t, st.c)
	await.Until(30*time.Second, 50*time.Millisecond, func() bool {
		fams = scrape(t, st.ts.URL)
		missing = missingMetric(fams, id)
		return missing == "" && counterOf(fams, "weir_step_elements_in_total", id, "Orders") >= 260
	})
	if missing != "" {
		t.Errorf("/metrics after the restart: %s", missing)
	}
	if got := counterOf(fams, "weir_step_elements_in_total", id, "Orders"); got < 260 {
		t.Errorf("after the restart Orders counts %v elements, want at least 260", got)
	}

	// The events: created, running, rescaled, resumed after the restart,
	// the LogForTesting lines (none yet: no window closed), in order.
	evs, err := st.c.Events(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for i, ev := range evs.Events {
		if ev.Seq != uint64(i+1) {
			t.Errorf("event %d has seq %d", i, ev.Seq)
		}
		types = append(types, string(ev.Type))
	}
	for _, want := range []record.EventType{record.EventStateChanged, record.EventRescaleSucceeded, record.EventConditionChanged, record.EventRecovered} {
		if !slices.Contains(types, string(want)) {
			t.Errorf("events %v lack %s", types, want)
		}
	}
	if i, k := slices.Index(types, string(record.EventRescaleSucceeded)), slices.Index(types, string(record.EventRecovered)); i > k {
		t.Errorf("events out of order: %v", types)
	}

	// The history's counter series never go back either.
	var h *client.MetricsHistory
	await.Until(30*time.Second, 50*time.Millisecond, func() bool {
		h, err = st.c.MetricsHistory(ctx, id, url.Values{"step": {"Orders"}, "metric": {service.HistElementsIn}, "resolution": {"5s"}})
		return err != nil || len(h.Series) == 1 && len(h.Series[0].Points) > 0
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Series) != 1 || len(h.Series[0].Points) == 0 {
		t.Fatalf("history of Orders' elements_in: %+v", h.Series)
	}
	prev := 0.0
	for _, p := range h.Series[0].Points {
		if p[1] < prev {
			t.Fatalf("history of Orders' elements_in drops: %v", h.Series[0].Points)
		}
		prev = p[1]
	}
	if _, err := st.c.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, st.c, id, client.StateCancelled)
}

// TestEventsRoutes: GET /v1/jobs/{id}/events lists a job's events, a
// follow stream delivers them as server-sent events until the job ends,
// LogForTesting lines of a server job are its events, and bad parameters
// are refused with messages that name them.
func TestEventsRoutes(t *testing.T) {
	ts, c := newTestServer(t)
	ctx := context.Background()
	const logged = `pipeline:
  transforms:
    - type: Create
      name: In
      config:
        elements: [{region: NORTH, amount: 250}, {region: WEST, amount: 100}]
    - type: LogForTesting
      name: Log
      input: In
`
	res, err := c.Submit(ctx, SubmitRequest{Name: "logged", Pipeline: logged, BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// Follow from the start: the stream ends once the job is DONE.
	var streamed []client.Event
	if err := c.FollowEvents(ctx, res.ID, 0, func(ev client.Event) error {
		streamed = append(streamed, ev)
		return nil
	}); err != nil {
		t.Fatalf("following the events: %v", err)
	}
	list, err := c.Events(ctx, "logged", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Events) != len(streamed) {
		t.Fatalf("streamed %d events, listed %d", len(streamed), len(list.Events))
	}
	var states, lines []string
	for i, ev := range list.Events {
		if streamed[i].Seq != ev.Seq || streamed[i].Message != ev.Message {
			t.Errorf("event %d: streamed %+v, listed %+v", i, streamed[i], ev)
		}
		switch ev.Type {
		case client.EventStateChanged:
			states = append(states, ev.Details["to"].(string))
		case client.EventLog:
			lines = append(lines, ev.Message)
		}
	}
	if want := []string{"PENDING", "RUNNING", "DONE"}; !slices.Equal(states, want) {
		t.Errorf("state events %v, want %v", states, want)
	}
	slices.Sort(lines)
	if want := []string{`{"region": "NORTH", "amount": 250}`, `{"region": "WEST", "amount": 100}`}; !slices.Equal(lines, want) {
		t.Errorf("LogForTesting events %q, want %q", lines, want)
	}
	// after= continues after a sequence number.
	rest, err := c.Events(ctx, res.ID, list.Events[0].Seq, 1)
	if err != nil || len(rest.Events) != 1 || rest.Events[0].Seq != list.Events[1].Seq {
		t.Errorf("after=%d&limit=1: %+v, %v", list.Events[0].Seq, rest, err)
	}

	for _, tc := range []struct{ query, want string }{
		{"after=x", `after="x" is not an event sequence number`},
		{"limit=0", "limit=\"0\" must be an integer between 1 and 10000"},
		{"follow=maybe", `follow="maybe" must be true or false`},
		{"since=1", `unknown query parameter "since"`},
	} {
		resp, err := http.Get(ts.URL + "/v1/jobs/" + res.ID + "/events?" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		var eb ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || eb.Error.Code != errcode.InvalidRequest || !strings.Contains(eb.Error.Message, tc.want) {
			t.Errorf("?%s: %d %s %q, want 400 INVALID_REQUEST with %q", tc.query, resp.StatusCode, eb.Error.Code, eb.Error.Message, tc.want)
		}
	}
	if _, err := c.Events(ctx, "no-such-job", 0, 0); !isCode(err, errcode.JobNotFound) {
		t.Errorf("events of an unknown job: %v", err)
	}
}

func isCode(err error, code errcode.Code) bool {
	ae, ok := err.(*Error)
	return ok && ae.Code == code
}

// TestMetricsDocumented: docs/METRICS.md names every exported metric with
// its type and labels, and every event type.
func TestMetricsDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/METRICS.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, d := range MetricDefs() {
		row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(d.Name) + "` \\| " + d.Type + " \\| `" + regexp.QuoteMeta(strings.Join(d.Labels, ", ")) + "` \\|")
		if !row.MatchString(doc) {
			t.Errorf("docs/METRICS.md has no row | `%s` | %s | `%s` |", d.Name, d.Type, strings.Join(d.Labels, ", "))
		}
	}
	for _, e := range record.EventTypes() {
		if !strings.Contains(doc, "| `"+string(e.Type)+"` |") {
			t.Errorf("docs/METRICS.md does not document event type %s", e.Type)
		}
	}
	g, err := os.ReadFile("../docs/grafana/weir.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(g, &dash); err != nil {
		t.Fatalf("docs/grafana/weir.json: %v", err)
	}
	for _, name := range []string{"weir_job_system_lag_seconds", "weir_job_data_watermark_age_seconds", "weir_job_backlog_elements",
		"weir_step_elements_produced_total", "weir_checkpoint_duration_seconds_bucket", "weir_checkpoint_size_bytes_bucket"} {
		if !strings.Contains(string(g), name) {
			t.Errorf("the Grafana dashboard does not chart %s", name)
		}
	}
}
