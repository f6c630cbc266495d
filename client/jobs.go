package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// SubmitRequest is the body of POST /v1/jobs.
type SubmitRequest struct {
	// Name is the job name ([a-z]([-a-z0-9]*[a-z0-9])?).
	Name string `json:"name"`
	// Pipeline is the YAML text of the pipeline.
	Pipeline string `json:"pipeline"`
	// PipelineFile names the pipeline in error messages (the client's path).
	PipelineFile string `json:"pipeline_file,omitempty"`
	// BaseDir is the absolute directory relative paths in the pipeline
	// resolve against (the client's working directory).
	BaseDir string     `json:"base_dir"`
	Options JobOptions `json:"options"`
	// ServiceOptions are Dataflow's service options, verbatim ("KEY" or
	// "KEY=VALUE"): create_or_update_job, a replacement under a new name
	// (parallel_replace_job_name=OLD), ...
	ServiceOptions []string `json:"service_options,omitempty"`
	// RequestID makes the request idempotent for 24 hours.
	RequestID string `json:"request_id,omitempty"`
	// Partition is the partition a bounded job runs: the partition of the
	// input manifests its file sources read.
	Partition string `json:"partition,omitempty"`
	// Manifest makes every file source of the job read this input
	// manifest (at Partition) instead of its path.
	Manifest string `json:"manifest,omitempty"`
	// Shadow makes a partition run stage its outputs without publishing
	// them (weir run --shadow).
	Shadow bool `json:"shadow,omitempty"`
}

// SubmitResponse is the reply to a submission.
type SubmitResponse struct {
	ID    string   `json:"id"`
	Name  string   `json:"name"`
	State JobState `json:"state"`
	// Error is why the job failed to start, when State is FAILED.
	Error string `json:"error,omitempty"`
	// Replacement is the strategy of the replacement flow the job is the
	// new job of (stop_and_replace, parallel); empty for a new job or an
	// in-place update.
	Replacement string `json:"replacement,omitempty"`
}

// JobList is the reply to GET /v1/jobs.
type JobList struct {
	Jobs []Summary `json:"jobs"`
}

// UpdateRequest is the body of POST /v1/jobs:update: replace the running
// job of Name with a new version of its pipeline (in-place update).
type UpdateRequest struct {
	SubmitRequest
	// TransformNameMapping is JSON {"Old": "New"}; "" maps a step to deletion.
	TransformNameMapping string `json:"transform_name_mapping,omitempty"`
	AllowSourceChange    bool   `json:"allow_source_change,omitempty"`
	// ValidateOnly runs the compatibility check and changes nothing.
	ValidateOnly bool `json:"validate_only,omitempty"`
	// JinjaVariables, when given (even {}), make the server render the
	// pipeline as a Jinja template first; includes and imports are refused
	// (the server reads no file a submitted template names).
	JinjaVariables map[string]any `json:"jinja_variables,omitempty"`
}

// UpdateResponse is the reply to an update (and to a creation from a
// snapshot): the compatibility report, and the new job when the update
// happened. A refused update answers 409 with this body plus an error.
type UpdateResponse struct {
	Report   CompatReport    `json:"report"`
	Job      *SubmitResponse `json:"job,omitempty"`
	Replaced *Summary        `json:"replaced,omitempty"`
	PauseMS  int64           `json:"pause_ms,omitempty"`
	// InStore says the update was made in the store: the running job had
	// no execution (it waited for its connector), so nothing paused; the
	// new job starts at the service's next retry.
	InStore bool `json:"in_store,omitempty"`
	// Options are the new job's options (given ones, the running job's for
	// the rest); OptionsChanged those that differ from the running job's.
	Options        *JobOptions    `json:"options,omitempty"`
	OptionsChanged []OptionChange `json:"options_changed,omitempty"`
	// Notes say what the service options made of the request.
	Notes []string `json:"notes,omitempty"`
	// Graph is the new pipeline's canonical graph, as the check read it
	// (also when it refuses the update): the console's preview draws it.
	Graph json.RawMessage `json:"graph,omitempty"`
	// RenderedPipeline is the pipeline after Jinja rendering, when
	// JinjaVariables were given.
	RenderedPipeline string `json:"rendered_pipeline,omitempty"`
	// SourcePositions says, for a job created from a snapshot, where each
	// Pub/Sub source starts and how its position was placed.
	SourcePositions []SourcePlacement `json:"source_positions,omitempty"`
	// Rehearsal is the verdict of the pre-flight rehearsal
	// (weir_rehearse=required): passed, or the figures of the refusal.
	Rehearsal *RehearsalVerdict `json:"rehearsal,omitempty"`
	// Plan is, for a validate-only update whose new pipeline loaded,
	// everything the update would do (as `weir plan` prints it).
	Plan  *Plan        `json:"plan,omitempty"`
	Error *ErrorDetail `json:"error,omitempty"`
}

// SourcePlacement is where a Pub/Sub source of a job created from a
// snapshot starts.
type SourcePlacement struct {
	Step         string `json:"step"`
	Subscription string `json:"subscription"`
	Topic        string `json:"topic,omitempty"`
	// Translation is "exact" (the snapshot's position, on the broker it was
	// taken on), or how another broker's position was translated:
	// "from-publish-time", "earliest" or "latest".
	Translation string `json:"translation"`
	// StartSeq is the first stream sequence the source reads.
	StartSeq uint64 `json:"start_seq"`
	// Note says it in words.
	Note string `json:"note"`
}

// HistoryResponse is the reply of GET /v1/history/{name}: every job of a
// name, oldest first, and every refused or validate-only update attempt.
type HistoryResponse struct {
	Name     string    `json:"name"`
	Jobs     []*Job    `json:"jobs"`
	Attempts []Attempt `json:"attempts"`
	// Generations tells how each job took over from the one before, its
	// replacement phases, stop window, rescales and rollback snapshots.
	Generations []GenerationHistory `json:"generations"`
}

// OptionsRequest is the body of POST /v1/jobs/{ref}/options: the job's new
// options (a new num_workers rescales it in flight).
type OptionsRequest struct {
	Options JobOptions `json:"options"`
}

// OptionsResponse is the answer to POST /v1/jobs/{ref}/options: the job
// and its options once the change is made (a new autoscaling range moves
// a worker count outside it to its nearest bound, a rescale).
type OptionsResponse struct {
	Summary
	Options JobOptions `json:"options"`
}

// RollbackRequest is the body of POST /v1/jobs/{name}:rollback (optional:
// an empty body goes back to the generation the running job replaced).
type RollbackRequest struct {
	// ToGeneration is the generation to go back to (0: the previous one).
	ToGeneration int64 `json:"to_generation,omitempty"`
	// ValidateOnly answers the report and changes nothing.
	ValidateOnly bool `json:"validate_only,omitempty"`
	// MaxStopDuration bounds the running job's drain ("5m"); it is
	// cancelled after. Default 5m.
	MaxStopDuration string `json:"max_stop_duration,omitempty"`
	// RequestID makes the rollback idempotent for 24 hours, as a
	// submission's: a retry gets the first answer, never a second
	// rollback; the same ID with another request is 409 REQUEST_ID_REUSED.
	RequestID string `json:"request_id,omitempty"`
}

// RollbackResponse is the reply of a rollback: the report (what is re-read
// and recomputed) and the rollback job. A refusal after the check (say
// REWIND_BEYOND_RETENTION) answers its status with this body plus an error.
type RollbackResponse struct {
	RollbackResult
	Error *ErrorDetail `json:"error,omitempty"`
}

// ReleaseRequest is the body of POST /v1/process:release: a new build of
// the Go program that runs the job of Name asks this process to check the
// build's graph against the job's stored graph and, when it passes, to
// checkpoint every job and release the data directory.
type ReleaseRequest struct {
	// Name is the job name.
	Name string `json:"name"`
	// Graph is the new build's canonical graph JSON.
	Graph json.RawMessage `json:"graph"`
	// Program is the new build's executable, recorded with a refused attempt.
	Program string `json:"program,omitempty"`
	// TransformNameMapping is JSON {"Old": "New"}; "" maps a step to deletion.
	TransformNameMapping string `json:"transform_name_mapping,omitempty"`
	AllowSourceChange    bool   `json:"allow_source_change,omitempty"`
	// ValidateOnly runs the check and releases nothing.
	ValidateOnly bool `json:"validate_only,omitempty"`
}

// ReleaseResponse is the reply to a release: the compatibility report
// (absent when the name has no active job), the job checked against, and
// whether the data directory is released (the process then exits). A
// refused check answers 409 with this body plus an error.
type ReleaseResponse struct {
	Report   *CompatReport `json:"report,omitempty"`
	Replaced *Summary      `json:"replaced,omitempty"`
	Released bool          `json:"released"`
	Error    *ErrorDetail  `json:"error,omitempty"`
}

// EventList is the answer of GET /v1/jobs/{id}/events: the job's events,
// oldest first.
type EventList struct {
	JobID  string  `json:"job_id"`
	Events []Event `json:"events"`
}

// DefaultEventLimit is how many events GET /v1/jobs/{id}/events returns
// without ?limit= (a job keeps its last 10,000).
const DefaultEventLimit = 1000

// Submit creates a job.
func (c *Client) Submit(ctx context.Context, req SubmitRequest) (*SubmitResponse, error) {
	var out SubmitResponse
	if err := c.do(ctx, http.MethodPost, "/v1/jobs", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// List returns the jobs matching status ("active", "terminated", "all").
func (c *Client) List(ctx context.Context, status string) ([]Summary, error) {
	var out JobList
	if err := c.do(ctx, http.MethodGet, "/v1/jobs?status="+url.QueryEscape(status), nil, &out); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// Get returns the job with ID or name ref, with live metrics while it runs.
func (c *Client) Get(ctx context.Context, ref string) (*Job, error) {
	var out Job
	if err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(ref), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Drain asks the job ref to drain.
func (c *Client) Drain(ctx context.Context, ref string) (*Summary, error) {
	return c.action(ctx, ref, "drain")
}

// Cancel asks the job ref to cancel.
func (c *Client) Cancel(ctx context.Context, ref string) (*Summary, error) {
	return c.action(ctx, ref, "cancel")
}

func (c *Client) action(ctx context.Context, ref, action string) (*Summary, error) {
	var out Summary
	if err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(ref)+":"+action, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateOptions changes a running job's options; a new worker count
// rescales it in flight (same job ID).
func (c *Client) UpdateOptions(ctx context.Context, ref string, opts JobOptions) (*OptionsResponse, error) {
	var out OptionsResponse
	if err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(ref)+"/options", OptionsRequest{Options: opts}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Update asks the server to replace the running job of req.Name. A refused
// update returns the report together with an *Error (code
// INCOMPATIBLE_UPDATE); the running job is then unchanged.
func (c *Client) Update(ctx context.Context, req UpdateRequest) (*UpdateResponse, error) {
	var out UpdateResponse
	replied, err := c.doWithReply(ctx, http.MethodPost, "/v1/jobs:update", req, &out)
	if err != nil && !(replied && out.Error != nil) {
		return nil, err
	}
	return &out, err
}

// History returns every job of a name and its recorded update attempts.
func (c *Client) History(ctx context.Context, name string) (*HistoryResponse, error) {
	var out HistoryResponse
	if err := c.do(ctx, http.MethodGet, "/v1/history/"+url.PathEscape(name), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Rollback asks the server to go back to an earlier generation of job
// name. A refusal that comes with a report returns both.
func (c *Client) Rollback(ctx context.Context, name string, req RollbackRequest) (*RollbackResponse, error) {
	var out RollbackResponse
	replied, err := c.doWithReply(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(name)+":rollback", req, &out)
	if err != nil && !(replied && out.Error != nil) {
		return nil, err
	}
	return &out, err
}

// Release asks the process at the client's address to release its data
// directory to a new build (POST /v1/process:release). A refused check
// returns the reply (with the report) together with an *Error of code
// INCOMPATIBLE_UPDATE; the process then keeps running untouched. The
// release waits for every job's checkpoint: give the client a timeout
// longer than the process's shutdown bound.
func (c *Client) Release(ctx context.Context, req ReleaseRequest) (*ReleaseResponse, error) {
	var out ReleaseResponse
	replied, err := c.doWithReply(ctx, http.MethodPost, "/v1/process:release", req, &out)
	if err != nil && !(replied && out.Error != nil && out.Report != nil) {
		return nil, err
	}
	return &out, err
}

// Events returns the events of job ref after sequence number after, at
// most limit (0: the server's default).
func (c *Client) Events(ctx context.Context, ref string, after uint64, limit int) (*EventList, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatUint(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/v1/jobs/" + url.PathEscape(ref) + "/events"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out EventList
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// FollowEvents streams the events of job ref after sequence number after
// (GET /v1/jobs/{ref}/events?follow=true) and calls fn with each, until
// the job is terminal (nil), ctx ends, the server ends the stream (for a
// shutdown: ErrStreamEnded, after which a caller may follow again from the
// last sequence number it saw), or fn fails.
func (c *Client) FollowEvents(ctx context.Context, ref string, after uint64, fn func(Event) error) error {
	path := "/v1/jobs/" + url.PathEscape(ref) + "/events?follow=true"
	if after > 0 {
		path += "&after=" + strconv.FormatUint(after, 10)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	c.authorize(req)
	hc := *c.http
	hc.Timeout = 0 // a stream lasts as long as the job
	resp, err := hc.Do(req)
	if err != nil {
		return c.transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return replyError(http.MethodGet, path, resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var event, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if event == "end" {
				return nil
			}
			if data != "" {
				var ev Event
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					return fmt.Errorf("decoding an event of job %s: %w", ref, err)
				}
				if err := fn(ev); err != nil {
					return err
				}
			}
			event, data = "", ""
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the events of job %s: %w", ref, err)
	}
	return ErrStreamEnded
}

// ErrStreamEnded says the server ended an event stream before the job
// ended (it shuts down or hands its data directory over).
var ErrStreamEnded = errors.New("the server ended the event stream")

// MetricsHistory returns the metrics history of job ref; query holds the
// parameters of GET /v1/jobs/{id}/metrics:history (from, to, step, metric,
// resolution), nil for the default (the last hour).
func (c *Client) MetricsHistory(ctx context.Context, ref string, query url.Values) (*MetricsHistory, error) {
	path := "/v1/jobs/" + url.PathEscape(ref) + "/metrics:history"
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	var out MetricsHistory
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
