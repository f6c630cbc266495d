package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/service"
)

const batchYAML = `pipeline:
  transforms:
    - type: Create
      name: In
      config:
        elements: [{region: NORTH, amount: 250}, {region: WEST, amount: 100}]
    - type: Combine
      name: Totals
      input: In
      config:
        group_by: region
        combine: {total: {value: amount, fn: sum}}
`

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
`

// newTestServer runs a service in a temp data dir behind httptest.
func newTestServer(t *testing.T) (*httptest.Server, *Client) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	svc, err := service.Open(context.Background(), service.Options{DataDir: t.TempDir(), CheckpointInterval: 50 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(NewServer(svc, logger))
	t.Cleanup(func() {
		ts.Close()
		if err := svc.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	c, err := NewClient(ts.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ts, c
}

func body(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestAPIRequests(t *testing.T) {
	ts, c := newTestServer(t)
	base := t.TempDir()
	ctx := context.Background()
	stream, err := c.Submit(ctx, SubmitRequest{Name: "stream", Pipeline: streamingYAML, BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.Submit(ctx, SubmitRequest{Name: "batch", Pipeline: batchYAML, BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, batch.ID, client.StateDone)

	tests := []struct {
		name, method, path, body string
		status                   int
		code                     errcode.Code
		contains                 []string
	}{
		{"health", "GET", "/healthz", "", 200, "", []string{`"ok"`}},
		{"submit", "POST", "/v1/jobs", body(SubmitRequest{Name: "other", Pipeline: batchYAML, BaseDir: base}), 201, "", []string{`"id"`, `"name": "other"`}},
		{"unknown field", "POST", "/v1/jobs", `{"name": "x", "pipeline": "p", "base_dir": "/", "colour": "red"}`, 400, errcode.InvalidRequest, []string{`unknown field \"colour\"`, "base_dir"}},
		{"unknown option", "POST", "/v1/jobs", `{"name": "x", "pipeline": "p", "base_dir": "/", "options": {"num_wokers": 2}}`, 400, errcode.InvalidRequest, []string{"num_wokers", "options.num_workers"}},
		{"bad json", "POST", "/v1/jobs", `{"name": `, 400, errcode.InvalidRequest, []string{"not valid JSON"}},
		{"syntax error", "POST", "/v1/jobs", `{"name" "x"}`, 400, errcode.InvalidRequest, []string{"not valid JSON", "byte"}},
		{"wrong type", "POST", "/v1/jobs", `{"name": 3}`, 400, errcode.InvalidRequest, []string{`\"name\"`, "a string"}},
		{"trailing data", "POST", "/v1/jobs", `{"name": "x"} {}`, 400, errcode.InvalidRequest, []string{"after its JSON object"}},
		{"empty body", "POST", "/v1/jobs", ``, 400, errcode.InvalidRequest, []string{"empty"}},
		{"invalid name", "POST", "/v1/jobs", body(SubmitRequest{Name: "Bad_Name", Pipeline: batchYAML, BaseDir: base}), 400, errcode.InvalidJobName, []string{"Bad_Name"}},
		{"invalid options", "POST", "/v1/jobs", body(SubmitRequest{Name: "x", Pipeline: batchYAML, BaseDir: base, Options: client.JobOptions{NumWorkers: -2}}), 400, errcode.InvalidOptions, []string{"num_workers"}},
		{"invalid pipeline", "POST", "/v1/jobs", body(SubmitRequest{Name: "x", Pipeline: "pipeline:\n  transforms:\n    - type: Nope\n", PipelineFile: "/home/me/p.yaml", BaseDir: base}), 400, errcode.InvalidPipeline, []string{"/home/me/p.yaml:3:13", "Nope"}},
		{"second active job", "POST", "/v1/jobs", body(SubmitRequest{Name: "stream", Pipeline: streamingYAML, BaseDir: base}), 409, errcode.JobNameActive, []string{stream.ID}},
		{"list", "GET", "/v1/jobs", "", 200, "", []string{stream.ID, batch.ID}},
		{"list active", "GET", "/v1/jobs?status=active", "", 200, "", []string{stream.ID}},
		{"list bad status", "GET", "/v1/jobs?status=sleeping", "", 400, errcode.InvalidFilter, []string{"sleeping"}},
		{"list bad parameter", "GET", "/v1/jobs?state=active", "", 400, errcode.InvalidRequest, []string{`\"state\"`}},
		{"get by id", "GET", "/v1/jobs/" + batch.ID, "", 200, "", []string{`"state": "DONE"`, `"type": "Batch"`, `"generation": 1`, `"graph"`}},
		{"get by name", "GET", "/v1/jobs/stream", "", 200, "", []string{stream.ID, `"state": "RUNNING"`, `"metrics"`}},
		{"get unknown", "GET", "/v1/jobs/nope", "", 404, errcode.JobNotFound, []string{`\"nope\"`}},
		{"get with action", "GET", "/v1/jobs/stream:drain", "", 405, errcode.MethodNotAllowed, nil},
		{"drain a batch job", "POST", "/v1/jobs/" + batch.ID + ":drain", "", 409, errcode.JobTerminated, nil},
		{"cancel unknown", "POST", "/v1/jobs/nope:cancel", "", 404, errcode.JobNotFound, nil},
		{"unknown action", "POST", "/v1/jobs/stream:pause", "", 404, errcode.NotFound, []string{"pause"}},
		{"no action", "POST", "/v1/jobs/stream", "", 405, errcode.MethodNotAllowed, nil},
		{"wrong method", "DELETE", "/v1/jobs", "", 405, errcode.MethodNotAllowed, nil},
		{"unknown route", "GET", "/v2/things", "", 404, errcode.NotFound, nil},
		{"drain", "POST", "/v1/jobs/stream:drain", "", 200, "", []string{`"state": "DRAINING"`}},
		// The path form of an action, on a job whose answer cannot race
		// (the stream above may already be DRAINED by now).
		{"cancel a finished job (path form)", "POST", "/v1/jobs/batch/cancel", "", 409, errcode.JobTerminated, []string{"DONE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, ts.URL+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
			if tt.code != "" {
				var eb ErrorBody
				dec := json.NewDecoder(strings.NewReader(string(b)))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&eb); err != nil || eb.Error.Code != tt.code || eb.Error.Message == "" {
					t.Errorf("error body %s (%v), want code %s", b, err, tt.code)
				}
			}
			for _, s := range tt.contains {
				if !strings.Contains(string(b), s) {
					t.Errorf("reply lacks %s:\n%s", s, b)
				}
			}
		})
	}
	waitState(t, c, stream.ID, client.StateDrained)
	// A drained job cannot be drained again.
	_, err = c.Drain(ctx, stream.ID)
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != errcode.JobTerminated || ae.Status != 409 {
		t.Errorf("drain a DRAINED job: %v", err)
	}
}

func waitState(t *testing.T, c *Client, ref string, want client.JobState) *client.Job {
	t.Helper()
	var j *client.Job
	await.Until(20*time.Second, 20*time.Millisecond, func() bool {
		var err error
		if j, err = c.Get(context.Background(), ref); err != nil {
			t.Fatal(err)
		}
		return j.State == want || j.State.Terminal()
	})
	if j.State != want {
		t.Fatalf("job %s is %s (error %q), want %s", ref, j.State, j.Error, want)
	}
	return j
}

func TestAPIMetrics(t *testing.T) {
	ts, c := newTestServer(t)
	j, err := c.Submit(context.Background(), SubmitRequest{Name: "stream", Pipeline: streamingYAML, BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var text, missing string
	await.Until(10*time.Second, 50*time.Millisecond, func() bool {
		resp, err := http.Get(ts.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		text = string(b)
		want := []string{
			`weir_jobs{state="RUNNING",type="Streaming"} 1`,
			`weir_step_elements_in_total{job_id="` + j.ID + `",job_name="stream",step="Sums"}`,
			`weir_job_data_watermark_age_seconds{job_id="` + j.ID + `",job_name="stream"}`,
			`weir_job_system_lag_seconds{job_id="` + j.ID + `",job_name="stream"}`,
			`weir_step_watermark_timestamp_seconds{job_id="` + j.ID + `",job_name="stream",step="Events"}`,
		}
		missing = ""
		for _, w := range want {
			if !strings.Contains(text, w) {
				missing = w
			}
		}
		return missing == ""
	})
	if missing != "" {
		t.Fatalf("/metrics lacks %s:\n%s", missing, text)
	}
	if _, err := c.Cancel(context.Background(), "stream"); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, j.ID, client.StateCancelled)
}

func TestClientUnreachable(t *testing.T) {
	c, err := NewClient("127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(context.Background(), "all"); !errors.Is(err, ErrUnreachable) {
		t.Errorf("err = %v, want ErrUnreachable", err)
	}
	for _, bad := range []string{"ftp://x", "http://", "::"} {
		if _, err := NewClient(bad, nil); err == nil {
			t.Errorf("NewClient(%q) accepted", bad)
		}
	}
}
